package enqueue_test

import (
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// TestARunExtendsTheSeriesWhoseTimeHasCome: a daily series created now
// has its first ten occurrences; as days pass, each run creates the next
// ones (each once, whichever run), hands them off when due, and a
// cancelled series gets none. In memory, and in DynamoDB Local (its own
// index partition, the enqueue's role's calls).
func TestARunExtendsTheSeriesWhoseTimeHasCome(t *testing.T) {
	for _, local := range []bool{false, true} {
		name := "memory"
		if local {
			name = "dynamodb"
		}
		t.Run(name, func(t *testing.T) {
			var b *bundle
			if local {
				b = setupLocal(t, 2)
			} else {
				b = setup(t, 2)
			}
			r, err := b.store.Validator().ParseJSON([]byte(`{"id":"daily-e","accountRef":"acct-1","dueLocal":"` +
				b.clk.Now().Add(2*time.Hour).In(time.UTC).Format("2006-01-02T15:04") + `","timeZone":"UTC","recur":"FREQ=DAILY",` +
				`"deliveries":[{"channel":"email","provider":"webhook","recipientRef":"acct-1/c","templateRef":"t"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.store.Create(b.ctx, r); err != nil {
				t.Fatal(err)
			}
			e := b.enqueuer(t, func(c *enqueue.Config) { c.Series, c.SeriesLedger = b.store, b.ledger.(enqueue.SeriesLedger) })
			if rep := b.run(t, e); rep.OccurrencesCreated != 0 {
				t.Fatalf("a run at once: %+v; want nothing to extend (ten created, none due)", rep)
			}
			occurrence := func(d int) message.DeliveryKey {
				at := r.DueAt.Add(time.Duration(d) * 24 * time.Hour)
				return message.DeliveryKey{ReminderID: "daily-e." + at.Format("20060102T1504"), Channel: "email", Provider: "webhook"}
			}
			if _, err := b.ledger.Get(b.ctx, occurrence(10)); err == nil {
				t.Fatal("the eleventh occurrence exists before the first is due")
			}
			b.clk.Advance(3 * time.Hour) // the first is due
			rep := b.run(t, e)
			if rep.SeriesExtended != 1 || rep.OccurrencesCreated != 1 {
				t.Fatalf("a run once the first is due: %+v; want the eleventh created", rep)
			}
			if _, err := b.ledger.Get(b.ctx, occurrence(10)); err != nil {
				t.Fatalf("the eleventh: %v", err)
			}
			if rep := b.run(t, e); rep.SeriesExtended != 0 {
				t.Fatalf("a second run: %+v; want nothing due for extension", rep)
			}
			if _, err := b.store.Cancel(b.ctx, "daily-e", "stop"); err != nil {
				t.Fatal(err)
			}
			b.clk.Advance(5 * 24 * time.Hour)
			if rep := b.run(t, e); rep.OccurrencesCreated != 0 {
				t.Fatalf("a run after the cancel: %+v", rep)
			}
			if d, err := b.ledger.Get(b.ctx, occurrence(10)); err != nil || d.Status != ledger.StatusCancelled {
				t.Fatalf("the eleventh after the cancel: %+v, %v", d, err)
			}
		})
	}
}
