package streammap_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/local/streammap"
)

// table is a table on DynamoDB Local with a stream of new and old images,
// and a DynamoDB Streams client on DynamoDB Local.
type table struct {
	ctx     context.Context
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	name    string
	arn     string // its LatestStreamArn
}

func newTable(t *testing.T) *table {
	t.Helper()
	cfg := standintest.AWSConfig(t)
	f := &table{ctx: context.Background(), db: standintest.DynamoDB(t), name: standintest.Name("nudge-stream")}
	// DynamoDB Local serves DynamoDB Streams on its own endpoint.
	f.streams = dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")) })
	out, err := f.db.CreateTable(f.ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(f.name),
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
		BillingMode:          dbtypes.BillingModePayPerRequest,
		StreamSpecification:  &dbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.arn = aws.ToString(out.TableDescription.LatestStreamArn)
	t.Cleanup(func() {
		_, _ = f.db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(f.name)})
	})
	return f
}

// put writes an item with key pk and status.
func (f *table) put(t *testing.T, pk, status string) {
	t.Helper()
	f.write(t, &dynamodb.PutItemInput{TableName: aws.String(f.name), Item: map[string]dbtypes.AttributeValue{
		"pk": &dbtypes.AttributeValueMemberS{Value: pk}, "status": &dbtypes.AttributeValueMemberS{Value: status}}})
}

func (f *table) write(t *testing.T, in *dynamodb.PutItemInput) {
	t.Helper()
	if _, err := f.db.PutItem(f.ctx, in); err != nil {
		t.Fatal(err)
	}
}

// mapping makes a Mapping of the table's stream, by its name, with fast
// polls and retries.
func (f *table) mapping(t *testing.T, inv streammap.Invoker, edit func(*streammap.Config)) *streammap.Mapping {
	t.Helper()
	cfg := streammap.Config{Streams: f.streams, TableName: f.name, Invoker: inv, PollInterval: 20 * time.Millisecond, RetryDelay: 5 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	m, err := streammap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// failSeq is a batch item failure naming r.
func failSeq(r events.DynamoDBEventRecord) events.DynamoDBBatchItemFailure {
	return events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber}
}

// TestInsertModifyRemoveArriveInOrderWithTheirImages: what DynamoDB Local
// streams reaches the function as Lambda's event: each change in order,
// with the images its kind has, every attribute type intact.
func TestInsertModifyRemoveArriveInOrderWithTheirImages(t *testing.T) {
	t.Parallel()
	f := newTable(t)
	f.write(t, &dynamodb.PutItemInput{TableName: aws.String(f.name), Item: map[string]dbtypes.AttributeValue{
		"pk":     &dbtypes.AttributeValueMemberS{Value: "d#1"},
		"status": &dbtypes.AttributeValueMemberS{Value: "pending"},
		"n":      &dbtypes.AttributeValueMemberN{Value: "1.5"},
		"doc": &dbtypes.AttributeValueMemberM{Value: map[string]dbtypes.AttributeValue{
			"l": &dbtypes.AttributeValueMemberL{Value: []dbtypes.AttributeValue{&dbtypes.AttributeValueMemberNULL{Value: true},
				&dbtypes.AttributeValueMemberBOOL{Value: true}, &dbtypes.AttributeValueMemberB{Value: []byte{7, 8}}}},
			"ss": &dbtypes.AttributeValueMemberSS{Value: []string{"x"}},
			"ns": &dbtypes.AttributeValueMemberNS{Value: []string{"3"}},
			"bs": &dbtypes.AttributeValueMemberBS{Value: [][]byte{{9}}},
		}},
	}})
	if _, err := f.db.UpdateItem(f.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.name), Key: map[string]dbtypes.AttributeValue{
		"pk": &dbtypes.AttributeValueMemberS{Value: "d#1"}}, UpdateExpression: aws.String("SET #s = :s"),
		ExpressionAttributeNames: map[string]string{"#s": "status"}, ExpressionAttributeValues: map[string]dbtypes.AttributeValue{
			":s": &dbtypes.AttributeValueMemberS{Value: "sent"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.DeleteItem(f.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.name), Key: map[string]dbtypes.AttributeValue{
		"pk": &dbtypes.AttributeValueMemberS{Value: "d#1"}}}); err != nil {
		t.Fatal(err)
	}
	f.put(t, "d#2", "pending")

	s := &seen{t: t}
	m := f.mapping(t, s.invoker(), nil)
	run(t, m)
	drain(t, m)
	s.mu.Lock()
	var recs []events.DynamoDBEventRecord
	for _, b := range s.batches {
		recs = append(recs, b...)
	}
	s.mu.Unlock()
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	var names []string
	for i, r := range recs {
		names = append(names, r.EventName+" "+r.Change.Keys["pk"].String())
		if r.EventSource != "aws:dynamodb" || r.EventVersion != "1.1" || r.EventSourceArn != f.arn || r.AWSRegion == "" || r.EventID == "" ||
			r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" || r.Change.SizeBytes <= 0 || r.Change.ApproximateCreationDateTime.IsZero() {
			t.Errorf("record %d is not shaped as Lambda's: %+v", i, r)
		}
		if i > 0 && !seqBefore(recs[i-1].Change.SequenceNumber, r.Change.SequenceNumber) {
			t.Errorf("record %d: sequence number %s after %s", i, r.Change.SequenceNumber, recs[i-1].Change.SequenceNumber)
		}
	}
	if got := strings.Join(names, ", "); got != "INSERT d#1, MODIFY d#1, REMOVE d#1, INSERT d#2" {
		t.Fatalf("records %s", got)
	}
	ins, mod, rm := recs[0].Change, recs[1].Change, recs[2].Change
	if ins.OldImage != nil || ins.NewImage["status"].String() != "pending" {
		t.Errorf("INSERT images: old %v, new %v", ins.OldImage, ins.NewImage)
	}
	doc := ins.NewImage["doc"].Map()
	list := doc["l"].List()
	if n, _ := ins.NewImage["n"].Float(); n != 1.5 || !list[0].IsNull() || !list[1].Boolean() || string(list[2].Binary()) != "\x07\x08" ||
		doc["ss"].StringSet()[0] != "x" || doc["ns"].NumberSet()[0] != "3" || doc["bs"].BinarySet()[0][0] != 9 {
		t.Errorf("INSERT's nested attributes: %+v", ins.NewImage)
	}
	if mod.OldImage["status"].String() != "pending" || mod.NewImage["status"].String() != "sent" || len(mod.NewImage["doc"].Map()) != 4 {
		t.Errorf("MODIFY images: old %v, new %v", mod.OldImage, mod.NewImage)
	}
	if rm.NewImage != nil || rm.OldImage["status"].String() != "sent" {
		t.Errorf("REMOVE images: old %v, new %v", rm.OldImage, rm.NewImage)
	}
	if m.StreamARN() != f.arn {
		t.Errorf("the mapping found stream %s for the table; its LatestStreamArn is %s", m.StreamARN(), f.arn)
	}
	if st := m.Stats(); st.RecordsRead != 4 || st.Acknowledged != 4 || st.RecordsSent != 4 || st.BatchFailures != 0 || st.Shards < 1 {
		t.Errorf("stats %+v", st)
	}
}

