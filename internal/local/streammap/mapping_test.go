package streammap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/nudgehq/nudge/internal/local/streammap"
)

func TestNewRefusesWhatLambdaRefuses(t *testing.T) {
	t.Parallel()
	inv := streammap.InvokerFunc(func(context.Context, []byte) ([]byte, error) { return nil, nil })
	base := streammap.Config{Streams: newFakeStream(), TableName: "ledger", Invoker: inv}
	for _, c := range []struct {
		name string
		edit func(*streammap.Config)
		want string
	}{
		{"no client", func(c *streammap.Config) { c.Streams = nil }, "Streams"},
		{"no function", func(c *streammap.Config) { c.Invoker = nil }, "Invoker"},
		{"no stream", func(c *streammap.Config) { c.TableName = "" }, "StreamARN"},
		{"batch too big", func(c *streammap.Config) { c.BatchSize = 10001 }, "outside 1–10000"},
		{"batch negative", func(c *streammap.Config) { c.BatchSize = -1 }, "outside 1–10000"},
		{"position", func(c *streammap.Config) { c.StartingPosition = types.ShardIteratorTypeAtSequenceNumber }, "not TRIM_HORIZON or LATEST"},
		{"retries below -1", func(c *streammap.Config) { c.MaximumRetryAttempts = aws.Int(-2) }, "outside -1"},
		{"retries too many", func(c *streammap.Config) { c.MaximumRetryAttempts = aws.Int(10001) }, "to 10000"},
		{"negative delay", func(c *streammap.Config) { c.RetryDelay = -time.Second }, "negative"},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := streammap.New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	for _, n := range []int{-1, 0, 10000} {
		cfg := base
		cfg.MaximumRetryAttempts, cfg.BatchSize = aws.Int(n), 10000
		if _, err := streammap.New(cfg); err != nil {
			t.Errorf("retries %d: %v", n, err)
		}
	}
}

// seen records what a function was invoked with, and answers with what
// answer says (nil: success).
type seen struct {
	mu      sync.Mutex
	batches [][]events.DynamoDBEventRecord
	answer  func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
	busy    bool
	t       *testing.T
}

func (s *seen) invoker() streammap.Invoker {
	return streammap.InProcess(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		s.mu.Lock()
		if s.busy {
			s.t.Error("two invocations at once (the emulator would crash)")
		}
		s.busy = true
		s.batches = append(s.batches, ev.Records)
		call := len(s.batches)
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		defer func() { s.mu.Lock(); s.busy = false; s.mu.Unlock() }()
		if s.answer == nil {
			return events.DynamoDBEventResponse{}, nil
		}
		return s.answer(call, ev)
	})
}

// keys returns the keys of each batch, "k1 k2|k3".
func (s *seen) keys() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.batches {
		var ks []string
		for _, r := range b {
			ks = append(ks, r.Change.Keys["pk"].String())
		}
		out = append(out, strings.Join(ks, " "))
	}
	return strings.Join(out, "|")
}

// flat returns every key delivered, in order, and how many times each.
func (s *seen) flat() ([]string, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var order []string
	times := map[string]int{}
	for _, b := range s.batches {
		for _, r := range b {
			k := r.Change.Keys["pk"].String()
			order = append(order, k)
			times[k]++
		}
	}
	return order, times
}

// run starts m and returns a function that stops it and waits.
func run(t *testing.T, m *streammap.Mapping) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func drain(t *testing.T, m *streammap.Mapping) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

func fakeConfig(f *fakeStream, s *seen) streammap.Config {
	return streammap.Config{Streams: f, TableName: "ledger", Invoker: s.invoker(), PollInterval: 2 * time.Millisecond, RetryDelay: time.Millisecond}
}

