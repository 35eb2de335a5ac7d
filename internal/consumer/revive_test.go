package consumer_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/provider"
)

// The operator's revive from the ledger (nudge ledger revive) with the
// delivery's DLQ copy still there: whoever else redrives the copy, the
// console or nudge dlq redrive, the delivery is sent once. The ledger's
// conditional claim decides: a revived delivery is live, so every copy of
// its message, the enqueue's and the DLQ's alike, is claimed as a live
// delivery's is (one attempt at a time, a duplicate once sent), and a copy
// of a dead-lettering older than the revive revives nothing.

var byOps = ledger.Revival{By: "ops@example", Reason: "provider fixed"}

// deadWithACopy schedules id, lets the provider's 400 dead-letter it (the
// ledger dead, its copy in the DLQ) and revives it from the ledger, as the
// operator would.
func (b *bundle) deadWithACopy(id string) message.DeliveryKey {
	b.t.Helper()
	k := b.schedule(id, b.clk.Now())
	if _, resp := b.poll(1); failures(resp) != 0 {
		b.t.Fatal(resp)
	}
	if d := b.delivery(k); d.Status != ledger.StatusDead {
		b.t.Fatalf("not dead-lettered: %+v", d)
	}
	return k
}

func (b *bundle) revive(k message.DeliveryKey) {
	b.t.Helper()
	d, err := b.ledger.Revive(b.ctx, b.delivery(k), byOps)
	if err != nil || d.Status != ledger.StatusPending {
		b.t.Fatalf("revive: %+v, %v", d, err)
	}
}

// holdSend, once armed, holds a send until another record of the batch has
// finished: the two copies of one delivery in one batch then overlap as
// they can in production (one sends while the other tries its claim),
// whatever the goroutines' scheduling. Without it the batch's two records
// may run one after the other, and the second copy finds the delivery
// sent rather than leased: a loaded CI machine did (an outcome as correct,
// but not the path this test is for).
type holdSend struct {
	armed    atomic.Bool
	finished chan struct{}
	once     sync.Once
}

func newHoldSend() *holdSend { return &holdSend{finished: make(chan struct{})} }

func (h *holdSend) wrap(p provider.Provider) provider.Provider {
	return provider.Func(func(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
		if h.armed.Load() {
			select {
			case <-h.finished:
			case <-time.After(10 * time.Second): // the other record never ran beside this one: the test's check says so
			}
		}
		return p.Send(ctx, req, key)
	})
}

func (h *holdSend) middleware(next batch.Handler) batch.Handler {
	return batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
		err := next.Handle(ctx, rec)
		if h.armed.Load() {
			h.once.Do(func() { close(h.finished) })
		}
		return err
	})
}

// TestARevivedDeliveryIsSentOnceWhenTheConsoleRedrivesItsCopy: revived,
// then the enqueue's message and the console's redrive of the DLQ copy
// arrive in one batch: one claims and sends, the other finds it leased,
// and on its retry, sent.
func TestARevivedDeliveryIsSentOnceWhenTheConsoleRedrivesItsCopy(t *testing.T) {
	hold := newHoldSend()
	b := setup(t, options{script: "rem-rv-80=400", concurrency: 2, wrapSend: hold.wrap, middleware: []batch.Middleware{hold.middleware}}) // the first request fails, later ones succeed
	k := b.deadWithACopy("rem-rv-80")
	b.revive(k)
	hold.armed.Store(true)
	b.publish(b.body("rem-rv-80", b.delivery(k).DueAt)) // the enqueue hands the revived delivery off
	if moved := b.consoleRedrive(); len(moved) != 1 {
		t.Fatalf("the DLQ held %d messages, want the copy", len(moved))
	}
	ev, resp := b.poll(2)
	if failures(resp) != 1 || b.sink.Sends(k.String()) != 1 || b.delivery(k).Status != ledger.StatusSent {
		t.Fatalf("the batch of both copies: failures %v, sends %d, delivery %+v", resp.BatchItemFailures, b.sink.Sends(k.String()), b.delivery(k))
	}
	hold.armed.Store(false)
	b.expireVisibility(ev, resp)
	if _, resp := b.poll(1); failures(resp) != 0 {
		t.Fatalf("the leased copy's retry: %v", resp.BatchItemFailures)
	}
	if got := b.sink.Sends(k.String()); got != 1 || b.sink.Requests(k.String()) != 2 {
		t.Fatalf("sent %d times in %d requests, want once after the dead-lettered one", got, b.sink.Requests(k.String()))
	}
	if len(b.dlq()) != 0 {
		t.Fatal("the DLQ is not empty")
	}
}

