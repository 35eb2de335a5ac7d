package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// The provider's feedback (RecordFeedback): recorded once by its id, on a
// delivery in any status and without changing it; the standing feedback
// by weight, then provider time, whatever the order of arrival.

// SES-like events of one message, at provider times after t0.
var (
	fbSend  = ledger.Feedback{Kind: ledger.FeedbackSentByProvider, At: t0.Add(time.Second), ID: "msg-1:Send:2026-11-30T09:00:01.000Z", MessageID: "msg-1"}
	fbDelay = ledger.Feedback{Kind: ledger.FeedbackDelayed, Detail: "TransientCommunicationFailure", At: t0.Add(2 * time.Second),
		ID: "msg-1:DeliveryDelay:2", MessageID: "msg-1"}
	fbSoft      = ledger.Feedback{Kind: ledger.FeedbackBounced, Detail: "Transient/MailboxFull", At: t0.Add(3 * time.Second), ID: "fb-soft", MessageID: "msg-1"}
	fbDelivered = ledger.Feedback{Kind: ledger.FeedbackDelivered, Detail: "250", At: t0.Add(4 * time.Second), ID: "msg-1:Delivery:4", MessageID: "msg-1"}
	fbHard      = ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General", At: t0.Add(5 * time.Second),
		ID: "fb-hard", MessageID: "msg-1"}
	fbComplaint = ledger.Feedback{Kind: ledger.FeedbackComplained, Detail: "abuse", At: t0.Add(time.Hour), ID: "fb-complaint", MessageID: "msg-1"}
)

