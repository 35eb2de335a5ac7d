package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/local/standin"
	"github.com/nudgehq/nudge/pkg/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/redrive"
	"github.com/nudgehq/nudge/pkg/status"
)

// logsKeptIfFailed removes a run's logs (.local/logs/<stage>-*.log) once
// its test has passed; a failed test's stay, as its evidence.
func logsKeptIfFailed(t *testing.T, stage string) {
	t.Cleanup(func() {
		dir, err := standin.DefaultDir()
		if t.Failed() || err != nil {
			return
		}
		paths, _ := filepath.Glob(LogPath(dir, stage, "*.log"))
		for _, p := range paths {
			_ = os.Remove(p)
		}
	})
}

func TestParseFaults(t *testing.T) {
	t.Parallel()
	f, err := ParseFaults("500=5%,429=0.05,400=0.01,hang=0.02,drop=0,down=1%")
	if err != nil {
		t.Fatal(err)
	}
	if f != (Faults{Server: 0.05, Throttled: 0.05, Rejected: 0.01, Hang: 0.02, Down: 0.01}) {
		t.Fatalf("%+v", f)
	}
	if back, _ := ParseFaults(f.String()); back != f {
		t.Fatalf("String does not round-trip: %s", f)
	}
	if f, err := ParseFaults("none"); err != nil || f != (Faults{}) {
		t.Fatalf("none: %+v %v", f, err)
	}
	for spec, want := range map[string]string{
		"teapot=0.1":      "KIND one of 400, 429, 500, down, drop, hang",
		"500":             "want KIND=SHARE",
		"500=lots":        "between 0 and 1",
		"500=120%":        "between 0 and 1",
		"500=0.6,429=0.6": "add up to 1.20",
	} {
		if _, err := ParseFaults(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFaults(%q) = %v, want an error with %q", spec, err, want)
		}
	}
}

