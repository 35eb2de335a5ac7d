package provider

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Request is what a provider needs to send one delivery. Its JSON form
// (the webhook's body, the SNS message) holds references only: Address and
// TemplateData never leave the process except to a provider that renders
// and sends itself (SES).
type Request struct {
	DeliveryKey  string    `json:"deliveryKey"`
	ReminderID   string    `json:"reminderId"`
	Channel      string    `json:"channel"`
	RecipientRef string    `json:"recipientRef"`
	TemplateRef  string    `json:"templateRef"`
	DueAt        time.Time `json:"dueAt"`
	Attempt      int       `json:"attempt"`
	// Address is the recipient's address for the channel (an e-mail
	// address for SES), when the delivery carries one. Personal data: it
	// appears in no log, metric, error or message.
	Address string `json:"-"`
	// TemplateData is the reminder's metadata, the data a stored template
	// renders.
	TemplateData map[string]string `json:"-"`
}

// Receipt is the provider's acknowledgement.
type Receipt struct {
	// ID is the provider's identifier for the accepted send, if it gave one.
	ID string
}

// Provider sends deliveries.
type Provider interface {
	// Send delivers req. idempotencyKey is the same for every attempt of one
	// delivery. Errors should be classifiable (see package failure).
	Send(ctx context.Context, req Request, idempotencyKey string) (Receipt, error)
}

// Prober is a Provider that can send a probe: a message it certainly
// accepts and reports (SES: an e-mail to its mailbox simulator's success
// address, in the stage's configuration set), sent under key, which names
// no delivery. Its report shows that the provider's reports arrive. The
// consumer sends one under AmbiguousRecord when the window of an ambiguous
// attempt has passed and the provider has reported no message accepted
// after it (a quiet stage): at most one per window for the stage.
type Prober interface {
	Probe(ctx context.Context, key string) (Receipt, error)
}

// Func adapts a function to Provider.
type Func func(ctx context.Context, req Request, idempotencyKey string) (Receipt, error)

// Send calls f.
func (f Func) Send(ctx context.Context, req Request, key string) (Receipt, error) {
	return f(ctx, req, key)
}

// StatusError is a provider's non-2xx answer.
type StatusError struct {
	// Code is the HTTP status.
	Code int
	// After is the server's Retry-After, if it sent one.
	After time.Duration
}

func (e *StatusError) Error() string {
	s := "provider answered " + strconv.Itoa(e.Code)
	if e.After > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.After)
	}
	return s
}

// StatusCode returns the HTTP status.
func (e *StatusError) StatusCode() int { return e.Code }

// RetryAfter returns the server's requested delay.
func (e *StatusError) RetryAfter() time.Duration { return e.After }

// MaxRetryAfter bounds what ParseRetryAfter returns: a week, far above any
// retry policy's cap (the consumer's is at most 12 hours), far below where
// the arithmetic would overflow.
const MaxRetryAfter = 7 * 24 * time.Hour

// ParseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (relative to now), at most MaxRetryAfter. It returns 0 for an absent or
// unreadable value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http1Date(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, MaxRetryAfter).Round(time.Second)
		}
	}
	return 0
}

func http1Date(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC1123, time.RFC850, time.ANSIC} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not an HTTP date: %q", v)
}