// TestParentsAreReadBeforeChildren: whatever order DescribeStream lists
// them in, a shard is read to its end before its children; a shard whose
// parent is gone from the stream is read at once; a shard that appears
// later is read from its start, after its parent.
func TestParentsAreReadBeforeChildren(t *testing.T) {
	t.Parallel()
	f := newFakeStream()
	f.add("child-1", "parent")
	f.add("orphan", "trimmed-away")
	f.add("parent", "")
	f.add("child-2", "parent")
	f.put("parent", "p1")
	f.put("child-1", "c1")
	f.put("child-2", "c2")
	f.put("orphan", "o1")
	f.put("parent", "p2")
	f.close("parent")
	s := &seen{t: t}
	m, err := streammap.New(fakeConfig(f, s))
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	drain(t, m)
	order, times := s.flat()
	if len(order) != 5 || len(times) != 5 {
		t.Fatalf("delivered %v; want each of the five records once", order)
	}
	at := map[string]int{}
	for i, k := range order {
		at[k] = i
	}
	if at["p1"] > at["p2"] || at["p2"] > at["c1"] || at["p2"] > at["c2"] {
		t.Fatalf("delivered %v; want p1, p2 before c1 and c2", order)
	}
	// child-1 splits: its child appears later, with records written
	// before child-1's last one is read.
	f.add("grandchild", "child-1")
	f.put("grandchild", "g1")
	f.put("child-1", "c1-last")
	f.close("child-1")
	drain(t, m)
	if order, _ = s.flat(); strings.Join(order[5:], " ") != "c1-last g1" {
		t.Fatalf("delivered %v; want c1-last, then g1", order)
	}
	st := m.Stats()
	if st.Shards != 5 || st.ShardsFinished != 2 || st.RecordsRead != 7 || st.Acknowledged != 7 || st.Invocations != int64(len(s.batches)) {
		t.Fatalf("stats %+v", st)
	}
	if m.StreamARN() != testARN {
		t.Fatalf("found stream %s, want the latest of the table's, %s", m.StreamARN(), testARN)
	}
}

// TestLatestSkipsWhatWasThere: with LATEST, records in the stream before
// Run are not delivered, and a shard closed before it is skipped; records
// after are, and so is every record of a shard that appears later.
func TestLatestSkipsWhatWasThere(t *testing.T) {
	t.Parallel()
	f := newFakeStream()
	f.add("old", "")
	f.put("old", "before-1")
	f.close("old")
	f.add("open", "old")
	f.put("open", "before-2")
	s := &seen{t: t}
	cfg := fakeConfig(f, s)
	cfg.StartingPosition = types.ShardIteratorTypeLatest
	m, err := streammap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	drain(t, m)
	f.put("open", "after-1")
	f.add("new", "")
	f.put("new", "after-2")
	drain(t, m)
	if order, _ := s.flat(); strings.Join(order, " ") != "after-1 after-2" && strings.Join(order, " ") != "after-2 after-1" {
		t.Fatalf("delivered %v; want only after-1 and after-2", order)
	}
}

// TestExhaustedRetriesDiscardTheRestOfTheBatch: as in Lambda, a batch that
// fails its last retry goes to the on-failure handler whole, from the
// failed record to the batch's end, and the shard goes on after it; the
// records before the failure, acknowledged, are not in it.
func TestExhaustedRetriesDiscardTheRestOfTheBatch(t *testing.T) {
	t.Parallel()
	f := newFakeStream()
	f.add("s", "")
	f.put("s", "a")
	poison := f.put("s", "poison")
	last := f.put("s", "b")
	s := &seen{t: t, answer: func(_ int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, r := range ev.Records {
			if r.Change.Keys["pk"].String() == "poison" {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			}
		}
		return resp, nil
	}}
	var discarded []streammap.Discarded
	cfg := fakeConfig(f, s)
	cfg.MaximumRetryAttempts = aws.Int(1)
	cfg.OnFailure = func(_ context.Context, d streammap.Discarded) { discarded = append(discarded, d) }
	m, err := streammap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	drain(t, m)
	f.put("s", "c")
	drain(t, m)
	if got := s.keys(); got != "a poison b|poison b|c" {
		t.Fatalf("batches %q; want a poison b, then poison b (the one retry), then c", got)
	}
	if len(discarded) != 1 {
		t.Fatalf("%d discarded batches", len(discarded))
	}
	d := discarded[0]
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(d.Event, &ev); err != nil || len(ev.Records) != 2 {
		t.Fatalf("the discarded event: %v %s", err, d.Event)
	}
	if d.StartSequenceNumber != poison || d.EndSequenceNumber != last || d.BatchSize != 2 || d.ShardID != "s" || d.StreamARN != testARN ||
		d.Condition != streammap.ConditionRetryAttemptsExhausted || d.ApproximateInvokeCount != 2 || d.Err == nil || d.At.IsZero() {
		t.Fatalf("discarded %+v", d)
	}
	st := m.Stats()
	if st.Discarded != 2 || st.Acknowledged != 2 || st.PartialFailures != 2 || st.BatchesRetried != 1 || st.Invocations != 3 || st.RecordsSent != 6 {
		t.Fatalf("stats %+v", st)
	}
}

