package outcome_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

var t0 = time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)

// delivery is a live delivery with personal data and template data, as the
// ledger holds one for SES.
func delivery(id string) ledger.Delivery {
	return ledger.Delivery{ReminderID: id, AccountRef: "acct-7", Channel: "email", Provider: "ses", Status: ledger.StatusSending,
		RecipientRef: "acct-7/contact-1", TemplateRef: "renewal-v3", Address: "pat.doe@example.com",
		TemplateData: map[string]string{"name": "Pat Doe", "plan": "Gold"}, DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
		Attempts: 1, UpdatedAt: t0.Add(time.Second),
		History: []ledger.Entry{{At: ledger.Format(t0), Status: ledger.StatusQueued}, {At: ledger.Format(t0.Add(time.Second)), Status: ledger.StatusSending}}}
}

// ended is d after the write that ended it in status s at t.
func ended(d ledger.Delivery, s ledger.Status, class failure.Class, note string, t time.Time) ledger.Delivery {
	d.Status, d.UpdatedAt = s, t
	d.History = append(append([]ledger.Entry(nil), d.History...), ledger.Entry{At: ledger.Format(t), Status: s, Attempt: d.Attempts, Class: class, Note: note})
	switch s {
	case ledger.StatusSent:
		d.SentAt, d.Receipt = t, "0100018f-ses-message-id"
	case ledger.StatusDead:
		d.LastErrorClass, d.LastError = class, note
	}
	return d
}

func TestEveryEndIsOneOutcome(t *testing.T) {
	live := delivery("rem-1")
	at := t0.Add(2 * time.Second)
	unended := live
	unended.History = append(unended.History, ledger.Entry{At: ledger.Format(at), Status: ledger.StatusExpired, Attempt: 1, Class: failure.ClassAmbiguous, Note: ledger.UnendedNote(1)})
	unended.Status, unended.UpdatedAt = ledger.StatusExpired, at
	for _, tc := range []struct {
		name    string
		to      ledger.Delivery
		want    outcome.Outcome
		class   failure.Class
		receipt string
	}{
		{"sent", ended(live, ledger.StatusSent, "", "0100018f-ses-message-id", at), outcome.Sent, "", "0100018f-ses-message-id"},
		{"dead", ended(live, ledger.StatusDead, failure.ClassRejected, "provider answered 400", at), outcome.DeadLettered, failure.ClassRejected, ""},
		{"dead ambiguous", ended(live, ledger.StatusDead, failure.ClassAmbiguous, "timed out after the request was written", at), outcome.NeedsReview, failure.ClassAmbiguous, ""},
		{"expired", ended(live, ledger.StatusExpired, "", "expiresAt x", at), outcome.Expired, "", ""},
		{"expired after an unended attempt", unended, outcome.NeedsReview, failure.ClassAmbiguous, ""},
		{"cancelled", ended(live, ledger.StatusCancelled, "", "cancelled by ops", at), outcome.Cancelled, "", ""},
	} {
		e, ok := outcome.Of(live, true, tc.to, "prod")
		if !ok || e.Outcome != tc.want || e.Class != tc.class || e.Receipt != tc.receipt || e.Status != string(tc.to.Status) {
			t.Errorf("%s: %+v, %v; want %s, class %q", tc.name, e, ok, tc.want, tc.class)
			continue
		}
		if e.ReminderID != "rem-1" || e.AccountRef != "acct-7" || e.DeliveryKey != "rem-1:email:ses" || e.Channel != "email" || e.Provider != "ses" ||
			e.Attempt != 1 || e.DueAt != "2027-03-01T09:00:00.000Z" || e.At != "2027-03-01T09:00:02.000Z" || e.Stage != "prod" || len(e.EventID) != 32 {
			t.Errorf("%s: %+v", tc.name, e)
		}
		if e.DetailType() == "" || !strings.HasPrefix(e.DetailType(), "Delivery ") {
			t.Errorf("%s: detail-type %q", tc.name, e.DetailType())
		}
		// An INSERT already ended (no old image) is an end too.
		if _, ok := outcome.Of(ledger.Delivery{}, false, tc.to, ""); !ok {
			t.Errorf("%s: an item created ended has no event", tc.name)
		}
	}
}

