package esm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/local/esm"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
)

func batchOf(ids ...string) events.SQSEvent {
	var ev events.SQSEvent
	for _, id := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: id})
	}
	return ev
}

func TestAcknowledgedFollowsLambdasRules(t *testing.T) {
	t.Parallel()
	ev := batchOf("m1", "m2", "m3")
	cases := []struct {
		name      string
		response  string
		deleted   string // message ids, comma-separated
		wholeFail string // part of the error, when the whole batch fails
	}{
		{"empty response", ``, "m1,m2,m3", ""},
		{"null response", `null`, "m1,m2,m3", ""},
		{"empty object", `{}`, "m1,m2,m3", ""},
		{"null list", `{"batchItemFailures":null}`, "m1,m2,m3", ""},
		{"empty list", `{"batchItemFailures":[]}`, "m1,m2,m3", ""},
		{"one failure", `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`, "m1,m3", ""},
		{"all failed", `{"batchItemFailures":[{"itemIdentifier":"m1"},{"itemIdentifier":"m2"},{"itemIdentifier":"m3"}]}`, "", ""},
		{"repeated id", `{"batchItemFailures":[{"itemIdentifier":"m2"},{"itemIdentifier":"m2"}]}`, "m1,m3", ""},
		{"empty id", `{"batchItemFailures":[{"itemIdentifier":""}]}`, "", "empty itemIdentifier"},
		{"null id", `{"batchItemFailures":[{"itemIdentifier":null}]}`, "", "no itemIdentifier"},
		{"misspelt key", `{"batchItemFailures":[{"itemId":"m2"}]}`, "", "no itemIdentifier"},
		{"unknown id", `{"batchItemFailures":[{"itemIdentifier":"m9"}]}`, "", `"m9" is not a message`},
		{"function error", `{"errorMessage":"boom","errorType":"Runtime.ExitError"}`, "", "function error"},
		{"not JSON", `Task timed out`, "", "not a JSON object"},
		{"list of strings", `{"batchItemFailures":["m2"]}`, "", "not a list of objects"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keep, err := esm.Acknowledged(ev, []byte(c.response))
			if c.wholeFail != "" {
				if err == nil || !strings.Contains(err.Error(), c.wholeFail) || len(keep) != 0 {
					t.Fatalf("got %v, %v; want the whole batch failed with %q", keep, err, c.wholeFail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range keep {
				ids = append(ids, r.MessageId)
			}
			if got := strings.Join(ids, ","); got != c.deleted {
				t.Fatalf("deleted %q, want %q", got, c.deleted)
			}
		})
	}
}

func TestNewRefusesWhatLambdaRefuses(t *testing.T) {
	t.Parallel()
	inv := []esm.Invoker{esm.InvokerFunc(func(context.Context, []byte) ([]byte, error) { return nil, nil })}
	base := esm.Config{Queue: &sqs.Client{}, QueueURL: "u", QueueARN: "arn:aws:sqs:eu-west-1:1:q", Invokers: inv}
	for _, c := range []struct {
		name string
		edit func(*esm.Config)
		want string
	}{
		{"no invokers", func(c *esm.Config) { c.Invokers = nil }, "Invoker"},
		{"batch too big", func(c *esm.Config) { c.BatchSize = 10001 }, "outside 1–10000"},
		{"big batch without window", func(c *esm.Config) { c.BatchSize = 100 }, "batching window of at least 1s"},
		{"window too long", func(c *esm.Config) { c.BatchingWindow = 6 * time.Minute }, "outside 0–5m"},
		{"no queue", func(c *esm.Config) { c.QueueURL = "" }, "required"},
		{"timeout too long", func(c *esm.Config) { c.FunctionTimeout = 16 * time.Minute }, "function timeout"},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := esm.New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := esm.New(base); err != nil {
		t.Fatal(err)
	}
}

// fixture is a work queue with a DLQ on fauxqs.
type fixture struct {
	ctx context.Context
	sqs *sqs.Client
	q   standintest.Queues
}

func setup(t *testing.T, visibility time.Duration, maxReceiveCount int) *fixture {
	t.Helper()
	client := standintest.SQS(t)
	return &fixture{ctx: context.Background(), sqs: client, q: standintest.QueuePair(t, client, visibility, maxReceiveCount)}
}

func (f *fixture) send(t testing.TB, n int) {
	t.Helper()
	for i := 0; i < n; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprintf(`{"n":%d}`, j))})
		}
		if _, err := f.sqs.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(f.q.WorkURL), Entries: entries}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) mapping(t *testing.T, batch int, window time.Duration, inv ...esm.Invoker) *esm.Mapping {
	t.Helper()
	m, err := esm.New(esm.Config{Queue: f.sqs, QueueURL: f.q.WorkURL, QueueARN: f.q.WorkARN, BatchSize: batch, BatchingWindow: window, Invokers: inv, PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// depth returns the visible and in-flight messages of url.
func (f *fixture) depth(t *testing.T, url string) (visible, inFlight string) {
	t.Helper()
	out, err := f.sqs.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

// failing reports the records whose body has an odd n as failures.
func failing(t *testing.T, seen *[]events.SQSEvent) esm.Invoker {
	var mu sync.Mutex
	return esm.InvokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		var ev events.SQSEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			t.Errorf("the payload is not an SQS event: %v", err)
		}
		mu.Lock()
		*seen = append(*seen, ev)
		mu.Unlock()
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			var b struct{ N int }
			_ = json.Unmarshal([]byte(r.Body), &b)
			if b.N%2 == 1 {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return json.Marshal(resp)
	})
}

// TestPollDeletesOnlySuccessesAndFailuresComeBack: the reported failures are
// left alone, and come back after the queue's visibility timeout with a
// higher receive count; the successes are gone.
func TestPollDeletesOnlySuccessesAndFailuresComeBack(t *testing.T) {
	t.Parallel()
	f := setup(t, 2*time.Second, 5)
	f.send(t, 6)
	var seen []events.SQSEvent
	m := f.mapping(t, 10, time.Second, failing(t, &seen))
	res, err := m.Poll(f.ctx, m.Invoker(0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 6 || res.Deleted != 3 || len(res.Failed) != 3 || res.BatchError != nil {
		t.Fatalf("first poll: %+v", res)
	}
	r := seen[0].Records[0]
	if r.EventSource != "aws:sqs" || r.EventSourceARN != f.q.WorkARN || r.ReceiptHandle == "" || r.Attributes["ApproximateReceiveCount"] != "1" || r.Md5OfBody == "" {
		t.Fatalf("a record is not shaped like Lambda's: %+v", r)
	}
	if v, inFlight := f.depth(t, f.q.WorkURL); v != "0" || inFlight != "3" {
		t.Fatalf("after the poll: %s visible, %s in flight; want 0 and 3", v, inFlight)
	}
	// The failures come back after their visibility, each received twice now.
	for deadline := time.Now().Add(10 * time.Second); res.Records == 0 || len(seen) < 2; {
		if res, err = m.Poll(f.ctx, m.Invoker(0)); err != nil || time.Now().After(deadline) {
			t.Fatalf("the failures did not come back: %v", err)
		}
	}
	if res.Records != 3 || res.Deleted != 0 || m.Stats().Invocations != 2 {
		t.Fatalf("second poll: %+v", res)
	}
	for _, r := range seen[1].Records {
		if r.Attributes["ApproximateReceiveCount"] != "2" || !strings.Contains("135", r.Body[5:6]) {
			t.Fatalf("came back: %s with receive count %s", r.Body, r.Attributes["ApproximateReceiveCount"])
		}
	}
	if st := m.Stats(); st.Invocations != 2 || st.Records != 9 || st.Deleted != 3 || st.Returned != 6 || st.DeleteRequests != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAFailedBatchDeletesNothing: a function error, or a response naming an
// unknown id, leaves every record to its visibility.
func TestAFailedBatchDeletesNothing(t *testing.T) {
	t.Parallel()
	for name, inv := range map[string]esm.Invoker{
		"function error": esm.InvokerFunc(func(context.Context, []byte) ([]byte, error) { return nil, errors.New("runtime exited") }),
		"unknown id": esm.InvokerFunc(func(context.Context, []byte) ([]byte, error) {
			return []byte(`{"batchItemFailures":[{"itemIdentifier":"not-in-this-batch"}]}`), nil
		}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, 30*time.Second, 5)
			f.send(t, 4)
			m := f.mapping(t, 10, time.Second, inv)
			res, err := m.Poll(f.ctx, m.Invoker(0))
			if err != nil {
				t.Fatal(err)
			}
			if res.Records != 4 || res.Deleted != 0 || len(res.Failed) != 4 || res.BatchError == nil {
				t.Fatalf("%+v", res)
			}
			if v, inFlight := f.depth(t, f.q.WorkURL); v != "0" || inFlight != "4" {
				t.Fatalf("%s visible, %s in flight; want 0 and 4", v, inFlight)
			}
		})
	}
}

// TestACrashingRecordReachesTheDLQAfterMaxReceiveCount: the mapping never
// deletes a record whose batch keeps failing, so the queue's redrive policy
// moves it to the DLQ after maxReceiveCount receives.
func TestACrashingRecordReachesTheDLQAfterMaxReceiveCount(t *testing.T) {
	t.Parallel()
	f := setup(t, time.Second, 2)
	f.send(t, 1)
	var calls atomic.Int32
	crash := esm.InvokerFunc(func(context.Context, []byte) ([]byte, error) {
		calls.Add(1)
		return []byte(`{"errorMessage":"panic: nil map","errorType":"Runtime.ExitError"}`), nil
	})
	m := f.mapping(t, 10, 0, crash)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v, _ := f.depth(t, f.q.DLQURL); v == "1" {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the record did not reach the DLQ; %d invocations", calls.Load())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	<-done
	if got := calls.Load(); got != 2 {
		t.Fatalf("the function was invoked %d times with the record, want maxReceiveCount = 2", got)
	}
	if v, inFlight := f.depth(t, f.q.WorkURL); v != "0" || inFlight != "0" {
		t.Fatalf("the work queue still has %s visible, %s in flight", v, inFlight)
	}
}

// TestBatchingWindowGathersUpToTheBatchSize: with a window, receives of ten
// are gathered into one batch of the configured size; without one, a batch
// is what one receive returns.
func TestBatchingWindowGathersUpToTheBatchSize(t *testing.T) {
	t.Parallel()
	f := setup(t, 30*time.Second, 5)
	f.send(t, 35)
	var sizes []int
	record := esm.InvokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		var ev events.SQSEvent
		_ = json.Unmarshal(payload, &ev)
		sizes = append(sizes, len(ev.Records))
		return nil, nil
	})
	m := f.mapping(t, 25, 2*time.Second, record)
	res, err := m.Poll(f.ctx, m.Invoker(0))
	if err != nil || res.Records != 25 || res.Deleted != 25 {
		t.Fatalf("%+v %v", res, err)
	}
	m2 := f.mapping(t, 10, 0, record)
	if _, err := m2.Poll(f.ctx, m2.Invoker(0)); err != nil {
		t.Fatal(err)
	}
	if sizes[0] != 25 || sizes[1] < 1 || sizes[1] > 10 {
		t.Fatalf("batch sizes %v; want 25, then 1–10", sizes)
	}
}

// TestMaxConcurrencyIsTheNumberOfInvokers: one invocation at a time per
// invoker, never more invocations at once than invokers.
func TestMaxConcurrencyIsTheNumberOfInvokers(t *testing.T) {
	t.Parallel()
	f := setup(t, 30*time.Second, 5)
	f.send(t, 40)
	var running, peak, records atomic.Int32
	var invokers []esm.Invoker
	for range 3 {
		var busy atomic.Bool
		invokers = append(invokers, esm.InvokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
			if !busy.CompareAndSwap(false, true) {
				t.Error("an invoker was invoked while busy (the emulator would crash)")
			}
			defer busy.Store(false)
			n := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			var ev events.SQSEvent
			_ = json.Unmarshal(payload, &ev)
			records.Add(int32(len(ev.Records)))
			time.Sleep(100 * time.Millisecond)
			return nil, nil
		}))
	}
	m := f.mapping(t, 5, 0, invokers...)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for records.Load() < 40 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if records.Load() != 40 || peak.Load() > 3 {
		t.Fatalf("%d records invoked (want 40), peak concurrency %d (want ≤ 3)", records.Load(), peak.Load())
	}
	if v, inFlight := f.depth(t, f.q.WorkURL); v != "0" || inFlight != "0" {
		t.Fatalf("the work queue still has %s visible, %s in flight", v, inFlight)
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// hanging is an instance whose invocations never answer until it is
// recycled, as an emulator stuck on a runtime that does not return: it
// counts its invocations and recycles, and fails the test if it is invoked
// while still busy with one the mapping gave up on.
type hanging struct {
	t                     *testing.T
	busy                  atomic.Bool
	invocations, recycles atomic.Int32
	release               chan struct{}
	mu                    sync.Mutex
}

func (h *hanging) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if !h.busy.CompareAndSwap(false, true) {
		h.t.Error("invoked while still running an invocation the mapping gave up on (the emulator would crash)")
	}
	if h.invocations.Add(1) > 1 {
		h.busy.Store(false)
		return nil, nil // a recycled instance answers
	}
	h.mu.Lock()
	release := h.release
	h.mu.Unlock()
	<-ctx.Done() // the mapping's limit; the instance itself runs on
	go func() { <-release; h.busy.Store(false) }()
	return nil, ctx.Err()
}

func (h *hanging) Recycle(context.Context) error {
	h.recycles.Add(1)
	h.mu.Lock()
	close(h.release)
	h.mu.Unlock()
	for h.busy.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// TestAnInvocationThatNeverAnswersEndsAtTheFunctionsTimeout: as Lambda ends
// an invocation at the function's timeout, the mapping fails a batch whose
// invocation has not answered by then (and the grace); its records come
// back after their visibility timeout, and the instance is recycled before
// it is invoked again, never invoked while still busy.
func TestAnInvocationThatNeverAnswersEndsAtTheFunctionsTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, 2*time.Second, 5)
	f.send(t, 3)
	inv := &hanging{t: t, release: make(chan struct{})}
	var logged bytes.Buffer
	m, err := esm.New(esm.Config{Queue: f.sqs, QueueURL: f.q.WorkURL, QueueARN: f.q.WorkARN, BatchSize: 10, BatchingWindow: time.Second,
		Invokers: []esm.Invoker{inv}, PollWait: time.Second, FunctionTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logged}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	// While it hangs, the poller says so: invoking, since when, which batch.
	var during esm.PollerState
	for deadline := time.Now().Add(10 * time.Second); during.Phase != esm.Invoking && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		during = m.Pollers()[0]
	}
	if during.Phase != esm.Invoking || len(during.Records) != 3 || time.Since(during.Since) > 2*time.Second || m.Held() != 3 {
		t.Fatalf("while the invocation hangs: %+v, held %d; want invoking 3 records", during, m.Held())
	}
	for deadline := time.Now().Add(20 * time.Second); m.Stats().Deleted < 3 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	st := m.Stats()
	if st.Timeouts != 1 || st.BatchFailures != 1 || st.Deleted != 3 || inv.recycles.Load() != 1 || inv.invocations.Load() != 2 {
		t.Fatalf("stats %+v, %d invocations, %d recycles; want one timeout, then one recycle and the 3 records sent again and deleted",
			st, inv.invocations.Load(), inv.recycles.Load())
	}
	if log := logged.String(); !strings.Contains(log, "invoker=0 records=3") || !strings.Contains(log, "invocation timed out: no answer") {
		t.Fatalf("the mapping's log does not name the timed-out invocation: %s", log)
	}
	if r := m.Returned(); len(r) != 0 {
		t.Fatalf("records still returned after they were sent again: %+v", r)
	}
	if p := m.Pollers()[0]; p.Phase != esm.Idle || m.Held() != 0 {
		t.Fatalf("after Run: %+v, held %d", p, m.Held())
	}
}