func defaults(t *testing.T, cfg Config) Config {
	t.Helper()
	c, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestThePlanIsTheMixTheDocsDescribe: reproducible from its seed, expired
// reminders first, every fault kind present at the default size, and the
// outcome each fault calls for.
func TestThePlanIsTheMixTheDocsDescribe(t *testing.T) {
	t.Parallel()
	cfg := defaults(t, Config{})
	p, again := newPlan(cfg), newPlan(cfg)
	if len(p.reminders) != 300 || len(p.poison) != 3 {
		t.Fatalf("%d reminders, %d poison", len(p.reminders), len(p.poison))
	}
	for i, r := range p.reminders {
		if r.id != again.reminders[i].id || r.kind != again.reminders[i].kind || len(r.deliveries) != len(again.reminders[i].deliveries) {
			t.Fatal("the same seed drew a different mix")
		}
	}
	for i, r := range p.reminders[1:] {
		if r.kind == expired && p.reminders[i].kind != expired {
			t.Fatalf("%s is expired but comes after %s", r.id, p.reminders[i].id)
		}
	}
	faults := map[string]int{}
	for _, d := range p.byKey {
		faults[d.fault]++
		switch d.fault {
		case "400":
			if d.expect != ledger.StatusDead || d.class != "rejected" {
				t.Errorf("a 400 must end dead as rejected: %+v", d)
			}
		case "down":
			if d.expect != ledger.StatusDead || d.class != "exhausted" {
				t.Errorf("a provider down must end dead as exhausted: %+v", d)
			}
		case "":
		case "500", "hang", "drop":
			// SES may have sent: its policy is review. The others retry.
			if d.key.Provider == ses.Name && (d.expect != ledger.StatusDead || d.class != failure.ClassAmbiguous) {
				t.Errorf("fault %s at SES must end dead as ambiguous: %+v", d.fault, d)
			}
			if d.key.Provider != ses.Name && d.expect != ledger.StatusSent {
				t.Errorf("fault %s must still end sent: %+v", d.fault, d)
			}
		default:
			if d.expect != ledger.StatusSent {
				t.Errorf("fault %s must still end sent: %+v", d.fault, d)
			}
		}
	}
	for _, k := range []string{"500", "429", "400", "hang", "drop", "down"} {
		if faults[k] == 0 {
			t.Errorf("no delivery meets fault %s at the default size", k)
		}
	}
	plan := p.sinkPlan()
	for _, d := range p.byKey {
		first, second := plan(d.key.String(), 1), plan(d.key.String(), 2)
		want := map[string]string{"": "ok", "500": "500", "429": "429", "400": "400", "hang": "hang", "drop": "drop", "down": "500"}[d.fault]
		// A permanent rejection and an outage meet every attempt; the
		// others only the first.
		if first.Kind != want || (second.Kind != "ok") != (d.fault == "down" || d.fault == "400") || d.fault == "400" && second.Kind != "400" {
			t.Fatalf("%s (%s): first %s, then %s", d.key, d.fault, first.Kind, second.Kind)
		}
	}
}

// clean returns the evidence of a perfect run of p.
func clean(p *plan) evidence {
	ev := evidence{stored: map[message.DeliveryKey]ledger.Delivery{}, accepted: map[message.DeliveryKey]int{}}
	for k, d := range p.byKey {
		ev.stored[k] = ledger.Delivery{ReminderID: k.ReminderID, Channel: k.Channel, Provider: k.Provider, Status: d.expect, LastErrorClass: d.class}
		if d.fault == "drop" && k.Provider == ses.Name {
			ev.accepted[k] = 1 // it went out; the answer was lost, so it waits for review
		}
		switch d.expect {
		case ledger.StatusSent:
			ev.accepted[k] = 1
		case ledger.StatusDead:
			ev.dlq = append(ev.dlq, deadLetter{key: k, class: d.class})
		}
	}
	for i := range p.poison {
		id := fmt.Sprint("poison-", i)
		ev.dlq = append(ev.dlq, deadLetter{class: "decode", source: id})
		ev.poisonIDs = append(ev.poisonIDs, id)
	}
	return ev
}

// TestViolationsCatchEachBrokenInvariant: a perfect run passes, and each
// way a run can go wrong is reported.
func TestViolationsCatchEachBrokenInvariant(t *testing.T) {
	t.Parallel()
	p := newPlan(defaults(t, Config{Reminders: 100}))
	if v := p.violations(clean(p)); len(v) != 0 {
		t.Fatalf("a perfect run broke invariants: %v", v)
	}
	var sent, dead, sesSent, snsSent message.DeliveryKey
	for k, d := range p.byKey {
		if d.expect == ledger.StatusSent && d.fault == "" {
			sent = k
			switch k.Provider {
			case ses.Name:
				sesSent = k
			case sns.Name:
				snsSent = k
			}
		}
		if d.expect == ledger.StatusDead && d.class != failure.ClassAmbiguous {
			dead = k
		}
	}
	if sesSent.ReminderID == "" || snsSent.ReminderID == "" {
		t.Fatal("the plan gives no clean delivery to SES or SNS")
	}
	for _, c := range []struct {
		name   string
		break_ func(*evidence)
		want   string
	}{
		{"sent twice", func(ev *evidence) { ev.resent = map[string]int{sent.String(): 1} }, "sent twice: " + sent.String()},
		{"lost", func(ev *evidence) { delete(ev.stored, sent) }, "lost: " + sent.String()},
		{"wrong outcome", func(ev *evidence) {
			d := ev.stored[sent]
			d.Status = ledger.StatusDead
			ev.stored[sent] = d
		}, "ended dead"},
		{"wrong class", func(ev *evidence) {
			d := ev.stored[dead]
			d.LastErrorClass = "server"
			ev.stored[dead] = d
		}, `dead-lettered as "server"`},
		{"sent but never accepted", func(ev *evidence) { delete(ev.accepted, sent) }, "the provider never accepted it"},
		{"accepted but not sent", func(ev *evidence) { ev.accepted[dead] = 1 }, "accepted by the provider but is recorded dead"},
		{"an e-mail sent twice", func(ev *evidence) { ev.accepted[sesSent] = 2 }, "sent twice: SES accepted " + sesSent.String() + " 2 times"},
		{"an SES delivery reviewed without a lapsed lease", func(ev *evidence) {
			d := ev.stored[sesSent]
			d.Status, d.LastErrorClass = ledger.StatusDead, failure.ClassAmbiguous
			ev.stored[sesSent] = d
		}, sesSent.String() + " (due"},
		{"dead without a DLQ message", func(ev *evidence) {
			for i, m := range ev.dlq {
				if m.key == dead {
					ev.dlq = append(ev.dlq[:i], ev.dlq[i+1:]...)
					break
				}
			}
		}, "has no message in the DLQ"},
		{"poison lost", func(ev *evidence) { ev.dlq = ev.dlq[:len(ev.dlq)-1] }, "poison messages were put on the queue, 2 reached"},
		{"overdue", func(ev *evidence) { ev.overdue = 2 }, "2 deliveries were due"},
		{"queue not empty", func(ev *evidence) { ev.queueLeft = 3 }, "3 messages were left"},
		{"failed invocations", func(ev *evidence) { ev.batchFailures = 1 }, "failed as a whole"},
		{"a problem on the way", func(ev *evidence) { ev.problems = []string{"enqueue run at 10:00:00 failed"} }, "enqueue run at"},
		{"publish failed", func(ev *evidence) { ev.publishFailed = 2 }, "could not publish 2"},
	} {
		ev := clean(p)
		c.break_(&ev)
		v := p.violations(ev)
		if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), c.want) {
			t.Errorf("%s: violations %q, want one with %q", c.name, v, c.want)
		}
	}
}

