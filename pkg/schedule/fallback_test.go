package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// A reminder whose sms delivery falls back to a push, and whose late
// policy is send-late within 2h.
const withFallback = `{"id":"rem-fb","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","expiresAt":"2026-12-01T21:00:00Z",
 "deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"acct-1/c-1","templateRef":"t",
   "fallback":{"channel":"push","provider":"webhook","recipientRef":"acct-1/d-1","templateRef":"t-push","within":"90m"}}],
 "late":{"policy":"send-late","within":"2h"}}`

// TestFallbackAndLateAreRefusedClearly: each bad fallback or late policy
// names its field and the fix.
func TestFallbackAndLateAreRefusedClearly(t *testing.T) {
	t.Parallel()
	v := schedule.Validator{Now: func() time.Time { return now }}
	const head = `{"id":"rem-1","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","deliveries":[`
	const sms = `{"channel":"sms","provider":"webhook","recipientRef":"c-1","templateRef":"t"`
	fb := func(f string) string { return head + sms + `,"fallback":{` + f + `}}]}` }
	for _, tc := range []struct {
		name, js, field, fix string
	}{
		{"fallback repeats its delivery", fb(`"channel":"sms","provider":"webhook","recipientRef":"c-2","templateRef":"t"`),
			"deliveries[0].fallback.provider", "no delivery and no other fallback"},
		{"fallback repeats a later delivery", head + sms + `,"fallback":{"channel":"email","provider":"webhook","recipientRef":"c-2","templateRef":"t"}},` +
			`{"channel":"email","provider":"webhook","recipientRef":"c-3","templateRef":"t"}]}`, "deliveries[0].fallback.provider", "no delivery"},
		{"two fallbacks alike", head + sms + `,"fallback":{"channel":"push","provider":"webhook","recipientRef":"c-2","templateRef":"t"}},` +
			`{"channel":"email","provider":"webhook","recipientRef":"c-3","templateRef":"t",` +
			`"fallback":{"channel":"push","provider":"webhook","recipientRef":"c-4","templateRef":"t"}}]}`,
			"deliveries[1].fallback.provider", "no other fallback"},
		{"fallback channel unknown", fb(`"channel":"fax","provider":"webhook","recipientRef":"c-2","templateRef":"t"`),
			"deliveries[0].fallback.channel", "use one of"},
		{"fallback provider not run", fb(`"channel":"push","provider":"pigeon","recipientRef":"c-2","templateRef":"t"`),
			"deliveries[0].fallback.provider", "providers setting"},
		{"fallback address for references only", fb(`"channel":"push","provider":"webhook","recipientRef":"c-2","templateRef":"t","address":"a@example.com"`),
			"deliveries[0].fallback.address", "leave address out"},
		{"fallback within not a duration", fb(`"channel":"push","provider":"webhook","recipientRef":"c-2","templateRef":"t","within":"soon"`),
			"deliveries[0].fallback.within", "duration"},
		{"fallback within too long", fb(`"channel":"push","provider":"webhook","recipientRef":"c-2","templateRef":"t","within":"200h"`),
			"deliveries[0].fallback.within", "1m to 7 days"},
		{"fallback of a fallback", fb(`"channel":"push","provider":"webhook","recipientRef":"c-2","templateRef":"t","fallback":{}`), "fallback", "known fields"},
		{"late policy unknown", head + sms + `}],"late":{"policy":"later"}}`, "late.policy", "send-late"},
		{"send-late without within", head + sms + `}],"late":{"policy":"send-late"}}`, "late.within", "2h"},
		{"send-late within too short", head + sms + `}],"late":{"policy":"send-late","within":"30s"}}`, "late.within", "1m to 7 days"},
		{"escalate with within", head + sms + `}],"late":{"policy":"escalate","within":"1h"}}`, "late.within", "send-late"},
	} {
		_, err := v.ParseJSON([]byte(tc.js))
		var ve *schedule.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Fix, tc.fix) {
			t.Errorf("%s: %v; want field %s and a fix saying %q", tc.name, err, tc.field, tc.fix)
		}
	}
	// Fallbacks count against the limit.
	var ds []string
	for i := range 5 {
		ds = append(ds, `{"channel":"webhook","provider":"p`+string(rune('a'+i))+`","recipientRef":"c","templateRef":"t"`+
			`,"fallback":{"channel":"webhook","provider":"q`+string(rune('a'+i))+`","recipientRef":"c","templateRef":"t"}}`)
	}
	_, err := schedule.Validator{Now: func() time.Time { return now }, Providers: []string{"pa", "pb", "pc", "pd", "pe", "qa", "qb", "qc", "qd", "qe"}}.
		ParseJSON([]byte(head + strings.Join(ds, ",") + `]}`))
	var ve *schedule.ValidationError
	if !errors.As(err, &ve) || ve.Field != "deliveries" || !strings.Contains(ve.Problem, "5 deliveries and 5 fallbacks") {
		t.Errorf("10 deliveries and fallbacks: %v", err)
	}
}

