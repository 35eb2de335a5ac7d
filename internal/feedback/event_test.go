package feedback_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

const (
	sesMessageID = "0100019a5f6e2b3c-8d2f4a61-3b7e-4c2a-9f10-6e5d4c3b2a19-000000"
	recipient    = "ana.lima@example.com"
	sender       = "reminders@nudge.example"
)

var fixtureKey = message.DeliveryKey{ReminderID: "rem-184.a", Channel: "email", Provider: "ses"}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseReadsEverySESEvent decodes every file in testdata/, modelled on
// AWS's documented examples, and checks what is read of it.
func TestParseReadsEverySESEvent(t *testing.T) {
	t.Parallel()
	want := map[string]ledger.Feedback{
		"send.json": {Kind: ledger.FeedbackSentByProvider, At: at("2026-11-30T09:00:00.412Z"),
			ID: sesMessageID + ":Send:2026-11-30T09:00:00.412Z"},
		"delivery.json": {Kind: ledger.FeedbackDelivered, Detail: "250 2.6.0", At: at("2026-11-30T09:00:01.838Z"),
			ID: sesMessageID + ":Delivery:2026-11-30T09:00:01.838Z"},
		"bounce-permanent.json": {Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General 5.1.1", At: at("2026-11-30T09:00:02.669Z"),
			ID: "0100019a5f6e31aa-9c0b7d52-4a1e-4f3b-8e21-7d6c5b4a3f20-000000"},
		"bounce-transient.json": {Kind: ledger.FeedbackBounced, Detail: "Transient/MailboxFull 4.2.2", At: at("2026-11-30T21:00:04.120Z"),
			ID: "0100019a5f7a0b11-1d2c3b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5d-000000"},
		"complaint.json": {Kind: ledger.FeedbackComplained, Detail: "abuse", At: at("2026-11-30T10:12:41.000Z"),
			ID: "0100019a5f9b44cc-2e1d0c9b-8a7f-4e6d-b5c4-3a2b1c0d9e8f-000000"},
		"reject.json": {Kind: ledger.FeedbackRejected, Detail: "Bad content", At: at("2026-11-30T09:00:00.412Z"),
			ID: sesMessageID + ":Reject:2026-11-30T09:00:00.412Z"},
		"delivery-delay.json": {Kind: ledger.FeedbackDelayed, Detail: "TransientCommunicationFailure", At: at("2026-11-30T09:20:00.386Z"),
			ID: sesMessageID + ":DeliveryDelay:2026-11-30T09:20:00.386Z"},
		"rendering-failure.json": {Kind: ledger.FeedbackRenderingFailed, Detail: "template nudge-dev-renewal-notice", At: at("2026-11-30T09:00:00.412Z"),
			ID: sesMessageID + ":Rendering Failure:2026-11-30T09:00:00.412Z"},
	}
	ignored := map[string]bool{"open.json": true}
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v, %v", files, err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		e, err := feedback.Parse(fixture(t, name))
		if ignored[name] {
			if !errors.Is(err, feedback.ErrNotOurs) {
				t.Errorf("%s: %+v, %v; want it not recorded (ErrNotOurs)", name, e, err)
			}
			continue
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("%s has no expectation in this test; add one", name)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		w.MessageID = sesMessageID
		g := e.Feedback
		if g.Kind != w.Kind || g.Permanent != w.Permanent || g.Detail != w.Detail || !g.At.Equal(w.At) || g.ID != w.ID || g.MessageID != w.MessageID {
			t.Errorf("%s: feedback %+v\nwant %+v", name, g, w)
		}
		if e.Key != fixtureKey || e.MessageID != sesMessageID || e.ConfigurationSet != "nudge-dev" {
			t.Errorf("%s: key %s, message %s, configuration set %q", name, e.Key, e.MessageID, e.ConfigurationSet)
		}
		if err := e.OfStage("dev"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := e.OfStage("prod"); !errors.Is(err, feedback.ErrNotOurs) {
			t.Errorf("%s of dev's configuration set, checked for prod: %v; want ErrNotOurs", name, err)
		}
	}
}

// edit decodes a fixture, lets change alter it, and encodes it again.
func edit(t *testing.T, name string, change func(ev map[string]any, detail, mail map[string]any)) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(fixture(t, name), &ev); err != nil {
		t.Fatal(err)
	}
	detail := ev["detail"].(map[string]any)
	change(ev, detail, detail["mail"].(map[string]any))
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dropHeader(mail map[string]any) {
	var kept []any
	for _, h := range mail["headers"].([]any) {
		if h.(map[string]any)["name"] != "X-Nudge-Delivery-Key" {
			kept = append(kept, h)
		}
	}
	mail["headers"] = kept
}

// variants are events that are not recorded, by why: not ours, or
// malformed. Several carry an address where Nudge reads a value.
func variants(t *testing.T) []struct {
	name string
	body []byte
	want error
} {
	return []struct {
		name string
		body []byte
		want error
	}{
		{"not JSON", []byte("ana.lima@example.com is not JSON"), feedback.ErrMalformed},
		{"another source", edit(t, "bounce-permanent.json", func(ev, _, _ map[string]any) { ev["source"] = recipient }), feedback.ErrNotOurs},
		{"an advisor event", edit(t, "send.json", func(ev, _, _ map[string]any) { ev["detail-type"] = "Advisor Recommendation Status Open" }), feedback.ErrNotOurs},
		{"an e-mail Nudge did not send", edit(t, "bounce-permanent.json", func(_, _, mail map[string]any) {
			dropHeader(mail)
			delete(mail["tags"].(map[string]any), "nudge_reminder")
		}), feedback.ErrNotOurs},
		{"a key that is an address", edit(t, "bounce-permanent.json", func(_, _, mail map[string]any) {
			dropHeader(mail)
			mail["headers"] = append(mail["headers"].([]any), map[string]any{"name": "x-nudge-delivery-key", "value": recipient + ":email:ses"})
		}), feedback.ErrMalformed},
		{"a key of another provider", edit(t, "delivery.json", func(_, _, mail map[string]any) {
			dropHeader(mail)
			mail["headers"] = append(mail["headers"].([]any), map[string]any{"name": "X-Nudge-Delivery-Key", "value": "rem-184:email:webhook"})
		}), feedback.ErrMalformed},
		{"a tag that is an address", edit(t, "complaint.json", func(_, _, mail map[string]any) {
			mail["tags"].(map[string]any)["nudge_reminder"] = []any{recipient}
		}), feedback.ErrMalformed},
		{"no message id", edit(t, "send.json", func(_, _, mail map[string]any) { mail["messageId"] = recipient }), feedback.ErrMalformed},
		{"an eventType of another detail-type", edit(t, "bounce-permanent.json", func(_, d, _ map[string]any) {
			d["eventType"] = "Delivery"
		}), feedback.ErrMalformed},
		{"an eventType that is an address", edit(t, "bounce-permanent.json", func(_, d, _ map[string]any) { d["eventType"] = recipient }), feedback.ErrMalformed},
		{"a bounce without its object", edit(t, "bounce-permanent.json", func(_, d, _ map[string]any) { delete(d, "bounce") }), feedback.ErrMalformed},
		{"a time that is not one", edit(t, "delivery.json", func(_, d, _ map[string]any) {
			d["delivery"].(map[string]any)["timestamp"] = recipient
		}), feedback.ErrMalformed},
		{"a field of the wrong type", edit(t, "delivery.json", func(_, _, mail map[string]any) { mail["headers"] = recipient }), feedback.ErrMalformed},
	}
}

// TestEventsThatAreNotRecordedSayWhy: each variant is refused with its
// reason; one whose headers SES truncated is read by its tag.
func TestEventsThatAreNotRecordedSayWhy(t *testing.T) {
	t.Parallel()
	for _, v := range variants(t) {
		e, err := feedback.Parse(v.body)
		if err == nil {
			err = e.OfStage("dev")
		}
		var fe *feedback.Error
		if !errors.Is(err, v.want) || !errors.As(err, &fe) {
			t.Errorf("%s: %+v, %v; want %v", v.name, e, err, v.want)
		}
	}
	other := edit(t, "delivery.json", func(_, _, mail map[string]any) {
		mail["tags"].(map[string]any)["ses:configuration-set"] = []any{"nudge-prod"}
	})
	e, err := feedback.Parse(other)
	if err != nil || !errors.Is(e.OfStage("dev"), feedback.ErrNotOurs) || e.OfStage("prod") != nil {
		t.Errorf("another stage's event: %+v, %v", e, err)
	}
	// Truncated headers: the header is not trusted, the tag is read.
	trunc := edit(t, "delivery.json", func(_, _, mail map[string]any) {
		mail["headersTruncated"] = true
		mail["tags"].(map[string]any)["nudge_reminder"] = []any{"rem-9_d1__x"}
	})
	if e, err := feedback.Parse(trunc); err != nil || e.Key != (message.DeliveryKey{ReminderID: "rem-9.1_x", Channel: "email", Provider: "ses"}) {
		t.Errorf("truncated headers: %+v, %v; want the tag's reminder", e.Key, err)
	}
}

// TestNoAddressReachesTheFeedbackOrAnError: whatever SES's record holds,
// neither the Event (every field, as %+v prints it) nor an error names an
// address.
func TestNoAddressReachesTheFeedbackOrAnError(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.json")
	bodies := map[string][]byte{}
	for _, path := range files {
		b := fixture(t, filepath.Base(path))
		if !strings.Contains(string(b), recipient) || !strings.Contains(string(b), sender) {
			t.Fatalf("%s names no address: the test would prove nothing", path)
		}
		bodies[filepath.Base(path)] = b
	}
	for _, v := range variants(t) {
		bodies[v.name] = v.body
	}
	for name, b := range bodies {
		e, err := feedback.Parse(b)
		if err == nil {
			err = e.OfStage("prod")
		}
		for what, s := range map[string]string{"event": fmt.Sprintf("%+v %s", e, e.Feedback.Note()), "error": fmt.Sprint(err)} {
			if strings.Contains(s, "@") {
				t.Errorf("%s: the %s names an address: %s", name, what, s)
			}
		}
	}
}
