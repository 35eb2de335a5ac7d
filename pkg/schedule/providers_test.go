package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

const sesReminder = `{"id":"rem-mail","accountRef":"acct-1","dueAt":"2026-12-01T10:00:00Z","metadata":{"plan":"Pro"},
"deliveries":[{"channel":"email","provider":"ses","recipientRef":"acct-1/contact-2","templateRef":"renewal-notice","address":"ana@example.com"}]}`

func TestTheIntakeRefusesWhatTheStageOrTheProviderCannotSend(t *testing.T) {
	t.Parallel()
	v := validator()
	v.Providers = []string{"webhook", "ses"}
	for _, tc := range []struct {
		name, js, field, fix string
	}{
		{"a provider the stage does not run", strings.Replace(good, `"provider":"webhook"`, `"provider":"sns"`, 1), "deliveries[0].provider", "webhook, ses"},
		{"ses without an address", strings.Replace(sesReminder, `,"address":"ana@example.com"`, "", 1), "deliveries[0].address", "e-mail address"},
		{"ses to a malformed address", strings.Replace(sesReminder, "ana@example.com", "Ana <ana@example.com>", 1), "deliveries[0].address", "plain address"},
		{"ses on another channel", strings.Replace(sesReminder, `"channel":"email"`, `"channel":"sms"`, 1), "deliveries[0].channel", `channel "email"`},
		{"ses with a template SES cannot name", strings.Replace(sesReminder, "renewal-notice", "renewal notice!", 1), "deliveries[0].templateRef", "templates/email"},
		{"the webhook with an address", strings.Replace(good, `"templateRef":"renewal-v3"`, `"templateRef":"renewal-v3","address":"ana@example.com"`, 1), "deliveries[0].address", "recipientRef"},
	} {
		_, err := v.ParseJSON([]byte(tc.js))
		var ve *schedule.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Fix, tc.fix) {
			t.Errorf("%s: %v; want field %s with a fix mentioning %q", tc.name, err, tc.field, tc.fix)
			continue
		}
		if strings.Contains(err.Error(), "ana@example.com") {
			t.Errorf("%s: the error quotes the address: %v", tc.name, err)
		}
	}
}

type templates map[string][]string

func (t templates) TemplateVariables(_ context.Context, ref string) ([]string, bool, error) {
	vars, ok := t[ref]
	return vars, ok, nil
}

func TestAnSESDeliveryKeepsItsAddressOnTheDeliveryItemAlone(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(now)
	l, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: l, Clock: clk, Doors: map[string]provider.Door{ses.Name: ses.NewDoor("", templates{"renewal-notice": {"plan"}})}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Validator().ParseJSON([]byte(sesReminder))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := store.Create(context.Background(), r); err != nil || out != schedule.Created {
		t.Fatalf("Create = %s, %v", out, err)
	}
	d, err := l.Get(context.Background(), r.Key(r.Deliveries[0]))
	if err != nil || d.Address != "ana@example.com" || d.TemplateData["plan"] != "Pro" {
		t.Fatalf("delivery %+v, %v; want the address and the metadata as template data", d, err)
	}
	// The reminder item has no field for an address
	// (ledger.ReminderDelivery); the reminder read back has none.
	if stored, err := l.ReadReminder(context.Background(), "rem-mail"); err != nil || stored.Reminder == nil {
		t.Fatalf("the reminder item: %+v, %v", stored.Reminder, err)
	}
	v, err := store.Show(context.Background(), "rem-mail")
	if err != nil || v.Reminder == nil || v.Reminder.Deliveries[0].Address != "" {
		t.Fatalf("the reminder read back holds %+v (%v); want no address on it", v.Reminder, err)
	}
	// The same again is unchanged; another address is a conflict that
	// names the field and shows neither address whole.
	if out, err := store.Create(context.Background(), r); err != nil || out != schedule.Unchanged {
		t.Fatalf("again: %s, %v", out, err)
	}
	other, _ := store.Validator().ParseJSON([]byte(strings.Replace(sesReminder, "ana@example.com", "bob@example.com", 1)))
	_, err = store.Create(context.Background(), other)
	var ce *schedule.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Field, "address") || strings.Contains(err.Error(), "ana@") || strings.Contains(err.Error(), "bob@") {
		t.Fatalf("another address: %v; want a conflict on the address with both masked", err)
	}
}

func TestAnSESDeliveryWithATemplateNotDeployedIsRefusedAtIntake(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(now)
	l, _ := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	store, _ := schedule.New(schedule.Config{Ledger: l, Clock: clk, Doors: map[string]provider.Door{ses.Name: ses.NewDoor("", templates{})}})
	r, err := store.Validator().ParseJSON([]byte(sesReminder))
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Create(context.Background(), r)
	var ve *schedule.ValidationError
	if !errors.As(err, &ve) || ve.Field != "deliveries[0].templateRef" || !strings.Contains(ve.Fix, "templates/email") {
		t.Fatalf("Create = %v; want the template refused with the fix", err)
	}
	if stored, _ := l.ReadReminder(context.Background(), "rem-mail"); !stored.Empty() {
		t.Fatal("a refused reminder left items behind")
	}
}

func TestAnSESDeliveryWithoutTheDataItsTemplateRendersIsRefused(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(now)
	l, _ := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	store, _ := schedule.New(schedule.Config{Ledger: l, Clock: clk, Doors: map[string]provider.Door{ses.Name: ses.NewDoor("", templates{"renewal-notice": {"plan", "renewsOn"}})}})
	r, err := store.Validator().ParseJSON([]byte(sesReminder))
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Create(context.Background(), r)
	var ve *schedule.ValidationError
	if !errors.As(err, &ve) || ve.Field != "metadata" || !strings.Contains(ve.Problem, "lacks renewsOn") || !strings.Contains(ve.Fix, "--meta renewsOn=") {
		t.Fatalf("Create = %v; want the missing variable named with the fix", err)
	}
}

func TestMaskAddress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"ana@example.com": "a•••@example.com", "": "", "xy": "x•••", "a@example.com": "•••@example.com", "@example.com": "•••@example.com"} {
		if got := ledger.MaskAddress(in); got != want {
			t.Errorf("MaskAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
