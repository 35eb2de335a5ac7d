package outcome_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/pkg/failure"
)

// taker is a fake ledger that takes fallbacks: the first take of a
// primary's fallback succeeds, a later one is refused as not held (as the
// ledger's condition does); fail makes the next takes fail.
type taker struct {
	mu    sync.Mutex
	taken map[string]int // by the primary's key
	calls []string       // reasons
	fail  int
	// changed makes every take refused as its primary changed since.
	changed bool
}

func (k *taker) TakeFallback(_ context.Context, primary ledger.Delivery, reason string) (ledger.Delivery, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, reason)
	if k.fail > 0 {
		k.fail--
		return ledger.Delivery{}, errors.New("ProvisionedThroughputExceededException: slow down")
	}
	if k.changed {
		return ledger.Delivery{}, &ledger.RefusedError{Op: "take-fallback", Key: primary.Key(), Reason: ledger.ErrPrimaryChanged, Current: primary}
	}
	if k.taken == nil {
		k.taken = map[string]int{}
	}
	k.taken[primary.Key().String()]++
	fb := ledger.Delivery{ReminderID: primary.ReminderID, Channel: primary.Fallback.Channel, Provider: primary.Fallback.Provider, Status: ledger.StatusPending}
	if k.taken[primary.Key().String()] > 1 {
		return ledger.Delivery{}, &ledger.RefusedError{Op: "take fallback", Key: fb.Key(), Reason: ledger.ErrNotHeld, Current: fb}
	}
	return fb, nil
}

// topic is a fake SNS topic: it records what it was told.
type topic struct {
	mu   sync.Mutex
	told []*sns.PublishInput
	fail int
}

func (p *topic) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail > 0 {
		p.fail--
		return nil, errors.New("InternalError: 500")
	}
	p.told = append(p.told, in)
	return &sns.PublishOutput{MessageId: aws.String("m-1")}, nil
}

// withFallback is d naming an SMS fallback.
func withFallback(d ledger.Delivery) ledger.Delivery {
	d.Fallback = ledger.FallbackRef{Channel: "sms", Provider: "sns"}
	return d
}

func newFallbackFunction(t *testing.T, b *bus, k *taker, p *topic, topicARN string) (*outcome.Function, emf) {
	t.Helper()
	f, rec, _ := newFunctionWith(t, b, func(c *outcome.Config) {
		c.Fallbacks = k
		if p != nil {
			c.Notify, c.OperatorsTopic = p, topicARN
		}
	})
	return f, rec
}

// TestAFailedDeliveryTakesItsFallbackOnce: the change that fails a
// delivery naming a fallback (dead, expired, a failing report) takes it,
// with the reason; a later change of the failed delivery (a report after
// the bounce), a delivery without a fallback, and a sent one take none; the
// same record delivered again takes it again, which the ledger refuses as
// taken, and that is done.
func TestAFailedDeliveryTakesItsFallbackOnce(t *testing.T) {
	live := withFallback(delivery("rem-f1"))
	at := t0.Add(time.Minute)
	dead := ended(live, ledger.StatusDead, failure.ClassRejected, "provider answered 400", at)
	live4 := withFallback(delivery("rem-f4"))
	sent := ended(live4, ledger.StatusSent, "", "", at)
	bounced := feedback(sent, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General", At: at.Add(time.Minute), ID: "fb-1"})
	// The take marks the primary (fbTaken): the records after it carry
	// the mark and take nothing.
	marked := bounced
	marked.FallbackTaken = at.Add(time.Minute)
	later := feedback(marked, ledger.Feedback{Kind: ledger.FeedbackDelivered, At: at.Add(2 * time.Minute), ID: "fb-2"})
	expired := ended(withFallback(delivery("rem-f2")), ledger.StatusExpired, "", "", at)
	plain := ended(delivery("rem-f3"), ledger.StatusDead, failure.ClassRejected, "provider answered 400", at)

	b, k := &bus{}, &taker{}
	f, rec := newFallbackFunction(t, b, k, nil, "")
	resp, err := f.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record(t, "1", &live, dead), record(t, "2", &live4, sent), record(t, "3", &sent, bounced), record(t, "4", &marked, later),
		record(t, "5", &live, expired), record(t, "6", &live, plain),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	if len(k.calls) != 3 || !strings.Contains(k.calls[0], "dead") || !strings.Contains(k.calls[1], "bounced") || !strings.Contains(k.calls[2], "expired") {
		t.Fatalf("takes %q; want the dead, the bounced and the expired one's, each once", k.calls)
	}
	for _, e := range b.details(t) {
		if e.Fallback != "" && e.Fallback != e.ReminderID+":sms:sns" {
			t.Errorf("%s event names the fallback %q", e.Outcome, e.Fallback)
		}
		if (e.ReminderID == "rem-f1" || e.ReminderID == "rem-f4") && e.Fallback == "" {
			t.Errorf("%s event of a delivery with a fallback does not name it", e.Outcome)
		}
	}

	// The stream delivers the dead record again: the ledger finds the
	// fallback taken, and that is done.
	resp, err = f.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record(t, "1", &live, dead)}})
	if err != nil || len(resp.BatchItemFailures) != 0 || len(k.calls) != 4 || k.taken[dead.Key().String()] != 2 {
		t.Fatalf("again: %v %v, takes %q", resp, err, k.calls)
	}
	if rec.Count("FallbacksTaken") != 3 || rec.Count("FallbacksFoundTaken") != 1 {
		t.Errorf("FallbacksTaken %v, FallbacksFoundTaken %v; want 3, 1", rec.Count("FallbacksTaken"), rec.Count("FallbacksFoundTaken"))
	}
}