func TestNoEventForWhatIsNotAnEnd(t *testing.T) {
	live := delivery("rem-2")
	retrying := live
	retrying.Status = ledger.StatusRetrying
	sent := ended(live, ledger.StatusSent, "", "r", t0.Add(time.Minute))
	resent := sent
	resent.UpdatedAt = t0.Add(2 * time.Minute) // a later write that left it sent
	for name, pair := range map[string][2]ledger.Delivery{
		"claim":           {retrying, live},
		"retry":           {live, retrying},
		"still sent":      {sent, resent},
		"revived to live": {ended(live, ledger.StatusDead, failure.ClassRejected, "x", t0), retrying},
	} {
		if e, ok := outcome.Of(pair[0], true, pair[1], ""); ok {
			t.Errorf("%s: event %+v", name, e)
		}
	}
	if _, ok := outcome.Of(ledger.Delivery{}, false, live, ""); ok {
		t.Error("a live delivery created has an event")
	}
}

func TestTheEventIDNamesTheChange(t *testing.T) {
	live := delivery("rem-3")
	dead := ended(live, ledger.StatusDead, failure.ClassRejected, "provider answered 400", t0.Add(time.Minute))
	a, _ := outcome.Of(live, true, dead, "")
	b, _ := outcome.Of(live, true, dead, "") // the same record, delivered again
	if a.EventID != b.EventID {
		t.Fatalf("the same change has two ids: %s, %s", a.EventID, b.EventID)
	}
	revived := dead
	revived.Status, revived.Attempts = ledger.StatusSending, 2
	revived.History = append(append([]ledger.Entry(nil), dead.History...), ledger.Entry{At: ledger.Format(t0.Add(2 * time.Minute)), Status: ledger.StatusSending})
	again := ended(revived, ledger.StatusDead, failure.ClassRejected, "provider answered 400", t0.Add(3*time.Minute))
	c, _ := outcome.Of(revived, true, again, "")
	if c.EventID == a.EventID {
		t.Fatal("a second dead-lettering after a revive has the first one's id")
	}
	other := ended(delivery("rem-4"), ledger.StatusDead, failure.ClassRejected, "provider answered 400", t0.Add(time.Minute))
	if d, _ := outcome.Of(live, true, other, ""); d.EventID == a.EventID {
		t.Fatal("two deliveries' ends share an id")
	}
}

// TestTheDetailHoldsNoPersonalData: the address, the template data and
// the recipient and template references stay in the ledger.
func TestTheDetailHoldsNoPersonalData(t *testing.T) {
	live := delivery("rem-5")
	for _, s := range []ledger.Status{ledger.StatusSent, ledger.StatusDead, ledger.StatusExpired, ledger.StatusCancelled} {
		e, ok := outcome.Of(live, true, ended(live, s, failure.ClassRejected, "x", t0.Add(time.Minute)), "")
		if !ok {
			t.Fatal(s)
		}
		b, _ := json.Marshal(e)
		for _, secret := range []string{"pat.doe", "example.com", "Pat Doe", "Gold", "contact-1", "renewal-v3"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s: the detail holds %q: %s", s, secret, b)
			}
		}
	}
}

// record is the stream record of the change from old (nil: an INSERT) to d.
func record(t *testing.T, seq string, old *ledger.Delivery, d ledger.Delivery) events.DynamoDBEventRecord {
	t.Helper()
	r := events.DynamoDBEventRecord{EventID: "ev-" + seq, EventName: "MODIFY", Change: events.DynamoDBStreamRecord{SequenceNumber: seq, NewImage: image(t, d)}}
	if old == nil {
		r.EventName = "INSERT"
	} else {
		r.Change.OldImage = image(t, *old)
	}
	return r
}

func image(t *testing.T, d ledger.Delivery) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	av, err := ledger.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]events.DynamoDBAttributeValue{}
	for k, v := range av {
		out[k] = lambdaAttr(v)
	}
	return out
}

func lambdaAttr(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = lambdaAttr(e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		m := map[string]events.DynamoDBAttributeValue{}
		for k, e := range v.Value {
			m[k] = lambdaAttr(e)
		}
		return events.NewMapAttribute(m)
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	}
	panic(fmt.Sprintf("no conversion for %T", v))
}

// bus is a fake EventBridge: it records the entries put, and fails those
// whose detail contains a string of failOn (per-entry InternalException)
// the number of times failOn says (-1: always); callErr fails whole calls.
type bus struct {
	mu      sync.Mutex
	calls   [][]ebtypes.PutEventsRequestEntry
	put     []ebtypes.PutEventsRequestEntry
	failOn  map[string]int
	callErr int
}

