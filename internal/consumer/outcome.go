package consumer

import (
	"slices"
	"strconv"
	"time"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Transition names what became of a record: the "outcome" of its log line.
type Transition string

// The transitions (docs/operations.md, "Logs").
const (
	Sent      Transition = "sent"      // the provider accepted; the ledger says sent
	Duplicate Transition = "duplicate" // the delivery had already ended; nothing was sent
	Retry     Transition = "retry"     // transient or ambiguous: back on the queue after Next
	Leased    Transition = "leased"    // another consumer holds the delivery
	Deferred  Transition = "deferred"  // early, paced or on another queue than its provider's: put back, by Via
	Expired   Transition = "expired"   // past expiresAt; never sent
	Dead      Transition = "dead"      // dead-lettered with Class and Reason
)

// Outcome is what became of one record: the transition, what the line says
// about it, and the error the batch processor gets (nil acknowledges the
// record). report turns it into the log line and the metrics, in one place.
// An Outcome without a Transition is a failure already logged where it
// happened (a DLQ or ledger write that failed): the record is retried.
type Outcome struct {
	Transition Transition
	Kind       failure.Kind  // retry: transient or ambiguous
	Class      failure.Class // retry, dead
	Status     ledger.Status // duplicate: the status that ended it
	Next       time.Duration // retry, leased, deferred: when it comes back
	Via        string        // deferred: visibility, republish, forward or calendar
	ExpiresAt  time.Time     // expired
	Reason     string        // duplicate, dead
	Error      string        // retry: the failure
	Err        error         // for the batch processor
}

// transitionValue holds each transition as a log value, boxed once rather
// than on every record.
var transitionValue = map[Transition]any{
	Sent: string(Sent), Duplicate: string(Duplicate), Retry: string(Retry), Leased: string(Leased),
	Deferred: string(Deferred), Expired: string(Expired), Dead: string(Dead),
}

// report writes o's transition line and counts its metrics. The metrics
// are split where the dashboard and the alarms read them, and nowhere else
// (each split value is a custom metric, and billed): Sent by channel,
// Retried and DeadLettered by failure class. A channel Nudge does not know
// counts as "other", a body that did not decode as "none", so that a
// producer's bad data cannot mint metrics.
func (c *Consumer) report(r *record, o Outcome) {
	m := c.cfg.Metrics
	switch o.Transition {
	case "":
		return
	case Sent:
		ch := r.channel
		switch {
		case ch == "":
			ch = "none"
		case !slices.Contains(message.Channels, ch):
			ch = "other"
		}
		m.AddBy(MetricSent, 1, map[string]string{"Channel": ch})
		if r.late {
			m.Add(MetricLate, 1)
		}
		m.Observe(MetricDueToSent, c.cfg.Clock.Now().Sub(r.dueAt).Seconds())
		if !r.accepted.IsZero() { // sent by this attempt, not settled by a provider's record
			r.log = r.log.With(r.timing()...)
		}
	case Duplicate:
		m.Add(MetricDuplicate, 1)
	case Retry:
		m.AddBy(MetricRetried, 1, map[string]string{"ErrorClass": string(o.Class)})
	case Deferred:
		m.Add(MetricDeferred, 1)
	case Expired:
		m.Add(MetricExpired, 1)
	case Dead:
		m.AddBy(MetricDeadLettered, 1, map[string]string{"ErrorClass": string(o.Class)})
	}
	kv := make([]any, 0, 12)
	kv = append(kv, "outcome", transitionValue[o.Transition])
	if o.Kind != 0 {
		kv = append(kv, "kind", o.Kind.String())
	}
	if o.Class != "" {
		kv = append(kv, "errorClass", string(o.Class))
	}
	if o.Status != "" {
		kv = append(kv, "status", string(o.Status))
	}
	if o.Next != 0 {
		kv = append(kv, "next", o.Next.String())
	}
	if o.Via != "" {
		kv = append(kv, "via", o.Via)
	}
	if !o.ExpiresAt.IsZero() {
		kv = append(kv, "expiresAt", ledger.Format(o.ExpiresAt))
	}
	if o.Reason != "" {
		kv = append(kv, "reason", text.Clip(o.Reason, deadletter.MaxReason))
	}
	if o.Error != "" {
		kv = append(kv, "error", o.Error)
	}
	r.log.Info("transition", kv...)
}

// timing is where a sent delivery's time went, as log attributes: the
// queue's first receive of its message (SQS's
// ApproximateFirstReceiveTimestamp, on the first receive only), the start
// of its handling, the claim's return and the provider's acceptance, each
// in milliseconds from its due time (negative: before it).
func (r *record) timing() []any {
	since := func(t time.Time) int64 { return t.Sub(r.dueAt).Milliseconds() }
	kv := []any{"startedMs", since(r.started), "claimedMs", since(r.claimed), "acceptedMs", since(r.accepted)}
	if ms, err := strconv.ParseInt(r.rec.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64); err == nil && r.receives == 1 {
		kv = append(kv, "receivedMs", since(time.UnixMilli(ms)))
	}
	return kv
}