// TestReceivesTheMappingNeverHadAreCounted: a record that comes back with a
// receive count above what the mapping had of it (another consumer
// received it, or a receive's answer was lost) is counted, once per
// missing receive; records the mapping itself returned are not.
func TestReceivesTheMappingNeverHadAreCounted(t *testing.T) {
	t.Parallel()
	f := setup(t, time.Second, 10)
	f.send(t, 4)
	// Two records received elsewhere first: the mapping never has that
	// receive.
	out, err := f.sqs.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.q.WorkURL), MaxNumberOfMessages: 2})
	if err != nil || len(out.Messages) != 2 {
		t.Fatalf("receive elsewhere: %v, %d messages", err, len(out.Messages))
	}
	// The mapping's own returns: the first batch fails as a whole, once.
	var calls atomic.Int32
	m := f.mapping(t, 10, time.Second, esm.InvokerFunc(func(context.Context, []byte) ([]byte, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("runtime exited")
		}
		return nil, nil
	}))
	for deadline := time.Now().Add(20 * time.Second); m.Stats().Deleted < 4 && time.Now().Before(deadline); {
		if _, err := m.Poll(f.ctx, m.Invoker(0)); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.Deleted != 4 || st.UnseenReceives != 2 || st.BatchFailures != 1 {
		t.Fatalf("stats %+v; want the 4 records deleted after one failed batch, and the 2 receives had elsewhere counted unseen", st)
	}
}