// seqBefore reports whether sequence number a is below b (as numbers).
func seqBefore(a, b string) bool {
	x, okA := new(big.Int).SetString(a, 10)
	y, okB := new(big.Int).SetString(b, 10)
	return okA && okB && x.Cmp(y) < 0
}

// TestPartialFailureRedeliversFromTheLowestFailed: the function reports
// three records of five; the batch is retried from the lowest of them, and
// the two before it are not sent again.
func TestPartialFailureRedeliversFromTheLowestFailed(t *testing.T) {
	t.Parallel()
	f := newTable(t)
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		f.put(t, k, "pending")
	}
	s := &seen{t: t, answer: func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call > 1 {
			return events.DynamoDBEventResponse{}, nil
		}
		// In any order: the lowest is the checkpoint.
		r := ev.Records
		return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{failSeq(r[4]), failSeq(r[2]), failSeq(r[3])}}, nil
	}}
	m := f.mapping(t, s.invoker(), nil)
	run(t, m)
	drain(t, m)
	if got := s.keys(); got != "k1 k2 k3 k4 k5|k3 k4 k5" {
		t.Fatalf("batches %q; want k1–k5, then k3–k5", got)
	}
	if st := m.Stats(); st.PartialFailures != 1 || st.BatchesRetried != 1 || st.Acknowledged != 5 || st.RecordsSent != 8 || st.BatchFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAFailedBatchIsRedeliveredWhole: a function error, an invocation that
