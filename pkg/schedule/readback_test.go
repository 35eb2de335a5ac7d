package schedule_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestAReminderReadsBackAsItWasCreated: through the ledger (in memory, and
// in DynamoDB Local when the stand-ins run), a reminder with every field
// set reads back as it was created: its times to the millisecond, its
// metadata, its creator, its deliveries; the address is on its delivery
// item alone, and the reminder read back has none.
func TestAReminderReadsBackAsItWasCreated(t *testing.T) {
	t.Parallel()
	const js = `{"id":"rem-rt","accountRef":"acct-9","dueAt":"2026-12-01T09:00:00.123Z","expiresAt":"2026-12-02T10:30:15.456+01:00","timeZone":"Asia/Kathmandu",
"metadata":{"plan":"Pro","tier":"2"},"deliveries":[
{"channel":"email","provider":"ses","recipientRef":"acct-9/contact-1","templateRef":"renewal-notice","address":"ana@example.com"},
{"channel":"sms","provider":"webhook","recipientRef":"acct-9/contact-2","templateRef":"renewal-sms"}]}`
	for _, name := range []string{"memory", "dynamodb"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := clock.NewFake(now)
			var l schedule.Ledger
			if name == "memory" {
				m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				l = m
			} else {
				db := standintest.DynamoDB(t)
				d, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				l = d
			}
			doors := map[string]provider.Door{ses.Name: ses.NewDoor("", templates{"renewal-notice": {"plan"}})}
			store, err := schedule.New(schedule.Config{Ledger: l, Clock: clk, Doors: doors})
			if err != nil {
				t.Fatal(err)
			}
			r, err := store.Validator().ParseJSON([]byte(js))
			if err != nil {
				t.Fatal(err)
			}
			if due := time.Date(2026, 12, 1, 9, 0, 0, 123_000_000, time.UTC); !r.DueAt.Equal(due) {
				t.Fatalf("dueAt parsed as %v", r.DueAt)
			}
			caller := schedule.Caller{Principal: "arn:aws:sts::123456789012:assumed-role/billing/session"}
			if out, err := store.CreateAs(ctx, caller, r); err != nil || out != schedule.Created {
				t.Fatalf("create: %s, %v", out, err)
			}
			v, err := store.ShowAs(ctx, caller, r.ID)
			if err != nil || v.Reminder == nil {
				t.Fatalf("show: %+v, %v", v, err)
			}
			got, want := *v.Reminder, r
			want.CreatedBy = caller.Principal
			want.Deliveries = append([]schedule.Delivery(nil), r.Deliveries...)
			for i := range want.Deliveries {
				want.Deliveries[i].Address = ""
			}
			if !got.DueAt.Equal(want.DueAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
				t.Errorf("times read back %v–%v; want %v–%v", got.DueAt, got.ExpiresAt, want.DueAt, want.ExpiresAt)
			}
			got.DueAt, got.ExpiresAt = want.DueAt, want.ExpiresAt
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read back:\n got  %+v\n want %+v", got, want)
			}
			addresses := map[string]string{}
			for _, d := range v.Deliveries {
				addresses[d.Channel] = d.Address
			}
			if want := map[string]string{"email": "ana@example.com", "sms": ""}; !reflect.DeepEqual(addresses, want) {
				t.Errorf("the delivery items' addresses: %v; want %v", addresses, want)
			}
			// The same reminder again compares equal with what was read.
			if out, err := store.CreateAs(ctx, caller, r); err != nil || out != schedule.Unchanged {
				t.Errorf("the same again: %s, %v", out, err)
			}
		})
	}
}