// TestAFallbackIsWrittenHeldAndReadBack: a create writes the fallback's
// held item beside its delivery, the late policy on both and on the
// reminder; a repeat is unchanged, a changed fallback or policy a
// conflict; show, the document and a reschedule know them; cancel ends
// the held fallback.
func TestAFallbackIsWrittenHeldAndReadBack(t *testing.T) {
	b := setup(t)
	r := b.parse(t, withFallback)
	if r.Late != (schedule.LatePolicy{Policy: schedule.LateSendLate, Within: 2 * time.Hour}) || r.Deliveries[0].Fallback == nil ||
		r.Deliveries[0].Fallback.Within != 90*time.Minute {
		t.Fatalf("validated: %+v", r)
	}
	if out, err := b.store.Create(b.ctx, r); err != nil || out != schedule.Created {
		t.Fatalf("create: %v, %v", out, err)
	}
	if out, err := b.store.Create(b.ctx, b.parse(t, withFallback)); err != nil || out != schedule.Unchanged {
		t.Fatalf("the same again: %v, %v", out, err)
	}
	for _, change := range []struct{ from, to, field string }{
		{`"within":"90m"`, `"within":"2h"`, "deliveries"},
		{`"t-push"`, `"t-push-2"`, "deliveries"},
		{`"within":"2h"}}`, `"within":"3h"}}`, "late"},
		{`"late":{"policy":"send-late","within":"2h"}`, `"late":{"policy":"expire"}`, "late"},
	} {
		_, err := b.store.Create(b.ctx, b.parse(t, strings.Replace(withFallback, change.from, change.to, 1)))
		var ce *schedule.ConflictError
		if !errors.As(err, &ce) || ce.Field != change.field {
			t.Errorf("create with %s: %v; want a conflict on %s", change.to, err, change.field)
		}
	}
	primaryKey := message.DeliveryKey{ReminderID: "rem-fb", Channel: "sms", Provider: "webhook"}
	heldKey := message.DeliveryKey{ReminderID: "rem-fb", Channel: "push", Provider: "webhook"}
	p, err := b.ledger.Get(b.ctx, primaryKey)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.ledger.Get(b.ctx, heldKey)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fallback.Key("rem-fb") != heldKey || p.Late != ledger.LateSendLate || !p.ExpiresAt.Equal(r.ExpiresAt.Add(2*time.Hour)) ||
		!p.OnTimeUntil.Equal(r.ExpiresAt) || p.Index == nil {
		t.Errorf("primary: %+v", p)
	}
	if h.Status != ledger.StatusHeld || h.Index != nil || h.FallbackOf.Key("rem-fb") != primaryKey || h.FallbackWithin != 90*time.Minute ||
		!h.ExpiresAt.Equal(r.ExpiresAt) || !h.TTL.Equal(p.TTL) {
		t.Errorf("held fallback: %+v", h)
	}
	v, err := b.store.Show(b.ctx, "rem-fb")
	if err != nil {
		t.Fatal(err)
	}
	if v.Reminder == nil || v.Reminder.Late != r.Late || v.Reminder.Deliveries[0].Fallback == nil || *v.Reminder.Deliveries[0].Fallback != (schedule.Fallback{
		Channel: "push", Provider: "webhook", RecipientRef: "acct-1/d-1", TemplateRef: "t-push", Within: 90 * time.Minute}) {
		t.Errorf("shown reminder: %+v", v.Reminder)
	}
	doc, err := b.store.Document(b.ctx, v, false)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]schedule.DeliveryDocument{}
	for _, d := range doc.Deliveries {
		byKey[d.Key] = d
	}
	if d := byKey[heldKey.String()]; d.Status != schedule.StatusHeld || d.HandedOff != nil || d.Told() != "held: fallback of sms:webhook, taken if it fails" {
		t.Errorf("held fallback's document: %+v", d)
	}
	if d := byKey[primaryKey.String()]; d.Fallback != "push:webhook" || d.Late != schedule.LateSendLate || d.HandedOff == nil {
		t.Errorf("primary's document: %+v", d)
	}
	// A reschedule moves the held fallback too, which stays held.
	moved, err := b.store.Reschedule(b.ctx, "rem-fb", schedule.Times{DueAt: "2026-12-02T09:00:00Z"}, "")
	if err != nil || moved.Refused() || len(moved.Deliveries) != 2 {
		t.Fatalf("reschedule: %+v, %v", moved, err)
	}
	p, _ = b.ledger.Get(b.ctx, primaryKey)
	h, _ = b.ledger.Get(b.ctx, heldKey)
	if !p.ExpiresAt.Equal(moved.ExpiresAt.Add(2*time.Hour)) || !p.OnTimeUntil.Equal(moved.ExpiresAt) ||
		h.Status != ledger.StatusHeld || !h.DueAt.Equal(moved.DueAt) || h.Index != nil {
		t.Errorf("moved: primary expires %v on time until %v; fallback %s due %v", p.ExpiresAt, p.OnTimeUntil, h.Status, h.DueAt)
	}
	again, err := b.store.Reschedule(b.ctx, "rem-fb", schedule.Times{DueAt: "2026-12-02T09:00:00Z"}, "")
	if err != nil || again.Deliveries[0].Moved || again.Deliveries[1].Moved {
		t.Errorf("the same reschedule again moved something: %+v, %v", again, err)
	}
	// Cancel ends the held fallback.
	res, err := b.store.Cancel(b.ctx, "rem-fb", "by the owner")
	if err != nil || len(res) != 2 {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	for _, c := range res {
		if !c.Cancelled || c.Status != schedule.StatusCancelled {
			t.Errorf("cancel of %s: %+v", c.Key, c)
		}
	}
}