func (b *bus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, in.Entries)
	if len(in.Entries) > outcome.MaxEntries {
		return nil, fmt.Errorf("ValidationException: %d entries", len(in.Entries))
	}
	if b.callErr != 0 {
		b.callErr--
		return nil, errors.New("InternalException: 500")
	}
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		failed := false
		for s, n := range b.failOn {
			if n != 0 && strings.Contains(aws.ToString(e.Detail), s) {
				failed = true
				if n > 0 {
					b.failOn[s] = n - 1
				}
			}
		}
		if failed {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String("InternalException"), ErrorMessage: aws.String("try again")})
			continue
		}
		b.put = append(b.put, e)
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(fmt.Sprint("bus-", len(b.put), "-", i))})
	}
	return out, nil
}

func (b *bus) details(t *testing.T) []outcome.Event {
	t.Helper()
	var out []outcome.Event
	for _, e := range b.put {
		var ev outcome.Event
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func newFunction(t *testing.T, b *bus) (*outcome.Function, emf, *bytes.Buffer) {
	return newFunctionWith(t, b, nil)
}

// newFunctionWith is newFunction with the config changed by set (nil:
// unchanged), whose fallbacks are taken by a fake that finds none held.
func newFunctionWith(t *testing.T, b *bus, set func(*outcome.Config)) (*outcome.Function, emf, *bytes.Buffer) {
	t.Helper()
	rec := metrics.New(map[string]string{"Function": "outcomes"})
	logs := &bytes.Buffer{}
	fake := instant{clock.NewFake(t0)}
	cfg := outcome.Config{Events: b, Fallbacks: &taker{}, Bus: "nudge-test", Stage: "test", Metrics: rec, MetricsOut: logs,
		Clock: fake, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	if set != nil {
		set(&cfg)
	}
	f, err := outcome.NewFunction(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, emf{logs}, logs
}

// emf reads the function's metric lines.
type emf struct{ out *bytes.Buffer }

// Count sums metric name over the EMF lines written so far.
func (m emf) Count(name string) float64 {
	var sum float64
	for _, line := range strings.Split(m.out.String(), "\n") {
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) != nil || v["_aws"] == nil {
			continue
		}
		if n, ok := v[name].(float64); ok {
			sum += n
		}
	}
	return sum
}

// instant is a fake clock whose waits pass at once (advancing it).
type instant struct{ *clock.Fake }

func (c instant) After(d time.Duration) <-chan time.Time {
	c.Advance(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// batch is a stream batch of n deliveries' changes: for each, its claim
// (no event), then its end (sent, or dead for every third).
func batch(t *testing.T, n int) events.DynamoDBEvent {
	t.Helper()
	var ev events.DynamoDBEvent
	seq := 100
	for i := range n {
		d := delivery(fmt.Sprintf("rem-b%02d", i))
		queued := d
		queued.Status = ledger.StatusQueued
		end := ended(d, ledger.StatusSent, "", "r", t0.Add(time.Minute))
		if i%3 == 2 {
			end = ended(d, ledger.StatusDead, failure.ClassRejected, "provider answered 400", t0.Add(time.Minute))
		}
		ev.Records = append(ev.Records, record(t, fmt.Sprint(seq), &queued, d), record(t, fmt.Sprint(seq+1), &d, end))
		seq += 2
	}
	return ev
}

func TestHandlePutsEachEndInOrderTenAtATime(t *testing.T) {
	b := &bus{}
	f, rec, _ := newFunction(t, b)
	ev := batch(t, 23)
	ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{SequenceNumber: "999",
		OldImage: image(t, ended(delivery("rem-ttl"), ledger.StatusSent, "", "r", t0))}})
	resp, err := f.Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v, %v", resp, err)
	}
	if len(b.calls) != 3 || len(b.calls[0]) != 10 || len(b.calls[2]) != 3 {
		t.Fatalf("%d calls", len(b.calls))
	}
	got := b.details(t)
	if len(got) != 23 {
		t.Fatalf("%d events, want 23", len(got))
	}
	for i, e := range got {
		want := outcome.Sent
		if i%3 == 2 {
			want = outcome.DeadLettered
		}
		if e.ReminderID != fmt.Sprintf("rem-b%02d", i) || e.Outcome != want {
			t.Fatalf("event %d: %+v", i, e)
		}
		en := b.put[i]
		if aws.ToString(en.Source) != "nudge" || aws.ToString(en.DetailType) != want.DetailType() || aws.ToString(en.EventBusName) != "nudge-test" ||
			!aws.ToTime(en.Time).Equal(t0.Add(time.Minute)) {
			t.Fatalf("entry %d: %+v", i, en)
		}
	}
	if rec.Count("Published") != 23 {
		t.Fatalf("Published %v", rec.Count("Published"))
	}
}

// TestAnEntryRefusedOnceIsPutAgain: EventBridge's per-entry failures are
// retried within the invocation, the others not put twice.
func TestAnEntryRefusedOnceIsPutAgain(t *testing.T) {
	b := &bus{failOn: map[string]int{"rem-b04": 2}}
	f, rec, _ := newFunction(t, b)
	resp, _ := f.Handle(context.Background(), batch(t, 6))
	if len(resp.BatchItemFailures) != 0 || len(b.put) != 6 || len(b.calls) != 3 || len(b.calls[1]) != 1 {
		t.Fatalf("failures %v, %d put in %d calls", resp.BatchItemFailures, len(b.put), len(b.calls))
	}
	if rec.Count("PutRetried") != 2 || rec.Count("PublishFailed") != 0 {
		t.Fatalf("PutRetried %v, PublishFailed %v", rec.Count("PutRetried"), rec.Count("PublishFailed"))
	}
}

// TestAnEntryThatKeepsFailingFailsItsRecord: the record of the first event
// not put is the batch item failure, and nothing after it is put in this
// invocation: the mapping retries from it.
func TestAnEntryThatKeepsFailingFailsItsRecord(t *testing.T) {
	b := &bus{failOn: map[string]int{"rem-b13": -1}}
	f, rec, logs := newFunction(t, b)
	ev := batch(t, 23)
	resp, _ := f.Handle(context.Background(), ev)
	want := ev.Records[2*13+1].Change.SequenceNumber // rem-b13's end
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != want {
		t.Fatalf("failures %v, want %s", resp.BatchItemFailures, want)
	}
	if len(b.put) != 19 { // the first 10, then 9 of the second ten; the third ten never
		t.Fatalf("%d put", len(b.put))
	}
	if rec.Count("PublishFailed") != 1 || !strings.Contains(logs.String(), "the stream mapping retries") {
		t.Fatalf("PublishFailed %v\n%s", rec.Count("PublishFailed"), logs)
	}
	// The retry from that record puts it and the rest; the ones after it
	// in its ten come again with their ids.
	b.failOn = nil
	var retry events.DynamoDBEvent
	for i, r := range ev.Records {
		if r.Change.SequenceNumber == want {
			retry.Records = ev.Records[i:]
		}
	}
	before := b.details(t)
	if resp, _ := f.Handle(context.Background(), retry); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp)
	}
	ids := map[string]int{}
	for _, e := range b.details(t) {
		ids[e.EventID]++
	}
	if len(ids) != 23 {
		t.Fatalf("%d distinct events after the retry, want 23", len(ids))
	}
	if len(b.put)-len(before) != 10 {
		t.Fatalf("the retry put %d", len(b.put)-len(before))
	}
}