// TestTheChannelsContract: an SNS copy is a counted duplicate, not a
// violation (a standard topic does not deduplicate), and an SES delivery
// an attempt died sending is reviewed, not a violation.
func TestTheChannelsContract(t *testing.T) {
	t.Parallel()
	p := newPlan(defaults(t, Config{Reminders: 100}))
	var sesKey, snsKey message.DeliveryKey
	for k, d := range p.byKey {
		if d.expect == ledger.StatusSent && d.fault == "" {
			switch k.Provider {
			case ses.Name:
				sesKey = k
			case sns.Name:
				snsKey = k
			}
		}
	}
	ev := clean(p)
	ev.accepted[snsKey] = 2
	d := ev.stored[sesKey]
	d.Status, d.LastErrorClass = ledger.StatusDead, failure.ClassAmbiguous
	d.History = []ledger.Entry{{Status: ledger.StatusQueued}, {Status: ledger.StatusSending}, {Status: ledger.StatusSending}, {Status: ledger.StatusDead}}
	ev.stored[sesKey] = d
	ev.dlq = append(ev.dlq, deadLetter{key: sesKey, class: failure.ClassAmbiguous})
	if v := p.violations(ev); len(v) != 0 {
		t.Fatalf("violations %v", v)
	}
	for k, d := range p.byKey {
		if d.kind != dueNow && d.kind != dueSoon {
			continue
		}
		if want, class := expectFor(k.Provider, d.fault); d.expect != want || d.class != class {
			t.Fatalf("%s with fault %q expects %s %s; the contract says %s %s", k, d.fault, d.expect, d.class, want, class)
		}
	}
}

// TestConfigRefusesNonsense: bad options name the option and the fix.
func TestConfigRefusesNonsense(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Reminders: 5}, "use 10 to 1,000,000"},
		{Config{Spread: time.Hour}, "spread 1h0m0s; use 1s to 10m"},
		{Config{Tick: time.Millisecond}, "use at least 500ms"},
		{Config{Duplicates: 2}, "duplicates share 2; use 0 to 1"},
		{Config{Faults: &Faults{Server: 0.7, Drop: 0.5}}, "add up to 1.20"},
		{Config{Kills: -1}, "-1 consumer kills, 0 enqueue kills; use 0 or more"},
		{Config{EnqueueBudget: time.Minute}, "enqueue budget 1m0s; use 0"},
	} {
		if _, err := c.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.cfg, err, c.want)
		}
	}
	cfg := defaults(t, Config{MaxConcurrency: 1})
	if _, err := cfg.stage(); err == nil || !strings.Contains(err.Error(), "maximum concurrency 1") {
		t.Errorf("a maximum concurrency of 1 is below Lambda's minimum for SQS: %v", err)
	}
	// The consumer's time budget is the stage's relation, checked once.
	cfg = defaults(t, Config{ConsumerTimeout: 3 * time.Second})
	if _, err := cfg.stage(); err == nil || !strings.Contains(err.Error(), "raise the consumer timeout to 6s or more") {
		t.Errorf("a 3 s consumer timeout with the demo's 2 s provider timeout: %v", err)
	}
}

