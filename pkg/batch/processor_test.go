package batch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/local/batchtest"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newProcessor(t *testing.T, h batch.HandlerFunc, cfg batch.Config) *batch.Processor {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	p, err := batch.New(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestAllSucceedGivesEmptyFailureList(t *testing.T) {
	t.Parallel()
	p := newProcessor(t, func(context.Context, events.SQSMessage) error { return nil }, batch.Config{})
	resp, err := p.Process(context.Background(), batchtest.Event("a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.BatchItemFailures == nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("BatchItemFailures = %#v, want an empty list", resp.BatchItemFailures)
	}
}

func TestFailuresAreReportedAndDelaysApplied(t *testing.T) {
	t.Parallel()
	vis := &batchtest.Visibility{}
	p := newProcessor(t, func(_ context.Context, rec events.SQSMessage) error {
		switch rec.Body {
		case "retry":
			return failure.Retryable(errors.New("provider 503"), 30*time.Second)
		case "plain":
			return errors.New("no opinion")
		case "permanent":
			return failure.Permanent(errors.New("bad"))
		case "panic":
			panic("boom")
		}
		return nil
	}, batch.Config{Visibility: vis})
	ev := batchtest.Event("ok", "retry", "plain", "permanent", "panic", "ok")
	rep := p.Run(context.Background(), ev)
	if got := fmt.Sprint(failedIDs(rep.Response())); got != "[m1 m2 m3 m4]" {
		t.Fatalf("failures = %s, want [m1 m2 m3 m4]", got)
	}
	if len(vis.Changes) != 1 || vis.Changes["h1"] != 30 {
		t.Fatalf("visibility changes = %v, want only h1=30", vis.Changes)
	}
	if rep.Results[1].Visibility == nil || *rep.Results[1].Visibility != 30*time.Second {
		t.Fatalf("result 1 visibility = %v", rep.Results[1].Visibility)
	}
	var fe *failure.Error
	if !errors.As(rep.Results[4].Err, &fe) || fe.Class != failure.ClassPanic {
		t.Fatalf("panic result = %v, want class panic", rep.Results[4].Err)
	}
	if rep.Count(batch.Succeeded) != 2 || rep.Count(batch.Failed) != 4 {
		t.Fatalf("counts: %d succeeded, %d failed", rep.Count(batch.Succeeded), rep.Count(batch.Failed))
	}
}

func TestConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	var running, peak, arrivals atomic.Int32
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(3)
	p := newProcessor(t, func(context.Context, events.SQSMessage) error {
		n := running.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		if arrivals.Add(1) <= 3 {
			started.Done()
		}
		<-release
		running.Add(-1)
		return nil
	}, batch.Config{Concurrency: 3})
	done := make(chan events.SQSEventResponse)
	go func() {
		resp, _ := p.Process(context.Background(), batchtest.Event("1", "2", "3", "4", "5", "6", "7", "8", "9", "10"))
		done <- resp
	}()
	started.Wait() // three records run at once
	close(release)
	resp := <-done
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("unexpected failures %v", resp.BatchItemFailures)
	}
	if peak.Load() != 3 {
		t.Fatalf("peak concurrency %d, want 3", peak.Load())
	}
}

func TestDeadlineCutoffReturnsUnstartedRecordsAtOnce(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	vis := &batchtest.Visibility{}
	var ran atomic.Int32
	p := newProcessor(t, func(context.Context, events.SQSMessage) error {
		ran.Add(1)
		clk.Advance(3 * time.Second) // each record takes 3s
		return nil
	}, batch.Config{
		Concurrency:  1,
		CutoffMargin: 5 * time.Second,
		Clock:        clk,
		Visibility:   vis,
		Deadline:     func(context.Context) (time.Time, bool) { return start.Add(10 * time.Second), true },
	})
	bodies := make([]string, 12)
	rep := p.Run(context.Background(), batchtest.Event(bodies...))
	// t=0 and t=3 start; at t=6 the cut-off (t=5) has passed.
	if ran.Load() != 2 || rep.Count(batch.Unstarted) != 10 {
		t.Fatalf("ran %d, unstarted %d; want 2 and 10", ran.Load(), rep.Count(batch.Unstarted))
	}
	if len(rep.Response().BatchItemFailures) != 10 {
		t.Fatalf("failures %v", rep.Response().BatchItemFailures)
	}
	if vis.Calls != 1 || len(vis.Changes) != 10 || vis.Changes["h11"] != 0 {
		t.Fatalf("visibility: %d calls, changes %v; want 1 call setting 10 records to 0", vis.Calls, vis.Changes)
	}
}

