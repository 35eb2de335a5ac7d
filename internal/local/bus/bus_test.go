package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/local/bus"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
)

// now is the fake clock's time in every fast test: an event without a Time
// is dated by it, to the second.
var now = time.Date(2026, 3, 1, 10, 20, 30, 900_000_000, time.UTC)

const nowText = "2026-03-01T10:20:30Z"

var uuid = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// fakeSQS records what the bus sends, per queue, and fails the first
// sends to a queue as told (-1: every one).
type fakeSQS struct {
	mu    sync.Mutex
	sent  map[string][]string
	calls map[string]int
	fail  map[string]int
}

func newFakeSQS() *fakeSQS {
	return &fakeSQS{sent: map[string][]string{}, calls: map[string]int{}, fail: map[string]int{}}
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := aws.ToString(in.QueueUrl)
	f.calls[q]++
	if n := f.fail[q]; n < 0 || f.calls[q] <= n {
		return nil, fmt.Errorf("fake SQS: send %d to %s refused", f.calls[q], q)
	}
	f.sent[q] = append(f.sent[q], aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("m%d", f.calls[q]))}, nil
}

func (f *fakeSQS) bodies(queue string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent[queue]...)
}

func (f *fakeSQS) callsTo(queue string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[queue]
}

func (f *fakeSQS) events(t *testing.T, queue string) []events.EventBridgeEvent {
	t.Helper()
	var out []events.EventBridgeEvent
	for _, b := range f.bodies(queue) {
		var ev events.EventBridgeEvent
		if err := json.Unmarshal([]byte(b), &ev); err != nil {
			t.Fatalf("a message on %s is not an EventBridge event: %v\n%s", queue, err, b)
		}
		out = append(out, ev)
	}
	return out
}

// lockedBuffer is a log the bus writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func queue(name string) string { return "http://sqs.local/000000000000/" + name }

type fixture struct {
	bus    *bus.Bus
	sqs    *fakeSQS
	client *eventbridge.Client
}

// setup starts a bus on cfg, with a fake SQS, the fake clock and a short
// retry pause unless cfg says otherwise, and an EventBridge client on it
// that does not retry.
func setup(t *testing.T, cfg bus.Config) fixture {
	t.Helper()
	f := fixture{sqs: newFakeSQS()}
	if cfg.SQS == nil {
		cfg.SQS = f.sqs
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.NewFake(now)
	}
	if cfg.TargetRetryWait == 0 {
		cfg.TargetRetryWait = time.Millisecond
	}
	b, err := bus.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	f.bus = b
	f.client = client(b.URL(), func(o *eventbridge.Options) { o.RetryMaxAttempts = 1 })
	return f
}

// client is the SDK's EventBridge client on the stand-in, as a function
// builds it, with static credentials.
func client(url string, optFns ...func(*eventbridge.Options)) *eventbridge.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIALOCALTEST", "secret", ""),
		HTTPClient:  awshttp.NewBuildableClient(),
	}
	return eventbridge.NewFromConfig(cfg, append([]func(*eventbridge.Options){func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(url) }}, optFns...)...)
}

func entry(source, detailType, detail string) types.PutEventsRequestEntry {
	return types.PutEventsRequestEntry{Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(detail)}
}

func put(t *testing.T, c *eventbridge.Client, entries ...types.PutEventsRequestEntry) *eventbridge.PutEventsOutput {
	t.Helper()
	out, err := c.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: entries})
	if err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	if len(out.Entries) != len(entries) {
		t.Fatalf("PutEvents answered %d entries for %d", len(out.Entries), len(entries))
	}
	return out
}

// apiCode returns the error's AWS error code, failing the test if it is
// not an API error.
func apiCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an AWS API error", err, err)
	}
	return ae.ErrorCode()
}

func failures(out *eventbridge.PutEventsOutput) []string {
	var got []string
	for _, e := range out.Entries {
		if e.ErrorCode != nil {
			got = append(got, aws.ToString(e.ErrorCode))
		} else {
			got = append(got, "ok")
		}
	}
	return got
}

