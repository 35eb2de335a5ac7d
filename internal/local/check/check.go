package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Planned is one delivery of a plan, with the end its faults call for.
type Planned struct {
	Key message.DeliveryKey
	// Kind is its place in the run's mix ("due now", …), for the reader.
	Kind string
	// Fault is the fault its provider meets ("500", …; Repeats), or "".
	Fault string
	// Expect is the status it must end in, and Class the failure class it
	// must carry if that is dead.
	Expect ledger.Status
	Class  failure.Class
	// Feedback is the standing feedback (its Kind and Permanent) its
	// provider's events must leave on it once the provider has sent it:
	// SES's, by its recipient's mailbox. Zero for a provider that reports
	// none: it must have none. Simulator is its recipient when that is a
	// mailbox of SES's simulator (bounce@simulator.amazonses.com, …), for
	// the reader; "" for an ordinary one.
	Feedback  ledger.Feedback
	Simulator string
	// FallbackOf is, for a fallback, the delivery it stands in for (zero
	// for any other delivery). What a fallback must end as follows from
	// that delivery's end, not from the plan: taken and sent once if the
	// delivery failed (ledger.Delivery.FallbackDue: dead, expired, bounced,
	// complained), held if not; Expect is the plan's guess, for the reader.
	FallbackOf message.DeliveryKey
}

// Plan is what a run set out to do.
type Plan struct {
	// Deliveries are every delivery the run schedules, by key.
	Deliveries map[message.DeliveryKey]Planned
	// Poison is how many malformed messages the run puts on the work
	// queue: each must reach the DLQ.
	Poison int
	// Windows are the send windows the run's deliveries named, by key
	// (recipient.go): each must be due at its window's opening and sent
	// inside it.
	Windows map[message.DeliveryKey]PlannedWindow
	// Series are the recurring reminders the run created, by id. Their
	// occurrences are not among Deliveries: Check adds those their rules
	// and the bounds (SeriesAhead, SeriesCount: schedule.Config's) call
	// for by the end, each a delivery that must be sent once if due by
	// then, pending if not; any other occurrence is a violation.
	Series      map[string]PlannedSeries
	SeriesAhead time.Duration
	SeriesCount int
}

// Evidence is what a run left behind, to check the plan against.
type Evidence struct {
	// End is when the run ended: a delivery due by then must have ended.
	End time.Time
	// Ledger is every delivery in the table, by key.
	Ledger map[message.DeliveryKey]ledger.Delivery
	// DLQ is every message read from the DLQ, copies included.
	DLQ []DeadLetter
	// PoisonIDs are the ids of the poison messages put on the work queue.
	PoisonIDs []string
	// QueueLeft is how many messages the work queue held at the end; -1
	// when it could not be read.
	QueueLeft int

	// Recorded counts the copies of each delivery its provider's own record
	// holds (the sink's acceptances, the SES store's e-mails, the SNS
	// subscriber's messages).
	Recorded map[message.DeliveryKey]int
	// Requests counts the requests each delivery's provider received for it.
	Requests map[message.DeliveryKey]int
	// ProviderRequests counts every request each provider received, by
	// provider name.
	ProviderRequests map[string]int64
	// Probes counts the probes each provider's record holds (messages
	// under a ledger.ProbeKey: a consumer showing that reports arrive).
	Probes map[string]int
	// AcceptedAt is when the provider accepted a delivery, where its record
	// says (the sink's): the start of the duplicate window.
	AcceptedAt map[message.DeliveryKey]time.Time
	// Resends are the deliveries requested again after the provider had
	// accepted them and answered so.
	Resends []Resend

	// Kills are the consumer runtimes killed mid-batch, and
	// InvocationTimeout the consumer's timeout: how long after a request
	// the invocation that sent it may still run.
	Kills             []Kill
	InvocationTimeout time.Duration
	// LedgerFailed holds the delivery keys whose accepted send a consumer
	// logged it could not record in the ledger (it retries with the key).
	LedgerFailed map[string]bool
	// BatchFailures counts the consumer invocations that failed as a
	// whole, the killed ones included.
	BatchFailures int64
	// ErrorLines are the mapping's failures by kind, then the functions'
	// first errors.
	ErrorLines []string
	// PublishFailed counts the deliveries the enqueue could not publish.
	PublishFailed float64
	// Budget is the consumer's attempt budget.
	Budget int

	// Events are the outcome events the local bus delivered to the
	// outcomes queue (their details), repeats included, read after the
	// stream mapping caught up with the ledger; EventsRead says the run
	// read them (every local run does), and so that they are checked.
	Events     []outcome.Event
	EventsRead bool
	// FeedbackRead says the run waited until SES's events of every e-mail
	// it sent were recorded before it read the ledger, so that a sent
	// delivery without its feedback is one the path lost (check/feedback.go).
	FeedbackRead bool

	// Series are the ledger's series items of the plan's series, by id.
	Series map[string]ledger.Series

	// Problems are what went wrong on the way (a refused cancel, a failed
	// schedule tick, a short DLQ read), and Stall the run's last stall
	// report, if it stalled.
	Problems []string
	Stall    string
}

