package schedule

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
)

// TestADeliveryThatFailedAfterSendingCannotBeMissed: the document keeps the
// ledger's status (sent) and adds the standing feedback, failed or not;
// Told says it in words.
func TestADeliveryThatFailedAfterSendingCannotBeMissed(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 9, 0, 2, 669e6, time.UTC)
	d := ledger.Delivery{ReminderID: "rem-1", Channel: "email", Provider: "ses", Status: ledger.StatusSent, Address: "ana.lima@example.com",
		Feedback: ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General 5.1.1", At: at, MessageID: "msg-1"}}
	doc := deliveryDocument(d, false)
	want := Feedback{Kind: "bounced", Detail: "Permanent/General 5.1.1", At: "2026-11-30T09:00:02.669Z", Failed: true}
	if doc.Status != StatusSent || doc.Feedback == nil || *doc.Feedback != want {
		t.Fatalf("document %+v, feedback %+v", doc, doc.Feedback)
	}
	if got, want := doc.Told(), "sent, then bounced (Permanent/General 5.1.1) at 2026-11-30T09:00:02.669Z"; got != want {
		t.Errorf("Told() = %q, want %q", got, want)
	}
	b, _ := json.Marshal(doc)
	wantJSON := `"feedback":{"kind":"bounced","detail":"Permanent/General 5.1.1","at":"2026-11-30T09:00:02.669Z","failed":true}`
	if !strings.Contains(string(b), `"status":"sent"`) || !strings.Contains(string(b), wantJSON) {
		t.Errorf("JSON %s", b)
	}
	d.Feedback = ledger.Feedback{Kind: ledger.FeedbackDelivered, Detail: "250 2.6.0", At: at}
	if doc := deliveryDocument(d, false); doc.Feedback.Failed || doc.Told() != "sent; delivered (250 2.6.0) at 2026-11-30T09:00:02.669Z" {
		t.Errorf("delivered: %+v, %q", doc.Feedback, doc.Told())
	}
	d.Feedback = ledger.Feedback{}
	if doc := deliveryDocument(d, false); doc.Feedback != nil || doc.Told() != "sent" {
		t.Errorf("no feedback: %+v, %q", doc.Feedback, doc.Told())
	}
	b, _ = json.Marshal(deliveryDocument(d, false))
	if strings.Contains(string(b), "feedback") {
		t.Errorf("a delivery without feedback shows %s", b)
	}
}

// TestAPrimaryWhoseFallbackWasTakenSaysSo: reminder show's words for a
// primary whose fallback was taken end with when, and the document
// carries it.
func TestAPrimaryWhoseFallbackWasTakenSaysSo(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 9, 0, 2, 669e6, time.UTC)
	d := ledger.Delivery{ReminderID: "rem-1", Channel: "email", Provider: "ses", Status: ledger.StatusSent,
		Fallback:      ledger.FallbackRef{Channel: "sms", Provider: "webhook"},
		Feedback:      ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General", At: at},
		FallbackTaken: at.Add(time.Second)}
	doc := deliveryDocument(d, false)
	want := "sent, then bounced (Permanent/General) at 2026-11-30T09:00:02.669Z; fallback taken at 2026-11-30T09:00:03.669Z"
	if got := doc.Told(); got != want || doc.FallbackTaken != "2026-11-30T09:00:03.669Z" {
		t.Errorf("Told() = %q (fallbackTaken %q), want %q", got, doc.FallbackTaken, want)
	}
	d.Status, d.Feedback, d.LastErrorClass = ledger.StatusDead, ledger.Feedback{}, "rejected"
	if got := deliveryDocument(d, false).Told(); got != "dead; fallback taken at 2026-11-30T09:00:03.669Z" {
		t.Errorf("dead: Told() = %q", got)
	}
}
