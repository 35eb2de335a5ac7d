package streammap_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/nudgehq/nudge/internal/local/streammap"
)

const testARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/ledger/stream/2026-01-01T00:00:00.000"

func modifyRecord() types.Record {
	item := func(status string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "d#1"}, "status": &types.AttributeValueMemberS{Value: status}}
	}
	return types.Record{
		EventID: aws.String("e-1"), EventName: types.OperationTypeModify, EventVersion: aws.String("1.1"), EventSource: aws.String("aws:dynamodb"),
		AwsRegion: aws.String("eu-west-1"),
		Dynamodb: &types.StreamRecord{
			ApproximateCreationDateTime: aws.Time(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)),
			Keys:                        map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "d#1"}},
			OldImage:                    item("leased"),
			NewImage:                    item("sent"),
			SequenceNumber:              aws.String("000000000000000000042"), SizeBytes: aws.Int64(61), StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	}
}

// TestRecordIsShapedAsLambdasEvent: the record's JSON, pinned, as Lambda's
// example event has it (epoch seconds, eventSourceARN the stream's).
func TestRecordIsShapedAsLambdasEvent(t *testing.T) {
	t.Parallel()
	got, err := streammap.Record(testARN, modifyRecord())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"eventID":"e-1","eventName":"MODIFY","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"eu-west-1",` +
		`"dynamodb":{"ApproximateCreationDateTime":1767225605,"Keys":{"pk":{"S":"d#1"}},"NewImage":{"pk":{"S":"d#1"},"status":{"S":"sent"}},` +
		`"OldImage":{"pk":{"S":"d#1"},"status":{"S":"leased"}},"SequenceNumber":"000000000000000000042","SizeBytes":61,"StreamViewType":"NEW_AND_OLD_IMAGES"},` +
		`"eventSourceARN":"` + testARN + `"}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestEventDecodesAsAWSLambdaGosDynamoDBEvent: an INSERT, a MODIFY and a
// REMOVE of a TTL deletion decode into events.DynamoDBEvent with every
// field in place; a record without region or version takes the ARN's
// region and 1.1.
func TestEventDecodesAsAWSLambdaGosDynamoDBEvent(t *testing.T) {
	t.Parallel()
	insert := modifyRecord()
	insert.EventName, insert.Dynamodb.OldImage, insert.AwsRegion, insert.EventVersion = types.OperationTypeInsert, nil, nil, nil
	remove := modifyRecord()
	remove.EventName, remove.Dynamodb.NewImage = types.OperationTypeRemove, nil
	remove.Dynamodb.SequenceNumber = aws.String("000000000000000000043")
	remove.UserIdentity = &types.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")}
	payload, err := streammap.Event(testARN, []types.Record{insert, modifyRecord(), remove})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatalf("aws-lambda-go cannot read the event: %v\n%s", err, payload)
	}
	if len(ev.Records) != 3 {
		t.Fatalf("%d records", len(ev.Records))
	}
	in, mod, rm := ev.Records[0], ev.Records[1], ev.Records[2]
	if in.EventName != "INSERT" || in.AWSRegion != "eu-west-1" || in.EventVersion != "1.1" || in.Change.OldImage != nil ||
		in.Change.NewImage["status"].String() != "sent" {
		t.Errorf("insert: %+v", in)
	}
	if mod.EventName != "MODIFY" || mod.EventSource != "aws:dynamodb" || mod.EventSourceArn != testARN || mod.EventID != "e-1" ||
		mod.Change.OldImage["status"].String() != "leased" || mod.Change.NewImage["status"].String() != "sent" || mod.Change.Keys["pk"].String() != "d#1" ||
		mod.Change.SequenceNumber != "000000000000000000042" || mod.Change.SizeBytes != 61 || mod.Change.StreamViewType != "NEW_AND_OLD_IMAGES" ||
		!mod.Change.ApproximateCreationDateTime.Equal(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)) || mod.UserIdentity != nil {
		t.Errorf("modify: %+v", mod)
	}
	if rm.EventName != "REMOVE" || rm.Change.NewImage != nil || rm.Change.OldImage["status"].String() != "leased" ||
		rm.UserIdentity == nil || rm.UserIdentity.Type != "Service" || rm.UserIdentity.PrincipalID != "dynamodb.amazonaws.com" {
		t.Errorf("remove: %+v %+v", rm, rm.UserIdentity)
	}
	empty, _ := streammap.Event(testARN, nil)
	if string(empty) != `{"Records":[]}` {
		t.Errorf("an empty batch is %s", empty)
	}
}

// TestRecordRefusesARecordItCannotShape: no sequence number, or an
// attribute of an unknown type, names the record.
func TestRecordRefusesARecordItCannotShape(t *testing.T) {
	t.Parallel()
	_, err := streammap.Record(testARN, types.Record{EventID: aws.String("e-9")})
	if err == nil || !strings.Contains(err.Error(), `"e-9" has no sequence number`) {
		t.Errorf("no sequence number: %v", err)
	}
	r := modifyRecord()
	r.Dynamodb.NewImage["odd"] = &types.UnknownUnionMember{Tag: "Q"}
	if _, err := streammap.Record(testARN, r); err == nil || !strings.Contains(err.Error(), "NewImage of stream record 000000000000000000042") {
		t.Errorf("unknown type: %v", err)
	}
}

// TestInProcessAnswersAsTheGoRuntime: the handler gets the decoded event;
// its response is JSON; its error is a function error payload, which fails
// the whole batch.
func TestInProcessAnswersAsTheGoRuntime(t *testing.T) {
	t.Parallel()
	payload, _ := streammap.Event(testARN, []types.Record{modifyRecord()})
	var got events.DynamoDBEvent
	ok := streammap.InProcess(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		got = ev
		return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[0].Change.SequenceNumber}}}, nil
	})
	resp, err := ok.Invoke(context.Background(), payload)
	if err != nil || string(resp) != `{"batchItemFailures":[{"itemIdentifier":"000000000000000000042"}]}` || got.Records[0].EventID != "e-1" {
		t.Fatalf("got %s, %v; the handler saw %+v", resp, err, got)
	}
	failing := streammap.InProcess(func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, errors.New("eventbridge: throttled")
	})
	resp, err = failing.Invoke(context.Background(), payload)
	if err != nil || string(resp) != `{"errorMessage":"eventbridge: throttled","errorType":"errorString"}` {
		t.Fatalf("got %s, %v", resp, err)
	}
	if n, err := streammap.Acknowledged([]string{"000000000000000000042"}, resp); n != 0 || err == nil || !strings.Contains(err.Error(), "function error") {
		t.Fatalf("a function error acknowledged %d: %v", n, err)
	}
}

// TestAcknowledgedFollowsLambdasRulesForStreams: success, the lowest
// failure as the checkpoint, and the responses that fail the whole batch.
func TestAcknowledgedFollowsLambdasRulesForStreams(t *testing.T) {
	t.Parallel()
	seqs := []string{"100", "200", "300", "400"}
	item := func(ids ...string) string {
		var parts []string
		for _, id := range ids {
			parts = append(parts, `{"itemIdentifier":"`+id+`"}`)
		}
		return `{"batchItemFailures":[` + strings.Join(parts, ",") + `]}`
	}
	for _, c := range []struct {
		name, response string
		acked          int
		wholeFail      string
	}{
		{"empty response", ``, 4, ""},
		{"null response", `null`, 4, ""},
		{"empty object", `{}`, 4, ""},
		{"null list", `{"batchItemFailures":null}`, 4, ""},
		{"empty list", `{"batchItemFailures":[]}`, 4, ""},
		{"the first failed", item("100"), 0, ""},
		{"one failed", item("300"), 2, ""},
		{"the lowest of several, in any order", item("400", "200", "300"), 1, ""},
		{"repeated", item("300", "300"), 2, ""},
		{"the last failed", item("400"), 3, ""},
		{"not in the batch", item("250"), 0, `"250" is not the sequence number of a record of this batch`},
		{"one of several not in the batch", item("300", "999"), 0, `"999" is not`},
		{"empty identifier", item(""), 0, "empty itemIdentifier"},
		{"null identifier", `{"batchItemFailures":[{"itemIdentifier":null}]}`, 0, "no itemIdentifier"},
		{"misspelt key", `{"batchItemFailures":[{"itemIdentifer":"300"}]}`, 0, "no itemIdentifier"},
		{"number identifier", `{"batchItemFailures":[{"itemIdentifier":300}]}`, 0, "not a string"},
		{"function error", `{"errorMessage":"boom","errorType":"Runtime.ExitError"}`, 0, "function error"},
		{"not JSON", `Task timed out after 3.00 seconds`, 0, "not a JSON object"},
		{"a list", `[]`, 0, "not a JSON object"},
		{"list of strings", `{"batchItemFailures":["300"]}`, 0, "not a list of objects"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := streammap.Acknowledged(seqs, []byte(c.response))
			if c.wholeFail != "" {
				if err == nil || !strings.Contains(err.Error(), c.wholeFail) || n != 0 {
					t.Fatalf("got %d, %v; want the whole batch failed with %q", n, err, c.wholeFail)
				}
				return
			}
			if err != nil || n != c.acked {
				t.Fatalf("got %d, %v; want %d acknowledged", n, err, c.acked)
			}
		})
	}
}