// TestATakeForAChangedPrimaryIsDone: a take the ledger refuses because
// the primary changed since the record (revived, redriven: a record
// processed late) is done, counted, its event put; an ambiguous end
// (dead as ambiguous) takes no fallback at all.
func TestATakeForAChangedPrimaryIsDone(t *testing.T) {
	live := withFallback(delivery("rem-h1"))
	dead := ended(live, ledger.StatusDead, failure.ClassRejected, "provider answered 400", t0.Add(time.Minute))
	live2 := withFallback(delivery("rem-h2"))
	unsure := ended(live2, ledger.StatusDead, failure.ClassAmbiguous, "no answer after the request was written", t0.Add(time.Minute))
	b, k := &bus{}, &taker{changed: true}
	f, rec := newFallbackFunction(t, b, k, nil, "")
	resp, err := f.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record(t, "1", &live, dead), record(t, "2", &live2, unsure)}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	if len(k.calls) != 1 || !strings.Contains(k.calls[0], "dead (rejected)") {
		t.Errorf("takes %q; want the rejected one's alone", k.calls)
	}
	if rec.Count("FallbacksPrimaryChanged") != 1 || rec.Count("FallbackFailed") != 0 || rec.Count("FallbacksTaken") != 0 {
		t.Errorf("FallbacksPrimaryChanged %v, FallbackFailed %v, FallbacksTaken %v; want 1, 0, 0",
			rec.Count("FallbacksPrimaryChanged"), rec.Count("FallbackFailed"), rec.Count("FallbacksTaken"))
	}
	if got := b.details(t); len(got) != 2 {
		t.Errorf("put %d events; want both records'", len(got))
	}
}

// TestAChangeAfterARefusedTakeTakesIt: a take refused because the primary
// changed since its record (a wait for SES's record after a bounce
// recorded while it was live) is taken by the record of that change, whose
// old image was already due: the mark, not the old image, says taken.
func TestAChangeAfterARefusedTakeTakesIt(t *testing.T) {
	sending := withFallback(delivery("rem-r1"))
	bounced := feedback(sending, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General", At: t0.Add(time.Minute), ID: "fb-r1"})
	waiting := bounced
	waiting.Status, waiting.UpdatedAt, waiting.LastErrorClass = ledger.StatusRetrying, t0.Add(2*time.Minute), failure.ClassAmbiguous
	b, k := &bus{}, &taker{}
	f, _ := newFallbackFunction(t, b, k, nil, "")
	resp, err := f.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record(t, "2", &bounced, waiting)}})
	if err != nil || len(resp.BatchItemFailures) != 0 || len(k.calls) != 1 || !strings.Contains(k.calls[0], "bounced") {
		t.Fatalf("%v %v: takes %q; want the fallback taken by the later record", resp, err, k.calls)
	}
}

// TestATakeThatFailsRetriesItsRecord: a take the ledger fails ends the batch
// at its record (reported failed, its event not put, so the mapping
// retries from it), the records before it done.
func TestATakeThatFailsRetriesItsRecord(t *testing.T) {
	first := ended(delivery("rem-g1"), ledger.StatusSent, "", "", t0.Add(time.Minute))
	live := withFallback(delivery("rem-g2"))
	dead := ended(live, ledger.StatusDead, failure.ClassExhausted, "attempts exhausted", t0.Add(time.Minute))
	d1 := delivery("rem-g1")
	b, k := &bus{}, &taker{fail: 1}
	f, rec := newFallbackFunction(t, b, k, nil, "")
	resp, _ := f.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record(t, "1", &d1, first), record(t, "2", &live, dead), record(t, "3", &d1, first),
	}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2" {
		t.Fatalf("failures %v; want the record whose take failed", resp.BatchItemFailures)
	}
	if got := b.details(t); len(got) != 1 || got[0].ReminderID != "rem-g1" {
		t.Fatalf("put %v; want the event of the record before it alone", got)
	}
	if rec.Count("FallbackFailed") != 1 {
		t.Errorf("FallbackFailed %v", rec.Count("FallbackFailed"))
	}
	resp, _ = f.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record(t, "2", &live, dead), record(t, "3", &d1, first)}})
	if len(resp.BatchItemFailures) != 0 || k.taken[dead.Key().String()] != 1 {
		t.Fatalf("retried: %v, taken %v", resp.BatchItemFailures, k.taken)
	}
}