func TestACallThatFailsIsRetriedThenFailsTheFirstRecord(t *testing.T) {
	b := &bus{callErr: 2}
	f, _, _ := newFunction(t, b)
	ev := batch(t, 3)
	if resp, _ := f.Handle(context.Background(), ev); len(resp.BatchItemFailures) != 0 || len(b.put) != 3 {
		t.Fatalf("two failed calls then one: %v, %d put", resp.BatchItemFailures, len(b.put))
	}
	b = &bus{callErr: 3}
	f, _, _ = newFunction(t, b)
	resp, _ := f.Handle(context.Background(), ev)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[1].Change.SequenceNumber {
		t.Fatalf("three failed calls: %v", resp.BatchItemFailures)
	}
}

// TestARecordThatDoesNotDecodeIsRetriedNotSkipped: a delivery's new image
// that does not decode (a newer writer's format) is counted and reported
// failed after the events before it are put, so that the mapping retries
// from it rather than losing its event; a reminder item passes with no
// event; an old image that does not decode still lets an end through.
func TestARecordThatDoesNotDecodeIsRetriedNotSkipped(t *testing.T) {
	b := &bus{}
	f, rec, logs := newFunction(t, b)
	ev := batch(t, 1)
	reminder := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "51",
		NewImage: map[string]events.DynamoDBAttributeValue{"PK": events.NewStringAttribute("REM#r"), "SK": events.NewStringAttribute("REMINDER")}}}
	bad := record(t, "52", nil, delivery("rem-bad"))
	bad.Change.NewImage["dueAt"] = events.NewStringAttribute("not a time")
	after := record(t, "53", nil, ended(delivery("rem-after"), ledger.StatusSent, "", "r", t0))
	ev.Records = append(ev.Records, reminder, bad, after)
	resp, _ := f.Handle(context.Background(), ev)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "52" || len(b.put) != 1 ||
		rec.Count("Undecodable") != 1 || !strings.Contains(logs.String(), "dueAt") {
		t.Fatalf("failures %v, %d put, Undecodable %v\n%s", resp.BatchItemFailures, len(b.put), rec.Count("Undecodable"), logs)
	}
	// An end whose old image does not decode still has its event.
	live := delivery("rem-old")
	end := record(t, "60", &live, ended(live, ledger.StatusSent, "", "r", t0))
	end.Change.OldImage["dueAt"] = events.NewStringAttribute("not a time")
	b = &bus{}
	f, _, _ = newFunction(t, b)
	if resp, _ := f.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{end}}); len(resp.BatchItemFailures) != 0 || len(b.put) != 1 {
		t.Fatalf("an end with an undecodable old image: %v, %d put", resp.BatchItemFailures, len(b.put))
	}
}

