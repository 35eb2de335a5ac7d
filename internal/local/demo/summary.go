package demo

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/provider"
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
	Histogram                          []check.Bucket

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
	// OutcomeKills are the outcomes runtimes killed mid-batch (of those
	// asked for).
	OutcomeKills, OutcomeKillsAsked int
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
	// Events counts the distinct outcome events the local bus delivered,
	// EventRepeats the publications beyond the first of one (the same
	// eventId), EarlierEnds the events of an end a delivery has since left.
	Events, EventRepeats, EarlierEnds int
	// FeedbackEvents counts those of a provider's report.
	FeedbackEvents int
	// PeakRSS is each function's largest peak resident memory (VmHWM of
	// its runtime), in bytes.
	PeakRSS map[string]int64
	// ByProvider is each provider's side of the run, from the ledger and
	// from the provider's stand-in's own record.
	ByProvider map[string]*check.ProviderCounts
	// FeedbackRead says the run had SES's feedback path (its stage runs
	// ses); Feedback counts the deliveries by the feedback standing on
	// them (SES's events, recorded by the feedback function);
	// FeedbackFailed those that failed after sending (bounced for good or
	// complained of); Simulated the e-mails sent to SES's mailbox
	// simulator.
	FeedbackRead              bool
	Feedback                  map[ledger.FeedbackKind]int
	FeedbackFailed, Simulated int
	// ReportDelay is the feedback path's delay: a send recorded to its
	// provider's first report recorded.
	ReportDelayP50, ReportDelayP99, ReportDelayMax time.Duration
	// Fallbacks counts the planned fallbacks, FallbacksTaken those taken
	// by why, FallbacksSent and FallbacksHeld how they ended, and
	// BouncedToFallback tells one e-mail's bounce and its fallback.
	Fallbacks                    int
	FallbacksTaken               map[string]int
	FallbacksSent, FallbacksHeld int
	BouncedToFallback            string
	// WindowsWaited counts the deliveries sent once their send window
	// opened (WindowWait after it opened), WindowsOpen those sent in a
	// window open when they fell due, WindowsShut those pending for one
	// that opens after the run.
	WindowsWaited, WindowsOpen, WindowsShut int
	WindowWaitP50, WindowWaitMax            time.Duration
	// Series counts the series created, Occurrences their occurrences in
	// the ledger, OccurrencesSent those sent; SeriesAhead and SeriesCount
	// are the bounds the checker held them to.
	Series, Occurrences, OccurrencesSent int
	SeriesAhead                          time.Duration
	SeriesCount                          int

	// Usage is what the run consumed as AWS bills it (the intake's writes
	// included), and Cost that at Prices per million sent deliveries.
	Usage Usage
	Cost  Cost

	Violations []string
}

// OK reports whether every invariant held.
func (s *Summary) OK() bool { return len(s.Violations) == 0 }