// TestAnExpiryUnderEscalateIsEscalated: a delivery whose reminder's late
// policy is escalate and that expires unsent gives its expired event, then
// an escalated one naming it, and the operators' topic is told once per
// record (a FIFO topic deduplicates by the event's id); its dead-lettering
// or sending is not escalated, nor an expiry under another policy. A topic
// that fails retries the record.
func TestAnExpiryUnderEscalateIsEscalated(t *testing.T) {
	esc := delivery("rem-e1")
	esc.Late = ledger.LateEscalate
	expired := ended(esc, ledger.StatusExpired, "", "", t0.Add(time.Hour))
	sent := ended(esc, ledger.StatusSent, "", "", t0.Add(time.Minute))
	plain := ended(delivery("rem-e2"), ledger.StatusExpired, "", "", t0.Add(time.Hour))
	const arn = "arn:aws:sns:eu-west-1:123456789012:ops.fifo"

	b, p := &bus{}, &topic{fail: 1}
	f, _ := newFallbackFunction(t, b, &taker{}, p, arn)
	recs := []events.DynamoDBEventRecord{record(t, "1", &esc, sent), record(t, "2", &esc, expired), record(t, "3", &esc, plain)}
	resp, _ := f.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2" || len(p.told) != 0 {
		t.Fatalf("a topic that fails: failures %v, told %d; want record 2 retried", resp.BatchItemFailures, len(p.told))
	}
	b.put = nil
	resp, _ = f.Handle(context.Background(), events.DynamoDBEvent{Records: recs[1:]})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	got := b.details(t)
	if len(got) != 3 || got[0].Outcome != outcome.Expired || got[1].Outcome != outcome.Escalated || got[2].Outcome != outcome.Expired {
		t.Fatalf("events %v; want expired, escalated, expired", got)
	}
	if got[1].EndEventID != got[0].EventID || got[1].EventID == got[0].EventID || got[1].DeliveryKey != got[0].DeliveryKey {
		t.Errorf("escalated %+v does not name its expiry %s", got[1], got[0].EventID)
	}
	if aws.ToString(b.put[1].DetailType) != "Delivery Escalated" {
		t.Errorf("detail-type %q", aws.ToString(b.put[1].DetailType))
	}
	if len(p.told) != 1 {
		t.Fatalf("the topic was told %d times; want once", len(p.told))
	}
	in := p.told[0]
	var told outcome.Event
	if err := json.Unmarshal([]byte(aws.ToString(in.Message)), &told); err != nil || told.EventID != got[1].EventID {
		t.Fatalf("told %s (%v); want the escalated event", aws.ToString(in.Message), err)
	}
	if aws.ToString(in.TopicArn) != arn || aws.ToString(in.MessageDeduplicationId) != told.EventID || aws.ToString(in.MessageGroupId) != "rem-e1" {
		t.Errorf("publish %+v: want the FIFO topic, deduplicated by the event's id, grouped by reminder", in)
	}
	if !strings.Contains(aws.ToString(in.Subject), "rem-e1:email:ses expired unsent") {
		t.Errorf("subject %q", aws.ToString(in.Subject))
	}
	if strings.Contains(aws.ToString(in.Message), "pat.doe") || strings.Contains(aws.ToString(in.Subject), "pat.doe") {
		t.Error("the operators' message holds the address")
	}
}

// TestEventsNameFallbacksAndLateSends: a fallback's events name the
// delivery it stands in for; a send after the reminder's expiresAt, under
// send-late, is marked late.
func TestEventsNameFallbacksAndLateSends(t *testing.T) {
	fb := delivery("rem-h1")
	fb.Channel, fb.Provider, fb.Address = "sms", "sns", ""
	fb.FallbackOf = ledger.FallbackRef{Channel: "email", Provider: "ses"}
	e, ok := outcome.End(ended(fb, ledger.StatusSent, "", "", t0.Add(time.Minute)), "test")
	if !ok || e.FallbackOf != "rem-h1:email:ses" || e.Fallback != "" || e.Late {
		t.Fatalf("fallback's sent event %+v", e)
	}
	late := delivery("rem-h2")
	late.Late, late.OnTimeUntil = ledger.LateSendLate, t0.Add(30*time.Second)
	if e, _ := outcome.End(ended(late, ledger.StatusSent, "", "", t0.Add(time.Minute)), "test"); !e.Late {
		t.Errorf("a send after expiresAt under send-late: %+v; want late", e)
	}
	if e, _ := outcome.End(ended(late, ledger.StatusSent, "", "", t0.Add(10*time.Second)), "test"); e.Late {
		t.Errorf("a send in time: %+v; want not late", e)
	}
}