// TestAHalfWrittenFallbackIsCompletedOrTombstoned: the held fallback is
// written before its primary, so a create cut off after it (the primary's
// write failing) leaves no primary that could fail without its fallback;
// the same create again writes the primary, and a cancel before that
// writes the primary cancelled and cancels the held fallback.
func TestAHalfWrittenFallbackIsCompletedOrTombstoned(t *testing.T) {
	for _, cancelFirst := range []bool{false, true} {
		b := setup(t)
		r := b.parse(t, withFallback)
		primaryKey := message.DeliveryKey{ReminderID: "rem-fb", Channel: "sms", Provider: "webhook"}
		heldKey := message.DeliveryKey{ReminderID: "rem-fb", Channel: "push", Provider: "webhook"}
		// A create cut off at its second delivery write.
		broken, _ := schedule.New(schedule.Config{Ledger: &failingLedger{bundleLedger: b.ledger, fail: 2}, Clock: b.clk})
		if _, err := broken.Create(b.ctx, r); err == nil {
			t.Fatal("the interrupted create succeeded")
		}
		if _, err := b.ledger.Get(b.ctx, primaryKey); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("the primary exists after the interruption (written before its fallback?): %v", err)
		}
		if h, err := b.ledger.Get(b.ctx, heldKey); err != nil || h.Status != ledger.StatusHeld {
			t.Fatalf("the fallback after the interruption: %+v, %v; want it held", h, err)
		}
		if cancelFirst {
			res, err := b.store.Cancel(b.ctx, "rem-fb", "")
			if err != nil || len(res) != 2 {
				t.Fatalf("cancel: %+v, %v", res, err)
			}
			for _, k := range []message.DeliveryKey{primaryKey, heldKey} {
				if d, err := b.ledger.Get(b.ctx, k); err != nil || d.Status != ledger.StatusCancelled {
					t.Errorf("%s after a cancel: %+v, %v", k, d, err)
				}
			}
			continue
		}
		if out, err := b.store.Create(b.ctx, r); err != nil || out != schedule.Completed {
			t.Fatalf("create again: %v, %v", out, err)
		}
		if p, err := b.ledger.Get(b.ctx, primaryKey); err != nil || p.Status != ledger.StatusPending || p.Fallback.Key("rem-fb") != heldKey {
			t.Errorf("the primary after the create again: %+v, %v", p, err)
		}
		if h, err := b.ledger.Get(b.ctx, heldKey); err != nil || h.Status != ledger.StatusHeld {
			t.Errorf("the fallback after the create again: %+v, %v", h, err)
		}
	}
}

// TestAFallbackUnderEscalateEscalatesToo: under escalate the held fallback
// carries the policy (its own expiry, once taken, escalates); under
// send-late it does not (its bound is its own).
func TestAFallbackUnderEscalateEscalatesToo(t *testing.T) {
	b := setup(t)
	heldKey := message.DeliveryKey{ReminderID: "rem-fb", Channel: "push", Provider: "webhook"}
	esc := strings.Replace(withFallback, `"late":{"policy":"send-late","within":"2h"}`, `"late":{"policy":"escalate"}`, 1)
	if _, err := b.store.Create(b.ctx, b.parse(t, esc)); err != nil {
		t.Fatal(err)
	}
	if h, err := b.ledger.Get(b.ctx, heldKey); err != nil || h.Late != ledger.LateEscalate || h.Status != ledger.StatusHeld {
		t.Errorf("held fallback under escalate: %+v, %v", h, err)
	}
	b = setup(t)
	if _, err := b.store.Create(b.ctx, b.parse(t, withFallback)); err != nil {
		t.Fatal(err)
	}
	if h, err := b.ledger.Get(b.ctx, heldKey); err != nil || h.Late != "" {
		t.Errorf("held fallback under send-late: late %q, %v", h.Late, err)
	}
}
