package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/nudgehq/nudge/pkg/consumer"
	"github.com/nudgehq/nudge/pkg/enqueue"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/redrive"
	"github.com/nudgehq/nudge/pkg/status"
)

// Summary is what a run did, and the invariants it broke.
type Summary struct {
	Elapsed    time.Duration
	Reminders  int
	Deliveries int
	// ByKind counts deliveries by their place in the mix ("due now", …).
	ByKind map[string]int
	// ByStatus counts deliveries by their final status in the ledger.
	ByStatus map[ledger.Status]int

	Sent int
	// Recognised counts messages the consumer recognised as duplicates of a
	// delivery that had already ended (the ledger's conditional claim).
	Recognised int
	// Suppressed counts repeated requests the provider suppressed by
	// idempotency key (retries after an answer was lost).
	Suppressed int
	Retried    int
	Deferred   int
	// DeadLettered counts DLQ messages by "class: reason".
	DeadLettered map[string]int
	Expired      int
	Cancelled    int
	// Overdue counts deliveries due before the end that had not ended.
	Overdue int

	// Latency is due→sent of the sent deliveries.
	LatencyP50, LatencyP99, LatencyMax time.Duration
	Histogram                          []Bucket

	// Requests counts AWS API requests by caller ("consumer DynamoDB", …).
	Requests map[string]int64
	// RequestsPerSent is all of them per sent delivery.
	RequestsPerSent float64

	Ticks, Invocations int
	// IntakeCalls are the intake function's invocations: one per API call.
	IntakeCalls int

	// Chaos: consumer runtimes killed mid-batch (of those asked for), the
	// invocations that failed as a whole, the enqueue runs the time budget
	// cut, and of those the ones whose requests still running at the
	// reserve were cancelled (DynamoDB Local answering slowly).
	Chaos             bool
	Kills, KillsAsked int
	// EnqueueKills are the enqueue runtimes killed mid-run (of those asked
	// for).
	EnqueueKills, EnqueueKillsAsked int
	FailedInvocations               int
	// UnseenReceives counts receives of the work queue's records that
	// never reached the local event source mapping (esm.Stats): each such
	// record waited out a visibility timeout before it ran.
	UnseenReceives int
	// MappingWarnings are the event source mapping's log lines, by kind
	// (a failed receive, a failed invocation, a record it never had).
	MappingWarnings []string
	EnqueueCut      int
	EnqueueSlow     int
	// Resent counts requests for a delivery the provider had already
	// accepted and answered, repeated because the instance it answered was
	// killed before it recorded the send; ResentLedger those repeated
	// because the consumer's ledger write after the acceptance failed (it
	// retries with the same key). The provider suppressed each by
	// idempotency key; a provider without idempotency keys would have
	// delivered each a second time.
	Resent, ResentLedger int
	// Window is the duplicate window: from the provider's acceptance to
	// the ledger's record of the send, over the sent deliveries.
	WindowP50, WindowP99, WindowMax time.Duration
	// DLQCopies counts dead letters beyond the first for the same delivery
	// or poison message: a consumer killed between its DLQ send and the
	// acknowledgement dead-letters the message again when it returns.
	DLQCopies int
	// KillsExhausted counts deliveries that kills dead-lettered: they ended
	// enough of its attempts to spend the attempt budget (exhaustedByKills).
	KillsExhausted int
	// PeakRSS is each function's largest peak resident memory (VmHWM of
	// its runtime), in bytes.
	PeakRSS map[string]int64
	// ByProvider is each provider's side of the run, from the ledger and
	// from the provider's stand-in's own record.
	ByProvider map[string]*ProviderCounts

	// Usage is what the run consumed as AWS bills it (the intake's writes
	// included), and Cost that at Prices per million sent deliveries.
	Usage Usage
	Cost  Cost

	Violations []string
}

