package consumer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
)

// TestBadBodiesAreDeadLetteredWithTheirReason: each kind of bad message
// body, put on the work queue and consumed as the event source mapping
// would, is acknowledged and dead-lettered at once with its class and a
// reason naming what is wrong, the body kept byte for byte; nothing stays
// on the work queue, nothing is sent, nothing crashes.
func TestBadBodiesAreDeadLetteredWithTheirReason(t *testing.T) {
	t.Parallel()
	due := time.Now().UTC().Format(time.RFC3339)
	valid := `"channel":"email","provider":"webhook","dueAt":"` + due + `"`
	for _, tc := range []struct {
		name, body, class, reason string
	}{
		{"malformed JSON", `{"v":1,"reminderId":`, "decode", "not valid JSON"},
		{"not a JSON object", `[1,2,3]`, "decode", "not a JSON object"},
		{"plain text", `please send the reminder`, "decode", "not a JSON object"},
		{"whitespace only", "  \n\t ", "decode", "not a JSON object"},
		{"data after the object", `{"v":1,"reminderId":"rem-1",` + valid + `} {}`, "decode", "data after"},
		{"unknown schema version", `{"v":2,"reminderId":"rem-1",` + valid + `}`, "decode", "unsupported schema version 2"},
		{"missing schema version", `{"reminderId":"rem-1",` + valid + `}`, "decode", `"v": missing`},
		{"missing field", `{"v":1,` + valid + `}`, "decode", `"reminderId": missing`},
		{"wrong-typed field", `{"v":1,"reminderId":42,` + valid + `}`, "decode", `"reminderId": is a JSON number, want a string`},
		{"wrong-typed version", `{"v":"1","reminderId":"rem-1",` + valid + `}`, "decode", "want a number"},
		{"bad time", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"webhook","dueAt":"tomorrow"}`, "decode", "RFC 3339"},
		{"time without a zone", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00"}`, "decode", "RFC 3339"},
		{"forbidden characters in an id", `{"v":1,"reminderId":"rem 1; drop",` + valid + `}`, "decode", "character"},
		{"oversized body", `{"v":1,"reminderId":"rem-1",` + valid + `,"traceId":"` + strings.Repeat("x", 100<<10) + `"}`, "decode", "over the 4096-byte limit"},
		{"unknown provider", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"carrier-pigeon","dueAt":"` + due + `"}`, "config", `no provider "carrier-pigeon"`},
		{"unknown delivery", `{"v":1,"reminderId":"rem-never-scheduled",` + valid + `}`, "not-found", "no delivery rem-never-scheduled:email:webhook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, options{})
			b.publish(tc.body)
			_, resp := b.poll(1)
			msgs := b.dlq()
			if failures(resp) != 0 || len(msgs) != 1 {
				t.Fatalf("failures %v, %d DLQ messages; want it acknowledged and dead-lettered", resp.BatchItemFailures, len(msgs))
			}
			m := msgs[0]
			if got := attr(m, deadletter.AttrErrorClass); got != tc.class || !strings.Contains(attr(m, deadletter.AttrReason), tc.reason) {
				t.Fatalf("dead-lettered as %q: %q; want %q with %q", got, attr(m, deadletter.AttrReason), tc.class, tc.reason)
			}
			if *m.Body != tc.body {
				t.Fatalf("the DLQ body differs from the original (%d bytes, was %d)", len(*m.Body), len(tc.body))
			}
			if v, d, f := b.queueDepth(b.q.WorkURL); v+d+f != 0 {
				t.Fatalf("the work queue still holds %d visible, %d delayed, %d in flight", v, d, f)
			}
			if accepted, _ := b.sink.Totals(); accepted != 0 {
				t.Fatal("the provider was called")
			}
		})
	}
}

// sqsEvent is an invocation payload of records with the given ids and
// bodies, shaped as the event source mapping sends them.
func sqsEvent(t *testing.T, ids []string, bodies []string) []byte {
	t.Helper()
	var ev events.SQSEvent
	for i := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: ids[i], ReceiptHandle: "rh-" + ids[i], Body: bodies[i], EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:nudge-work", Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestBadEventsFailTheInvocationAndTouchNothing: a payload the event source
// mapping never sends fails the invocation with a reason (so the mapping
// would return every record to the queue), before any AWS request.
func TestBadEventsFailTheInvocationAndTouchNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, payload, reason string
	}{
		{"empty event", `{}`, "empty event"},
		{"null payload", `null`, "empty event"},
		{"empty payload", ``, "empty event"},
		{"not JSON", `hello`, "not a JSON object"},
		{"truncated JSON", `{"Records":[{"messageId":"m-1"`, "not valid JSON"},
		{"event from another source", `{"version":"0","source":"aws.scheduler","detail-type":"Scheduled Event","detail":{}}`, `from "aws.scheduler"`},
		{"Records of the wrong type", `{"Records":{"messageId":"m-1"}}`, "does not decode"},
		{"record from another source", `{"Records":[{"messageId":"m-1","eventSource":"aws:sns","body":"{}"}]}`, `comes from "aws:sns"`},
		{"record without a messageId", `{"Records":[{"eventSource":"aws:sqs","body":"{}"}]}`, "no messageId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, options{})
			b.counter.Reset()
			_, err := b.fn.Invoke(b.ctx, json.RawMessage(tc.payload))
			var ee *consumer.EventError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Invoke(%q) = %v; want an EventError with %q", tc.payload, err, tc.reason)
			}
			if n := b.counter.Service("DynamoDB") + b.counter.Service("SQS"); n != 0 {
				t.Fatalf("a refused event made %d AWS requests: %s", n, b.counter)
			}
		})
	}
}

// TestOddButValidEvents: an empty batch, a batch naming one message twice,
// and a body with invalid UTF-8 (which SQS never carries, but a hand-made
// event can) each get a clear outcome and lose nothing.
func TestOddButValidEvents(t *testing.T) {
	t.Parallel()
	t.Run("empty batch", func(t *testing.T) {
		b := setup(t, options{})
		resp, err := b.fn.Invoke(b.ctx, json.RawMessage(`{"Records":[]}`))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%v, %v; want an empty response", resp, err)
		}
	})
	t.Run("duplicate message ids", func(t *testing.T) {
		b := setup(t, options{script: "rem-dup=ok+200ms"})
		k := b.schedule("rem-dup", b.clk.Now())
		body := b.body("rem-dup", b.clk.Now())
		resp, err := b.fn.Invoke(b.ctx, sqsEvent(t, []string{"m-1", "m-1"}, []string{body, body}))
		if err != nil {
			t.Fatal(err)
		}
		// One copy sends; the other finds it leased and asks to be retried:
		// the id is named once, and the retry will find it sent.
		if n := len(resp.BatchItemFailures); n > 1 || n == 1 && resp.BatchItemFailures[0].ItemIdentifier != "m-1" {
			t.Fatalf("response %v; want m-1 at most once", resp.BatchItemFailures)
		}
		if b.sink.Requests(k.String()) != 1 || b.delivery(k).Status != ledger.StatusSent {
			t.Fatalf("sink requests %d, status %s; want one send", b.sink.Requests(k.String()), b.delivery(k).Status)
		}
	})
	t.Run("invalid UTF-8 in a body", func(t *testing.T) {
		b := setup(t, options{})
		raw := []byte(`{"Records":[{"messageId":"m-utf8","receiptHandle":"rh","eventSource":"aws:sqs","body":"{\"v\":1,\"reminderId\":\"rem-` + "\xff\xfe" + `\",\"channel\":\"email\",\"provider\":\"webhook\",\"dueAt\":\"2026-11-30T09:00:00Z\"}","attributes":{"ApproximateReceiveCount":"1"}}]}`)
		resp, err := b.fn.Invoke(b.ctx, raw)
		msgs := b.dlq()
		if err != nil || len(resp.BatchItemFailures) != 0 || len(msgs) != 1 || attr(msgs[0], deadletter.AttrErrorClass) != "decode" {
			t.Fatalf("%v, %v, DLQ %d; want it dead-lettered as decode", resp, err, len(msgs))
		}
		t.Logf("reason: %s", attr(msgs[0], deadletter.AttrReason))
	})
}

// TestMissingTableRetriesAndDeadLettersNothing: a consumer pointed at a
// table that does not exist (a wrong NUDGE_TABLE) must not dead-letter the
// deliveries, which are not at fault: each record is returned for a retry
// with backoff, and the log names the table.
func TestMissingTableRetriesAndDeadLettersNothing(t *testing.T) {
	db := standintest.DynamoDB(t)
	missing, err := ledger.New(db, ledger.Config{Table: standintest.Name("nudge-missing")})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, options{wrapLedger: func(consumer.Ledger) consumer.Ledger { return missing }})
	for i := range 3 {
		b.publish(b.body(fmt.Sprint("rem-m", i), b.clk.Now()))
	}
	_, resp := b.poll(3)
	if failures(resp) != 3 || len(b.dlq()) != 0 {
		t.Fatalf("failures %v, DLQ %d; want all three retried and none dead-lettered", resp.BatchItemFailures, len(b.dlq()))
	}
	if !strings.Contains(b.logs.String(), "ResourceNotFoundException") {
		t.Fatalf("the logs do not name the missing table:\n%s", b.logs.String())
	}
}