// TestDemoRunKeepsItsInvariants runs a small demo with every fault on,
// through the real bootstraps under the emulator, DynamoDB Local and fauxqs,
// and checks its summary.
func TestDemoRunKeepsItsInvariants(t *testing.T) {
	standintest.AWSConfig(t) // skips (or fails under CI) without the stand-ins
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "intake")
	var (
		out        bytes.Buffer
		redriven   []message.DeliveryKey
		keptSystem observed
	)
	stage := strings.TrimPrefix(standintest.Name("demo"), "demo-")
	logsKeptIfFailed(t, stage)
	sum, err := Run(context.Background(), Config{
		// The consumer's timeout sets the visibility timeout (6×, 1 min):
		// a batch SQS delivers again (a receive whose answer was lost, as
		// at-least-once delivery allows) is back within the deadline. With
		// the stage's 30 s (3 min) one such batch left its deliveries
		// pending past the 2-minute deadline.
		Reminders: 200, Spread: 8 * time.Second, Tick: time.Second, Deadline: 2 * time.Minute, ConsumerTimeout: 10 * time.Second,
		Stage: stage, Bootstraps: bins, Out: &out,
		DynamoDBEndpoint: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), SESEndpoint: os.Getenv("AWS_ENDPOINT_URL_SESV2"),
		// Once it is over, an operator redrives the deliveries the provider
		// rejected (on every attempt: the cause is fixed now, so it accepts
		// them), and the running system sends them.
		Keep: func(ctx context.Context, _ *Summary, local Local) {
			redriven, keptSystem = redriveRejected(t, ctx, local)
		},
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	sum.Write(&out)
	if !sum.OK() {
		t.Fatalf("invariants broken:\n%s", out.String())
	}
	if sum.UnseenReceives > 0 {
		// Not a broken invariant (the records came back and were sent),
		// but the local system lost a receive's answer: say so (go test -v).
		t.Logf("%d receives never reached the mapping; the run:\n%s", sum.UnseenReceives, out.String())
	}
	p := newPlan(defaults(t, Config{Reminders: 200}))
	want := func(s ledger.Status) int { return p.count(func(d *planned) bool { return d.expect == s }) }
	if sum.Sent != want(ledger.StatusSent) || sum.Expired != want(ledger.StatusExpired) || sum.Cancelled != want(ledger.StatusCancelled) {
		t.Errorf("sent %d, expired %d, cancelled %d; the plan calls for %d, %d, %d",
			sum.Sent, sum.Expired, sum.Cancelled, want(ledger.StatusSent), want(ledger.StatusExpired), want(ledger.StatusCancelled))
	}
	for _, reason := range []string{"rejected: ", "exhausted: ", "decode: "} {
		found := false
		for r := range sum.DeadLettered {
			found = found || strings.HasPrefix(r, reason)
		}
		if !found {
			t.Errorf("no dead letter of class %q: %v", reason, sum.DeadLettered)
		}
	}
	// The webhook's sink suppresses a repeat after a lost answer: there is
	// one to suppress when the plan drops an answer of the webhook's.
	drops := p.count(func(d *planned) bool { return d.key.Provider == "webhook" && d.fault == "drop" })
	if sum.Recognised == 0 || drops > 0 && sum.Suppressed == 0 || sum.Retried == 0 || sum.Overdue != 0 || sum.RequestsPerSent == 0 || sum.LatencyP99 == 0 {
		t.Errorf("recognised %d, suppressed %d (%d webhook answers dropped), retried %d, overdue %d, requests/sent %.2f, p99 %v",
			sum.Recognised, sum.Suppressed, drops, sum.Retried, sum.Overdue, sum.RequestsPerSent, sum.LatencyP99)
	}
	if len(redriven) == 0 {
		t.Error("nothing was redriven after the run")
	}
	for _, k := range redriven {
		if keptSystem.status[k] != ledger.StatusSent {
			t.Errorf("redriven %s ended %s, want sent", k, keptSystem.status[k])
		}
	}
	if t.Failed() {
		t.Log(out.String())
	}
}