func TestFIFOKeepsOrderAndFailsTheRestOfAGroup(t *testing.T) {
	t.Parallel()
	ev := batchtest.LoadEvent(t, "../../events/sqs-fifo-batch.json")
	var mu sync.Mutex
	var order []string
	vis := &batchtest.Visibility{}
	p := newProcessor(t, func(_ context.Context, rec events.SQSMessage) error {
		mu.Lock()
		order = append(order, rec.MessageId[len(rec.MessageId)-1:])
		mu.Unlock()
		if rec.MessageId == ev.Records[0].MessageId {
			return failure.Retryable(errors.New("503"), 20*time.Second)
		}
		return nil
	}, batch.Config{Visibility: vis})
	rep := p.Run(context.Background(), ev)
	want := []batch.Status{batch.Failed, batch.Skipped, batch.Succeeded}
	for i, w := range want {
		if rep.Results[i].Status != w {
			t.Fatalf("record %d: %v, want %v", i, rep.Results[i].Status, w)
		}
	}
	if len(order) != 2 {
		t.Fatalf("ran %v, want the failed record and the other group's", order)
	}
	if vis.Changes[ev.Records[0].ReceiptHandle] != 20 || vis.Changes[ev.Records[1].ReceiptHandle] != 0 {
		t.Fatalf("visibility %v", vis.Changes)
	}
}

func TestFIFOGroupRunsInOrder(t *testing.T) {
	t.Parallel()
	ev := events.SQSEvent{}
	for i := 0; i < 20; i++ {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint(i), Body: fmt.Sprint(i), Attributes: map[string]string{"MessageGroupId": fmt.Sprint("g", i%2)}})
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	p := newProcessor(t, func(_ context.Context, rec events.SQSMessage) error {
		mu.Lock()
		defer mu.Unlock()
		g := rec.Attributes["MessageGroupId"]
		seen[g] = append(seen[g], rec.Body)
		return nil
	}, batch.Config{})
	p.Run(context.Background(), ev)
	if fmt.Sprint(seen["g0"]) != "[0 2 4 6 8 10 12 14 16 18]" || fmt.Sprint(seen["g1"]) != "[1 3 5 7 9 11 13 15 17 19]" {
		t.Fatalf("group order broken: %v", seen)
	}
}

func TestResponseNeverHasEmptyOrRepeatedIDs(t *testing.T) {
	t.Parallel()
	ev := batchtest.Event("x", "x", "x")
	ev.Records[1].MessageId = ev.Records[0].MessageId
	ev.Records[2].MessageId = ""
	p := newProcessor(t, func(context.Context, events.SQSMessage) error { return errors.New("fail") }, batch.Config{})
	resp, _ := p.Process(context.Background(), ev)
	if got := fmt.Sprint(failedIDs(resp)); got != "[m0]" {
		t.Fatalf("failures = %s, want [m0]", got)
	}
}

func TestVisibilityErrorStillReportsFailures(t *testing.T) {
	t.Parallel()
	vis := &batchtest.Visibility{Err: errors.New("sqs down")}
	p := newProcessor(t, func(context.Context, events.SQSMessage) error {
		return failure.Retryable(errors.New("x"), time.Minute)
	}, batch.Config{Visibility: vis})
	rep := p.Run(context.Background(), batchtest.Event("a"))
	if len(rep.Response().BatchItemFailures) != 1 || rep.Results[0].Visibility != nil {
		t.Fatalf("got %+v", rep)
	}
}

func TestEmptyEvent(t *testing.T) {
	t.Parallel()
	p := newProcessor(t, func(context.Context, events.SQSMessage) error { return nil }, batch.Config{})
	resp, err := p.Process(context.Background(), events.SQSEvent{})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v, %v", resp, err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	h := batch.HandlerFunc(func(context.Context, events.SQSMessage) error { return nil })
	if _, err := batch.New(h, batch.Config{Concurrency: -1}); err == nil {
		t.Error("accepted negative concurrency")
	}
	if _, err := batch.New(nil, batch.Config{}); err == nil {
		t.Error("accepted a nil handler")
	}
}