// TestPutEventsDeliversTheEventAsEventBridgeDoes: two entries, one dated by
// its Time, one by the clock, reach the rule's queue as EventBridge's
// envelope, byte for byte: fields in its order, the detail compacted and
// its HTML characters kept, resources [] when there are none, the time in
// whole seconds, the id the one PutEvents returned; and aws-lambda-go reads
// it.
func TestPutEventsDeliversTheEventAsEventBridgeDoes(t *testing.T) {
	q := queue("outcomes")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	dated := entry("nudge.outcomes", "Delivery Sent", `{ "delivery": "rem-1#email#ses", "note": "<a&b>", "n": 1.50 }`)
	dated.Time = aws.Time(time.Date(2026, 2, 3, 4, 5, 6, 789_000_000, time.UTC))
	dated.Resources = []string{"arn:aws:dynamodb:us-east-1:000000000000:table/ledger"}
	undated := entry("nudge.outcomes", "Delivery Expired", `{"delivery":"rem-2#sms#sns"}`)
	out := put(t, f.client, dated, undated)
	if out.FailedEntryCount != 0 {
		t.Fatalf("failed entries: %v", failures(out))
	}
	id1, id2 := aws.ToString(out.Entries[0].EventId), aws.ToString(out.Entries[1].EventId)
	if !uuid.MatchString(id1) || !uuid.MatchString(id2) || id1 == id2 {
		t.Fatalf("event ids %q, %q; want two random UUIDs", id1, id2)
	}
	want := []string{
		`{"version":"0","id":"` + id1 + `","detail-type":"Delivery Sent","source":"nudge.outcomes","account":"000000000000",` +
			`"time":"2026-02-03T04:05:06Z","region":"us-east-1","resources":["arn:aws:dynamodb:us-east-1:000000000000:table/ledger"],` +
			`"detail":{"delivery":"rem-1#email#ses","note":"<a&b>","n":1.50}}`,
		`{"version":"0","id":"` + id2 + `","detail-type":"Delivery Expired","source":"nudge.outcomes","account":"000000000000",` +
			`"time":"` + nowText + `","region":"us-east-1","resources":[],"detail":{"delivery":"rem-2#sms#sns"}}`,
	}
	got := f.sqs.bodies(q)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("delivered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	evs := f.sqs.events(t, q)
	if evs[0].ID != id1 || evs[0].DetailType != "Delivery Sent" || evs[0].AccountID != "000000000000" ||
		!evs[0].Time.Equal(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)) || string(evs[0].Detail) != `{"delivery":"rem-1#email#ses","note":"<a&b>","n":1.50}` {
		t.Errorf("aws-lambda-go read %+v", evs[0])
	}
	s := f.bus.Stats()
	if s.Requests != 1 || s.Accepted != 2 || s.Delivered["all"] != 2 || len(s.Failed) != 0 || len(s.Refused) != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestPutEventsToAFauxqsQueue: against the SQS stand-in, the SDK's
// EventBridge client on the bus, as a function builds it from the standard
// configuration, puts two events a rule matches and one it does not; the
// queue holds the two, each EventBridge's envelope byte for byte.
func TestPutEventsToAFauxqsQueue(t *testing.T) {
	awsCfg := standintest.AWSConfig(t)
	sqsClient := standintest.SQS(t)
	ctx := context.Background()
	created, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(standintest.Name("nudge-bus"))})
	if err != nil {
		t.Fatal(err)
	}
	q := aws.ToString(created.QueueUrl)
	t.Cleanup(func() {
		_, _ = sqsClient.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(q)})
	})
	rule := bus.Rule{Name: "outcomes", Source: []string{"nudge.outcomes"}, QueueURL: q}
	b, err := bus.Start(bus.Config{SQS: sqsClient, Clock: clock.NewFake(now), Rules: []bus.Rule{rule}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	eb := eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(b.URL()) })

	sent := entry("nudge.outcomes", "Delivery Sent", `{"delivery":"rem-1#email#ses","at":"2026-03-01T10:20:00Z"}`)
	sent.Time = aws.Time(time.Date(2026, 3, 1, 10, 20, 1, 0, time.UTC))
	dead := entry("nudge.outcomes", "Delivery Dead", `{"delivery":"rem-2#webhook#sink"}`)
	out := put(t, eb, sent, entry("other.app", "Delivery Sent", "{}"), dead)
	if out.FailedEntryCount != 0 {
		t.Fatalf("results %v", failures(out))
	}
	want := map[string]string{
		aws.ToString(out.Entries[0].EventId): `{"version":"0","id":"` + aws.ToString(out.Entries[0].EventId) + `","detail-type":"Delivery Sent",` +
			`"source":"nudge.outcomes","account":"000000000000","time":"2026-03-01T10:20:01Z","region":"us-east-1","resources":[],` +
			`"detail":{"delivery":"rem-1#email#ses","at":"2026-03-01T10:20:00Z"}}`,
		aws.ToString(out.Entries[2].EventId): `{"version":"0","id":"` + aws.ToString(out.Entries[2].EventId) + `","detail-type":"Delivery Dead",` +
			`"source":"nudge.outcomes","account":"000000000000","time":"` + nowText + `","region":"us-east-1","resources":[],` +
			`"detail":{"delivery":"rem-2#webhook#sink"}}`,
	}
	got := map[string]string{}
	receive := func() {
		msgs, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs.Messages {
			var ev events.EventBridgeEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatalf("not an event: %v\n%s", err, aws.ToString(m.Body))
			}
			got[ev.ID] = aws.ToString(m.Body)
		}
	}
	for round := 0; round < 5 && len(got) < len(want); round++ {
		receive()
	}
	receive() // once more: nothing else may have come
	if len(got) != len(want) {
		t.Fatalf("the queue holds %d events; want %d (the rule's source only):\n%v", len(got), len(want), got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("event %s on the queue\n%s\nwant\n%s", id, got[id], w)
		}
	}
	if s := b.Stats(); s.Accepted != 3 || s.Delivered["outcomes"] != 2 || len(s.TargetFailures) != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestTheStandardEndpointVariableReachesTheBus: a function that builds its