// TestChaosRunKeepsItsInvariants is a small chaos run: provider faults,
// consumer runtimes killed mid-batch, duplicates, poison, and enqueue runs
// cut by a short time budget; nothing may be sent twice, lost or overdue.
// make chaos runs the full size.
func TestChaosRunKeepsItsInvariants(t *testing.T) {
	standintest.AWSConfig(t)
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "intake")
	cfg := ChaosDefaults()
	cfg.Reminders, cfg.Rate, cfg.Spread, cfg.Tick, cfg.Deadline = 400, 200, 8*time.Second, time.Second, 150*time.Second
	// The budget is the chaos run's: a much smaller one fails runs on a
	// loaded machine, where the emulator's hand-over alone can take longer.
	// Whether a run is cut depends on the machine's speed; the cut and the
	// resume are asserted by the enqueue's own tests.
	cfg.Kills, cfg.EnqueueKills = 4, 2
	cfg.Stage, cfg.Bootstraps = strings.TrimPrefix(standintest.Name("chaos"), "chaos-"), bins
	logsKeptIfFailed(t, cfg.Stage)
	cfg.DynamoDBEndpoint, cfg.SQSEndpoint, cfg.SESEndpoint = os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), os.Getenv("AWS_ENDPOINT_URL_SQS"), os.Getenv("AWS_ENDPOINT_URL_SESV2")
	var out bytes.Buffer
	cfg.Out = &out
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	sum.Write(&out)
	if !sum.OK() {
		t.Fatalf("invariants broken:\n%s", out.String())
	}
	if !sum.Chaos || sum.Kills != 4 || sum.EnqueueKills != 2 || sum.FailedInvocations != sum.Kills || sum.Overdue != 0 ||
		sum.PeakRSS["consumer"] == 0 || sum.PeakRSS["enqueue"] == 0 || sum.WindowMax == 0 {
		t.Errorf("kills %d (failed invocations %d), enqueue kills %d, enqueue runs cut %d, overdue %d, peak RSS %v, window max %v",
			sum.Kills, sum.FailedInvocations, sum.EnqueueKills, sum.EnqueueCut, sum.Overdue, sum.PeakRSS, sum.WindowMax)
	}
	if !strings.Contains(out.String(), "duplicate window") {
		t.Error("the summary does not state the duplicate window")
	}
	if t.Failed() {
		t.Log(out.String())
	}
}

// TestARepeatIsExplainedOnlyByAKillDuringItsInvocation: a repeat of an
// answered acceptance is the kill's doing only if the instance the answer
// went to was killed while the invocation that sent it could still run.
func TestARepeatIsExplainedOnlyByAKillDuringItsInvocation(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := &system{cfg: Config{ConsumerTimeout: 6 * time.Second}, kills: []kill{
		{instance: "consumer-1", at: t0.Add(-time.Second)},
		{instance: "consumer-2", at: t0.Add(-50 * time.Millisecond)},
		{instance: "consumer-3", at: t0.Add(2 * time.Second)},
		{instance: "consumer-4", at: t0.Add(10 * time.Second)},
	}}
	for path, want := range map[string]bool{
		"/deliveries/consumer-1": false, // killed before the request was sent
		"/deliveries/consumer-2": true,  // the request was in flight as it died
		"/deliveries/consumer-3": true,  // killed during the invocation
		"/deliveries/consumer-4": false, // killed long after the invocation ended
		"/deliveries/consumer-5": false, // never killed
	} {
		if got := s.killedDuring(path, t0); got != want {
			t.Errorf("killedDuring(%s) = %v, want %v", path, got, want)
		}
	}
}

// observed is what the test saw of the kept system.
type observed struct {
	status map[message.DeliveryKey]ledger.Status
}