// sent creates a delivery, claims it and completes it with receipt
// msg-0: another message than the events' (a send before a redrive, say),
// so that their Send event is recorded, not redundant.
func (b bundle) sent(t *testing.T, id string) ledger.Delivery {
	t.Helper()
	c, err := b.claim("tok-"+id, b.create(t, id))
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.l.Complete(context.Background(), c, "msg-0")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (b bundle) feedback(t *testing.T, k message.DeliveryKey, f ledger.Feedback) ledger.Delivery {
	t.Helper()
	d, err := b.l.RecordFeedback(context.Background(), k, f)
	if err != nil {
		t.Fatalf("feedback %s: %v", f.Note(), err)
	}
	return d
}

// stands checks d's standing feedback is f's (its kind, detail, time,
// permanence and message id).
func stands(t *testing.T, what string, d ledger.Delivery, f ledger.Feedback) {
	t.Helper()
	g := d.Feedback
	if g.Kind != f.Kind || g.Detail != f.Detail || !g.At.Equal(f.At) || g.Permanent != f.Permanent || g.MessageID != f.MessageID || g.ID != "" {
		t.Fatalf("%s: standing feedback %+v, want %s at %s", what, g, f.Note(), ledger.Format(f.At))
	}
	if d.Failed() != f.Failed() {
		t.Fatalf("%s: Failed() = %v with %s standing", what, d.Failed(), f.Note())
	}
}

func feedbackEntries(d ledger.Delivery) []ledger.Entry {
	return slices.DeleteFunc(slices.Clone(d.History), func(e ledger.Entry) bool { return !e.Feedback })
}

// testFeedbackIsRecordedOnceByItsID: a feedback adds an entry (the status
// unchanged, the note naming it) and stands; nothing else changes; its
// repeat is refused with ErrFeedbackSeen and the delivery as it is.
func testFeedbackIsRecordedOnceByItsID(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.sent(t, "rem-fb-1")
	b.clk.Advance(time.Minute)
	got := b.feedback(t, d.Key(), fbSend)
	stands(t, "send", got, fbSend)
	if got.Status != ledger.StatusSent || !got.UpdatedAt.Equal(d.UpdatedAt) || !got.SentAt.Equal(d.SentAt) || got.Receipt != "msg-0" || !got.TTL.Equal(d.TTL) ||
		got.Index != nil || got.Attempts != 1 {
		t.Fatalf("feedback changed more than its own: %+v, was %+v", got, d)
	}
	last := got.History[len(got.History)-1]
	if len(got.History) != len(d.History)+1 || last.Status != ledger.StatusSent || !last.Feedback ||
		last.Note != "sent-by-provider" || last.At != ledger.Format(b.clk.Now()) {
		t.Fatalf("history %+v; want one entry more, status sent, naming the feedback", got.History)
	}
	if len(got.Transitions()) != len(d.History) {
		t.Fatalf("Transitions() = %+v, want the transitions alone", got.Transitions())
	}
	_, err := b.l.RecordFeedback(ctx, d.Key(), fbSend)
	re := refusal(t, err, ledger.ErrFeedbackSeen)
	if len(re.Current.History) != len(got.History) || re.Current.Feedback.Kind != ledger.FeedbackSentByProvider {
		t.Fatalf("the repeat's refusal carries %+v", re.Current)
	}
	// The same event told again with another message id is still a repeat:
	// the id decides.
	again := fbSend
	again.MessageID = "msg-other"
	refusal(t, func() error { _, err := b.l.RecordFeedback(ctx, d.Key(), again); return err }(), ledger.ErrFeedbackSeen)

	got = b.feedback(t, d.Key(), fbDelivered)
	stands(t, "delivered", got, fbDelivered)
	read, err := b.l.Get(ctx, d.Key())
	if err != nil || !slices.Equal(read.FeedbackSeen, got.FeedbackSeen) || len(read.FeedbackSeen) != 2 {
		t.Fatalf("read back %+v, %v; want what the write returned", read, err)
	}
	stands(t, "read back", read, fbDelivered)
	if got.Failed() {
		t.Fatal("a delivered e-mail reads as failed")
	}
}

// testAFailingFeedbackIsNeverReplacedByAnInformationalOne: a hard bounce
// stands over a delivery that arrives after it, even one the provider
// timed later; the latter is in the history, saying what stands.
func testAFailingFeedbackIsNeverReplacedByAnInformationalOne(t *testing.T, b bundle) {
	d := b.sent(t, "rem-fb-2")
	stands(t, "hard bounce", b.feedback(t, d.Key(), fbHard), fbHard)
	later := fbDelivered
	later.At, later.ID = fbHard.At.Add(time.Minute), "msg-1:Delivery:later"
	got := b.feedback(t, d.Key(), later)
	stands(t, "then a later delivery", got, fbHard)
	if last := got.History[len(got.History)-1]; !last.Feedback || last.Note != "delivered 250; bounced Permanent/General stands" {
		t.Fatalf("the history's last entry is %+v; want the delivery, saying the bounce stands", last)
	}
	if !got.Failed() || got.Status != ledger.StatusSent {
		t.Fatalf("%+v: want sent and Failed()", got)
	}
	// A transient bounce is informational: a delivery after it replaces it.
	soft := b.sent(t, "rem-fb-2b")
	stands(t, "soft bounce", b.feedback(t, soft.Key(), fbSoft), fbSoft)
	stands(t, "then delivered", b.feedback(t, soft.Key(), fbDelivered), fbDelivered)
}

// testTheOrderOfArrivalDoesNotDecide: the same events in any order leave
// the same standing feedback (the failing one, and of two failing ones the
// later by provider time), every id remembered and every event in the
// history.
func testTheOrderOfArrivalDoesNotDecide(t *testing.T, b bundle) {
	events := []ledger.Feedback{fbSend, fbDelay, fbSoft, fbDelivered, fbHard, fbComplaint}
	orders := [][]int{{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {4, 0, 5, 1, 3, 2}, {3, 5, 0, 4, 2, 1}, {2, 3, 1, 0, 5, 4}}
	for n, order := range orders {
		d := b.sent(t, fmt.Sprint("rem-fb-order-", n))
		var got ledger.Delivery
		for _, i := range order {
			b.clk.Advance(time.Second)
			got = b.feedback(t, d.Key(), events[i])
		}
		stands(t, fmt.Sprint("order ", order), got, fbComplaint)
		for _, e := range events {
			if !slices.Contains(got.FeedbackSeen, ledger.FeedbackDigest(e.ID)) {
				t.Fatalf("order %v: %s is not remembered: %v", order, e.Note(), got.FeedbackSeen)
			}
		}
		// The suite's history limit is 6: the last two transitions (sending,
		// sent) and the last four feedback entries.
		if tr := got.Transitions(); len(got.History) != 6 || len(tr) != 2 || tr[1].Status != ledger.StatusSent || len(feedbackEntries(got)) != 4 {
			t.Fatalf("order %v: history %+v", order, got.History)
		}
	}
	// Informational ones alone: the latest by provider time, whatever came
	// last; at the same time, the kind later in FeedbackKinds.
	for n, order := range [][]int{{0, 1, 3}, {3, 1, 0}, {1, 3, 0}} {
		d := b.sent(t, fmt.Sprint("rem-fb-info-", n))
		var got ledger.Delivery
		for _, i := range order {
			got = b.feedback(t, d.Key(), events[i])
		}
		stands(t, fmt.Sprint("informational ", order), got, fbDelivered)
	}
	tie := fbSend
	tie.At, tie.ID = fbDelivered.At, "msg-1:Send:tie"
	for n, pair := range [][]ledger.Feedback{{tie, fbDelivered}, {fbDelivered, tie}} {
		d := b.sent(t, fmt.Sprint("rem-fb-tie-", n))
		b.feedback(t, d.Key(), pair[0])
		stands(t, "a tie", b.feedback(t, d.Key(), pair[1]), fbDelivered)
	}
}

// testAnOlderFeedbackArrivingLateIsRecordedButDoesNotStand: a hard bounce
// timed before a complaint, arriving after it, is in the history and
// remembered (its repeat refused); the complaint stands.
func testAnOlderFeedbackArrivingLateIsRecordedButDoesNotStand(t *testing.T, b bundle) {
	d := b.sent(t, "rem-fb-late")
	b.feedback(t, d.Key(), fbComplaint)
	got := b.feedback(t, d.Key(), fbHard)
	stands(t, "complaint, then an older hard bounce", got, fbComplaint)
	if last := got.History[len(got.History)-1]; !last.Feedback || !strings.HasPrefix(last.Note, "bounced Permanent/General; complained") {
		t.Fatalf("the late bounce's entry is %+v", last)
	}
	_, err := b.l.RecordFeedback(context.Background(), d.Key(), fbHard)
	refusal(t, err, ledger.ErrFeedbackSeen)
	// The same for two informational ones.
	d = b.sent(t, "rem-fb-late-2")
	b.feedback(t, d.Key(), fbDelivered)
	stands(t, "delivered, then an older send", b.feedback(t, d.Key(), fbSend), fbDelivered)
}

// testFeedbackForAnUnknownDeliveryIsNotFound: purged, expired by its TTL or
// never ours, all look alike; and a feedback without its id or time is
// refused before anything is read.
func testFeedbackForAnUnknownDeliveryIsNotFound(t *testing.T, b bundle) {
	ctx := context.Background()
	k := message.DeliveryKey{ReminderID: "rem-fb-none", Channel: "email", Provider: "ses"}
	_, err := b.l.RecordFeedback(ctx, k, fbSend)
	refusal(t, err, ledger.ErrNotFound)
	d := b.sent(t, "rem-fb-bad")
	for _, f := range []ledger.Feedback{
		{Kind: ledger.FeedbackDelivered, At: t0},
		{Kind: ledger.FeedbackDelivered, ID: "x"},
		{Kind: "opened", ID: "x", At: t0},
		{Kind: ledger.FeedbackComplained, Permanent: true, ID: "x", At: t0},
	} {
		_, err := b.l.RecordFeedback(ctx, d.Key(), f)
		var re *ledger.RefusedError
		if err == nil || errors.As(err, &re) {
			t.Errorf("feedback %+v: %v; want it refused as unfit", f, err)
		}
	}
}

// testFeedbackLeavesAnUnsentDeliveryAsItIs: a delivery being sent, being
// retried, dead as ambiguous or ended with an unended attempt takes the
// feedback and keeps its status, its lease and what its history tells of
// its attempts.
func testFeedbackLeavesAnUnsentDeliveryAsItIs(t *testing.T, b bundle) {
	ctx := context.Background()
	// Sending: the Send event can arrive before the consumer records the
	// send; the holder's Complete still holds.
	c, err := b.claim("tok-s", b.create(t, "rem-fb-sending"))
	if err != nil {
		t.Fatal(err)
	}
	got := b.feedback(t, c.Key(), fbSend)
	if got.Status != ledger.StatusSending || got.ClaimToken != "tok-s" || !got.LeaseUntil.Equal(c.LeaseUntil) || got.LapsedLeaseTaken() {
		t.Fatalf("sending, after feedback: %+v", got)
	}
	if sent, err := b.l.Complete(ctx, c, "msg-1"); err != nil || sent.Status != ledger.StatusSent || sent.Feedback.Kind != ledger.FeedbackSentByProvider {
		t.Fatalf("complete after feedback: %+v, %v; want sent, the feedback kept", sent, err)
	}
	// Retrying.
	c, err = b.claim("tok-r", b.create(t, "rem-fb-retrying"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.l.Retry(ctx, c, ledger.Failure{Class: "ambiguous", Message: "timed out", NextAttemptAt: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	got = b.feedback(t, r.Key(), fbDelivered)
	if got.Status != ledger.StatusRetrying || !got.NextAttemptAt.Equal(r.NextAttemptAt) || got.LastErrorClass != "ambiguous" || got.Index == nil {
		t.Fatalf("retrying, after feedback: %+v", got)
	}
	// Dead as ambiguous.
	c, err = b.claim("tok-d", b.create(t, "rem-fb-dead"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "ambiguous", Message: "may have been sent"}); err != nil {
		t.Fatal(err)
	}
	got = b.feedback(t, c.Key(), fbHard)
	if got.Status != ledger.StatusDead || got.LastErrorClass != "ambiguous" || !got.Failed() {
		t.Fatalf("dead, after feedback: %+v", got)
	}
	// Cancelled after an attempt that never ended: still said so.
	if _, err := b.claim("tok-u", b.create(t, "rem-fb-unended")); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(2 * time.Minute)
	k := message.DeliveryKey{ReminderID: "rem-fb-unended", Channel: "email", Provider: "webhook"}
	if _, err := b.l.Cancel(ctx, k, "by owner"); err != nil {
		t.Fatal(err)
	}
	got = b.feedback(t, k, fbDelivered)
	if got.Status != ledger.StatusCancelled || got.EndedUnended() != 1 {
		t.Fatalf("cancelled with an unended attempt, after feedback: EndedUnended %d, %+v", got.EndedUnended(), got)
	}
}

// testFeedbackKeepsTheItemBounded: the history keeps its limit and the
// remembered ids their MaxFeedbackSeen, however many events come; an id
// forgotten is recorded again.
func testFeedbackKeepsTheItemBounded(t *testing.T, b bundle) {
	d := b.sent(t, "rem-fb-many")
	delay := func(i int) ledger.Feedback {
		return ledger.Feedback{Kind: ledger.FeedbackDelayed, Detail: "MailboxFull", At: t0.Add(time.Duration(i) * time.Second),
			ID: fmt.Sprint("delay-", i), MessageID: "msg-1"}
	}
	var got ledger.Delivery
	for i := range 12 {
		got = b.feedback(t, d.Key(), delay(i))
	}
	if len(got.History) != 6 || len(got.Transitions()) != 2 || len(got.FeedbackSeen) != ledger.MaxFeedbackSeen ||
		got.FeedbackSeen[ledger.MaxFeedbackSeen-1] != ledger.FeedbackDigest("delay-11") {
		t.Fatalf("after 12 events: %d history entries, seen %v", len(got.History), got.FeedbackSeen)
	}
	stands(t, "the latest delay", got, delay(11))
	_, err := b.l.RecordFeedback(context.Background(), d.Key(), delay(11))
	refusal(t, err, ledger.ErrFeedbackSeen)
	got = b.feedback(t, d.Key(), delay(0)) // forgotten: recorded again, standing unchanged
	stands(t, "a forgotten repeat", got, delay(11))
	long := fbHard
	long.Detail, long.ID = strings.Repeat("x", 300), "fb-long"
	if got = b.feedback(t, d.Key(), long); len(got.Feedback.Detail) > ledger.MaxFeedbackDetail {
		t.Fatalf("detail kept at %d bytes", len(got.Feedback.Detail))
	}
}

// testConcurrentFeedbackIsAllRecorded: events recorded at once are each
// recorded, the outranking one stands; one event recorded at once is
// recorded once.
func testConcurrentFeedbackIsAllRecorded(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.sent(t, "rem-fb-concurrent")
	events := []ledger.Feedback{fbSend, fbDelivered, fbHard, fbDelay}
	var wg sync.WaitGroup
	errs := make([]error, len(events))
	for i, f := range events {
		wg.Go(func() { _, errs[i] = b.l.RecordFeedback(ctx, d.Key(), f) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", events[i].Note(), err)
		}
	}
	got, err := b.l.Get(ctx, d.Key())
	if err != nil {
		t.Fatal(err)
	}
	stands(t, "four at once", got, fbHard)
	if len(got.FeedbackSeen) != 4 || len(feedbackEntries(got)) != 4 {
		t.Fatalf("four at once: seen %v, history %+v", got.FeedbackSeen, got.History)
	}
	d = b.sent(t, "rem-fb-concurrent-2")
	var mu sync.Mutex
	recorded, repeats := 0, 0
	for range 4 {
		wg.Go(func() {
			_, err := b.l.RecordFeedback(ctx, d.Key(), fbComplaint)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				recorded++
			case errors.Is(err, ledger.ErrFeedbackSeen):
				repeats++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if recorded != 1 || repeats != 3 {
		t.Fatalf("one event four times at once: %d recorded, %d repeats; want 1 and 3", recorded, repeats)
	}
}
