package schedule

import (
	"context"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Document is a reminder as `nudge reminder show --json` prints it and
// GET /v1/reminders/{id} answers: one shape, stable field names.
type Document struct {
	Reminder *Reminder `json:"reminder"`
	// Series is set for a series: its next occurrence, how many it has
	// created, and when it was cancelled.
	Series     *SeriesView        `json:"series,omitempty"`
	Deliveries []DeliveryDocument `json:"deliveries"`
	History    []Event            `json:"history"`
}

// DeliveryDocument is one delivery of a Document.
type DeliveryDocument struct {
	Key            string        `json:"key"`
	Channel        string        `json:"channel"`
	Provider       string        `json:"provider"`
	Status         Status        `json:"status"`
	Attempts       int           `json:"attempts"`
	DueAt          string        `json:"dueAt"`
	ExpiresAt      string        `json:"expiresAt"`
	LastErrorClass failure.Class `json:"lastErrorClass,omitempty"`
	LastError      string        `json:"lastError,omitempty"`
	NextAttemptAt  string        `json:"nextAttemptAt,omitempty"`
	SentAt         string        `json:"sentAt,omitempty"`
	Receipt        string        `json:"receipt,omitempty"`
	UpdatedAt      string        `json:"updatedAt"`
	// Address is the recipient's address for a provider that sends to it
	// (SES), masked unless revealed.
	Address string `json:"address,omitempty"`
	// HandedOff, for a live delivery, says whether the enqueue has handed
	// it to the queue; PublishAt when it may (a pending delivery stays
	// pending when the cursor hands it off).
	HandedOff *bool  `json:"handedOff,omitempty"`
	PublishAt string `json:"publishAt,omitempty"`
	// Feedback is what the provider said of the message after it took it
	// (SES: delivered, bounced, complained of), where it said anything.
	// Status stays the ledger's (sent): Feedback.Failed says the recipient
	// did not, or should not, get it.
	Feedback *Feedback `json:"feedback,omitempty"`
	// Fallback, on a delivery that has one, names it ("sms:webhook"):
	// taken if this one fails. FallbackOf, on a fallback, names the
	// delivery it stands in for; FallbackWithin is how long it may take
	// once taken ("1h").
	Fallback       string `json:"fallback,omitempty"`
	FallbackOf     string `json:"fallbackOf,omitempty"`
	FallbackWithin string `json:"fallbackWithin,omitempty"`
	// FallbackTaken, on a delivery whose fallback was taken, is when
	// (FormatTime'd): the fallback stands in for it, and it is never sent
	// any more (a redrive or revive of it is refused).
	FallbackTaken string `json:"fallbackTaken,omitempty"`
	// Late is the reminder's late policy where it is not the default
	// (send-late, escalate); OnTimeUntil, under send-late, the reminder's
	// expiresAt, after which a send is late (SentLate).
	Late        string `json:"late,omitempty"`
	OnTimeUntil string `json:"onTimeUntil,omitempty"`
	SentLate    bool   `json:"sentLate,omitempty"`
}

// Feedback is the provider's feedback that stands on a delivery: a failing
// one over an informational one, else the latest (docs/ledger.md,
// "Provider feedback").
type Feedback struct {
	// Kind is sent-by-provider, delivered, delayed, bounced, complained,
	// rejected or rendering-failed.
	Kind string `json:"kind"`
	// Detail is a type, subtype or status code, never an address:
	// "Permanent/General 5.1.1", "abuse".
	Detail string `json:"detail,omitempty"`
	// At is the provider's time of it (FormatTime'd).
	At string `json:"at"`
	// Failed is set for a failing feedback: a permanent bounce, a
	// complaint, a reject, a rendering failure.
	Failed bool `json:"failed"`
}

// Told is d's state in words, as `nudge reminder show` prints it: the
// status, and the provider's feedback where there is some: "sent, then
// bounced (Permanent/General 5.1.1) at 2026-11-30T09:00:02.669Z" for a
// failing one, "sent; delivered at …" otherwise; and, where its fallback
// was taken, "; fallback taken at …".
func (d DeliveryDocument) Told() string {
	if d.Status == StatusHeld {
		return "held: fallback of " + d.FallbackOf + ", taken if it fails"
	}
	if d.FallbackTaken != "" {
		taken := d.FallbackTaken
		d.FallbackTaken = ""
		return d.Told() + "; fallback taken at " + taken
	}
	if d.SentLate {
		d.Status += " late"
	}
	f := d.Feedback
	if f == nil {
		return string(d.Status)
	}
	what := f.Kind
	if f.Detail != "" {
		what += " (" + f.Detail + ")"
	}
	if f.Failed {
		return string(d.Status) + ", then " + what + " at " + f.At
	}
	return string(d.Status) + "; " + what + " at " + f.At
}

// Document returns v as a Document, asking the ledger whether each live
// delivery was handed off. Addresses are masked unless reveal.
func (s *Store) Document(ctx context.Context, v View, reveal bool) (Document, error) {
	doc := Document{Reminder: v.Reminder, Series: v.Series, History: v.Timeline(), Deliveries: []DeliveryDocument{}}
	if doc.History == nil {
		doc.History = []Event{}
	}
	for _, d := range v.Deliveries {
		dd := deliveryDocument(d, reveal)
		if !d.Status.Terminal() && d.Status != ledger.StatusHeld {
			h, err := s.cfg.Ledger.HandedOff(ctx, d)
			if err != nil {
				return Document{}, err
			}
			dd.HandedOff, dd.PublishAt = &h.Done, FormatOpt(h.PublishAt)
		}
		doc.Deliveries = append(doc.Deliveries, dd)
	}
	return doc, nil
}

// FormatTime formats t as every answer and document shows a time:
// RFC 3339 in UTC, to the millisecond, as the ledger stores it
// (ledger.Format).
func FormatTime(t time.Time) string { return ledger.Format(t) }

// FormatOpt is FormatTime, or "" for the zero time.
func FormatOpt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return FormatTime(t)
}

// MaskAddress hides a recipient's address but for its first character (as
// ledger.MaskAddress does): a•••@example.com.
func MaskAddress(a string) string { return ledger.MaskAddress(a) }
