package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// RecordLedger is what the consumer does with the ledger under
// provider.AmbiguousRecord: wait for the provider's record of an ambiguous
// attempt, settle the delivery sent by it, and read the feedback mark that
// says the provider's reports arrive (*ledger.Ledger, *ledger.Memory).
type RecordLedger interface {
	AwaitRecord(ctx context.Context, d ledger.Delivery, w ledger.Await) (ledger.Delivery, error)
	SettleSent(ctx context.Context, d ledger.Delivery, receipt, note string) (ledger.Delivery, error)
	FeedbackMark(ctx context.Context, provider string) (time.Time, error)
	ClaimProbe(ctx context.Context, provider string, since, now time.Time, every time.Duration) (bool, error)
}

var (
	_ RecordLedger = (*ledger.Ledger)(nil)
	_ RecordLedger = (*ledger.Memory)(nil)
)

// The metrics of the record policy, by provider.
const (
	// MetricAmbiguousSettled counts ambiguous sends the provider's record
	// showed accepted: recorded sent, not sent again.
	MetricAmbiguousSettled = "AmbiguousSettled"
	// MetricAmbiguousResent counts ambiguous sends the provider did not
	// report within the window while it reported later messages: sent
	// again under the same key.
	MetricAmbiguousResent = "AmbiguousResent"
	// MetricFeedbackMarkUnread counts reads of the provider's feedback
	// mark that failed once a window had passed: the delivery waits again
	// instead of being sent again (and, while the reads fail, goes to
	// review after the longest wait).
	MetricFeedbackMarkUnread = "FeedbackMarkUnread"
	// MetricProbe counts probes (provider.Prober) sent because an
	// ambiguous attempt's window passed with no later message reported,
	// by provider and Outcome (sent, failed).
	MetricProbe = "FeedbackProbe"
)

// RecordSkew is how much later than an ambiguous attempt's start a message
// the provider reports must have been accepted for its report to show that
// the report path works for that attempt: clocks of the consumer and the
// provider differ by that much at most.
const RecordSkew = time.Second

// awaitedSince reports whether the claimed d follows an ambiguous attempt
// whose record is awaited (its last transition before this claim is a
// wait, retrying as ambiguous, or the claim took over a lapsed lease), and
// when that attempt started: its sending entry, or where the history no
// longer holds it the entry after it (later, so the wait is no shorter).
func awaitedSince(d ledger.Delivery) (time.Time, bool) {
	h := d.Transitions()
	n := len(h)
	if n < 2 || h[n-1].Status != ledger.StatusSending {
		return time.Time{}, false
	}
	prev := h[n-2]
	waiting := prev.Status == ledger.StatusRetrying && prev.Class == failure.ClassAmbiguous
	if !waiting && !d.LapsedLeaseTaken() {
		return time.Time{}, false
	}
	at := prev.At
	if prev.Status != ledger.StatusSending && n >= 3 && h[n-3].Status == ledger.StatusSending {
		at = h[n-3].At
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return d.UpdatedAt, true
	}
	return t, true
}

// reported reports whether the provider reported a message of d's: it
// accepted one under d's key.
func reported(d ledger.Delivery) bool {
	return d.Feedback.Kind != "" || len(d.FeedbackSeen) > 0
}

// settleByRecord records the claimed d, which the provider reported
// (reported), sent by the provider's record, with its message id, instead
// of sending it.
func (c *Consumer) settleByRecord(ctx context.Context, d ledger.Delivery) Outcome {
	w := c.cfg.RecordWaits[d.Provider]
	_, err := c.cfg.Records.SettleSent(ctx, d, d.Feedback.MessageID, "sent, by "+w.Record)
	switch {
	case err == nil:
		c.cfg.Metrics.AddBy(MetricAmbiguousSettled, 1, map[string]string{"Provider": d.Provider})
		return Outcome{Transition: Sent, Reason: "by " + w.Record}
	case errors.Is(err, ledger.ErrAlreadySent), errors.Is(err, ledger.ErrLeaseLost):
		return Outcome{Transition: Duplicate, Reason: err.Error()}
	}
	return Outcome{Err: failure.Retryable(err, 0)}
}

// byRecord decides, before a send, a claimed delivery the provider has not
// reported (reported settles one it has), whose ambiguous attempt started
// at start, by the provider's record: sent again (done false) once the
// window has passed and the provider reported a message accepted after it;
// else waits again, up to MaxWait, and then is dead-lettered for review.
func (c *Consumer) byRecord(ctx context.Context, r *record, d ledger.Delivery, start time.Time) (Outcome, bool) {
	w := c.cfg.RecordWaits[d.Provider]
	now := c.cfg.Clock.Now()
	if !now.Before(start.Add(w.Window)) {
		mark, err := c.cfg.Records.FeedbackMark(ctx, d.Provider)
		if err != nil {
			c.cfg.Metrics.AddBy(MetricFeedbackMarkUnread, 1, map[string]string{"Provider": d.Provider})
			r.log.Warn("cannot read the provider's feedback mark; waiting again", "error", err.Error())
		} else if !mark.Before(start.Add(RecordSkew)) {
			c.cfg.Metrics.AddBy(MetricAmbiguousResent, 1, map[string]string{"Provider": d.Provider})
			r.log.Info("not in the provider's record, which holds later messages: sent again", "attemptStart", ledger.Format(start),
				"feedbackMark", ledger.Format(mark))
			return Outcome{}, false
		} else if now.Before(start.Add(w.MaxWait)) {
			// No message accepted since the attempt was reported (a quiet
			// stage): a probe's report shows whether reports arrive, and
			// the next claim decides by it. (Not at the look that ends the
			// wait: nothing would read its report.)
			c.probe(ctx, r, d, start, w.Window)
		}
	}
	if end := start.Add(w.MaxWait); now.Before(end) {
		// Until the window's end, or a window more once it has passed;
		// never past MaxWait's end.
		wait := start.Add(w.Window).Sub(now)
		if wait <= 0 {
			wait = w.Window
		}
		return c.awaitRecord(ctx, r, d, min(wait, end.Sub(now)), true), true
	}
	return c.deadLetter(ctx, r, &d, failure.ClassAmbiguous, fmt.Sprintf(
		"may have been sent (attempt from %s ended without an answer); %s did not settle it within %v and the feedback path showed no later event: "+
			"check the provider's record, then redrive to send or leave it dead",
		ledger.Format(start), w.Record, w.MaxWait)), true
}

