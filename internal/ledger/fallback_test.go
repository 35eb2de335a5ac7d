package ledger_test

import (
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
)

// TestFallbackDue: a primary's fallback is due when it ends dead (but as
// ambiguous), expired (but while an attempt may have been sent), or its
// standing feedback failed it; never when it names no fallback, and never
// for a delivery on its way, sent and standing, or cancelled.
func TestFallbackDue(t *testing.T) {
	t.Parallel()
	fb := ledger.FallbackRef{Channel: "sms", Provider: "webhook"}
	bounce := ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General", At: t0}
	soft := ledger.Feedback{Kind: ledger.FeedbackBounced, Detail: "Transient/MailboxFull", At: t0}
	for _, tc := range []struct {
		name   string
		d      ledger.Delivery
		reason string
	}{
		{"dead, rejected", ledger.Delivery{Status: ledger.StatusDead, LastErrorClass: failure.ClassRejected, Fallback: fb}, "dead (rejected)"},
		{"dead, ambiguous", ledger.Delivery{Status: ledger.StatusDead, LastErrorClass: failure.ClassAmbiguous, Fallback: fb}, ""},
		{"expired, an attempt may have been sent", ledger.Delivery{Status: ledger.StatusExpired, Fallback: fb,
			History: []ledger.Entry{{Status: ledger.StatusSending}, {Status: ledger.StatusExpired, Attempt: 1, Class: failure.ClassAmbiguous}}}, ""},
		{"cancelled, an attempt may have been sent", ledger.Delivery{Status: ledger.StatusCancelled, Fallback: fb,
			History: []ledger.Entry{{Status: ledger.StatusCancelled, Attempt: 2, Class: failure.ClassAmbiguous}}}, ""},
		{"expired, no attempt unended", ledger.Delivery{Status: ledger.StatusExpired, Fallback: fb,
			History: []ledger.Entry{{Status: ledger.StatusExpired, Note: "expiresAt"}}}, "expired"},
		{"dead, no class", ledger.Delivery{Status: ledger.StatusDead, Fallback: fb}, "dead"},
		{"expired", ledger.Delivery{Status: ledger.StatusExpired, Fallback: fb}, "expired"},
		{"sent, bounced permanently", ledger.Delivery{Status: ledger.StatusSent, Feedback: bounce, Fallback: fb}, "bounced Permanent/General"},
		{"sent, complained", ledger.Delivery{Status: ledger.StatusSent, Feedback: ledger.Feedback{Kind: ledger.FeedbackComplained, Detail: "abuse"}, Fallback: fb},
			"complained abuse"},
		{"sent, rejected by the provider", ledger.Delivery{Status: ledger.StatusSent, Feedback: ledger.Feedback{Kind: ledger.FeedbackRejected}, Fallback: fb},
			"rejected"},
		{"sent, soft bounce", ledger.Delivery{Status: ledger.StatusSent, Feedback: soft, Fallback: fb}, ""},
		{"sent", ledger.Delivery{Status: ledger.StatusSent, Fallback: fb}, ""},
		{"retrying", ledger.Delivery{Status: ledger.StatusRetrying, Fallback: fb}, ""},
		{"cancelled", ledger.Delivery{Status: ledger.StatusCancelled, Fallback: fb}, ""},
		{"dead, no fallback", ledger.Delivery{Status: ledger.StatusDead, LastErrorClass: failure.ClassRejected}, ""},
		{"bounced, no fallback", ledger.Delivery{Status: ledger.StatusSent, Feedback: bounce}, ""},
	} {
		reason, ok := tc.d.FallbackDue()
		if reason != tc.reason || ok != (tc.reason != "") {
			t.Errorf("%s: FallbackDue = %q, %v; want %q", tc.name, reason, ok, tc.reason)
		}
	}
}

// TestSentLate: sent after OnTimeUntil, and only then.
func TestSentLate(t *testing.T) {
	t.Parallel()
	on := t0.Add(time.Hour)
	for _, tc := range []struct {
		d    ledger.Delivery
		want bool
	}{
		{ledger.Delivery{Status: ledger.StatusSent, SentAt: on.Add(time.Millisecond), OnTimeUntil: on}, true},
		{ledger.Delivery{Status: ledger.StatusSent, SentAt: on, OnTimeUntil: on}, false},
		{ledger.Delivery{Status: ledger.StatusSent, SentAt: on.Add(time.Hour)}, false},
		{ledger.Delivery{Status: ledger.StatusDead, SentAt: on.Add(time.Hour), OnTimeUntil: on}, false},
	} {
		if got := tc.d.SentLate(); got != tc.want {
			t.Errorf("SentLate of %s sent %v, on time until %v = %v", tc.d.Status, tc.d.SentAt, tc.d.OnTimeUntil, got)
		}
	}
}

// TestLateRuleDerivesTheDeliveryExpiry: send-late extends the delivery's
// expiry by its bound; the others leave it the reminder's.
func TestLateRuleDerivesTheDeliveryExpiry(t *testing.T) {
	t.Parallel()
	exp := t0.Add(24 * time.Hour)
	if e, on := (ledger.LateRule{Policy: ledger.LateSendLate, Within: time.Hour}).DeliveryTimes(exp); !e.Equal(exp.Add(time.Hour)) || !on.Equal(exp) {
		t.Errorf("send-late: %v, %v", e, on)
	}
	for _, r := range []ledger.LateRule{{}, {Policy: ledger.LateEscalate}} {
		if e, on := r.DeliveryTimes(exp); !e.Equal(exp) || !on.IsZero() {
			t.Errorf("%q: %v, %v", r.Policy, e, on)
		}
	}
}