// TestAReceiveInFlightWhenRunEndsIsNotLost: Run ending while a long poll
// waits does not cancel the receive (its records would be hidden for a
// visibility timeout with no one holding them); what it receives is
// invoked and deleted, as Lambda drains a disabled mapping.
func TestAReceiveInFlightWhenRunEndsIsNotLost(t *testing.T) {
	t.Parallel()
	f := setup(t, time.Minute, 10)
	var invoked atomic.Int32
	m, err := esm.New(esm.Config{Queue: f.sqs, QueueURL: f.q.WorkURL, QueueARN: f.q.WorkARN, PollWait: 5 * time.Second,
		Invokers: []esm.Invoker{esm.InvokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
			var ev events.SQSEvent
			_ = json.Unmarshal(payload, &ev)
			invoked.Add(int32(len(ev.Records)))
			return nil, nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	for deadline := time.Now().Add(5 * time.Second); m.Pollers()[0].Phase != esm.Receiving && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the long poll has reached the queue
	cancel()
	f.send(t, 3) // arrives while the receive still waits
	<-done
	if v, inFlight := f.depth(t, f.q.WorkURL); invoked.Load() != 3 || v != "0" || inFlight != "0" {
		t.Fatalf("%d records invoked, the queue holds %s visible and %s in flight; want the 3 invoked and deleted", invoked.Load(), v, inFlight)
	}
}

// TestAPollOfAnEmptyQueueReturnsAfterThePollWait: Poll answers an empty
// Result when nothing arrives within the poll wait.
func TestAPollOfAnEmptyQueueReturnsAfterThePollWait(t *testing.T) {
	t.Parallel()
	f := setup(t, time.Second, 10)
	m := f.mapping(t, 10, time.Second, esm.InvokerFunc(func(context.Context, []byte) ([]byte, error) { return nil, nil }))
	start := time.Now()
	res, err := m.Poll(f.ctx, m.Invoker(0))
	if err != nil || res.Records != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("poll of an empty queue: %+v, %v after %v", res, err, time.Since(start))
	}
}

// BenchmarkMappingThroughput measures records per second through one
// mapping with a no-op function against fauxqs: the ceiling the local
// event source mapping puts on a demo, before any function work.
func BenchmarkMappingThroughput(b *testing.B) {
	client := standintest.SQS(b)
	for _, c := range []struct {
		batch     int
		window    time.Duration
		instances int
	}{{10, 0, 1}, {10, 0, 2}, {10, time.Second, 2}, {100, time.Second, 2}} {
		b.Run(fmt.Sprintf("batch=%d/window=%v/instances=%d", c.batch, c.window, c.instances), func(b *testing.B) {
			const n = 2000
			var records atomic.Int64
			var invokers []esm.Invoker
			for range c.instances {
				invokers = append(invokers, esm.InvokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
					var ev events.SQSEvent
					_ = json.Unmarshal(payload, &ev)
					records.Add(int64(len(ev.Records)))
					return nil, nil
				}))
			}
			for range b.N {
				// A fresh queue each time: fauxqs keeps a long poll whose
				// client went away, and hands it the next messages to
				// arrive, which then stay invisible for the visibility
				// timeout.
				q := standintest.QueuePair(b, client, 30*time.Second, 5)
				f := &fixture{ctx: context.Background(), sqs: client, q: q}
				records.Store(0)
				f.send(b, n)
				m, err := esm.New(esm.Config{Queue: client, QueueURL: q.WorkURL, QueueARN: q.WorkARN, BatchSize: c.batch, BatchingWindow: c.window, Invokers: invokers, PollWait: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				start := time.Now()
				done := make(chan struct{})
				go func() { m.Run(ctx); close(done) }()
				for records.Load() < n {
					time.Sleep(10 * time.Millisecond)
				}
				elapsed := time.Since(start)
				cancel()
				<-done
				b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
			}
		})
	}
}