func TestNewFunctionSaysWhatIsMissing(t *testing.T) {
	if _, err := outcome.NewFunction(outcome.Config{Events: &bus{}, Fallbacks: &taker{}}); err == nil || !strings.Contains(err.Error(), "NUDGE_EVENT_BUS") {
		t.Fatal(err)
	}
	if _, err := outcome.NewFunction(outcome.Config{Events: &bus{}, Bus: "b"}); err == nil || !strings.Contains(err.Error(), "NUDGE_TABLE") {
		t.Fatal(err)
	}
	if _, err := outcome.NewFunction(outcome.Config{Events: &bus{}, Fallbacks: &taker{}, Bus: "b", OperatorsTopic: "arn:aws:sns:eu-west-1:123456789012:ops"}); err == nil ||
		!strings.Contains(err.Error(), "SNS") {
		t.Fatal(err)
	}
	if _, err := outcome.NewFunction(outcome.Config{Bus: "b", Fallbacks: &taker{}}); err == nil || !strings.Contains(err.Error(), "Events") {
		t.Fatal(err)
	}
	if _, err := outcome.SettingsFromEnv(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "NUDGE_EVENT_BUS") {
		t.Fatal(err)
	}
}

// feedback is d after the ledger recorded f on it (the in-memory ledger,
// which records as the DynamoDB one does).
func feedback(d ledger.Delivery, f ledger.Feedback) ledger.Delivery {
	m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clock.NewFake(f.At.Add(time.Second))})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := m.Create(ctx, d); err != nil {
		panic(err)
	}
	got, err := m.RecordFeedback(ctx, d.Key(), f)
	if err != nil {
		panic(err)
	}
	return got
}

