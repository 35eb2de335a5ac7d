package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	nudgestatus "github.com/nudgehq/nudge/internal/status"
)

// TestAHarnessRefusesNoConsumers: a harness needs a consumer for its
// mapping, and a negative count of intake instances is nonsense.
func TestAHarnessRefusesNoConsumers(t *testing.T) {
	t.Parallel()
	s := &local.System{Stage: deployment.Dev()}
	for _, cfg := range []local.HarnessConfig{{Consumers: -1}, {IntakeInstances: -1}} {
		if _, err := s.StartHarness(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "start at least 1 consumer") {
			t.Errorf("%+v: %v; want an error naming the fix", cfg, err)
		}
	}
}

// TestTheHarnessRunsTheFunctionsCounted: on a system an earlier run left
// work in, the harness empties the table and the queues, runs the
// consumers and the enqueue under the emulator with their output where it
// is told and their requests through their own counting proxies, and stops
// them on Close.
func TestTheHarnessRunsTheFunctionsCounted(t *testing.T) {
	standintest.AWSConfig(t) // skips (or fails under CI) without the stand-ins
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "outcomes")
	sys := startSystem(t, "h")
	stage, ctx := sys.Stage, context.Background()
	// An earlier run's delivery and message.
	led, err := ledger.New(sys.DB, ledger.Config{Table: sys.Resources.Table, Shards: stage.Shards})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour)
	if err := led.Create(ctx, ledger.Delivery{ReminderID: "rem-earlier", Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusPending}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(sys.Resources.WorkURL), MessageBody: aws.String("earlier")}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var outputs []string
	h, err := sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: bins, Consumers: 2, PollWait: time.Second, Output: func(name string) io.Writer {
		mu.Lock()
		defer mu.Unlock()
		outputs = append(outputs, name)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	left := 0
	if err := h.Ledger.ScanDeliveries(ctx, func(ledger.Delivery) error { left++; return nil }); err != nil || left != 0 {
		t.Errorf("the table holds %d deliveries (%v); want an empty one", left, err)
	}
	if d, err := nudgestatus.QueueDepth(ctx, h.SQS, h.Resources.WorkURL); err != nil || d.Total() != 0 {
		t.Errorf("the work queue holds %+v (%v); want it purged", d, err)
	}
	names := []string{h.Consumers[0].Name, h.Consumers[1].Name, h.Enqueue.Name, h.Outcomes.Name}
	want := []string{"consumer-1", "consumer-2", "enqueue", "outcomes"}
	if h.Feedback != nil { // the stage runs ses: SES's events recorded
		names, want = append(names, h.Feedback.Name), append(want, "feedback")
	}
	if !slices.Equal(names, want) || !slices.Equal(outputs, names) {
		t.Errorf("functions %v, output asked for %v", names, outputs)
	}
	if h.Intake != nil || h.Proxies["intake DynamoDB"] != nil || h.Consumers[0].Startup <= 0 {
		t.Errorf("intake %v, its proxy %v, startup %v; want no intake and a measured start", h.Intake, h.Proxies["intake DynamoDB"], h.Consumers[0].Startup)
	}

	// A tick of the schedule goes through the enqueue's proxies alone.
	out, err := h.Enqueue.Invoke(ctx, []byte(`{"source":"aws.scheduler","scheduledTime":"`+time.Now().UTC().Format(time.RFC3339)+`"}`))
	if err != nil || strings.Contains(string(out), "errorType") {
		t.Fatalf("the enqueue's tick: %v: %s", err, out)
	}
	if h.Enqueue.Busy() || h.Proxies["enqueue DynamoDB"].Total() == 0 || h.Proxies["consumer DynamoDB"].Total() != 0 {
		t.Errorf("busy %v after the tick; DynamoDB requests: enqueue %d, consumer %d", h.Enqueue.Busy(),
			h.Proxies["enqueue DynamoDB"].Total(), h.Proxies["consumer DynamoDB"].Total())
	}
	h.Close()
	stopped := append([]*local.Function{h.Enqueue, h.Outcomes}, h.Consumers...)
	if h.Feedback != nil {
		stopped = append(stopped, h.Feedback)
	}
	for _, fn := range stopped {
		if !fn.Exited() {
			t.Errorf("%s runs on after Close", fn.Name)
		}
	}
}

// TestAnEndInTheLedgerReachesTheOutcomesQueue: the path the stack builds,
// run locally: a delivery that ends in the ledger (here cancelled, and one
// sent) is read from the table's stream by the stream mapping, turned into
// its outcome event by the outcomes function under the emulator, put on the
// local bus, and delivered by the bus's rule to the outcomes queue as
// EventBridge delivers to SQS; a change that is not an end gives none.
func TestAnEndInTheLedgerReachesTheOutcomesQueue(t *testing.T) {
	standintest.AWSConfig(t)
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "outcomes")
	sys := startSystem(t, "o")
	ctx := context.Background()
	h, err := sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: bins, Consumers: 1, PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	led, err := ledger.New(sys.DB, ledger.Config{Table: sys.Resources.Table, Shards: sys.Stage.Shards})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().UTC().Add(-time.Second)
	for _, id := range []string{"rem-o1", "rem-o2", "rem-o3"} {
		if err := led.Create(ctx, ledger.Delivery{ReminderID: id, AccountRef: "acct-o", Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
			DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
			t.Fatal(err)
		}
	}
	k1 := message.DeliveryKey{ReminderID: "rem-o1", Channel: "email", Provider: "webhook"}
	if _, err := led.Cancel(ctx, k1, "cancelled by the test"); err != nil {
		t.Fatal(err)
	}
	k2 := message.DeliveryKey{ReminderID: "rem-o2", Channel: "email", Provider: "webhook"}
	d, err := led.Claim(ctx, ledger.Claim{Key: k2, Token: "tok", LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.Complete(ctx, d, "receipt-o2"); err != nil {
		t.Fatal(err)
	}
	if err := h.DrainOutcomes(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for range 20 {
		out, err := sys.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(sys.Resources.OutcomesURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var env map[string]any
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &env); err != nil {
				t.Fatal(err)
			}
			detail, _ := env["detail"].(map[string]any)
			got[fmt.Sprint(env["detail-type"], " ", detail["deliveryKey"])] = env
		}
		if len(got) >= 2 {
			break
		}
	}
	cancelled, sent := got["Delivery Cancelled "+k1.String()], got["Delivery Sent "+k2.String()]
	if len(got) != 2 || cancelled == nil || sent == nil {
		t.Fatalf("the outcomes queue holds %v; want rem-o1's cancel and rem-o2's send, and nothing for rem-o3 (queued)", slices.Collect(maps.Keys(got)))
	}
	detail := sent["detail"].(map[string]any)
	if sent["source"] != "nudge" || detail["receipt"] != "receipt-o2" || detail["accountRef"] != "acct-o" || detail["stage"] != sys.Stage.Name || detail["attempt"] != 1.0 {
		t.Errorf("the sent event: %v", sent)
	}
}