// TestARetryingShardHoldsUpNoOther: a shard that retries a record without
// end does not stop another shard's records; Drain says which shard holds
// it up and from which record.
func TestARetryingShardHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	f := newFakeStream()
	f.add("stuck", "")
	f.add("free", "")
	poison := f.put("stuck", "poison")
	s := &seen{t: t, answer: func(_ int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if ev.Records[0].Change.Keys["pk"].String() == "poison" {
			return events.DynamoDBEventResponse{}, context.DeadlineExceeded
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	m, err := streammap.New(fakeConfig(f, s))
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	for i := range 5 {
		f.put("free", fmt.Sprint("free-", i))
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = m.Drain(ctx)
	if err == nil || !strings.Contains(err.Error(), "shard stuck retries from record "+poison) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Drain: %v; want it to name the stuck shard and record", err)
	}
	if _, times := s.flat(); times["free-4"] != 1 || times["poison"] < 3 {
		t.Fatalf("delivered %v; want every free record once, and the poison one again and again", times)
	}
	for _, sh := range m.Shards() {
		if sh.ShardID == "stuck" && (sh.RetryingFrom != poison || sh.Retries < 2 || !strings.Contains(sh.LastError, "function error")) {
			t.Fatalf("stuck shard: %+v", sh)
		}
	}
}

// TestRunRefusesAMissingStream: a table without a stream, or a stream that
// is not there, ends Run at once with a clear error; a Mapping runs once.
func TestRunRefusesAMissingStream(t *testing.T) {
	t.Parallel()
	inv := streammap.InvokerFunc(func(context.Context, []byte) ([]byte, error) { return nil, nil })
	for _, c := range []struct {
		cfg  streammap.Config
		want string
	}{
		{streammap.Config{Streams: newFakeStream(), TableName: "plain", Invoker: inv}, `table "plain" has no stream`},
		{streammap.Config{Streams: newFakeStream(), StreamARN: testARN + "x", Invoker: inv}, "ResourceNotFoundException"},
	} {
		m, err := streammap.New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = m.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run: %v; want an error with %q", err, c.want)
		}
		if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "has run already") {
			t.Errorf("a second Run: %v", err)
		}
		if err := m.Drain(context.Background()); err == nil || !strings.Contains(err.Error(), "Run has ended") {
			t.Errorf("Drain after Run: %v", err)
		}
	}
}

// TestBatchesKeepToTheBatchSize: records beyond the batch size, and beyond
// one read's thousand, wait for the next batch, in order.
func TestBatchesKeepToTheBatchSize(t *testing.T) {
	t.Parallel()
	f := newFakeStream()
	f.add("s", "")
	for i := range 2500 {
		f.put("s", fmt.Sprintf("k%04d", i))
	}
	s := &seen{t: t}
	cfg := fakeConfig(f, s)
	cfg.BatchSize = 1200
	m, err := streammap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	drain(t, m)
	s.mu.Lock()
	var sizes []int
	for _, b := range s.batches {
		sizes = append(sizes, len(b))
	}
	s.mu.Unlock()
	if len(sizes) != 3 || sizes[0] != 1200 || sizes[1] != 1200 || sizes[2] != 100 {
		t.Fatalf("batch sizes %v; want 1200, 1200, 100", sizes)
	}
	order, _ := s.flat()
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Fatalf("out of order at %d: %s, %s", i, order[i-1], order[i])
		}
	}
}

// TestRetryDelayDoublesUpToFiveSeconds: the pause before each retry.
func TestRetryDelayDoublesUpToFiveSeconds(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		base  time.Duration
		retry int
		want  time.Duration
	}{
		{100 * ms, 1, 100 * ms}, {100 * ms, 2, 200 * ms}, {100 * ms, 3, 400 * ms}, {100 * ms, 7, 5 * time.Second}, {100 * ms, 10000, 5 * time.Second},
		{ms, 1, ms}, {ms, 4, 8 * ms}, {8 * time.Second, 3, 8 * time.Second},
	} {
		if got := streammap.RetryDelay(c.base, c.retry); got != c.want {
			t.Errorf("retry %d from %v: %v, want %v", c.retry, c.base, got, c.want)
		}
	}
}
