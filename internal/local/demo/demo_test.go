package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/provider/ses"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/local/sesevents"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/localtime"
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
	for _, d := range p.Deliveries {
		faults[d.Fault]++
		switch d.Fault {
		case "400":
			if d.Expect != ledger.StatusDead || d.Class != "rejected" {
				t.Errorf("a 400 must end dead as rejected: %+v", d)
			}
		case "down":
			if d.Expect != ledger.StatusDead || d.Class != "exhausted" {
				t.Errorf("a provider down must end dead as exhausted: %+v", d)
			}
		case "":
		case "500", "hang", "drop":
			// The provider may have sent. The webhook and SNS retry with the
			// same key; SES's policy is record: its record settles a lost
			// answer (drop) sent, and has a 500 or a hang, which never
			// reached it, sent again once it reports later e-mails.
			if d.Expect != ledger.StatusSent || d.Class != "" {
				t.Errorf("fault %s at %s must end sent: %+v", d.Fault, d.Key.Provider, d)
			}
		default:
			if d.Expect != ledger.StatusSent {
				t.Errorf("fault %s must still end sent: %+v", d.Fault, d)
			}
		}
		// A due delivery ends as the checker's contract for its provider
		// and fault says.
		if kind(d.Kind) != dueNow && kind(d.Kind) != dueSoon {
			continue
		}
		if want, class := check.Expect(d.Key.Provider, d.Fault); d.Expect != want || d.Class != class {
			t.Fatalf("%s with fault %q expects %s %s; the contract says %s %s", d.Key, d.Fault, d.Expect, d.Class, want, class)
		}
	}
	for _, k := range []string{"500", "429", "400", "hang", "drop", "down"} {
		if faults[k] == 0 {
			t.Errorf("no delivery meets fault %s at the default size", k)
		}
	}
	plan := p.sinkPlan()
	for _, d := range p.Deliveries {
		first, second := plan(d.Key.String(), 1), plan(d.Key.String(), 2)
		want := map[string]string{"": "ok", "500": "500", "429": "429", "400": "400", "hang": "hang", "drop": "drop", "down": "500"}[d.Fault]
		// A permanent rejection and an outage meet every attempt; the
		// others only the first.
		if first.Kind != want || (second.Kind != "ok") != (d.Fault == "down" || d.Fault == "400") || d.Fault == "400" && second.Kind != "400" {
			t.Fatalf("%s (%s): first %s, then %s", d.Key, d.Fault, first.Kind, second.Kind)
		}
	}
	// The checker passes a perfect run of the mix: each of its deliveries
	// and poison messages is one the checker knows how to judge.
	if p.Poison != len(p.poison) {
		t.Fatalf("the plan tells the checker of %d poison messages; it puts %d on the queue", p.Poison, len(p.poison))
	}
	if v := check.Check(p.Plan, check.Perfect(p.Plan)); !v.OK() {
		t.Fatalf("a perfect run of the mix broke invariants: %v", v.Violations)
	}
}