// ProviderCounts are one provider's figures.
type ProviderCounts struct {
	// Deliveries the plan gave the provider; Sent the ledger records sent.
	Deliveries, Sent int
	// Recorded counts the deliveries the provider's stand-in holds (the
	// sink's acceptances, the SES store's e-mails, the SNS subscriber's
	// messages), each once; Copies the extra copies of one delivery it
	// holds: duplicates, which SNS's standard topic does not remove.
	Recorded, Copies int
	// Reviewed counts deliveries dead-lettered as ambiguous: the provider
	// may have sent them and does not deduplicate, so an operator decides.
	// Of those, Delivered the ones the stand-in shows did go out.
	Reviewed, Delivered int
	// Requests counts the provider requests the consumers made.
	Requests int64
}

// Bucket is one bar of the latency histogram.
type Bucket struct {
	UpTo  time.Duration // 0 for the last, open bucket
	Count int
}

// OK reports whether every invariant held.
func (s *Summary) OK() bool { return len(s.Violations) == 0 }

var bucketBounds = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, 0}

func (s *system) summarize(ctx context.Context) (*Summary, error) {
	sum := &Summary{Elapsed: time.Since(s.started), Reminders: len(s.plan.reminders), Deliveries: len(s.plan.byKey),
		ByKind: map[string]int{}, ByStatus: map[ledger.Status]int{}, DeadLettered: map[string]int{}, Requests: map[string]int64{}}
	for _, d := range s.plan.byKey {
		sum.ByKind[string(d.kind)]++
	}

	// The ledger.
	end := time.Now()
	stored := map[message.DeliveryKey]ledger.Delivery{}
	var latencies, windows []time.Duration
	err := s.view.ScanDeliveries(ctx, func(d ledger.Delivery) error {
		stored[d.Key()] = d
		sum.ByStatus[d.Status]++
		if d.Status == ledger.StatusSent {
			latencies = append(latencies, max(d.SentAt.Sub(d.DueAt), 0))
			if a, ok := s.sink.Accepted(d.Key().String()); ok {
				windows = append(windows, max(d.SentAt.Sub(a.At), 0))
			}
		}
		if !d.Status.Terminal() && !d.DueAt.After(end) {
			sum.Overdue++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sum.Sent, sum.Expired, sum.Cancelled = sum.ByStatus[ledger.StatusSent], sum.ByStatus[ledger.StatusExpired], sum.ByStatus[ledger.StatusCancelled]
	sum.latency(latencies)
	slices.Sort(windows)
	sum.WindowP50, sum.WindowP99, sum.WindowMax = quantile(windows, 0.5), quantile(windows, 0.99), quantile(windows, 1)

	// The DLQ.
	dlq, err := s.readDLQ(ctx, 20*time.Second)
	if err != nil {
		return nil, err
	}
	copies := map[string]int{}
	for _, m := range dlq {
		sum.DeadLettered[string(m.class)+": "+m.reasonKind()]++
		id := m.key.String()
		if m.key.ReminderID == "" {
			id = m.source
		}
		if copies[id]++; copies[id] > 1 {
			sum.DLQCopies++
		}
	}

	// The metrics, the sink, the requests.
	sum.Recognised = int(s.consumerLogs.metric(consumer.MetricDuplicate))
	sum.Retried = int(s.consumerLogs.metric(consumer.MetricRetried))
	sum.Deferred = int(s.consumerLogs.metric(consumer.MetricDeferred))
	_, sum.Suppressed = s.sink.Totals()
	for name, p := range s.proxies {
		sum.Requests[name] = p.Total()
	}
	st := s.mapping.Stats()
	sum.Requests["event source mapping SQS"] = st.ReceiveRequests + st.DeleteRequests
	var total int64
	for _, n := range sum.Requests {
		total += n
	}
	if sum.Sent > 0 {
		sum.RequestsPerSent = float64(total) / float64(sum.Sent)
	}
	sum.Ticks, sum.Invocations = int(s.ticks.Load()), s.consumerLogs.invocations()
	for _, name := range []string{"consumer DynamoDB", "enqueue DynamoDB", "intake DynamoDB"} {
		r, w := s.proxies[name].Units()
		sum.Usage.ReadUnits += r
		sum.Usage.WriteUnits += w
	}
	sum.Usage.SQSRequests = sum.Requests["consumer SQS"] + sum.Requests["enqueue SQS"] + sum.Requests["event source mapping SQS"]
	cBilled, cBytes := s.consumerLogs.usage()
	eBilled, eBytes := s.enqueueLogs.usage()
	iBilled, iBytes := s.intakeLogs.usage()
	sum.IntakeCalls = s.intakeLogs.invocations()
	sum.Usage.Invocations = sum.Invocations + sum.Ticks + sum.IntakeCalls
	sum.Usage.GBSeconds = gbSeconds(cBilled, s.stage.ConsumerMemoryMB) + gbSeconds(eBilled, s.stage.EnqueueMemoryMB) + gbSeconds(iBilled, s.stage.IntakeMemoryMB)
	sum.Usage.LogBytes = cBytes + eBytes + iBytes
	sum.Cost = sum.Usage.PerMillion(Prices, sum.Sent)
	s.mu.Lock()
	sum.Kills = len(s.kills)
	s.mu.Unlock()
	sum.Chaos, sum.KillsAsked = s.cfg.Kills > 0 || s.cfg.EnqueueKills > 0 || s.cfg.EnqueueBudget > 0, s.cfg.Kills
	sum.EnqueueKills, sum.EnqueueKillsAsked = int(s.enqueueKills.Load()), s.cfg.EnqueueKills
	sum.FailedInvocations, sum.EnqueueCut, sum.EnqueueSlow = int(st.BatchFailures), int(s.cutRuns.Load()), int(s.slowRuns.Load())
	sum.UnseenReceives, sum.MappingWarnings = int(st.UnseenReceives), s.esmErrors.Lines()
	sum.PeakRSS = map[string]int64{}
	for _, in := range append([]*instance{s.enqueue}, s.consumers...) {
		fn, _, _ := strings.Cut(in.name, "-")
		if rss, err := in.PeakRSS(); err == nil {
			sum.PeakRSS[fn] = max(sum.PeakRSS[fn], rss)
		}
	}
	// What each provider's stand-in recorded.
	emails, published, err := s.ch.records(ctx, s.sqs, s.started)
	if err != nil {
		return nil, err
	}
	sum.ByProvider = map[string]*ProviderCounts{}
	for _, p := range []string{webhook.Name, ses.Name, sns.Name} {
		sum.ByProvider[p] = &ProviderCounts{}
	}
	sinkKeys := map[string]int{}
	for _, k := range s.sink.Keys() {
		sinkKeys[k] = 1
	}
	records := map[string]map[string]int{webhook.Name: sinkKeys, ses.Name: emails, sns.Name: published}
	requests := map[message.DeliveryKey]int{}
	for k := range s.plan.byKey {
		pc := sum.ByProvider[k.Provider]
		pc.Deliveries++
		got := stored[k]
		if got.Status == ledger.StatusSent {
			pc.Sent++
		}
		if n := records[k.Provider][k.String()]; n > 0 {
			pc.Recorded++
			pc.Copies += n - 1
		}
		requests[k] = s.ch.requestsFor(k.String())
		if k.Provider == webhook.Name {
			requests[k] = s.sink.Requests(k.String())
		}
		if exhaustedByKills(k, s.plan.byKey[k], got, requests[k], records[k.Provider][k.String()], s.stage.MaxAttempts) {
			sum.KillsExhausted++
		}
		if got.Status == ledger.StatusDead && got.LastErrorClass == failure.ClassAmbiguous {
			pc.Reviewed++
			if records[k.Provider][k.String()] > 0 {
				pc.Delivered++
			}
		}
	}
	sum.ByProvider[webhook.Name].Requests = int64(s.sink.RequestTotal())
	sum.ByProvider[ses.Name].Requests = s.ch.ses.Requests()
	sum.ByProvider[sns.Name].Requests = s.ch.sns.Requests()

	// A repeat after an answered acceptance is explained only by a kill of
	// the instance the answer went to, during the invocation that sent it,
	// or by the consumer's own record that it could not write the send to
	// the ledger.
	resent := map[string]int{}
	ledgerFailed := s.consumerLogs.ledgerFailed()
	for _, r := range s.sink.Resends() {
		switch a, ok := s.sink.Accepted(r.Key); {
		case ok && s.killedDuring(r.AnsweredTo, a.Received):
			sum.Resent += r.Times
		case ledgerFailed[r.Key]:
			sum.ResentLedger += r.Times
		default:
			resent[r.Key] = r.Times
		}
	}

	// The invariants.
	queueLeft, qerr := s.depth(ctx, s.res.WorkURL)
	if qerr != nil {
		queueLeft = -1
	}
	accepted := map[message.DeliveryKey]int{}
	for _, rec := range records {
		for k, n := range rec {
			if key, err := message.ParseDeliveryKey(k); err == nil {
				accepted[key] += n
			}
		}
	}
	sum.Violations = s.plan.violations(evidence{
		stored: stored, accepted: accepted, resent: resent, dlq: dlq, overdue: sum.Overdue, queueLeft: queueLeft, poisonIDs: s.poisonIDs,
		batchFailures: st.BatchFailures - int64(sum.Kills), errorLines: append(s.esmErrors.Lines(), s.consumerLogs.errorLines()...), problems: s.problems, stall: s.stall.lastReport(),
		publishFailed: s.enqueueLogs.metric(enqueue.MetricPublishFailed), budget: s.stage.MaxAttempts,
		requests: requests,
	})
	return sum, nil
}

// evidence is what a run left behind, to check the invariants against.
type evidence struct {
	stored        map[message.DeliveryKey]ledger.Delivery // the ledger
	accepted      map[message.DeliveryKey]int             // the providers' own records: copies of each delivery
	resent        map[string]int                          // sends after an answered acceptance, not explained by a kill
	dlq           []deadLetter
	poisonIDs     []string // the poison messages put on the work queue
	overdue       int
	queueLeft     int // -1 when it could not be read
	batchFailures int64
	errorLines    []string
	problems      []string
	stall         string // the run's last stall report
	publishFailed float64
	budget        int                         // the consumer's attempt budget
	requests      map[message.DeliveryKey]int // the providers' own count of requests for each delivery
}

// violations checks the evidence against the plan: nothing sent twice,
// nothing lost, nothing overdue, and each delivery ended as its faults call
// for.
func (p *plan) violations(ev evidence) []string {
	var out []string
	violate := func(format string, args ...any) {
		if len(out) < 40 {
			out = append(out, fmt.Sprintf(format, args...))
		} else if len(out) == 40 {
			out = append(out, "… and more")
		}
	}
	resent := make([]string, 0, len(ev.resent))
	for key := range ev.resent {
		resent = append(resent, key)
	}
	sort.Strings(resent)
	for _, key := range resent {
		violate("sent twice: %s was sent %d more time(s) after the provider had answered that it was accepted", key, ev.resent[key])
	}
	dlqKeys, sources := map[message.DeliveryKey]bool{}, map[string]bool{}
	for _, m := range ev.dlq {
		dlqKeys[m.key] = true
		sources[m.source] = true
	}
	poisonDead := 0
	for _, id := range ev.poisonIDs {
		if sources[id] {
			poisonDead++
		}
	}
	keys := make([]message.DeliveryKey, 0, len(p.byKey))
	for k := range p.byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b message.DeliveryKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		want := p.byKey[k]
		got, ok := ev.stored[k]
		switch {
		case !ok:
			violate("lost: %s (%s) is not in the ledger", k, want.kind)
			continue
		case reviewedAfterLapse(k, got):
			// An attempt died mid-send (a kill): SES's review policy
			// dead-letters what may have gone out, whatever was planned.
		case exhaustedByKills(k, want, got, ev.requests[k], ev.accepted[k], ev.budget):
			// Kills ended enough of its attempts to spend the budget.
		case got.Status != want.expect:
			violate("%s (%s, fault %q) ended %s (%s %s), expected %s", k, want.kind, want.fault, got.Status, got.LastErrorClass, got.LastError, want.expect)
		case got.Status == ledger.StatusDead && got.LastErrorClass != want.class:
			violate("%s was dead-lettered as %q, expected %q", k, got.LastErrorClass, want.class)
		}
		copies := ev.accepted[k]
		if got.Status == ledger.StatusSent && copies == 0 {
			violate("%s is recorded sent, but the provider never accepted it", k)
		}
		// A delivery dead-lettered for review may have gone out; so may one
		// whose last attempt, the budget's, lost the provider's answer.
		reviewed := got.Status == ledger.StatusDead && got.LastErrorClass == failure.ClassAmbiguous ||
			exhaustedByKills(k, want, got, ev.requests[k], copies, ev.budget)
		if copies > 0 && got.Status != ledger.StatusSent && !reviewed {
			violate("%s was accepted by the provider but is recorded %s", k, got.Status)
		}
		if copies > 1 && k.Provider == ses.Name {
			violate("sent twice: SES accepted %s %d times; SES does not deduplicate, so the review policy must never send again", k, copies)
		}
		if got.Status == ledger.StatusDead && !dlqKeys[k] {
			violate("%s is dead in the ledger but has no message in the DLQ for review and redrive", k)
		}
	}
	if poisonDead != len(p.poison) {
		violate("%d poison messages were put on the queue, %d reached the DLQ", len(p.poison), poisonDead)
	}
	if ev.overdue > 0 {
		why := ""
		if ev.stall != "" {
			why = "; the run's last " + ev.stall
		}
		violate("%d deliveries were due before the end and had not ended (overdue)%s", ev.overdue, why)
	}
	if ev.queueLeft != 0 {
		violate("%d messages were left in the work queue (-1: it could not be read)", ev.queueLeft)
	}
	if ev.batchFailures > 0 {
		violate("%d consumer invocations failed as a whole (beyond those killed); the mapping's failures by kind, kills included, then the functions' first errors (all in .local/logs): %v", ev.batchFailures, ev.errorLines)
	}
	for _, pr := range ev.problems {
		violate("%s", pr)
	}
	if ev.publishFailed > 0 {
		violate("the enqueue could not publish %v deliveries", ev.publishFailed)
	}
	return out
}

// reviewedAfterLapse reports whether an SES delivery was dead-lettered for
// review because an earlier attempt never recorded an end: a claim took
// over its lapsed lease (two sending entries in a row in its history), or
// the repair handed it back to the queue meanwhile (UnendedAttempt).
func reviewedAfterLapse(k message.DeliveryKey, d ledger.Delivery) bool {
	if k.Provider != ses.Name || d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous {
		return false
	}
	for i := 1; i < len(d.History); i++ {
		if d.History[i].Status == ledger.StatusSending && d.History[i-1].Status == ledger.StatusSending {
			return true
		}
	}
	// Or the repair handed it back to the queue while an attempt held it
	// (the attempt's runtime was killed): the ledger marks that attempt as
	// never ended, and the next claim sent it to review.
	return d.UnendedAttempt > d.BudgetFrom
}

// exhaustedByKills reports whether a delivery planned to be sent was
// dead-lettered with its attempt budget spent only because kills ended its
// attempts. An attempt spends the budget when it claims the delivery,
// before its request, so a runtime killed in between spends an attempt the
// provider never saw; the budget is checked when an attempt fails. So a
// webhook or SNS delivery (SES sends the attempt after an unended one to
// review instead) with a transient fault can end dead `exhausted` when
// kills end every attempt but the budget's last, which meets the fault.
// That holds only where the evidence says exactly that:
//   - the provider saw one request for it (requests), the one its fault
//     failed: a killed attempt that had reached the provider would have
//     met the fault, and the next been answered; and it holds the delivery
//     only if that fault was a lost answer (accepted);
//   - the budget since the last redrive is spent (BudgetUsed);
//   - in the ledger's history since the last dead-lettering, no attempt
//     recorded a failure (retrying), every attempt but the last never
//     ended (a sending followed by another claim of the lapsed lease, or
//     by the repair's hand-back, queued), and the last ended dead.
//
// The history keeps the last HistoryLimit transitions; a kill is credited
// only with attempts whose visible record shows they never ended.
func exhaustedByKills(k message.DeliveryKey, want *planned, d ledger.Delivery, requests, accepted, budget int) bool {
	if k.Provider == ses.Name || want.expect != ledger.StatusSent || want.fault == "" || repeats(want.fault) ||
		d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassExhausted || budget == 0 || d.BudgetUsed() < budget ||
		requests != 1 || accepted > 0 && want.fault != "drop" {
		return false
	}
	h := d.History
	if n := len(h); n < 2 || h[n-1].Status != ledger.StatusDead || h[n-2].Status != ledger.StatusSending {
		return false
	}
	h = h[:len(h)-1]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Status == ledger.StatusDead {
			h = h[i+1:]
			break
		}
	}
	unended := 0
	for i, e := range h[:len(h)-1] {
		switch {
		case e.Status == ledger.StatusRetrying:
			return false
		case e.Status == ledger.StatusSending && h[i+1].Status != ledger.StatusSending && h[i+1].Status != ledger.StatusQueued:
			return false
		case e.Status == ledger.StatusSending:
			unended++
		}
	}
	return unended > 0
}

// quantile returns the q-quantile of sorted ls, 0 for none.
func quantile(ls []time.Duration, q float64) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	return ls[min(len(ls)-1, int(q*float64(len(ls))))]
}