// client from the standard configuration, with no endpoint in code, reaches
// the bus through AWS_ENDPOINT_URL_EVENTBRIDGE, as the local system will
// point it.
func TestTheStandardEndpointVariableReachesTheBus(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	t.Setenv("AWS_ENDPOINT_URL_EVENTBRIDGE", f.bus.URL())
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIALOCALTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	put(t, eventbridge.NewFromConfig(cfg), entry("s", "t", "{}"))
	if n := len(f.sqs.bodies(q)); n != 1 {
		t.Errorf("%d events delivered; want 1", n)
	}
}

// TestTheAccountAndRegionAreTheConfigured: an event names the bus's
// account and region, and a request signed for another region is refused.
func TestTheAccountAndRegionAreTheConfigured(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{AccountID: "123456789012", Region: "eu-west-1", Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	_, err := f.client.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("s", "t", "{}")}})
	if code := apiCode(t, err); code != "InvalidSignatureException" || !strings.Contains(err.Error(), "eu-west-1") {
		t.Errorf("a request signed for us-east-1 to a bus in eu-west-1: %v", err)
	}
	c := client(f.bus.URL(), func(o *eventbridge.Options) { o.Region = "eu-west-1"; o.RetryMaxAttempts = 1 })
	put(t, c, entry("s", "t", "{}"))
	evs := f.sqs.events(t, q)
	if len(evs) != 1 || evs[0].AccountID != "123456789012" || evs[0].Region != "eu-west-1" {
		t.Errorf("delivered %+v", evs)
	}
}

// TestElevenEntriesAreRefusedWhole: PutEvents takes 1 to 10 entries; 11 (or
// none) is a ValidationException for the whole request, and nothing of it
// is delivered; 10 go through.
func TestElevenEntriesAreRefusedWhole(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	var entries []types.PutEventsRequestEntry
	for i := range 11 {
		entries = append(entries, entry("s", "t", fmt.Sprintf(`{"i":%d}`, i)))
	}
	_, err := f.client.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: entries})
	if code := apiCode(t, err); code != "ValidationException" || !strings.Contains(err.Error(), "at most 10") {
		t.Errorf("11 entries: %v", err)
	}
	_, err = f.client.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{}})
	if code := apiCode(t, err); code != "ValidationException" {
		t.Errorf("no entries: %v", err)
	}
	if n := len(f.sqs.bodies(q)); n != 0 {
		t.Fatalf("%d events of refused requests delivered", n)
	}
	out := put(t, f.client, entries[:10]...)
	if out.FailedEntryCount != 0 || len(f.sqs.bodies(q)) != 10 {
		t.Errorf("10 entries: %d failed, %d delivered", out.FailedEntryCount, len(f.sqs.bodies(q)))
	}
	s := f.bus.Stats()
	if s.Refused["ValidationException"] != 2 || s.Accepted != 10 || s.Requests != 3 {
		t.Errorf("stats %+v", s)
	}
}