// DeadLetter is one message read from the DLQ.
type DeadLetter struct {
	// Key is the delivery's; zero for a poison message.
	Key    message.DeliveryKey
	Class  failure.Class
	Reason string
	// Source is the work queue message the consumer dead-lettered.
	Source string
}

// ReasonKind shortens the reason to its kind, for counting.
func (d DeadLetter) ReasonKind() string {
	r := d.Reason
	if i := strings.IndexAny(r, ":(\""); i > 0 {
		r = r[:i]
	}
	return strings.TrimSpace(r)
}

// Resend is a delivery requested again after its provider had accepted it
// and answered so.
type Resend struct {
	Key   string
	Times int
	// AnsweredTo is the consumer instance the acceptance was answered to
	// ("" if the record does not say), and Received when the accepted
	// request arrived (zero if unknown).
	AnsweredTo string
	Received   time.Time
}

// Kill is a consumer runtime killed mid-batch.
type Kill struct {
	Instance string
	At       time.Time
}

// Verdict is what Check found: the invariants broken, and the figures.
type Verdict struct {
	// Violations name each invariant broken; none when the run kept them.
	Violations []string

	// ByStatus counts the ledger's deliveries by status, and Overdue those
	// due by the end that had not ended.
	ByStatus map[ledger.Status]int
	Overdue  int
	// Latency is due→sent of the sent deliveries.
	LatencyP50, LatencyP99, LatencyMax time.Duration
	Histogram                          []Bucket
	// Window is the duplicate window: from the provider's acceptance to
	// the ledger's record of the send, over the sent deliveries.
	WindowP50, WindowP99, WindowMax time.Duration
	// DeadLettered counts DLQ messages by "class: reason"; DLQCopies the
	// ones beyond the first for the same delivery or poison message.
	DeadLettered map[string]int
	DLQCopies    int
	// Resent counts repeats after an answered acceptance that a kill of
	// the instance answered explains, and ResentLedger those the consumer's
	// failed ledger write explains.
	Resent, ResentLedger int
	// KillsExhausted counts deliveries that kills dead-lettered, by ending
	// enough of their attempts to spend the budget.
	KillsExhausted int
	// Events counts the distinct outcome events, EventRepeats the
	// publications beyond the first of one (the same eventId: at least
	// once), EarlierEnds the events of an end a delivery has since left
	// (dead-lettered, then revived or redriven), and FeedbackEvents those
	// of a provider's report (bounced, complained, rejected, feedback).
	Events, EventRepeats, EarlierEnds, FeedbackEvents int
	// ByProvider are each provider's figures, every provider the checker
	// knows and every one the plan uses.
	ByProvider map[string]*ProviderCounts
	// Feedback counts the ledger's deliveries by their standing feedback's
	// kind; FeedbackFailed those whose feedback is failing (sent, then
	// bounced for good or complained of: ledger.Delivery.Failed); and
	// Simulated the planned deliveries sent to SES's mailbox simulator.
	Feedback                  map[ledger.FeedbackKind]int
	FeedbackFailed, Simulated int
	// ReportDelay is how long after a delivery was recorded sent its
	// provider's first report was recorded, over the sent deliveries with
	// one (firstReportDelay): the feedback path's delay, as the run
	// measured it.
	ReportDelayP50, ReportDelayP99, ReportDelayMax time.Duration
	// Fallbacks are the planned fallbacks: FallbacksTaken those whose
	// delivery failed, by why (dead, expired, bounced, complained), and
	// FallbacksSent, FallbacksHeld how they ended.
	Fallbacks                    int
	FallbacksTaken               map[string]int
	FallbacksSent, FallbacksHeld int
	// WindowsWaited counts the deliveries sent once their send window
	// opened, WindowWaitP50 and WindowWaitMax how long after it opened;
	// WindowsOpen those sent in a window open when they fell due; and
	// WindowsShut those pending at the end for a window that opens after
	// it.
	WindowsWaited, WindowsOpen, WindowsShut int
	WindowWaitP50, WindowWaitMax            time.Duration
	// Series counts the planned series, Occurrences their occurrences in
	// the ledger (each a reminder of its own), OccurrencesSent those sent.
	Series, Occurrences, OccurrencesSent int
	// BouncedToFallback tells the story of one e-mail to SES's bounce@
	// whose fallback was sent, from the ledger, the provider's record and
	// the events ("" if the run had none).
	BouncedToFallback string
}