// redriveRejected redrives the DLQ's rejected deliveries as an operator
// would, then waits for the kept system to send them.
func redriveRejected(t *testing.T, ctx context.Context, local Local) ([]message.DeliveryKey, observed) {
	db, q := standintest.DynamoDB(t), standintest.SQS(t)
	led, err := ledger.New(db, ledger.Config{Table: local.Table})
	if err != nil {
		t.Fatal(err)
	}
	r, err := redrive.New(redrive.Config{Queue: q, DLQURL: local.DLQURL, TargetURL: local.WorkURL, Ledger: led, By: "demo-test", Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := r.Select(ctx, redrive.Filter{Max: 100, Class: "rejected"})
	// A DLQ read can come back short on the stand-ins: a receive whose
	// answer never arrived (the SDK repeats it) hides its messages for the
	// read's hold, as the summary's own read found (readDLQ). The messages
	// are still there: read again once the longest hold (the summary's
	// 20 s) has passed, and say so.
	for try := 1; err == nil && len(sel.Chosen) == 0 && try <= 2; try++ {
		depth, derr := status.QueueDepth(ctx, q, local.DLQURL)
		if derr != nil || depth.Total() == 0 {
			break
		}
		t.Logf("the DLQ read chose nothing while the DLQ holds %d messages (%d in flight): reading again after the hold", depth.Total(), depth.InFlight)
		time.Sleep(21 * time.Second)
		sel, err = r.Select(ctx, redrive.Filter{Max: 100, Class: "rejected"})
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Move(ctx, sel, nil)
	if err != nil || res.Moved == 0 || res.Failed > 0 {
		t.Fatalf("redrive: %+v, %v", res, err)
	}
	var keys []message.DeliveryKey
	for _, o := range res.Outcomes {
		k, _ := message.ParseDeliveryKey(o.DeliveryKey)
		keys = append(keys, k)
	}
	seen := observed{status: map[message.DeliveryKey]ledger.Status{}}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		done := 0
		got, err := led.GetMany(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		for k, d := range got {
			seen.status[k] = d.Status
			if d.Status == ledger.StatusSent {
				done++
			}
		}
		if done == len(keys) {
			break
		}
	}
	return keys, seen
}

// TestLogsTellAnUnrecordedSend: the consumer's retry after a failed
// complete (the provider accepted, the ledger did not record it) is read
// from its log line, so that the repeat it causes is not taken for a bug.
func TestLogsTellAnUnrecordedSend(t *testing.T) {
	t.Parallel()
	l := newFunctionLog(nil)
	for _, line := range []string{
		`{"msg":"transition","deliveryKey":"rem-1:email:webhook","outcome":"retry","errorClass":"aws","error":"ledger: complete rem-1:email:webhook: operation error DynamoDB: UpdateItem, canceled"}`,
		`{"msg":"transition","deliveryKey":"rem-2:email:webhook","outcome":"retry","errorClass":"server","error":"provider answered 500"}`,
		`{"msg":"transition","deliveryKey":"rem-3:email:webhook","outcome":"sent"}`,
		`REPORT RequestId: x	Duration: 12.00 ms	Billed Duration: 13 ms	Memory Size: 256 MB`,
	} {
		_, _ = l.Write([]byte(line + "\n"))
	}
	got := logs{l}.ledgerFailed()
	if len(got) != 1 || !got["rem-1:email:webhook"] {
		t.Fatalf("ledgerFailed = %v; want only rem-1", got)
	}
	if billed, _ := (logs{l}).usage(); billed != 13*time.Millisecond {
		t.Fatalf("billed %v, want 13ms", billed)
	}
}

// TestAReviewAfterAKilledAttemptIsExplained: an SES delivery whose attempt
// was killed mid-send, handed back to the queue by the repair and then
// sent to review, is explained by the kill; the same end without the
// ledger's mark of an unended attempt is not.
func TestAReviewAfterAKilledAttemptIsExplained(t *testing.T) {
	t.Parallel()
	k := message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: ses.Name}
	d := ledger.Delivery{Status: ledger.StatusDead, LastErrorClass: failure.ClassAmbiguous, Attempts: 2,
		History: []ledger.Entry{{Status: ledger.StatusSending}, {Status: ledger.StatusQueued}, {Status: ledger.StatusSending}, {Status: ledger.StatusDead}}}
	if reviewedAfterLapse(k, d) {
		t.Error("a review without an unended attempt is explained")
	}
	d.UnendedAttempt = 1
	if !reviewedAfterLapse(k, d) {
		t.Error("a review after the repair requeued a killed attempt is not explained")
	}
	if reviewedAfterLapse(message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: webhook.Name}, d) {
		t.Error("a webhook delivery's review is explained by a kill; only SES reviews what may have gone out")
	}
}

// TestABudgetSpentByKillsIsExplained: a webhook or SNS delivery planned to
// be sent that kills dead-lettered, by ending every attempt of its budget
// but the last, which met its one transient fault, is explained; the
// same end is a violation wherever the evidence says something else
// happened: the provider saw more than that one request, or holds the
// delivery after a fault that was not a lost answer, an attempt recorded a
// failure or ended otherwise, the budget was not spent, or the delivery is
// SES's (which sends the attempt after an unended one to review).
func TestABudgetSpentByKillsIsExplained(t *testing.T) {
	t.Parallel()
	p := newPlan(defaults(t, Config{Reminders: 400, Faults: &ChaosFaults}))
	keys := map[string]message.DeliveryKey{}
	for k, d := range p.byKey {
		if d.expect == ledger.StatusSent && (d.fault == "429" || d.fault == "drop" || d.fault == "") {
			keys[k.Provider+" "+d.fault] = k
		}
	}
	w429, sns429, wDrop, ses429, plain := keys["webhook 429"], keys["sns 429"], keys["webhook drop"], keys["ses 429"], keys["webhook "]
	for name, k := range map[string]message.DeliveryKey{"webhook 429": w429, "sns 429": sns429, "webhook drop": wDrop, "ses 429": ses429, "webhook": plain} {
		if k.ReminderID == "" {
			t.Fatalf("the plan has no %s delivery", name)
		}
	}
	const s, q, r, x, pe = ledger.StatusSending, ledger.StatusQueued, ledger.StatusRetrying, ledger.StatusDead, ledger.StatusPending
	for _, c := range []struct {
		name                 string
		key                  message.DeliveryKey
		history              []ledger.Status
		attempts, budgetFrom int
		requests, accepted   int
		explained            bool
	}{
		{"four attempts killed, the fifth met the 429", w429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, true},
		{"at SNS too", sns429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, true},
		{"killed attempts, one handed back by the repair; the history cut", w429, []ledger.Status{s, q, s, q, s, s, s, x}, 5, 0, 1, 0, true},
		{"since a redrive", w429, []ledger.Status{s, x, s, s, s, s, s, x}, 10, 5, 1, 0, true},
		{"the last attempt's answer lost after it was accepted", wDrop, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 1, true},
		{"a 429 the provider accepted all the same", w429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 1, false},
		{"a killed attempt had reached the provider", w429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 2, 0, false},
		{"an attempt recorded a failure", w429, []ledger.Status{q, s, r, s, s, s, s, x}, 5, 0, 1, 0, false},
		{"the budget not spent since the redrive", w429, []ledger.Status{s, x, s, s, s, s, s, x}, 8, 5, 1, 0, false},
		{"SES reviews instead", ses429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, false},
		{"no fault to fail the last attempt", plain, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, false},
	} {
		ev := clean(p)
		ev.budget, ev.requests = 5, map[message.DeliveryKey]int{c.key: c.requests}
		d := ev.stored[c.key]
		d.Status, d.LastErrorClass, d.Attempts, d.BudgetFrom, d.History = x, failure.ClassExhausted, c.attempts, c.budgetFrom, nil
		for _, st := range c.history {
			d.History = append(d.History, ledger.Entry{Status: st})
		}
		ev.stored[c.key] = d
		ev.accepted[c.key] = c.accepted
		ev.dlq = append(ev.dlq, deadLetter{key: c.key, class: failure.ClassExhausted})
		v := p.violations(ev)
		if c.explained && len(v) != 0 {
			t.Errorf("%s: violations %q", c.name, v)
		}
		if !c.explained && (len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), c.key.String())) {
			t.Errorf("%s: violations %q, want %s named", c.name, v, c.key)
		}
	}
}