// summarize reads the figures and checks the evidence against the plan.
func (r *run) summarize(ctx context.Context) (*Summary, error) {
	sum := &Summary{Elapsed: time.Since(r.started), Reminders: len(r.plan.reminders), Deliveries: len(r.plan.Deliveries),
		ByKind: map[string]int{}, Requests: map[string]int64{}}
	for _, d := range r.plan.Deliveries {
		sum.ByKind[d.Kind]++
	}
	ev, err := r.evidence(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := r.recipientPlan()
	if err != nil {
		return nil, err
	}
	v := check.Check(plan, ev)
	sum.Violations = v.Violations
	sum.ByStatus, sum.Overdue, sum.ByProvider = v.ByStatus, v.Overdue, v.ByProvider
	sum.Sent, sum.Expired, sum.Cancelled = v.ByStatus[ledger.StatusSent], v.ByStatus[ledger.StatusExpired], v.ByStatus[ledger.StatusCancelled]
	sum.LatencyP50, sum.LatencyP99, sum.LatencyMax, sum.Histogram = v.LatencyP50, v.LatencyP99, v.LatencyMax, v.Histogram
	sum.FeedbackRead, sum.Feedback, sum.FeedbackFailed, sum.Simulated = ev.FeedbackRead, v.Feedback, v.FeedbackFailed, v.Simulated
	sum.ReportDelayP50, sum.ReportDelayP99, sum.ReportDelayMax = v.ReportDelayP50, v.ReportDelayP99, v.ReportDelayMax
	sum.WindowP50, sum.WindowP99, sum.WindowMax = v.WindowP50, v.WindowP99, v.WindowMax
	sum.DeadLettered, sum.DLQCopies = v.DeadLettered, v.DLQCopies
	sum.Resent, sum.ResentLedger, sum.KillsExhausted = v.Resent, v.ResentLedger, v.KillsExhausted
	sum.Events, sum.EventRepeats, sum.EarlierEnds, sum.FeedbackEvents = v.Events, v.EventRepeats, v.EarlierEnds, v.FeedbackEvents
	sum.Fallbacks, sum.FallbacksTaken, sum.FallbacksSent, sum.FallbacksHeld = v.Fallbacks, v.FallbacksTaken, v.FallbacksSent, v.FallbacksHeld
	sum.BouncedToFallback = v.BouncedToFallback
	sum.WindowsWaited, sum.WindowsOpen, sum.WindowsShut = v.WindowsWaited, v.WindowsOpen, v.WindowsShut
	sum.WindowWaitP50, sum.WindowWaitMax = v.WindowWaitP50, v.WindowWaitMax
	sum.Series, sum.Occurrences, sum.OccurrencesSent = v.Series, v.Occurrences, v.OccurrencesSent
	sum.SeriesAhead, sum.SeriesCount = plan.SeriesAhead, plan.SeriesCount

	// The metrics, the sink, the requests.
	h, logs := r.h, r.logs
	sum.Recognised = int(logs.consumer.metric(consumer.MetricDuplicate))
	sum.Retried = int(logs.consumer.metric(consumer.MetricRetried))
	sum.Deferred = int(logs.consumer.metric(consumer.MetricDeferred))
	_, sum.Suppressed = h.Sink.Totals()
	for name, p := range h.Proxies {
		sum.Requests[name] = p.Total()
	}
	st := h.MappingStats()
	sum.Requests["event source mapping SQS"] = st.ReceiveRequests + st.DeleteRequests
	var total int64
	for _, n := range sum.Requests {
		total += n
	}
	if sum.Sent > 0 {
		sum.RequestsPerSent = float64(total) / float64(sum.Sent)
	}
	sum.Ticks, sum.Invocations = int(r.ticks.runs.Load()), logs.consumer.invocations()
	for _, name := range []string{"consumer DynamoDB", "enqueue DynamoDB", "intake DynamoDB", "feedback DynamoDB"} {
		if h.Proxies[name] == nil {
			continue // no intake, or no ses
		}
		reads, writes := h.Proxies[name].Units()
		sum.Usage.ReadUnits += reads
		sum.Usage.WriteUnits += writes
	}
	sum.Usage.SQSRequests = sum.Requests["consumer SQS"] + sum.Requests["enqueue SQS"] + sum.Requests["intake SQS"] + sum.Requests["event source mapping SQS"]
	cBilled, cBytes := logs.consumer.usage()
	eBilled, eBytes := logs.enqueue.usage()
	iBilled, iBytes := logs.intake.usage()
	oBilled, oBytes := logs.outcomes.usage()
	fBilled, fBytes := logs.feedback.usage()
	sum.IntakeCalls = logs.intake.invocations()
	sum.Usage.Invocations = sum.Invocations + sum.Ticks + sum.IntakeCalls + logs.outcomes.invocations() + logs.feedback.invocations()
	sum.Usage.GBSeconds = gbSeconds(cBilled, h.Stage.ConsumerMemoryMB) + gbSeconds(eBilled, h.Stage.EnqueueMemoryMB) + gbSeconds(iBilled, h.Stage.IntakeMemoryMB) +
		gbSeconds(oBilled, h.Stage.OutcomesMemoryMB) + gbSeconds(fBilled, h.Stage.FeedbackMemoryMB)
	sum.Usage.LogBytes = cBytes + eBytes + iBytes + oBytes + fBytes
	// SES's events on the default bus are AWS service events, which
	// EventBridge does not charge for: the outcome events alone are billed.
	sum.Usage.Events = h.Bus.Stats().Accepted
	for _, n := range h.SESEvents.Stats().Events {
		sum.Usage.Events -= n
	}
	sum.Cost = sum.Usage.PerMillion(Prices, sum.Sent)

	// The chaos.
	sum.Kills = len(ev.Kills)
	sum.Chaos, sum.KillsAsked = r.cfg.Kills > 0 || r.cfg.EnqueueKills > 0 || r.cfg.OutcomeKills > 0 || r.cfg.EnqueueBudget > 0, r.cfg.Kills
	sum.EnqueueKills, sum.EnqueueKillsAsked = int(r.kills.enqueue.Load()), r.cfg.EnqueueKills
	sum.OutcomeKills, sum.OutcomeKillsAsked = int(r.kills.outcomes.Load()), r.cfg.OutcomeKills
	sum.FailedInvocations, sum.EnqueueCut, sum.EnqueueSlow = int(st.BatchFailures), int(r.ticks.cut.Load()), int(r.ticks.slow.Load())
	sum.UnseenReceives, sum.MappingWarnings = int(st.UnseenReceives), logs.mappingErrors.Lines()
	sum.PeakRSS = map[string]int64{}
	for _, in := range append([]*local.Function{h.Enqueue}, h.Consumers...) {
		fn, _, _ := strings.Cut(in.Name, "-")
		if rss, err := in.PeakRSS(); err == nil {
			sum.PeakRSS[fn] = max(sum.PeakRSS[fn], rss)
		}
	}
	return sum, nil
}

// feedbackCounts renders the deliveries by their standing feedback: "212
// recorded (205 delivered, 4 bounced, 3 complained)", kinds in the
// ledger's order.
func feedbackCounts(by map[ledger.FeedbackKind]int) string {
	total, parts := 0, []string{}
	for _, k := range ledger.FeedbackKinds {
		if n := by[k]; n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if total == 0 {
		return "none recorded"
	}
	return fmt.Sprintf("%d recorded (%s)", total, strings.Join(parts, ", "))
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
		for _, d := range registry.All() {
			c := sum.ByProvider[d.Name]
			if c == nil {
				continue
			}
			fmt.Fprintf(w, "  %-9s %10d %8d %10d %8d %9d %9d   %s\n", d.Name, c.Deliveries, c.Sent, c.Recorded, c.Copies, c.Reviewed, c.Requests, d.StandIn.Evidence)
		}
		for _, d := range registry.All() {
			c := sum.ByProvider[d.Name]
			switch {
			case c == nil:
			case d.Contract.Ambiguous == provider.AmbiguousReview && c.Reviewed > 0:
				fmt.Fprintf(w, "  %s: %d reviewed (dead-lettered as ambiguous), of which %d did go out: %s does not deduplicate, so they wait for an operator rather than risk a second %s\n",
					d.Title, c.Reviewed, c.Delivered, d.Title, strings.TrimSuffix(d.Contract.Price.Unit, "s"))
			case d.Contract.Ambiguous == provider.AmbiguousRecord && d.Contract.Reports != nil && c.Settled+c.SentAgain+c.Reviewed > 0:
				record := d.Contract.Reports.Record
				fmt.Fprintf(w, "  %s: of the sends that may have gone out, %d settled by %s (recorded sent, not sent again), "+
					"%d sent again (not in %s, which had later %s; probes sent for a quiet stage: %d),\n", d.Title, c.Settled, record, c.SentAgain, record,
					d.Contract.Price.Unit, c.Probes)
				fmt.Fprintf(w, "    %d reviewed (dead-lettered as ambiguous: %s did not settle them within the longest wait), of which %d did go out\n",
					c.Reviewed, record, c.Delivered)
			case d.Contract.Ambiguous == provider.AmbiguousRetry && c.Copies > 0:
				fmt.Fprintf(w, "  %s: %d extra copies reached its stand-in (a retry after a lost answer); what deduplicates them: %s\n", d.Title, c.Copies, d.Contract.Deduplicates)
			}
		}
	}
	if sum.FeedbackRead {
		fmt.Fprintf(w, "\nSES feedback (its events → the default bus → the feedback queue → the feedback function → the ledger): %s;\n"+
			"  %d failed after sending (bounced for good or complained of); %d e-mails to SES's mailbox simulator, each ending as it says\n",
			feedbackCounts(sum.Feedback), sum.FeedbackFailed, sum.Simulated)
		fmt.Fprintf(w, "  a send recorded → its first report recorded: p50 %v, p99 %v, max %v (the stand-in's events, the bus, the feedback queue, the function)\n",
			sum.ReportDelayP50.Round(time.Millisecond), sum.ReportDelayP99.Round(time.Millisecond), sum.ReportDelayMax.Round(time.Millisecond))
	}
	if sum.Chaos {
		fmt.Fprintln(w, "\nchaos:")
		row("runtimes killed mid-batch", fmt.Sprintf("%d of %d", sum.Kills, sum.KillsAsked), "each fails its invocation; the batch returns after the visibility timeout")
		row("enqueue killed mid-run", fmt.Sprintf("%d of %d", sum.EnqueueKills, sum.EnqueueKillsAsked), "the run fails; the next resumes from the cursors")
		row("outcomes killed mid-batch", fmt.Sprintf("%d of %d", sum.OutcomeKills, sum.OutcomeKillsAsked), "the stream mapping retries the batch; its events come again with their eventIds")
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
	fmt.Fprintf(w, "\noutcome events (the ledger's stream → the outcomes function → the bus → its queue): %d, one for each end in the ledger", sum.Events-sum.FeedbackEvents)
	if sum.EarlierEnds > 0 {
		fmt.Fprintf(w, ", %d of them for an end a delivery has since left (revived, redriven)", sum.EarlierEnds)
	}
	fmt.Fprintf(w, ", and %d for the providers' reports recorded; %d repeats, each with its eventId\n", sum.FeedbackEvents, sum.EventRepeats)
	if sum.Fallbacks > 0 {
		var why []string
		taken := 0
		for _, k := range slices.Sorted(maps.Keys(sum.FallbacksTaken)) {
			why = append(why, fmt.Sprintf("%d %s", sum.FallbacksTaken[k], k))
			taken += sum.FallbacksTaken[k]
		}
		fmt.Fprintf(w, "\nfallbacks (taken once by the outcomes function when their delivery failed): %d named; taken %d (%s), sent %d; %d held, their delivery not failed\n",
			sum.Fallbacks, taken, strings.Join(why, ", "), sum.FallbacksSent, sum.FallbacksHeld)
		if sum.BouncedToFallback != "" {
			fmt.Fprintf(w, "  %s\n", sum.BouncedToFallback)
		}
	}
	sum.writeRecipient(w)
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

// writeRecipient tells of the recipient's time: the send windows and the
// series.
func (sum *Summary) writeRecipient(w io.Writer) {
	if n := sum.WindowsWaited + sum.WindowsOpen + sum.WindowsShut; n > 0 {
		fmt.Fprintf(w, "\nsend windows (the recipient's hours, in %s): %d sent once their window opened "+
			"(p50 %v, max %v after it opened), %d sent in a window open when they fell due, %d pending for a window that opens after the run, "+
			"each due at its opening\n", strings.Join(windowZones, ", "), sum.WindowsWaited, sum.WindowWaitP50.Round(time.Millisecond), sum.WindowWaitMax.Round(time.Millisecond),
			sum.WindowsOpen, sum.WindowsShut)
	}
	if sum.Series > 0 {
		fmt.Fprintf(w, "series (%s, in %s): %d, with %d occurrences created, each a reminder of its own, as their rules say and "+
			"at most %d ahead within %d days; %d due in the run, each sent once\n", strings.Join([]string{rules[daily], rules[weekly]}, " and "),
			strings.Join(seriesZones, ", "), sum.Series, sum.Occurrences, sum.SeriesCount, int(sum.SeriesAhead.Hours()/24), sum.OccurrencesSent)
	}
}