func (sum *Summary) latency(ls []time.Duration) {
	if len(ls) == 0 {
		return
	}
	slices.Sort(ls)
	sum.LatencyP50, sum.LatencyP99, sum.LatencyMax = quantile(ls, 0.5), quantile(ls, 0.99), quantile(ls, 1)
	sum.Histogram = make([]Bucket, len(bucketBounds))
	for i, b := range bucketBounds {
		sum.Histogram[i].UpTo = b
	}
	for _, l := range ls {
		i := sort.Search(len(bucketBounds)-1, func(i int) bool { return l <= bucketBounds[i] })
		sum.Histogram[i].Count++
	}
}

// deadLetter is one message read from the DLQ.
type deadLetter struct {
	key    message.DeliveryKey
	class  failure.Class
	reason string
	source string // the work queue message the consumer dead-lettered
}

// reasonKind shortens a reason to its kind, for counting.
func (d deadLetter) reasonKind() string {
	r := d.reason
	if i := strings.IndexAny(r, ":(\""); i > 0 {
		r = r[:i]
	}
	return strings.TrimSpace(r)
}

// readDLQ reads every DLQ message, as an operator's review does: read,
// then made visible again. A receive whose answer is lost hides its
// messages for the read's hold, and one run's reads each came back ten
// short, as if they had (docs/reliability.md, "Found by the chaos run"). So
// a read that returns fewer messages than the queue counts is repeated once
// its hold has ended, and up to three reads are joined by message id. If
// they never add up to the whole DLQ, the run says so as its own problem
// instead of blaming the consumer. The hold is at least minHold, and a
// second for every 100 messages, so that a read of a large DLQ is likely to
// end before the first messages it hid reappear (fauxqs reads about 500
// messages a second when idle); at 10,000 messages (a 100 s hold) the worst
// case, three reads of about 20 s and two waits of 101 s, is under 5 minutes.
func (s *system) readDLQ(ctx context.Context, minHold time.Duration) ([]deadLetter, error) {
	const reads = 3
	byID := map[string]deadLetter{}
	var ids []string // in the order first read
	for n := 1; ; n++ {
		depth, err := status.QueueDepth(ctx, s.sqs, s.res.DLQURL)
		if err != nil {
			return nil, fmt.Errorf("demo: read the DLQ: %w", err)
		}
		hold := max(minHold, time.Duration(depth.Total()/100)*time.Second)
		r, err := redrive.New(redrive.Config{Queue: s.sqs, DLQURL: s.res.DLQURL, TargetURL: s.res.WorkURL, ReviewHold: hold})
		if err != nil {
			return nil, err
		}
		got, err := r.List(ctx, 1_000_000)
		if err != nil && !errors.Is(err, redrive.ErrNotReleased) {
			return nil, fmt.Errorf("demo: read the DLQ: %w", err)
		}
		// What could not be released reappears after the hold: a read that
		// outlasted its hold costs the next read nothing.
		read := time.Now()
		// One dead letter per message: the review folds the copies of a
		// delivery into one letter, the checker counts each.
		count := 0
		for _, l := range got {
			key, _ := message.ParseDeliveryKey(l.DeliveryKey)
			for _, m := range l.Messages() {
				count++
				if _, ok := byID[m.MessageID]; ok {
					continue
				}
				byID[m.MessageID] = deadLetter{key: key, class: l.ErrorClass, reason: l.Reason, source: m.SourceMessageID}
				ids = append(ids, m.MessageID)
			}
		}
		if len(byID) >= depth.Total() {
			break
		}
		if n == reads {
			s.problem("the DLQ holds %d messages (visible %d, in flight %d, delayed %d), and %d reads returned %d of them (the last read %d): the checks below judge those",
				depth.Total(), depth.Visible, depth.InFlight, depth.Delayed, reads, len(byID), count)
			break
		}
		// Whatever this read's lost receives hid is visible again once its
		// hold has ended.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(read.Add(hold + time.Second))):
		}
	}
	out := make([]deadLetter, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out, nil
}