// fails, a response that is not JSON and an itemIdentifier that is not a
// sequence number of the batch each fail the whole batch, which is sent
// again from its first record.
func TestAFailedBatchIsRedeliveredWhole(t *testing.T) {
	t.Parallel()
	for name, first := range map[string]func(ev events.DynamoDBEvent) ([]byte, error){
		"function error": func(events.DynamoDBEvent) ([]byte, error) {
			return []byte(`{"errorMessage":"eventbridge: throttled","errorType":"errorString"}`), nil
		},
		"invocation error": func(events.DynamoDBEvent) ([]byte, error) {
			return nil, errors.New("standin: the emulator answered 502")
		},
		"unparseable answer": func(events.DynamoDBEvent) ([]byte, error) { return []byte(`Task timed out after 3.00 seconds`), nil },
		"unknown itemIdentifier": func(ev events.DynamoDBEvent) ([]byte, error) {
			return []byte(`{"batchItemFailures":[{"itemIdentifier":"` + ev.Records[1].Change.SequenceNumber + `0"}]}`), nil
		},
		"message id as itemIdentifier": func(ev events.DynamoDBEvent) ([]byte, error) {
			return []byte(`{"batchItemFailures":[{"itemIdentifier":"` + ev.Records[1].EventID + `"}]}`), nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newTable(t)
			for _, k := range []string{"k1", "k2", "k3"} {
				f.put(t, k, "pending")
			}
			var mu sync.Mutex
			var batches []string
			inv := streammap.InvokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
				var ev events.DynamoDBEvent
				if err := json.Unmarshal(payload, &ev); err != nil {
					t.Errorf("payload: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				var ks []string
				for _, r := range ev.Records {
					ks = append(ks, r.Change.Keys["pk"].String())
				}
				batches = append(batches, strings.Join(ks, " "))
				if len(batches) == 1 {
					return first(ev)
				}
				return nil, nil
			})
			m := f.mapping(t, inv, nil)
			run(t, m)
			drain(t, m)
			mu.Lock()
			got := strings.Join(batches, "|")
			mu.Unlock()
			if got != "k1 k2 k3|k1 k2 k3" {
				t.Fatalf("batches %q; want k1–k3 twice", got)
			}
			if st := m.Stats(); st.BatchFailures != 1 || st.BatchesRetried != 1 || st.Acknowledged != 3 || st.PartialFailures != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestExhaustedRetriesGoToOnFailureAndTheShardMovesOn: a record that fails
// every time is retried MaximumRetryAttempts times, then handed to the
// on-failure handler, and the records after it are delivered.
func TestExhaustedRetriesGoToOnFailureAndTheShardMovesOn(t *testing.T) {
	t.Parallel()
	f := newTable(t)
	f.put(t, "a", "pending")
	f.put(t, "poison", "pending")
	f.put(t, "b", "pending")
	s := &seen{t: t, answer: func(_ int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if ev.Records[0].Change.Keys["pk"].String() == "poison" {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{failSeq(ev.Records[0])}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	var mu sync.Mutex
	var discarded []streammap.Discarded
	m := f.mapping(t, s.invoker(), func(c *streammap.Config) {
		c.BatchSize, c.MaximumRetryAttempts = 1, aws.Int(2)
		c.OnFailure = func(_ context.Context, d streammap.Discarded) {
			mu.Lock()
			discarded = append(discarded, d)
			mu.Unlock()
		}
	})
	run(t, m)
	drain(t, m)
	if got := s.keys(); got != "a|poison|poison|poison|b" {
		t.Fatalf("batches %q; want a, poison three times (two retries), b", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(discarded) != 1 {
		t.Fatalf("%d discarded batches, want 1", len(discarded))
	}
	d := discarded[0]
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(d.Event, &ev); err != nil || len(ev.Records) != 1 || ev.Records[0].Change.Keys["pk"].String() != "poison" {
		t.Fatalf("the discarded event: %v %s", err, d.Event)
	}
	seq := ev.Records[0].Change.SequenceNumber
	if d.StartSequenceNumber != seq || d.EndSequenceNumber != seq || d.BatchSize != 1 || d.ApproximateInvokeCount != 3 || d.StreamARN != f.arn ||
		d.Condition != "RetryAttemptsExhausted" || !strings.Contains(d.Err.Error(), "reported record "+seq) {
		t.Fatalf("discarded %+v", d)
	}
	if st := m.Stats(); st.Discarded != 1 || st.Acknowledged != 2 || st.BatchesRetried != 2 || st.Invocations != 5 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDrainWaitsForEverythingWrittenBefore: Drain returns only once the
// function has acknowledged every record written before it was called,
// however slow the function, and not before.
func TestDrainWaitsForEverythingWrittenBefore(t *testing.T) {
	t.Parallel()
	f := newTable(t)
	s := &seen{t: t, answer: func(int, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		time.Sleep(30 * time.Millisecond)
		return events.DynamoDBEventResponse{}, nil
	}}
	m := f.mapping(t, s.invoker(), func(c *streammap.Config) { c.BatchSize = 4; c.StreamARN = f.arn })
	run(t, m)
	drain(t, m) // an empty stream is drained
	var want []string
	for i := range 30 {
		k := "k" + string(rune('a'+i/10)) + string(rune('0'+i%10))
		want = append(want, k)
		f.put(t, k, "pending")
	}
	drain(t, m)
	order, times := s.flat()
	if strings.Join(order, " ") != strings.Join(want, " ") || len(times) != 30 {
		t.Fatalf("after Drain the function had %d records: %v", len(order), order)
	}
	for _, sh := range m.Shards() {
		if sh.Pending != 0 || sh.RetryingFrom != "" {
			t.Fatalf("shard after Drain: %+v", sh)
		}
	}
	if st := m.Stats(); st.Invocations < 8 || st.Acknowledged != 30 {
		t.Fatalf("stats %+v; want 30 records in batches of at most 4", st)
	}
}

// TestLatestStartsAfterWhatWasWritten: with LATEST, records written before
// Run are not delivered; records written after are.
func TestLatestStartsAfterWhatWasWritten(t *testing.T) {
	t.Parallel()
	f := newTable(t)
	f.put(t, "before", "pending")
	s := &seen{t: t}
	m := f.mapping(t, s.invoker(), func(c *streammap.Config) { c.StartingPosition = types.ShardIteratorTypeLatest })
	run(t, m)
	drain(t, m)
	f.put(t, "after", "pending")
	drain(t, m)
	if got := s.keys(); got != "after" {
		t.Fatalf("batches %q; want only the record written after Run started", got)
	}
}