// TestARevivedDeliveryIsSentOnceWhenTheCLIRedrivesItsCopy: nudge dlq
// redrive, reviewed before the revive and applied after, finds the
// delivery no longer dead and leaves its copy; the enqueue's message sends
// it; a redrive of the copy afterwards (--include-settled) is a duplicate.
// A redrive reviewed after the revive moves the copy as a live delivery's,
// without a ledger mark, and only one of the two copies sends.
func TestARevivedDeliveryIsSentOnceWhenTheCLIRedrivesItsCopy(t *testing.T) {
	b := setup(t, options{script: "rem-rv-81=400;rem-rv-82=400"})
	r, err := redrive.New(redrive.Config{Queue: b.sqs, DLQURL: b.q.DLQURL, TargetURL: b.q.WorkURL, Ledger: b.ledger, By: "ops@example"})
	if err != nil {
		t.Fatal(err)
	}

	k := b.deadWithACopy("rem-rv-81")
	sel, err := r.Select(b.ctx, redrive.Filter{Max: 5})
	if err != nil || len(sel.Chosen) != 1 {
		t.Fatalf("select: %+v, %v", sel, err)
	}
	b.revive(k) // while the redrive is under review
	res, err := r.Move(b.ctx, sel, nil)
	if err != nil || res.Moved != 0 || res.Skipped != 1 {
		t.Fatalf("the redrive of a delivery revived meanwhile: %+v, %v", res, err)
	}
	b.publish(b.body("rem-rv-81", b.delivery(k).DueAt))
	if _, resp := b.poll(1); failures(resp) != 0 || b.delivery(k).Status != ledger.StatusSent {
		t.Fatalf("the enqueue's message: %v, %+v", resp.BatchItemFailures, b.delivery(k))
	}
	sel, err = r.Select(b.ctx, redrive.Filter{Max: 5, IncludeSettled: true})
	if err != nil || len(sel.Chosen) != 1 {
		t.Fatalf("select the settled copy: %+v, %v", sel, err)
	}
	if res, err := r.Move(b.ctx, sel, nil); err != nil || res.Moved != 1 {
		t.Fatalf("move the settled copy: %+v, %v", res, err)
	}
	if _, resp := b.poll(1); failures(resp) != 0 {
		t.Fatalf("the settled copy: %v", resp.BatchItemFailures)
	}
	if got := b.sink.Sends(k.String()); got != 1 {
		t.Fatalf("rem-rv-81 sent %d times, want once", got)
	}

	k = b.deadWithACopy("rem-rv-82")
	b.revive(k)
	sel, err = r.Select(b.ctx, redrive.Filter{Max: 5})
	if err != nil || len(sel.Chosen) != 1 || sel.Chosen[0].Ledger != ledger.StatusPending {
		t.Fatalf("select after the revive: %+v, %v", sel, err)
	}
	if res, err := r.Move(b.ctx, sel, nil); err != nil || res.Moved != 1 || res.Outcomes[0].Marked {
		t.Fatalf("the redrive of a revived delivery: %+v, %v", res, err)
	}
	b.publish(b.body("rem-rv-82", b.delivery(k).DueAt))
	for range 2 {
		ev, resp := b.poll(1)
		b.expireVisibility(ev, resp)
	}
	if got, d := b.sink.Sends(k.String()), b.delivery(k); got != 1 || d.Status != ledger.StatusSent {
		t.Fatalf("rem-rv-82 sent %d times, delivery %+v; want once", got, d)
	}
	if len(b.dlq()) != 0 {
		t.Fatal("the DLQ is not empty")
	}
}

// TestACopyOlderThanTheReviveRevivesNothing: revived, the delivery fails
// again and is dead-lettered again (a second copy in the DLQ); the console
// redrives both: the first copy, of the dead-lettering before the revive,
// is refused; the second revives it once, and it is sent once.
func TestACopyOlderThanTheReviveRevivesNothing(t *testing.T) {
	b := setup(t, options{script: "rem-rv-83=400,400"})
	k := b.deadWithACopy("rem-rv-83")
	b.revive(k)
	b.publish(b.body("rem-rv-83", b.delivery(k).DueAt))
	if _, resp := b.poll(1); failures(resp) != 0 || b.delivery(k).Status != ledger.StatusDead || b.delivery(k).Attempts != 2 {
		t.Fatalf("the revived delivery's second 400: %v, %+v", resp.BatchItemFailures, b.delivery(k))
	}
	if moved := b.consoleRedrive(); len(moved) != 2 {
		t.Fatalf("the DLQ held %d messages, want both copies", len(moved))
	}
	for range 2 {
		if _, resp := b.poll(1); failures(resp) != 0 {
			t.Fatalf("a redriven copy: %v", resp.BatchItemFailures)
		}
	}
	if got, d := b.sink.Sends(k.String()), b.delivery(k); got != 1 || b.sink.Requests(k.String()) != 3 || d.Status != ledger.StatusSent || d.Attempts != 3 {
		t.Fatalf("sent %d times in %d requests, delivery %+v; want once, after two 400s", got, b.sink.Requests(k.String()), d)
	}
}

// TestAReviveReviewedBeforeAConsoleRedriveSendsNothingMore: the operator
// reads the dead delivery for a revive; before it is applied, a console
// redrive sends the DLQ copy; the revive, conditional on the delivery
// still being dead as read, writes nothing, so no later message sends it
// again.
func TestAReviveReviewedBeforeAConsoleRedriveSendsNothingMore(t *testing.T) {
	b := setup(t, options{script: "rem-rv-84=400"})
	k := b.deadWithACopy("rem-rv-84")
	read := b.delivery(k) // the revive's plan
	b.consoleRedrive()
	if _, resp := b.poll(1); failures(resp) != 0 || b.delivery(k).Status != ledger.StatusSent {
		t.Fatalf("the console's copy: %v, %+v", resp.BatchItemFailures, b.delivery(k))
	}
	if d, err := b.ledger.Revive(b.ctx, read, byOps); err == nil {
		t.Fatalf("the revive from a read before the send wrote %+v", d)
	}
	if d := b.delivery(k); d.Status != ledger.StatusSent || d.Index != nil {
		t.Fatalf("after the refused revive: %+v", d)
	}
	b.publish(b.body("rem-rv-84", read.DueAt)) // any later copy
	if _, resp := b.poll(1); failures(resp) != 0 {
		t.Fatalf("a later copy: %v", resp.BatchItemFailures)
	}
	if got := b.sink.Sends(k.String()); got != 1 {
		t.Fatalf("sent %d times, want once", got)
	}
}
