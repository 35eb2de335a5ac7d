package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
)

// onTimeLeads are the lead times the precision benchmark schedules at,
// each a path through the system: the intake's short-notice hand-off (due
// now, in 2 s, 10 s, 45 s, 90 s) and the enqueue's cursor (3 min, beyond
// the run's lookahead of 2 min).
var onTimeLeads = []time.Duration{0, 2 * time.Second, 10 * time.Second, 45 * time.Second, 90 * time.Second, 3 * time.Minute}

// onTimeLookahead is the run's lookahead: shorter than the stage's 15 min,
// so that a reminder beyond it is handed off by the enqueue's cursor within
// a run of minutes. The enqueue keeps the stage's tick (1 min) and settle
// (15 s).
const onTimeLookahead = 2 * time.Minute

// BenchmarkOnTime is the precision benchmark, with the stage's own timing:
// the whole system on the stand-ins (the intake behind its function URL,
// the enqueue invoked each minute with its 15 s settle, the event source
// mapping, two consumers, the webhook), reminders created through the API
// at each lead time, spread over a minute so that every phase of the tick
// is met. Per lead time it reports the lateness, due → the provider's
// acceptance, p50 / p99 / max, and where the time went (median: due → the
// queue's first receive, → the handler's start after any hold, → the
// claim, → the provider's acceptance), from the consumer's log. No faults.
// `make bench` runs it; alone:
//
//	NUDGE_REQUIRE_STANDINS=1 build/nudge local exec -- go test -run '^$' -bench OnTime ./internal/local
func BenchmarkOnTime(b *testing.B) {
	standintest.AWSConfig(b)
	bins := standintest.Bootstraps(b, "consumer", "enqueue", "outcomes", "intake")
	sys := startStage(b, "ontime", deployment.Dev())
	perLead := 120 // over 100, so that the p99 is not the max
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logs := &lockedLog{}
	look := "NUDGE_LOOKAHEAD=" + onTimeLookahead.String()
	h, err := sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: bins, Consumers: 2, IntakeInstances: 2,
		EnqueueOverrides: []string{look}, IntakeOverrides: []string{look}, ConsumerOverrides: []string{look},
		Output: func(name string) io.Writer {
			if strings.HasPrefix(name, "consumer") {
				return logs
			}
			return nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	go h.Mapping.Run(ctx)
	// The schedule: a tick a minute, as EventBridge Scheduler's rate(1 minute).
	tick := func() {
		if _, err := h.Enqueue.Invoke(ctx, fmt.Appendf(nil, `{"source":"aws.scheduler","scheduledTime":%q}`, time.Now().UTC().Format(time.RFC3339))); err != nil && ctx.Err() == nil {
			b.Error(err)
		}
	}
	go func() {
		for {
			tick()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Minute):
			}
		}
	}()
	api := h.Intake.Client()
	due := map[message.DeliveryKey]time.Duration{} // key → its lead time
	start := time.Now()
	var puts sync.WaitGroup
	for i := range perLead {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Minute / time.Duration(perLead))))
		for _, lead := range onTimeLeads {
			id := fmt.Sprintf("ontime-%d-%d", lead/time.Second, i)
			in := apiReminder(id, time.Now().Add(lead))
			due[message.DeliveryKey{ReminderID: id, Channel: in.Deliveries[0].Channel, Provider: in.Deliveries[0].Provider}] = lead
			puts.Add(1)
			go func() { // the lead times at once, as independent callers
				defer puts.Done()
				if _, err := api.Put(ctx, in); err != nil {
					b.Error(err)
				}
			}()
		}
	}
	puts.Wait()
	// Until every one is sent.
	for {
		sent := 0
		for k := range due {
			d, err := h.Ledger.Get(ctx, k)
			if err != nil {
				b.Fatal(err)
			}
			if d.Status == ledger.StatusSent {
				sent++
			}
		}
		if sent == len(due) {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d sent when the run ended", sent, len(due))
		case <-time.After(5 * time.Second):
		}
	}
	cancel()
	b.StopTimer()

	// The consumers' sent transitions: where each delivery's time went.
	type timing struct{ received, started, claimed, accepted float64 }
	byLead := map[time.Duration][]timing{}
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg, Outcome, DeliveryKey                    string
			ReceivedMs, StartedMs, ClaimedMs, AcceptedMs *float64
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "transition" || l.Outcome != "sent" || l.AcceptedMs == nil {
			continue
		}
		k, err := message.ParseDeliveryKey(l.DeliveryKey)
		lead, ok := due[k]
		if err != nil || !ok {
			continue
		}
		seen[l.DeliveryKey]++
		t := timing{started: *l.StartedMs, claimed: *l.ClaimedMs, accepted: *l.AcceptedMs}
		if l.ReceivedMs != nil {
			t.received = *l.ReceivedMs
		}
		byLead[lead] = append(byLead[lead], t)
	}
	for k, n := range seen {
		if n != 1 {
			b.Errorf("%s sent %d times", k, n)
		}
	}
	w := os.Stdout
	fmt.Fprintf(w, "\nOn time, with the stage's timing (tick 1 min, settle 15 s, lookahead %v for the run), %d reminders per lead time, no faults\n", onTimeLookahead, perLead)
	fmt.Fprintf(w, "| lead time | path | lateness p50 | p99 | max | due → first receive | → handler (after the hold) | → claimed | → accepted |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, lead := range onTimeLeads {
		ts := byLead[lead]
		if len(ts) != perLead {
			b.Errorf("lead %v: %d sends in the log; want %d", lead, len(ts), perLead)
			continue
		}
		col := func(f func(timing) float64) []float64 {
			out := make([]float64, len(ts))
			for i, t := range ts {
				out[i] = f(t)
			}
			slices.Sort(out)
			return out
		}
		late := col(func(t timing) float64 { return t.accepted })
		path := "intake hand-off"
		if lead > onTimeLookahead {
			path = "enqueue cursor"
		}
		p50, p99, mx := quantile(late, 0.5), quantile(late, 0.99), late[len(late)-1]
		fmt.Fprintf(w, "| %v | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms |\n", lead, path, p50, p99, mx,
			quantile(col(func(t timing) float64 { return t.received }), 0.5),
			quantile(col(func(t timing) float64 { return t.started - t.received }), 0.5),
			quantile(col(func(t timing) float64 { return t.claimed - t.started }), 0.5),
			quantile(col(func(t timing) float64 { return t.accepted - t.claimed }), 0.5))
		b.ReportMetric(p99, fmt.Sprintf("lead-%s-p99-ms", lead))
	}
}

// quantile is the q-quantile of sorted (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