// TestABadEntryFailsAloneAndTheOthersGoThrough: a Detail that is not JSON,
// or JSON but not an object, fails its entry with MalformedDetail; a
// missing Source, DetailType or Detail with InvalidArgument; each counts in
// FailedEntryCount, gets no event id, and the good entries around them are
// delivered in order.
func TestABadEntryFailsAloneAndTheOthersGoThrough(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	noSource := entry("", "t", "{}")
	noSource.Source = nil
	noDetail := entry("s", "t", "")
	noDetail.Detail = nil
	out := put(t, f.client,
		entry("s", "t", `{"n":1}`),
		entry("s", "t", `{"n":`),
		entry("s", "t", `[1,2]`),
		noSource,
		entry("s", "", "{}"),
		noDetail,
		entry("s", strings.Repeat("x", 129), "{}"),
		entry("s", "t", `{"n":2}`),
	)
	want := "ok MalformedDetail MalformedDetail InvalidArgument InvalidArgument InvalidArgument InvalidArgument ok"
	if got := strings.Join(failures(out), " "); got != want || out.FailedEntryCount != 6 {
		t.Fatalf("results %s (FailedEntryCount %d); want %s (6)", got, out.FailedEntryCount, want)
	}
	for i, e := range out.Entries {
		if (e.ErrorCode != nil) == (e.EventId != nil) || (e.ErrorCode != nil && aws.ToString(e.ErrorMessage) == "") {
			t.Errorf("entry %d: id %v, code %v, message %q", i, aws.ToString(e.EventId), aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
		}
	}
	if !strings.Contains(aws.ToString(out.Entries[3].ErrorMessage), "Source") || !strings.Contains(aws.ToString(out.Entries[5].ErrorMessage), "Detail") {
		t.Errorf("the messages do not name the field: %q, %q", aws.ToString(out.Entries[3].ErrorMessage), aws.ToString(out.Entries[5].ErrorMessage))
	}
	evs := f.sqs.events(t, q)
	if len(evs) != 2 || string(evs[0].Detail) != `{"n":1}` || string(evs[1].Detail) != `{"n":2}` || evs[0].ID != aws.ToString(out.Entries[0].EventId) {
		t.Errorf("delivered %+v", evs)
	}
	s := f.bus.Stats()
	if s.Accepted != 2 || s.Failed["MalformedDetail"] != 2 || s.Failed["InvalidArgument"] != 4 {
		t.Errorf("stats %+v", s)
	}
}

// TestAnEntryForAnUnknownBusFails: an EventBusName the stand-in does not
// have fails its entry with a message naming the bus and the fix; a custom
// bus, by name or ARN, gets its events to its own rules only.
func TestAnEntryForAnUnknownBusFails(t *testing.T) {
	onDefault, onOutcomes := queue("default"), queue("outcomes")
	f := setup(t, bus.Config{Buses: []string{"nudge-outcomes"}, Rules: []bus.Rule{
		{Name: "default-all", QueueURL: onDefault},
		{Name: "outcomes-all", EventBus: "nudge-outcomes", QueueURL: onOutcomes},
	}})
	unknown := entry("s", "t", `{"n":1}`)
	unknown.EventBusName = aws.String("nudge-outcome")
	foreign := entry("s", "t", `{"n":2}`)
	foreign.EventBusName = aws.String("arn:aws:events:us-east-1:111111111111:event-bus/nudge-outcomes")
	byName := entry("s", "t", `{"n":3}`)
	byName.EventBusName = aws.String("nudge-outcomes")
	byARN := entry("s", "t", `{"n":4}`)
	byARN.EventBusName = aws.String(f.bus.ARN("nudge-outcomes"))
	def := entry("s", "t", `{"n":5}`)
	def.EventBusName = aws.String("default")
	out := put(t, f.client, unknown, foreign, byName, byARN, def)
	if got := strings.Join(failures(out), " "); got != "ResourceNotFoundException ResourceNotFoundException ok ok ok" {
		t.Fatalf("results %s", got)
	}
	if msg := aws.ToString(out.Entries[0].ErrorMessage); !strings.Contains(msg, "nudge-outcome ") || !strings.Contains(msg, "Config.Buses") {
		t.Errorf("the message %q does not name the bus and the fix", msg)
	}
	if got := f.sqs.bodies(onOutcomes); len(got) != 2 || !strings.Contains(got[0], `{"n":3}`) || !strings.Contains(got[1], `{"n":4}`) {
		t.Errorf("the custom bus's rule got %v", got)
	}
	if got := f.sqs.bodies(onDefault); len(got) != 1 || !strings.Contains(got[0], `{"n":5}`) {
		t.Errorf("the default bus's rule got %v", got)
	}
}

// TestARequestWithoutAuthorizationIsRefused: a request without a SigV4
// Authorization header (raw, or from a client without credentials) is
// refused with an AWS error and nothing is delivered.
func TestARequestWithoutAuthorizationIsRefused(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	req, err := http.NewRequest(http.MethodPost, f.bus.URL()+"/", strings.NewReader(`{"Entries":[{"Source":"s","DetailType":"t","Detail":"{}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "AWSEvents.PutEvents")
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != 400 || e.Type != "MissingAuthenticationTokenException" || e.Message == "" {
		t.Errorf("unsigned request: %d %s", resp.StatusCode, body)
	}
	anonymous := client(f.bus.URL(), func(o *eventbridge.Options) { o.Credentials = aws.AnonymousCredentials{}; o.RetryMaxAttempts = 1 })
	_, err = anonymous.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("s", "t", "{}")}})
	if code := apiCode(t, err); code != "MissingAuthenticationTokenException" {
		t.Errorf("a client without credentials: %v", err)
	}
	if n := len(f.sqs.bodies(q)); n != 0 || f.bus.Stats().Accepted != 0 {
		t.Errorf("%d events of unsigned requests delivered", n)
	}
}

// TestOtherOperationsAreUnknown: the SDK's other calls get a clear
// UnknownOperationException.
func TestOtherOperationsAreUnknown(t *testing.T) {
	f := setup(t, bus.Config{})
	_, err := f.client.ListRules(context.Background(), &eventbridge.ListRulesInput{})
	var re *awshttp.ResponseError
	if code := apiCode(t, err); code != "UnknownOperationException" || !strings.Contains(err.Error(), "AWSEvents.ListRules") ||
		!errors.As(err, &re) || re.HTTPStatusCode() != 400 {
		t.Errorf("ListRules: %v", err)
	}
}

// TestRulePatternsMatchOnSourceAndDetailType: a rule takes an event whose
// source is in its Source list and detail-type in its DetailType list, an
// empty list matching any; the others do not get it.
func TestRulePatternsMatchOnSourceAndDetailType(t *testing.T) {
	all, bySource, byType, both := queue("all"), queue("by-source"), queue("by-type"), queue("both")
	f := setup(t, bus.Config{Rules: []bus.Rule{
		{Name: "all", QueueURL: all},
		{Name: "by-source", Source: []string{"nudge.outcomes", "nudge.feedback"}, QueueURL: bySource},
		{Name: "by-type", DetailType: []string{"Delivery Sent"}, QueueURL: byType},
		{Name: "both", Source: []string{"nudge.outcomes"}, DetailType: []string{"Delivery Dead", "Delivery Expired"}, QueueURL: both},
	}})
	for _, c := range []struct {
		source, detailType string
		want               []string
	}{
		{"nudge.outcomes", "Delivery Sent", []string{all, bySource, byType}},
		{"nudge.feedback", "Delivery Dead", []string{all, bySource}},
		{"nudge.outcomes", "Delivery Expired", []string{all, bySource, both}},
		{"other.app", "Delivery Sent", []string{all, byType}},
		{"other.app", "Delivery Dead", []string{all}},
		{"nudge.outcome", "delivery sent", []string{all}}, // exact, case-sensitive matches
	} {
		before := map[string]int{}
		for _, q := range []string{all, bySource, byType, both} {
			before[q] = len(f.sqs.bodies(q))
		}
		put(t, f.client, entry(c.source, c.detailType, "{}"))
		var got []string
		for _, q := range []string{all, bySource, byType, both} {
			if len(f.sqs.bodies(q)) > before[q] {
				got = append(got, q)
			}
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s / %s went to %v; want %v", c.source, c.detailType, got, c.want)
		}
	}
	s := f.bus.Stats()
	if s.Delivered["all"] != 6 || s.Delivered["by-source"] != 3 || s.Delivered["by-type"] != 2 || s.Delivered["both"] != 1 {
		t.Errorf("delivered by rule %v", s.Delivered)
	}
}

// TestEntryFaultsAsTheSDKSeesThem: every Nth entry, or a chance of them,
// fails with InternalFailure (or ThrottlingException) in its result entry,
// the call itself succeeds, and only the others are delivered.
func TestEntryFaultsAsTheSDKSeesThem(t *testing.T) {
	q := queue("q")
	draws := []float64{0.1, 0.9, 0.29, 0.3}
	var mu sync.Mutex
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}, Faults: bus.Faults{EntryEvery: 2},
		Rand: func() float64 { mu.Lock(); defer mu.Unlock(); d := draws[0]; draws = draws[1:]; return d }})
	entries := []types.PutEventsRequestEntry{entry("s", "t", `{"n":1}`), entry("s", "t", `{"n":2}`), entry("s", "t", `{"n":3}`)}
	out := put(t, f.client, entries...)
	out2 := put(t, f.client, entries[0])
	if got := strings.Join(append(failures(out), failures(out2)...), " "); got != "ok InternalFailure ok InternalFailure" || out.FailedEntryCount != 1 {
		t.Fatalf("every 2nd entry: %s (FailedEntryCount %d)", got, out.FailedEntryCount)
	}
	if msg := aws.ToString(out.Entries[1].ErrorMessage); !strings.Contains(msg, "injected") {
		t.Errorf("the fault's message %q does not say it is injected", msg)
	}

	if err := f.bus.SetFaults(bus.Faults{EntryRate: 0.3, EntryCode: bus.CodeThrottling}); err != nil {
		t.Fatal(err)
	}
	out = put(t, f.client, entries[0], entries[1], entries[2], entries[0])
	if got := strings.Join(failures(out), " "); got != "ThrottlingException ok ThrottlingException ok" {
		t.Fatalf("a 30%% chance on draws 0.1 0.9 0.29 0.3: %s", got)
	}
	if got := f.sqs.bodies(q); len(got) != 4 {
		t.Errorf("delivered %d events; want the 4 that did not fail", len(got))
	}
	s := f.bus.Stats()
	if s.Failed["InternalFailure"] != 2 || s.Failed["ThrottlingException"] != 2 || s.EntryFaults != 4 || s.Accepted != 4 || s.Delivered["all"] != 4 {
		t.Errorf("stats %+v", s)
	}
	if err := f.bus.SetFaults(bus.Faults{EntryCode: "InternalException"}); err == nil {
		t.Error("SetFaults took an entry error code EventBridge does not retry")
	}
}

// TestRequestFaultsAsTheSDKSeesThem: a request fault is a 500
// InternalException, which a client that does not retry returns as
// *types.InternalException, and which the SDK's retryer retries: every
// 2nd request failing, a call with retries succeeds, and its events are
// delivered once.
func TestRequestFaultsAsTheSDKSeesThem(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}, Faults: bus.Faults{RequestRate: 1}})
	_, err := f.client.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("s", "t", "{}")}})
	var ie *types.InternalException
	var re *awshttp.ResponseError
	if !errors.As(err, &ie) || !errors.As(err, &re) || re.HTTPStatusCode() != 500 || !strings.Contains(ie.ErrorMessage(), "injected") {
		t.Fatalf("a request fault: %v (%T)", err, err)
	}

	if err := f.bus.SetFaults(bus.Faults{RequestEvery: 2}); err != nil {
		t.Fatal(err)
	}
	retrying := client(f.bus.URL(), func(o *eventbridge.Options) {
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), 5*time.Millisecond)
	})
	put(t, retrying, entry("s", "t", `{"n":1}`)) // request 1: through
	put(t, retrying, entry("s", "t", `{"n":2}`)) // request 2: fault, request 3: through
	if got := f.sqs.bodies(q); len(got) != 2 {
		t.Errorf("delivered %d events; want 2, each once", len(got))
	}
	s := f.bus.Stats()
	if s.RequestFaults != 2 || s.Refused["InternalException"] != 2 || s.Accepted != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestTheSizeLimitCountsAsEventBridgeDoes: the entries' total size
// (Source, DetailType, Detail, Resources in UTF-8 bytes, 14 for a Time) at
// the limit is accepted, one byte over is a ValidationException for the
// whole request.
func TestTheSizeLimitCountsAsEventBridgeDoes(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	const limit = bus.DefaultMaxRequestBytes
	// Two entries: the first with a Time and a resource, the second's detail
	// padded with a two-byte character so that bytes, not characters, count.
	first := entry("nudge.outcomes", "Delivery Sent", `{"a":"é"}`)
	first.Time = aws.Time(now)
	first.Resources = []string{"arn:aws:dynamodb:us-east-1:000000000000:table/ledger"}
	firstSize := bus.EntrySize(*first.Source, *first.DetailType, *first.Detail, first.Resources, true)
	if firstSize != 14+13+len(`{"a":"é"}`)+52+14 {
		t.Fatalf("EntrySize %d", firstSize)
	}
	padded := func(size int) types.PutEventsRequestEntry {
		frame := len("nudge.outcomes") + len("Padding") + len(`{"p":""}`)
		pad := strings.Repeat("é", (size-frame)/2) + strings.Repeat("x", (size-frame)%2)
		return entry("nudge.outcomes", "Padding", `{"p":"`+pad+`"}`)
	}
	at := padded(limit - firstSize)
	if got := bus.EntrySize(*at.Source, *at.DetailType, *at.Detail, nil, false); got != limit-firstSize {
		t.Fatalf("the padded entry is %d bytes; want %d", got, limit-firstSize)
	}
	out := put(t, f.client, first, at)
	if out.FailedEntryCount != 0 || len(f.sqs.bodies(q)) != 2 {
		t.Fatalf("at the limit: %v, %d delivered", failures(out), len(f.sqs.bodies(q)))
	}
	_, err := f.client.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{first, padded(limit - firstSize + 1)}})
	if code := apiCode(t, err); code != "ValidationException" || !strings.Contains(err.Error(), "over the limit") ||
		!strings.Contains(err.Error(), fmt.Sprint(limit+1)) {
		t.Errorf("one byte over: %v", err)
	}
	if n := len(f.sqs.bodies(q)); n != 2 {
		t.Errorf("%d delivered; the request over the limit delivered something", n)
	}

	small := setup(t, bus.Config{MaxRequestBytes: 100})
	_, err = small.client.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{padded(101)}})
	if code := apiCode(t, err); code != "ValidationException" {
		t.Errorf("Config.MaxRequestBytes 100, 101 bytes: %v", err)
	}
	put(t, small.client, padded(100))
}

// TestAFailingTargetIsRetriedThenCounted: a target that refuses twice gets
// the event on the third try; one that always refuses is tried
// TargetAttempts times and counted in TargetFailures, while PutEvents
// still reports the entry accepted, as EventBridge does (delivery is not
// the caller's business).
func TestAFailingTargetIsRetriedThenCounted(t *testing.T) {
	flaky, broken, fine := queue("flaky"), queue("broken"), queue("fine")
	sqsFake := newFakeSQS()
	sqsFake.fail[flaky], sqsFake.fail[broken] = 2, -1
	log := &lockedBuffer{}
	f := setup(t, bus.Config{SQS: sqsFake, TargetAttempts: 3, Log: log, Rules: []bus.Rule{
		{Name: "flaky", QueueURL: flaky}, {Name: "broken", QueueURL: broken}, {Name: "fine", QueueURL: fine},
	}})
	out := put(t, f.client, entry("s", "t", "{}"))
	if out.FailedEntryCount != 0 {
		t.Fatalf("results %v", failures(out))
	}
	if sqsFake.callsTo(flaky) != 3 || sqsFake.callsTo(broken) != 3 || sqsFake.callsTo(fine) != 1 ||
		len(sqsFake.bodies(flaky)) != 1 || len(sqsFake.bodies(broken)) != 0 || len(sqsFake.bodies(fine)) != 1 {
		t.Errorf("sends flaky %d broken %d fine %d; delivered flaky %d broken %d fine %d; want 3 3 1, 1 0 1",
			sqsFake.callsTo(flaky), sqsFake.callsTo(broken), sqsFake.callsTo(fine),
			len(sqsFake.bodies(flaky)), len(sqsFake.bodies(broken)), len(sqsFake.bodies(fine)))
	}
	if line := log.String(); !strings.Contains(line, "rule broken: event "+aws.ToString(out.Entries[0].EventId)+" not delivered to "+broken+" after 3 tries") {
		t.Errorf("the log does not say which event the target lost:\n%s", line)
	}
	s := f.bus.Stats()
	if s.Delivered["flaky"] != 1 || s.Delivered["fine"] != 1 || s.Delivered["broken"] != 0 || s.TargetFailures["broken"] != 1 || len(s.TargetFailures) != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestConcurrentRequests: requests from several goroutines are all
// answered, every event is delivered once with an id of its own, and the
// counts add up.
func TestConcurrentRequests(t *testing.T) {
	q := queue("q")
	f := setup(t, bus.Config{Rules: []bus.Rule{{Name: "all", QueueURL: q}}})
	const workers, calls, per = 6, 10, 3
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range calls {
				var entries []types.PutEventsRequestEntry
				for i := range per {
					entries = append(entries, entry("s", "t", fmt.Sprintf(`{"w":%d,"c":%d,"i":%d}`, w, c, i)))
				}
				out, err := f.client.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: entries})
				if err != nil || out.FailedEntryCount != 0 {
					t.Errorf("worker %d call %d: %v", w, c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ids, details := map[string]bool{}, map[string]bool{}
	for _, ev := range f.sqs.events(t, q) {
		ids[ev.ID], details[string(ev.Detail)] = true, true
	}
	const n = workers * calls * per
	if len(ids) != n || len(details) != n {
		t.Errorf("%d ids, %d details delivered; want %d each", len(ids), len(details), n)
	}
	if s := f.bus.Stats(); s.Requests != workers*calls || s.Accepted != n || s.Delivered["all"] != n {
		t.Errorf("stats %+v", s)
	}
}

// TestNewRefusesNonsense: a configuration the bus cannot serve is refused
// with the field and the fix.
func TestNewRefusesNonsense(t *testing.T) {
	q := queue("q")
	sqsFake := newFakeSQS()
	for _, c := range []struct {
		name string
		cfg  bus.Config
		want string
	}{
		{"account", bus.Config{AccountID: "42"}, "AccountID"},
		{"region", bus.Config{Region: "mars"}, "Region"},
		{"bus name", bus.Config{Buses: []string{"no spaces"}}, "Buses[0]"},
		{"default listed", bus.Config{Buses: []string{"default"}}, "twice"},
		{"rule without name", bus.Config{SQS: sqsFake, Rules: []bus.Rule{{QueueURL: q}}}, "Name"},
		{"rule on unknown bus", bus.Config{SQS: sqsFake, Rules: []bus.Rule{{Name: "r", EventBus: "other", QueueURL: q}}}, "Config.Buses"},
		{"two rules one name", bus.Config{SQS: sqsFake, Rules: []bus.Rule{{Name: "r", QueueURL: q}, {Name: "r", QueueURL: q}}}, "two rules"},
		{"no queue", bus.Config{SQS: sqsFake, Rules: []bus.Rule{{Name: "r"}}}, "QueueURL"},
		{"fifo", bus.Config{SQS: sqsFake, Rules: []bus.Rule{{Name: "r", QueueURL: q + ".fifo"}}}, "FIFO"},
		{"no SQS", bus.Config{Rules: []bus.Rule{{Name: "r", QueueURL: q}}}, "Config.SQS"},
		{"size", bus.Config{MaxRequestBytes: -1}, "MaxRequestBytes"},
		{"attempts", bus.Config{TargetAttempts: -1}, "TargetAttempts"},
		{"entry rate", bus.Config{Faults: bus.Faults{EntryRate: 1.5}}, "EntryRate"},
		{"request every", bus.Config{Faults: bus.Faults{RequestEvery: -2}}, "RequestEvery"},
	} {
		if _, err := bus.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %s", c.name, err, c.want)
		}
	}
}