// probe sends d's provider a probe (provider.Prober), if it can take one
// and the ledger grants it (ClaimProbe: one per window for the stage, and
// none while one sent after the attempt that started at start is less
// than a window old). A probe that fails is logged and counted; a later
// claim sends another once the window has passed.
func (c *Consumer) probe(ctx context.Context, r *record, d ledger.Delivery, start time.Time, window time.Duration) {
	p, ok := c.cfg.Providers[d.Provider].(provider.Prober)
	if !ok {
		return
	}
	now := c.cfg.Clock.Now()
	// A probe accepted within RecordSkew of the attempt's start cannot show
	// its report path (the mark must pass start + RecordSkew): only one
	// after that stops this one.
	granted, err := c.cfg.Records.ClaimProbe(ctx, d.Provider, start.Add(RecordSkew), now, window)
	if err != nil {
		r.log.Warn("cannot claim the provider's probe; waiting again", "error", err.Error())
		return
	}
	if !granted {
		return // another consumer sent one within the window
	}
	key := ledger.ProbeKey(d.Provider, d.Channel, now)
	receipt, err := p.Probe(ctx, key.String())
	tags := map[string]string{"Provider": d.Provider, "Outcome": "sent"}
	if err != nil {
		tags["Outcome"] = "failed"
		c.cfg.Metrics.AddBy(MetricProbe, 1, tags)
		r.log.Warn("probe failed; another is sent after the window", "probeKey", key.String(), "error", err.Error())
		return
	}
	c.cfg.Metrics.AddBy(MetricProbe, 1, tags)
	r.log.Info("no message reported since the attempt: probe sent, whose report shows whether reports arrive", "probeKey", key.String(),
		"providerMessageId", receipt.ID, "attemptStart", ledger.Format(start))
}

// waitNote is the note of a wait for provider's record until next, in the
// history and lastError: "awaits ses record to 09:15:00Z", 30 bytes for
// SES, so that the item stays under 1 KB. The time of day is enough: a
// wait is at most SQS's longest delay (15 min), and the entry has its date.
func waitNote(provider string, next time.Time) string {
	return "awaits " + provider + " record to " + next.UTC().Format("15:04:05Z")
}

// awaitRecord records that d waits for the provider's record and brings
// its message back after wait (at most SQS's longest delay): a copy
// re-published with that delay, so that the waits spend no receives
// (a FIFO queue, which has no per-message delay, by visibility). looked is
// set when this claim only looked for the record.
func (c *Consumer) awaitRecord(ctx context.Context, r *record, d ledger.Delivery, wait time.Duration, looked bool) Outcome {
	wait = max(min(wait, envelope.MaxDelaySeconds*time.Second), time.Second).Round(time.Second)
	next := c.cfg.Clock.Now().Add(wait)
	note := waitNote(d.Provider, next)
	_, err := c.cfg.Records.AwaitRecord(ctx, d, ledger.Await{Note: note, Next: next, Looked: looked})
	switch {
	case isSettled(err):
		return Outcome{Transition: Duplicate, Reason: err.Error()}
	case errors.Is(err, ledger.ErrLeaseLost):
		// Another copy holds it now, and decides.
		return Outcome{Transition: Duplicate, Reason: err.Error()}
	case err != nil:
		return Outcome{Err: failure.Retryable(err, 0)}
	}
	o := Outcome{Transition: Retry, Kind: failure.KindAmbiguous, Class: failure.ClassAmbiguous, Next: wait, Error: note}
	if r.rec.Attributes["MessageGroupId"] != "" {
		o.Err = failure.Retryable(errors.New(note), wait)
		return o
	}
	env := envelope.Build(envelope.Spec{Kind: envelope.Standard, Body: r.rec.Body, Delay: wait, Attributes: envelope.Kept(r.rec.MessageAttributes)})
	if _, err := c.cfg.Queue.SendMessage(ctx, env.Send(c.cfg.Routes.For(d.Provider))); err != nil {
		o.Err = failure.Retryable(err, wait) // back by visibility instead
	}
	return o
}

// checkRecordPolicies checks that every provider under the record policy
// has its wait, and the ledger its operations.
func checkRecordPolicies(cfg *Config) error {
	for name, p := range cfg.Ambiguous {
		if p != provider.AmbiguousRecord {
			continue
		}
		w := cfg.RecordWaits[name]
		if w.Window <= 0 || w.MaxWait < w.Window || w.Record == "" {
			return fmt.Errorf("consumer: provider %q waits for its record (policy record) without a window, a longest wait and the record's name "+
				"(RecordWaits, from the driver's contract: provider.WaitFor); use review or retry for a provider that reports nothing", name)
		}
		if cfg.Records == nil {
			rl, ok := cfg.Ledger.(RecordLedger)
			if !ok {
				return fmt.Errorf("consumer: provider %q waits for its record (policy record), and the ledger (%T) cannot: set Config.Records",
					name, cfg.Ledger)
			}
			cfg.Records = rl
		}
	}
	return nil
}