// OK reports whether every invariant held.
func (v Verdict) OK() bool { return len(v.Violations) == 0 }

// Check checks the evidence against the plan: nothing sent twice, nothing
// lost, nothing overdue, and each delivery ended as its faults call for.
// It returns the violations and the figures.
func Check(p Plan, ev Evidence) Verdict {
	v := Verdict{ByStatus: map[ledger.Status]int{}, DeadLettered: map[string]int{}, ByProvider: map[string]*ProviderCounts{}}
	p, seriesBad := withSeries(p, ev)

	// The ledger.
	var latencies, windows []time.Duration
	for k, d := range ev.Ledger {
		v.ByStatus[d.Status]++
		if d.Status == ledger.StatusSent {
			latencies = append(latencies, max(d.SentAt.Sub(d.DueAt), 0))
			if at, ok := ev.AcceptedAt[k]; ok {
				windows = append(windows, max(d.SentAt.Sub(at), 0))
			}
		}
		if !d.Status.Terminal() && d.Status != ledger.StatusHeld && !d.DueAt.After(ev.End) {
			v.Overdue++ // a held fallback is due only once taken
		}
	}
	v.latency(latencies)
	slices.Sort(windows)
	v.WindowP50, v.WindowP99, v.WindowMax = quantile(windows, 0.5), quantile(windows, 0.99), quantile(windows, 1)

	// The DLQ.
	copies := map[string]int{}
	for _, m := range ev.DLQ {
		v.DeadLettered[string(m.Class)+": "+m.ReasonKind()]++
		id := m.Key.String()
		if m.Key.ReminderID == "" {
			id = m.Source
		}
		if copies[id]++; copies[id] > 1 {
			v.DLQCopies++
		}
	}

	// Each provider's record.
	for _, name := range registry.Names() {
		v.ByProvider[name] = &ProviderCounts{}
	}
	counts := func(name string) *ProviderCounts {
		if v.ByProvider[name] == nil {
			v.ByProvider[name] = &ProviderCounts{}
		}
		return v.ByProvider[name]
	}
	for k, want := range p.Deliveries {
		pc := counts(k.Provider)
		pc.Deliveries++
		got, n := ev.Ledger[k], ev.Recorded[k]
		if got.Status == ledger.StatusSent {
			pc.Sent++
		}
		if n > 0 {
			pc.Recorded++
			pc.Copies += n - 1
		}
		if exhaustedByKills(want, got, ev.Requests[k], n, ev.Budget) {
			v.KillsExhausted++
		}
		if got.Status == ledger.StatusDead && got.LastErrorClass == failure.ClassAmbiguous {
			pc.Reviewed++
			if n > 0 {
				pc.Delivered++
			}
		}
		byRecord, again := settledOrSentAgain(k.Provider, got)
		if byRecord {
			pc.Settled++
		}
		if again {
			pc.SentAgain++
		}
	}
	for name, n := range ev.ProviderRequests {
		counts(name).Requests = n
	}
	for name, n := range ev.Probes {
		counts(name).Probes = n
	}

	// A repeat after an answered acceptance is explained only by a kill of
	// the instance the answer went to, during the invocation that sent it,
	// or by the consumer's own record that it could not write the send to
	// the ledger.
	resent := map[string]int{}
	for _, r := range ev.Resends {
		switch {
		case !r.Received.IsZero() && killedDuring(ev.Kills, r.AnsweredTo, r.Received, ev.InvocationTimeout):
			v.Resent += r.Times
		case ev.LedgerFailed[r.Key]:
			v.ResentLedger += r.Times
		default:
			resent[r.Key] = r.Times
		}
	}
	p, fallbackBad := v.fallbackEnds(p, ev)
	v.BouncedToFallback = bouncedToFallback(p, ev)
	v.Violations = append(violations(p, ev, resent, v.Overdue), fallbackBad...)
	if ev.EventsRead {
		v.Violations = append(v.Violations, v.events(ev)...)
	}
	v.Violations = append(v.Violations, v.feedback(p, ev)...)
	v.Violations = append(append(v.Violations, seriesBad...), v.windows(p, ev)...)
	v.seriesFigures(p, ev)
	return v
}