// Write renders the summary as text.
func (sum *Summary) Write(w io.Writer) {
	title := "demo"
	if sum.Chaos {
		title = "chaos run"
	}
	fmt.Fprintf(w, "\n== Nudge %s: %d reminders, %d deliveries, %.0fs, %d schedule ticks, %d consumer invocations, %d intake API calls\n",
		title, sum.Reminders, sum.Deliveries, sum.Elapsed.Seconds(), sum.Ticks, sum.Invocations, sum.IntakeCalls)
	var mix []string
	for _, k := range kinds {
		if n := sum.ByKind[string(k)]; n > 0 {
			mix = append(mix, fmt.Sprintf("%d %s", n, k))
		}
	}
	fmt.Fprintf(w, "mix (deliveries): %s\n\n", strings.Join(mix, ", "))
	row := func(name string, v any, note string) { fmt.Fprintf(w, "  %-28s %8v   %s\n", name, v, note) }
	row("sent", sum.Sent, "once each, by the provider's own count")
	row("duplicates recognised", sum.Recognised, "messages for a delivery already ended (ledger condition)")
	row("duplicates suppressed", sum.Suppressed, "repeat requests the provider dropped by idempotency key")
	row("retried", sum.Retried, "transient and ambiguous failures, with backoff")
	row("deferred", sum.Deferred, "early messages put back without spending a receive")
	dead := 0
	for _, n := range sum.DeadLettered {
		dead += n
	}
	row("dead-lettered", dead, "with the reason, for review and redrive")
	reasons := make([]string, 0, len(sum.DeadLettered))
	for r := range sum.DeadLettered {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "      %-54s %d\n", r, sum.DeadLettered[r])
	}
	row("expired", sum.Expired, "never sent after expiresAt")
	row("cancelled", sum.Cancelled, "")
	row("still pending (future)", sum.ByStatus[ledger.StatusPending], "due after the run")
	row("overdue", sum.Overdue, "must be 0")
	if sum.UnseenReceives > 0 {
		row("receives never seen", sum.UnseenReceives, "records the mapping was never handed: each waited a visibility timeout")
		for _, line := range sum.MappingWarnings {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
	if len(sum.ByProvider) > 0 {
		fmt.Fprintf(w, "\nby provider (the stand-in's own record):\n")
		fmt.Fprintf(w, "  %-9s %10s %8s %10s %8s %9s %9s   %s\n", "", "deliveries", "sent", "recorded", "copies", "reviewed", "requests", "the record")
		for _, p := range []struct{ name, record string }{
			{webhook.Name, "the sink's acceptances (deduplicated by Idempotency-Key)"},
			{ses.Name, "the SES stand-in's store, by the " + ses.HeaderDeliveryKey + " header"},
			{sns.Name, "the topic's subscriber queue, by the deliveryKey attribute"},
		} {
			c := sum.ByProvider[p.name]
			if c == nil {
				continue
			}
			fmt.Fprintf(w, "  %-9s %10d %8d %10d %8d %9d %9d   %s\n", p.name, c.Deliveries, c.Sent, c.Recorded, c.Copies, c.Reviewed, c.Requests, p.record)
		}
		if c := sum.ByProvider[ses.Name]; c != nil && c.Reviewed > 0 {
			fmt.Fprintf(w, "  SES: %d reviewed (dead-lettered as ambiguous), of which %d did go out: SES does not deduplicate, so they wait for an operator rather than risk a second e-mail\n", c.Reviewed, c.Delivered)
		}
		if c := sum.ByProvider[sns.Name]; c != nil && c.Copies > 0 {
			fmt.Fprintf(w, "  SNS: %d extra copies reached the subscriber (a retry after a lost answer; a standard topic does not deduplicate, subscribers do by deliveryKey)\n", c.Copies)
		}
	}
	if sum.Chaos {
		fmt.Fprintln(w, "\nchaos:")
		row("runtimes killed mid-batch", fmt.Sprintf("%d of %d", sum.Kills, sum.KillsAsked), "each fails its invocation; the batch returns after the visibility timeout")
		row("enqueue killed mid-run", fmt.Sprintf("%d of %d", sum.EnqueueKills, sum.EnqueueKillsAsked), "the run fails; the next resumes from the cursors")
		row("invocations failed", sum.FailedInvocations, "as a whole; must not exceed the kills")
		row("enqueue runs cut", fmt.Sprintf("%d of %d", sum.EnqueueCut, sum.Ticks), "by the time budget; the next run resumes from the cursors")
		row("  of which at the reserve", sum.EnqueueSlow, "requests still running near the deadline, cancelled so it answers in time")
		row("repeats after a kill", sum.Resent, "already accepted; suppressed by idempotency key")
		row("repeats, ledger write failed", sum.ResentLedger, "accepted, not recorded (the ledger timed out); same key")
		row("DLQ copies", sum.DLQCopies, "dead-lettered again after a kill before the acknowledgement")
		row("budget spent by kills", sum.KillsExhausted, "dead-lettered `exhausted`: kills ended enough of its attempts; a redrive sends it")
		fmt.Fprintf(w, "  duplicate window: p50 %v, p99 %v, max %v (provider acceptance → ledger record of the send)\n",
			sum.WindowP50.Round(time.Millisecond), sum.WindowP99.Round(time.Millisecond), sum.WindowMax.Round(time.Millisecond))
		fmt.Fprintf(w, "  A provider without idempotency keys would have delivered the %d repeats twice: a crash or a failed\n  ledger write inside the window repeats the send, and only the key makes the repeat harmless.\n", sum.Resent+sum.ResentLedger)
	}
	if len(sum.PeakRSS) > 0 {
		var parts []string
		for _, fn := range []string{"consumer", "enqueue"} {
			if rss, ok := sum.PeakRSS[fn]; ok {
				parts = append(parts, fmt.Sprintf("%s %.1f MB", fn, float64(rss)/(1<<20)))
			}
		}
		fmt.Fprintf(w, "\npeak memory (RSS of the runtime): %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "\ndue→sent latency: p50 %v, p99 %v, max %v\n", sum.LatencyP50.Round(time.Millisecond), sum.LatencyP99.Round(time.Millisecond), sum.LatencyMax.Round(time.Millisecond))
	most := 0
	for _, b := range sum.Histogram {
		most = max(most, b.Count)
	}
	prev := "0"
	for _, b := range sum.Histogram {
		label := fmt.Sprintf("%s–%v", prev, b.UpTo)
		if b.UpTo == 0 {
			label = "> " + prev
		}
		prev = b.UpTo.String()
		bar := ""
		if most > 0 {
			bar = strings.Repeat("#", (b.Count*40+most-1)/most)
		}
		fmt.Fprintf(w, "  %-12s %6d %s\n", label, b.Count, bar)
	}
	fmt.Fprintf(w, "\nAWS API requests: %.2f per sent delivery\n", sum.RequestsPerSent)
	names := make([]string, 0, len(sum.Requests))
	for n := range sum.Requests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		per := 0.0
		if sum.Sent > 0 {
			per = float64(sum.Requests[n]) / float64(sum.Sent)
		}
		fmt.Fprintf(w, "  %-28s %8d   %.2f per sent\n", n, sum.Requests[n], per)
	}
	sum.writeCost(w)
	if sum.OK() {
		fmt.Fprintln(w, "\nOK: nothing sent twice, nothing lost, nothing overdue, every outcome as its faults call for.")
		return
	}
	fmt.Fprintf(w, "\nFAILED: %d invariant(s) broken:\n", len(sum.Violations))
	for _, v := range sum.Violations {
		fmt.Fprintln(w, "  - "+v)
	}
}
