package local_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/local/demo"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// BenchmarkIntakeAPI measures the intake as applications reach it: signed
// HTTP requests to the local function URL, the real bootstrap on four
// emulator instances, DynamoDB Local behind a counting proxy. Per call it
// reports the throughput and the DynamoDB requests and write (and read)
// units the function spent; batch reports per reminder. Stand-in latency
// is not AWS's: the throughput is this machine's, the requests and units
// are what AWS would bill.
func BenchmarkIntakeAPI(b *testing.B) {
	var proxy *standin.Proxy
	_, in, log := startIntakeVia(b, 4, func(ddbURL string) string {
		p, err := standin.NewProxy(ddbURL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		proxy = p
		return p.Endpoint
	})
	api := in.Client()
	ctx := context.Background()
	due := time.Now().Add(24 * time.Hour)
	var seq atomic.Int64
	// Warm every instance, and the table's shard registry.
	for range 8 {
		if _, err := api.Put(ctx, apiReminder(fmt.Sprintf("warm-%d", seq.Add(1)), due)); err != nil {
			b.Fatal(err)
		}
	}
	measure := func(b *testing.B, per int, op func(i int) error) {
		b.Helper()
		r0, w0 := proxy.Units()
		n0 := proxy.Total()
		u0 := usageOf(log.String())
		start := time.Now()
		var wg sync.WaitGroup
		var next atomic.Int64
		errs := make(chan error, 4)
		for range 4 { // one caller per instance
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= b.N {
						return
					}
					if err := op(i); err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		r1, w1 := proxy.Units()
		u1 := usageOf(log.String())
		ops := float64(b.N * per)
		wcu, rcu := (w1-w0)/ops, (r1-r0)/ops
		invocations := float64(u1.invocations - u0.invocations)
		billedMs := float64(u1.billedMs-u0.billedMs) / ops
		logBytes := float64(u1.logBytes-u0.logBytes) / ops
		b.ReportMetric(ops/elapsed.Seconds(), "calls/s")
		b.ReportMetric(float64(proxy.Total()-n0)/ops, "ddb-req/call")
		b.ReportMetric(wcu, "wcu/call")
		b.ReportMetric(rcu, "rcu/call")
		b.ReportMetric(billedMs, "billed-ms/call")
		// What a million such calls cost in AWS at the demo's list prices:
		// the invocations (a function URL adds nothing), their duration at
		// the stage's 256 MB, DynamoDB's units, the request log lines.
		p := demo.Prices
		usd := invocations/ops*p.LambdaRequest + billedMs/1000*0.25*p.LambdaGBSecond*1e6 + wcu*p.DynamoDBWrite + rcu*p.DynamoDBRead + logBytes*1e6/(1<<30)*p.LogsGB
		b.ReportMetric(usd, "usd/million-calls")
	}
	b.Run("put", func(b *testing.B) {
		measure(b, 1, func(int) error {
			_, err := api.Put(ctx, apiReminder(fmt.Sprintf("put-%d", seq.Add(1)), due))
			return err
		})
	})
	b.Run("put-3-deliveries", func(b *testing.B) {
		measure(b, 1, func(int) error {
			r := apiReminder(fmt.Sprintf("put3-%d", seq.Add(1)), due)
			r.Deliveries = append(r.Deliveries, schedule.DeliveryInput{Channel: "email", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"},
				schedule.DeliveryInput{Channel: "push", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"})
			_, err := api.Put(ctx, r)
			return err
		})
	})
	b.Run("put-unchanged", func(b *testing.B) {
		measure(b, 1, func(int) error {
			_, err := api.Put(ctx, apiReminder("warm-1", due))
			return err
		})
	})
	b.Run("get", func(b *testing.B) {
		measure(b, 1, func(int) error {
			_, err := api.Get(ctx, "warm-1")
			return err
		})
	})
	b.Run("reschedule", func(b *testing.B) {
		measure(b, 1, func(i int) error {
			_, err := api.Reschedule(ctx, "warm-"+strconv.Itoa(i%8+1), schedule.Times{DueAt: due.Add(time.Duration(seq.Add(1)) * time.Second).UTC().Format(time.RFC3339)})
			return err
		})
	})
	b.Run("list-25", func(b *testing.B) {
		measure(b, 1, func(int) error {
			_, err := api.List(ctx, "acct-api", 25, "")
			return err
		})
	})
	b.Run("put-then-cancel", func(b *testing.B) { // two calls per op
		measure(b, 2, func(int) error {
			id := fmt.Sprintf("cancel-%d", seq.Add(1))
			if _, err := api.Put(ctx, apiReminder(id, due)); err != nil {
				return err
			}
			_, err := api.Cancel(ctx, id)
			return err
		})
	})
	b.Run("batch-100-per-reminder", func(b *testing.B) {
		measure(b, 100, func(int) error {
			var rs []schedule.Input
			for range 100 {
				rs = append(rs, apiReminder(fmt.Sprintf("batch-%d", seq.Add(1)), due))
			}
			res, err := api.Batch(ctx, rs)
			if err == nil {
				for _, r := range res.Results {
					if r.Status != 201 {
						return fmt.Errorf("batch result %+v", r)
					}
				}
			}
			return err
		})
	})
}

// BenchmarkIntakeColdStart starts a fresh intake instance and times its
// first answer through the function URL: the process start, the
// runtime's init (the emulator's INIT REPORT, which opens the connection
// to DynamoDB with the warm-up's read) and the first request (its REPORT's
// Duration).
func BenchmarkIntakeColdStart(b *testing.B) {
	sys, warm, _ := startIntake(b, 1)
	warm.Close()
	bins := standintest.Bootstraps(b, "intake")
	ctx := context.Background()
	var first, initDur, request time.Duration
	for i := 0; i < b.N; i++ {
		log := &lockedLog{}
		start := time.Now()
		in, err := sys.StartIntake(ctx, filepath.Join(bins, "intake", "bootstrap"), 1, sys.Endpoints(), log)
		if err != nil {
			b.Fatal(err)
		}
		_, err = in.Client().Get(ctx, "rem-none")
		first = time.Since(start)
		in.Close()
		if status(err) != 404 {
			b.Fatalf("first GET: %v", err)
		}
		if m := initReport.FindStringSubmatch(log.String()); m != nil {
			ms, _ := strconv.ParseFloat(m[1], 64)
			initDur = time.Duration(ms * float64(time.Millisecond))
		}
		if m := firstReport.FindStringSubmatch(log.String()); m != nil {
			ms, _ := strconv.ParseFloat(m[1], 64)
			request = time.Duration(ms * float64(time.Millisecond))
		}
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "ms-to-first-answer")
	b.ReportMetric(float64(initDur.Microseconds())/1000, "init-ms")
	b.ReportMetric(float64(request.Microseconds())/1000, "first-request-ms")
}

var (
	initReport  = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	firstReport = regexp.MustCompile(`REPORT RequestId: [^\n]*?\tDuration: ([0-9.]+) ms`)
)

// usage is what the intake's log says it ran: REPORT lines, their billed
// milliseconds, and the bytes of its own log lines (what CloudWatch Logs
// would ingest; the emulator's lines stand for Lambda's START/END/REPORT).
type usage struct {
	invocations, billedMs, logBytes int64
}

var billed = regexp.MustCompile(`Billed Duration: ([0-9]+) ms`)

func usageOf(log string) usage {
	var u usage
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.HasPrefix(line, "REPORT "):
			u.invocations++
			u.logBytes += int64(len(line)) + 1
			if m := billed.FindStringSubmatch(line); m != nil {
				ms, _ := strconv.ParseInt(m[1], 10, 64)
				u.billedMs += ms
			}
		case strings.HasPrefix(line, "START ") || strings.HasPrefix(line, "END ") || strings.HasPrefix(line, `{"time"`):
			u.logBytes += int64(len(line)) + 1
		}
	}
	return u
}