// TestEachReportOfTheProviderIsOneEvent: a report that makes the delivery
// failed is bounced, complained or rejected; any other, or one after the
// delivery already failed, is feedback; the report's id names the event;
// a write that recorded no new report has none; the end's id is unchanged
// by reports recorded after it.
func TestEachReportOfTheProviderIsOneEvent(t *testing.T) {
	at := t0.Add(time.Minute)
	sent := ended(delivery("rem-f1"), ledger.StatusSent, "", "0100018f-ses-message-id", at)
	delivered := feedback(sent, ledger.Feedback{Kind: ledger.FeedbackDelivered, Detail: "250 2.6.0", At: at.Add(time.Second), ID: "d-1"})
	e, ok := outcome.Of(sent, true, delivered, "")
	if !ok || e.Outcome != outcome.Feedback || e.Feedback == nil || e.Feedback.Kind != "delivered" || e.Feedback.Failed || e.Feedback.Standing != "delivered 250 2.6.0" {
		t.Fatalf("delivered: %+v %+v", e, e.Feedback)
	}
	complained := feedback(delivered, ledger.Feedback{Kind: ledger.FeedbackComplained, Detail: "abuse", At: at.Add(time.Minute), ID: "c-1"})
	c, ok := outcome.Of(delivered, true, complained, "")
	if !ok || c.Outcome != outcome.Complained || !c.Feedback.Failed || c.EventID == e.EventID || c.Receipt != "0100018f-ses-message-id" {
		t.Fatalf("complained: %+v %+v", c, c.Feedback)
	}
	// A late delivered report after the complaint: told, not standing.
	late := feedback(complained, ledger.Feedback{Kind: ledger.FeedbackDelivered, Detail: "250 2.6.0", At: at, ID: "d-0"})
	l, ok := outcome.Of(complained, true, late, "")
	if !ok || l.Outcome != outcome.Feedback || l.Feedback.Kind != "delivered" || l.Feedback.Standing != "complained abuse" {
		t.Fatalf("late: %+v %+v", l, l.Feedback)
	}
	// A second failing report after the first: feedback, failed.
	bounce := feedback(complained, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General", At: at.Add(2 * time.Minute), ID: "b-1"})
	if b, _ := outcome.Of(complained, true, bounce, ""); b.Outcome != outcome.Feedback || !b.Feedback.Failed {
		t.Fatalf("a second failure: %+v %+v", b, b.Feedback)
	}
	// The same record again: the same id; a write without a new report: none.
	if again, _ := outcome.Of(delivered, true, complained, ""); again.EventID != c.EventID {
		t.Fatal("the same record gave another id")
	}
	if e, ok := outcome.Of(complained, true, complained, ""); ok {
		t.Fatalf("a write without a new report: %+v", e)
	}
	// The end's event id is the same before and after reports.
	before, _ := outcome.End(sent, "")
	after, _ := outcome.End(complained, "")
	if before.EventID != after.EventID || before.Outcome != outcome.Sent {
		t.Fatalf("the end's id moved with the reports: %s, %s", before.EventID, after.EventID)
	}
	// A report on a delivery not sent (a send that timed out): told too.
	retrying := delivery("rem-f2")
	retrying.Status = ledger.StatusRetrying
	sentBy := feedback(retrying, ledger.Feedback{Kind: ledger.FeedbackSentByProvider, At: at, ID: "s-1", MessageID: "m-1"})
	if s, ok := outcome.Of(retrying, true, sentBy, ""); !ok || s.Outcome != outcome.Feedback || s.Status != "retrying" || s.Feedback.Kind != "sent-by-provider" {
		t.Fatalf("sent by provider: %+v %+v", s, s.Feedback)
	}
}

// TestAReportOnALargeDeliveryIsStillAnEvent: a delivery item near the
// 1 KB the ledger keeps it within (a long address and template data) still
// keeps the entry of the report just recorded, so its event is made (the
// ledger once dropped that entry to stay under 1 KB, and the report had
// no event: a chaos run found it).
func TestAReportOnALargeDeliveryIsStillAnEvent(t *testing.T) {
	d := delivery("rem-large")
	d.TemplateData = map[string]string{"notes": strings.Repeat("x", 700)}
	sent := ended(d, ledger.StatusSent, "", "0100018f-ses-message-id", t0.Add(time.Minute))
	prev := sent
	for i, kind := range []ledger.FeedbackKind{ledger.FeedbackSentByProvider, ledger.FeedbackDelivered} {
		next := feedback(prev, ledger.Feedback{Kind: kind, At: t0.Add(time.Duration(2+i) * time.Minute), ID: fmt.Sprint("r-", i)})
		e, ok := outcome.Of(prev, true, next, "")
		if !ok || e.Feedback == nil || e.Feedback.Kind != string(kind) {
			t.Fatalf("report %d (%s): %+v, %v; history %+v", i, kind, e, ok, next.History)
		}
		prev = next
	}
}

// TestAnEventTellsTheRecipientsTime: a delivery of a reminder given in a
// zone has its due time on the recipient's wall clock in its events, with
// the zone and its send window; one given in UTC alone has none of them.
func TestAnEventTellsTheRecipientsTime(t *testing.T) {
	d := ended(delivery("rem-tz"), ledger.StatusSent, "", "", t0.Add(time.Second))
	e, ok := outcome.End(d, "dev")
	if !ok || e.TimeZone != "" || e.DueLocal != "" || e.Window != "" {
		t.Fatalf("without a zone: %+v", e)
	}
	d.TimeZone, d.Window = "Asia/Kathmandu", "14:45-21:00 Asia/Kathmandu"
	e, _ = outcome.End(d, "dev")
	if e.TimeZone != "Asia/Kathmandu" || e.DueLocal != "2027-03-01T14:45" || e.Window != d.Window || e.DueAt != "2027-03-01T09:00:00.000Z" {
		t.Fatalf("in Kathmandu: %+v", e)
	}
}