func TestQueueURLFromARN(t *testing.T) {
	t.Parallel()
	for arn, want := range map[string]string{
		"arn:aws:sqs:eu-west-1:123456789012:nudge-work": "https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-work",
		"arn:aws-cn:sqs:cn-north-1:123456789012:q.fifo": "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q.fifo",
		"arn:aws:sns:eu-west-1:123456789012:topic":      "",
		"": "",
	} {
		if got := batch.QueueURLFromARN(arn); got != want {
			t.Errorf("QueueURLFromARN(%q) = %q, want %q", arn, got, want)
		}
	}
}

// BenchmarkProcessorOverhead measures the processor's own cost per record
// with a handler that does nothing.
func BenchmarkProcessorOverhead(b *testing.B) {
	p, _ := batch.New(batch.HandlerFunc(func(context.Context, events.SQSMessage) error { return nil }), batch.Config{Logger: quiet})
	ev := batchtest.Event("1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.Process(ctx, ev)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ev.Records)), "ns/record")
}

func TestCutoffPastAtStartIsLoggedAsAnError(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	p := newProcessor(t, func(context.Context, events.SQSMessage) error { return nil }, batch.Config{
		Clock: clock.NewFake(now), CutoffMargin: 12 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Deadline: func(context.Context) (time.Time, bool) { return now.Add(10 * time.Second), true },
	})
	rep := p.Run(context.Background(), batchtest.Event("a", "b"))
	if rep.Count(batch.Unstarted) != 2 || !strings.Contains(logs.String(), "cut-off margin shorter than the function timeout") {
		t.Fatalf("unstarted %d; logs: %s", rep.Count(batch.Unstarted), logs.String())
	}
}

// TestRecordsStillRunningAreCancelledBeforeTheDeadline: a record slower
// than the cut-off margin is cancelled Reserve before the invocation
// deadline and reported as failed, so that the invocation answers in time
// instead of timing out and returning the whole batch.
func TestRecordsStillRunningAreCancelledBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	start := time.Now()
	deadline := start.Add(1500 * time.Millisecond)
	p := newProcessor(t, func(ctx context.Context, rec events.SQSMessage) error {
		if rec.Body == "quick" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return nil
		}
	}, batch.Config{CutoffMargin: 1200 * time.Millisecond, Reserve: 500 * time.Millisecond,
		Deadline: func(context.Context) (time.Time, bool) { return deadline, true }})
	rep := p.Run(context.Background(), batchtest.Event("quick", "slow-1", "slow-2"))
	took := time.Since(start)
	if took < 900*time.Millisecond || took > 1300*time.Millisecond {
		t.Fatalf("Run took %v; want the slow records cancelled at about 1s (deadline 1.5s less the 500ms reserve)", took)
	}
	if rep.Results[0].Status != batch.Succeeded || rep.Count(batch.Failed) != 2 || !errors.Is(rep.Results[1].Err, context.DeadlineExceeded) {
		t.Fatalf("results %+v", rep.Results)
	}
	if ids := rep.Response().BatchItemFailures; len(ids) != 2 {
		t.Fatalf("response %v; want the two slow records", ids)
	}
}

// TestTheInvocationsDeadlineCountsFromTheProcessorsClock: without a
// Deadline function the processor takes the context's deadline, which is
// on Lambda's (the wall) clock, as the time left of it from its own clock's
// now, whatever date that clock reads: records run, under a context that
// ends before the invocation does.
func TestTheInvocationsDeadlineCountsFromTheProcessorsClock(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{time.Date(2020, 1, 1, 9, 0, 0, 0, time.UTC), time.Date(2040, 1, 1, 9, 0, 0, 0, time.UTC)} {
		var left time.Duration
		p := newProcessor(t, func(ctx context.Context, _ events.SQSMessage) error {
			dl, _ := ctx.Deadline()
			left = time.Until(dl)
			return nil
		}, batch.Config{Clock: clock.NewFake(at), CutoffMargin: 3 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep := p.Run(ctx, batchtest.Event("a"))
		cancel()
		if rep.Count(batch.Succeeded) != 1 || left <= 0 || left > 10*time.Second {
			t.Errorf("clock at %s: %d succeeded, the record's context had %v left; want it run with at most the 10 s the invocation had",
				at.Format(time.DateOnly), rep.Count(batch.Succeeded), left)
		}
	}
}