// TestAShareOfTheEmailsGoesToTheSimulator: about one in ten of the SES
// deliveries due now without a fault goes to a mailbox of SES's
// simulator, the five in turn, the same ones for the same seed, each with
// the feedback SES's events give it; every other SES delivery expects
// delivered, and the others none.
func TestAShareOfTheEmailsGoesToTheSimulator(t *testing.T) {
	t.Parallel()
	cfg := defaults(t, Config{Reminders: 2000})
	p, again := newPlan(cfg), newPlan(cfg)
	byAddress, candidates := map[string]int{}, 0
	for k, d := range p.Deliveries {
		if d.Simulator != again.Deliveries[k].Simulator {
			t.Fatalf("%s: the same seed sent it to %q, then %q", k, d.Simulator, again.Deliveries[k].Simulator)
		}
		viaSES := k.Provider == ses.Name
		if viaSES && kind(d.Kind) == dueNow && d.Fault == "" {
			candidates++
		}
		switch {
		case d.Simulator != "":
			byAddress[d.Simulator]++
			if !viaSES || kind(d.Kind) != dueNow || d.Fault != "" {
				t.Errorf("%s (%s, fault %q) goes to the simulator; only SES deliveries due now without a fault do", k, d.Kind, d.Fault)
			}
		case viaSES && (d.Feedback != ledger.Feedback{Kind: ledger.FeedbackDelivered}):
			t.Errorf("%s to an ordinary address expects feedback %+v; SES delivers it", k, d.Feedback)
		case !viaSES && d.Feedback.Kind != "":
			t.Errorf("%s expects feedback %+v; only SES reports any", k, d.Feedback)
		}
	}
	want := map[string]ledger.Feedback{sesevents.Success: {Kind: ledger.FeedbackDelivered}, sesevents.OutOfOffice: {Kind: ledger.FeedbackDelivered},
		sesevents.Bounce: {Kind: ledger.FeedbackBounced, Permanent: true}, sesevents.SuppressionList: {Kind: ledger.FeedbackBounced, Permanent: true},
		sesevents.Complaint: {Kind: ledger.FeedbackComplained}}
	total := 0
	for address, n := range byAddress {
		total += n
		if _, ok := want[address]; !ok {
			t.Errorf("%d deliveries go to %s, not a simulator address", n, address)
		}
	}
	if len(byAddress) != len(want) || total < candidates/20 || total > candidates/5 {
		t.Errorf("%d of %d candidates to the simulator, by address %v; want about one in ten, over all five", total, candidates, byAddress)
	}
	for k, d := range p.Deliveries {
		if f, ok := want[d.Simulator]; ok && d.Feedback != f {
			t.Errorf("%s to %s expects %+v; SES's events say %+v", k, d.Simulator, d.Feedback, f)
		}
	}
	// The rest of the mix is the seed's as before: the simulator draws from
	// its own source.
	for i, r := range p.reminders {
		if r.kind != again.reminders[i].kind || len(r.deliveries) != len(again.reminders[i].deliveries) {
			t.Fatal("the same seed drew a different mix")
		}
	}
	// An e-mail to the simulator is addressed to it at the intake.
	for _, r := range p.reminders {
		for i, d := range r.deliveries {
			if d.Simulator != "" {
				in, err := p.input(r, time.Now(), time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if got := in.Deliveries[i].Address; got != d.Simulator {
					t.Fatalf("%s is addressed to %q at the intake; want %s", d.Key, got, d.Simulator)
				}
				return
			}
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
		{Config{Kills: -1}, "-1 consumer kills, 0 enqueue kills, 0 outcomes kills; use 0 or more"},
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
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "intake", "outcomes", "feedback")
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
	want := func(s ledger.Status) int { return p.count(func(d check.Planned) bool { return d.Expect == s }) }
	// An SES send that may have gone out and that its record could not
	// settle before the run ended was reviewed instead (the checker
	// accepted it, with no copy at SES).
	reviewed := 0
	if c := sum.ByProvider[ses.Name]; c != nil {
		reviewed = c.Reviewed
	}
	// Each series' first occurrence is due in the run, and sent: the
	// checker plans the occurrences, the mix does not.
	if sum.Sent+reviewed != want(ledger.StatusSent)+sum.OccurrencesSent || sum.Expired != want(ledger.StatusExpired) || sum.Cancelled != want(ledger.StatusCancelled) {
		t.Errorf("sent %d (and %d reviewed at SES), expired %d, cancelled %d; the plan calls for %d (and %d occurrences), %d, %d",
			sum.Sent, reviewed, sum.Expired, sum.Cancelled, want(ledger.StatusSent), sum.OccurrencesSent, want(ledger.StatusExpired), want(ledger.StatusCancelled))
	}
	kinds, series := map[kind]int{}, 0
	for _, r := range p.reminders {
		kinds[r.kind] += len(r.deliveries)
		if r.kind.series() {
			series++
		}
	}
	if sum.Series != series || series == 0 || sum.OccurrencesSent != sum.Series ||
		sum.WindowsWaited != kinds[windowWaits] || sum.WindowsOpen != kinds[windowOpen] || sum.WindowsShut != kinds[windowShut] {
		t.Errorf("series %d (first occurrences sent %d); windows waited %d, open %d, shut %d; the plan has %d waiting, %d open, %d shut",
			sum.Series, sum.OccurrencesSent, sum.WindowsWaited, sum.WindowsOpen, sum.WindowsShut, kinds[windowWaits], kinds[windowOpen], kinds[windowShut])
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
	drops := p.count(func(d check.Planned) bool { return d.Key.Provider == "webhook" && d.Fault == "drop" })
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
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "intake", "outcomes", "feedback")
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
	// The select's hold is 20 s, not the operator's 5 minutes: a DLQ read
	// can come back short on the stand-ins, since a receive whose answer
	// never arrived (the SDK repeats it) hides its messages for the read's
	// hold, as the summary's own read found (readDLQ). With the default
	// hold, one such receive in this select hid the rejected messages for
	// 5 minutes, past both reads again below (a run failed so: "chose
	// nothing while the DLQ holds 6 messages (6 in flight)"). The messages
	// are still there: read again once the longest hold (20 s, the
	// summary's and this select's) has passed, and say so.
	const hold = 20 * time.Second
	r, err := redrive.New(redrive.Config{Queue: q, DLQURL: local.DLQURL, TargetURL: local.WorkURL, Ledger: led, By: "demo-test", Rate: 100,
		ReviewHold: hold, SelectHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := r.Select(ctx, redrive.Filter{Max: 100, Class: "rejected"})
	for try := 1; err == nil && len(sel.Chosen) == 0 && try <= 2; try++ {
		depth, derr := status.QueueDepth(ctx, q, local.DLQURL)
		if derr != nil || depth.Total() == 0 {
			break
		}
		t.Logf("the DLQ read chose nothing while the DLQ holds %d messages (%d in flight): reading again after the hold", depth.Total(), depth.InFlight)
		time.Sleep(hold + time.Second)
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

// TestTheRecipientsKindsAskWhatTheCheckerExpects: each windowed reminder of
// the default mix asks for a window that the library opens when the demo
// tells the checker it opens (a waiting one on the minute, at least the
// lead away; an open one at once; a shut one six hours on), and each
// series for its kind's rule from a first occurrence soon after now, in
// its zone; every new kind is in the mix.
func TestTheRecipientsKindsAskWhatTheCheckerExpects(t *testing.T) {
	cfg := defaults(t, Config{})
	p := newPlan(cfg)
	now := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	seen := map[kind]int{}
	for _, r := range p.reminders {
		if !r.kind.recipients() {
			continue
		}
		seen[r.kind]++
		in, err := p.input(r, now, r.soon)
		if err != nil {
			t.Fatal(err)
		}
		if r.kind.series() {
			if in.Recur != rules[r.kind] || in.TimeZone != r.zone || in.DueAt != "" || len(in.Deliveries) != 1 {
				t.Fatalf("%s (%s) asks for %+v", r.id, r.kind, in)
			}
			loc, _ := localtime.LoadZone(r.zone)
			if first := now.Add(r.soon).In(loc).Format("2006-01-02T15:04:05"); !strings.HasPrefix(first, in.DueLocal) {
				t.Fatalf("%s starts at %s; want %s in %s", r.id, in.DueLocal, first, r.zone)
			}
			continue
		}
		wi := in.Deliveries[0].Window
		if wi == nil {
			t.Fatalf("%s (%s) names no window", r.id, r.kind)
		}
		w, err := localtime.ParseWindow(wi.From, wi.To, wi.TimeZone, wi.Days)
		if err != nil {
			t.Fatal(err)
		}
		opens := r.opens
		if opens.IsZero() {
			opens = now // open when it falls due
		}
		if got := w.Next(now); !got.Equal(opens) {
			t.Fatalf("%s (%s): window %s opens at %s; the checker is told %s", r.id, r.kind, w, got, r.opens)
		}
		switch lead := opens.Sub(now); r.kind {
		case windowWaits:
			if lead < windowLead || lead > max(windowLead, cfg.Spread/2)+time.Minute || r.opens.Second() != 0 || len(wi.Days) != 1 {
				t.Fatalf("%s waits %v for %s", r.id, lead, w)
			}
		case windowOpen:
			if lead != 0 {
				t.Fatalf("%s's window %s is shut at %s", r.id, w, now)
			}
		case windowShut:
			if lead < 6*time.Hour || lead > 6*time.Hour+time.Minute {
				t.Fatalf("%s's window %s opens in %v", r.id, w, lead)
			}
		}
		// A retry asks for the same window.
		if again, _ := p.input(r, now.Add(time.Second), r.soon); !reflect.DeepEqual(again.Deliveries[0].Window, wi) {
			t.Fatalf("%s's retry asks for %+v, then %+v", r.id, wi, again.Deliveries[0].Window)
		}
	}
	for _, k := range []kind{windowWaits, windowOpen, windowShut, daily, weekly} {
		if seen[k] == 0 {
			t.Errorf("no %s reminder in the default mix", k)
		}
	}
}

// TestASmallRunMeetsEveryFault: a run too small for the draw to give every
// fault kind its share still meets each once (the demo test redrives the
// rejected ones).
func TestASmallRunMeetsEveryFault(t *testing.T) {
	for _, n := range []int{20, 200} {
		p := newPlan(defaults(t, Config{Reminders: n}))
		for _, f := range []string{"500", "429", "400", "hang", "drop", "down"} {
			if p.count(func(d check.Planned) bool { return d.Fault == f }) == 0 {
				t.Errorf("%d reminders: no delivery meets fault %s", n, f)
			}
		}
		if v := check.Check(p.Plan, check.Perfect(p.Plan)); !v.OK() {
			t.Fatalf("%d reminders: a perfect run broke invariants: %v", n, v.Violations)
		}
	}
}