// events checks the outcome events against the ledger: every delivery
// that ended has its end's event (the eventId its change gives), of its
// outcome; every event names a delivery of the ledger. It counts the
// events, the repeats and the earlier ends.
func (v *Verdict) events(ev Evidence) []string {
	var out []string
	violate := func(format string, args ...any) {
		if len(out) < 20 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	seen := map[string]outcome.Event{}
	for _, e := range ev.Events {
		if _, ok := seen[e.EventID]; ok {
			v.EventRepeats++
			continue
		}
		seen[e.EventID] = e
		k, err := message.ParseDeliveryKey(e.DeliveryKey)
		if _, ok := ev.Ledger[k]; err != nil || !ok {
			violate("outcome event %s (%s) names delivery %q, which is not in the ledger", e.EventID, e.Outcome, e.DeliveryKey)
		}
	}
	v.Events = len(seen)
	keys := sortedKeys(ev.Ledger)
	current := map[string]bool{}
	for _, k := range keys {
		want, ok := outcome.End(ev.Ledger[k], "")
		if !ok {
			continue
		}
		current[want.EventID] = true
		got, ok := seen[want.EventID]
		switch {
		case !ok:
			violate("no outcome event: %s ended %s (%s), and no %q event with its eventId %s reached the bus", k, want.Status, want.Outcome,
				want.DetailType(), want.EventID)
		case got.Outcome != want.Outcome || got.DeliveryKey != want.DeliveryKey:
			violate("outcome event %s says %s of %s; the ledger's end is %s of %s", got.EventID, got.Outcome, got.DeliveryKey, want.Outcome, want.DeliveryKey)
		}
	}
	// Every end the history still holds (one left since, by a revive or a
	// redrive) had its event too.
	for _, k := range keys {
		for _, id := range outcome.EndIDs(ev.Ledger[k]) {
			if current[id] {
				continue
			}
			current[id] = true
			if _, ok := seen[id]; !ok {
				violate("no outcome event: %s's history holds an end it has since left, and no event with its eventId %s reached the bus", k, id)
			}
		}
	}
	// Every report the ledger remembers on a delivery has its event.
	for _, k := range keys {
		for _, dig := range ev.Ledger[k].FeedbackSeen {
			id := outcome.FeedbackEventID(k.String(), dig)
			current[id] = true
			got, ok := seen[id]
			switch {
			case !ok:
				violate("no outcome event: a report of %s's provider was recorded on it, and no event with its eventId %s reached the bus", k, id)
			case !got.Outcome.IsFeedback():
				violate("outcome event %s of %s's provider's report says %s", id, k, got.Outcome)
			}
		}
	}
	for _, e := range seen {
		if e.Outcome.IsFeedback() {
			v.FeedbackEvents++
		}
	}
	for id, e := range seen {
		if k, err := message.ParseDeliveryKey(e.DeliveryKey); err == nil && !current[id] && !e.Outcome.IsFeedback() {
			if _, ok := ev.Ledger[k]; ok {
				v.EarlierEnds++
			}
		}
	}
	return out
}

// violations are the invariants the evidence breaks, at most 40 named.
// resent are the repeats after an answered acceptance nothing explains.
func violations(p Plan, ev Evidence, resent map[string]int, overdue int) []string {
	var out []string
	violate := func(format string, args ...any) {
		if len(out) < 40 {
			out = append(out, fmt.Sprintf(format, args...))
		} else if len(out) == 40 {
			out = append(out, "… and more")
		}
	}
	keys := make([]string, 0, len(resent))
	for key := range resent {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		violate("sent twice: %s was sent %d more time(s) after the provider had answered that it was accepted", key, resent[key])
	}
	dlqKeys, sources := map[message.DeliveryKey]bool{}, map[string]bool{}
	for _, m := range ev.DLQ {
		dlqKeys[m.Key] = true
		sources[m.Source] = true
	}
	poisonDead := 0
	for _, id := range ev.PoisonIDs {
		if sources[id] {
			poisonDead++
		}
	}
	for _, k := range sortedKeys(p.Deliveries) {
		want := p.Deliveries[k]
		got, ok := ev.Ledger[k]
		copies := ev.Recorded[k]
		// A delivery dead-lettered for review may have gone out; so may one
		// whose last attempt, the budget's, lost the provider's answer.
		killed := exhaustedByKills(want, got, ev.Requests[k], copies, ev.Budget)
		switch {
		case !ok:
			violate("lost: %s (%s) is not in the ledger", k, want.Kind)
			continue
		case reviewedAfterLapse(k, got):
			// An attempt died mid-send (a kill): a provider that reviews
			// dead-letters what may have gone out, whatever was planned.
		case unsettled(want, got, copies, ev.Kills, ev.InvocationTimeout):
			// A send that may have gone out, which the provider's record
			// could not settle within the longest wait: reviewed.
		case killed:
			// Kills ended enough of its attempts to spend the budget.
		case got.Status != want.Expect:
			violate("%s (%s, fault %q) ended %s (%s %s), expected %s", k, want.Kind, want.Fault, got.Status, got.LastErrorClass, got.LastError, want.Expect)
		case got.Status == ledger.StatusDead && got.LastErrorClass != want.Class:
			violate("%s was dead-lettered as %q, expected %q", k, got.LastErrorClass, want.Class)
		}
		if got.Status == ledger.StatusSent && copies == 0 {
			violate("%s is recorded sent, but the provider never accepted it", k)
		}
		ambiguous := got.Status == ledger.StatusDead && got.LastErrorClass == failure.ClassAmbiguous
		if copies > 0 && got.Status != ledger.StatusSent && !ambiguous && !killed {
			violate("%s was accepted by the provider but is recorded %s", k, got.Status)
		}
		if ambiguous && copies > 0 && records(k.Provider) && ev.FeedbackRead {
			name := title(k.Provider)
			violate("%s is dead as ambiguous (reviewed), but %s accepted it: %s's record shows it sent, and its events, read before the ledger, "+
				"should have settled it sent (the feedback function settles a delivery dead as ambiguous when they come)", k, name, name)
		}
		if copies > 1 && sendsOnce(k.Provider) {
			name := title(k.Provider)
			why := "the review policy must never send again"
			if records(k.Provider) {
				why = "a send that may have gone out is never sent again unless " + name + "'s record shows it did not"
			}
			violate("sent twice: %s accepted %s %d times; %s does not deduplicate, so %s", name, k, copies, name, why)
		}
		if got.Status == ledger.StatusDead && !dlqKeys[k] {
			violate("%s is dead in the ledger but has no message in the DLQ for review and redrive", k)
		}
	}
	if poisonDead != p.Poison {
		violate("%d poison messages were put on the queue, %d reached the DLQ", p.Poison, poisonDead)
	}
	if overdue > 0 {
		why := ""
		if ev.Stall != "" {
			why = "; the run's last " + ev.Stall
		}
		violate("%d deliveries were due before the end and had not ended (overdue)%s", overdue, why)
	}
	if ev.QueueLeft != 0 {
		violate("%d messages were left in the work queue (-1: it could not be read)", ev.QueueLeft)
	}
	if failed := ev.BatchFailures - int64(len(ev.Kills)); failed > 0 {
		violate("%d consumer invocations failed as a whole (beyond those killed); the mapping's failures by kind, kills included, "+
			"then the functions' first errors (all in .local/logs): %v", failed, ev.ErrorLines)
	}
	for _, pr := range ev.Problems {
		violate("%s", pr)
	}
	if ev.PublishFailed > 0 {
		violate("the enqueue could not publish %v deliveries", ev.PublishFailed)
	}
	return out
}
