package envelope_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/message"
)

var now = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func str(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// TestBuild: each producer's envelope on a standard and a FIFO queue. The
// hand-off's deduplication ids are the SHA-256 of "key#publishAt" that the
// enqueue has always sent (computed with sha256sum, not with the code).
func TestBuild(t *testing.T) {
	t.Parallel()
	key := message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: "webhook"}
	publishAt := time.Date(2026, 11, 30, 8, 45, 0, 0, time.UTC)
	kept := map[string]types.MessageAttributeValue{"nudge-error-class": str("exhausted"),
		"nudge-attempts": {DataType: aws.String("Number"), StringValue: aws.String("3")}}
	letter := map[string]types.MessageAttributeValue{"nudge-error-class": str("rejected"), "nudge-reason": str("provider answered 400")}
	for _, tc := range []struct {
		name string
		spec envelope.Spec
		want envelope.Envelope
	}{
		// The enqueue: delayed until due on a standard queue; on FIFO grouped by reminder, deduplicated by delivery and publish time.
		{"hand-off due now", envelope.Spec{Body: "b", Delay: 0, Dedup: envelope.ForHandOff(key, publishAt)}, envelope.Envelope{Body: "b"}},
		{"hand-off overdue", envelope.Spec{Body: "b", Delay: -time.Hour}, envelope.Envelope{Body: "b"}},
		{"hand-off due in 1 ms", envelope.Spec{Body: "b", Delay: time.Millisecond}, envelope.Envelope{Body: "b", DelaySeconds: 0}},
		{"hand-off due in 90.2 s", envelope.Spec{Body: "b", Delay: 90200 * time.Millisecond}, envelope.Envelope{Body: "b", DelaySeconds: 90}},
		{"hand-off due in 10 min", envelope.Spec{Body: "b", Delay: now.Add(10 * time.Minute).Sub(now)}, envelope.Envelope{Body: "b", DelaySeconds: 600}},
		{"hand-off due in 899.5 s", envelope.Spec{Body: "b", Delay: 899500 * time.Millisecond}, envelope.Envelope{Body: "b", DelaySeconds: 899}},
		{"hand-off due in 900 s", envelope.Spec{Body: "b", Delay: 900 * time.Second}, envelope.Envelope{Body: "b", DelaySeconds: 900}},
		{"hand-off due in 900.001 s", envelope.Spec{Body: "b", Delay: 900*time.Second + time.Millisecond}, envelope.Envelope{Body: "b", DelaySeconds: 900}},
		{"hand-off due in 2500", envelope.Spec{Body: "b", Delay: time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC).Sub(now)},
			envelope.Envelope{Body: "b", DelaySeconds: 900}},
		{"hand-off, the largest Duration", envelope.Spec{Body: "b", Delay: math.MaxInt64}, envelope.Envelope{Body: "b", DelaySeconds: 900}},
		{"hand-off FIFO", envelope.Spec{Kind: envelope.FIFO, Body: "b", Delay: 10 * time.Minute, Dedup: envelope.ForHandOff(key, publishAt)},
			envelope.Envelope{Body: "b", Group: "rem-1", DeduplicationID: "7e824c8903c7af1bc189b35fab75b394b0036ab6546a84335a94c73c88a602b0"}},
		{"hand-off FIFO, milliseconds, another zone", envelope.Spec{Kind: envelope.FIFO, Body: "b",
			Dedup: envelope.ForHandOff(key, publishAt.Add(123*time.Millisecond).In(time.FixedZone("x", 3600)))},
			envelope.Envelope{Body: "b", Group: "rem-1", DeduplicationID: "b2d352a4e7975f9a1a613b3807baf07587ef82a3160e38a6dea33d9b266cf2de"}},
		{"hand-off FIFO due in 2500", envelope.Spec{Kind: envelope.FIFO, Body: "b", Delay: time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC).Sub(now),
			Dedup: envelope.ForHandOff(key, publishAt)},
			envelope.Envelope{Body: "b", Group: "rem-1", DeduplicationID: "7e824c8903c7af1bc189b35fab75b394b0036ab6546a84335a94c73c88a602b0"}},

		// The consumer's deferral of an early message: a new body, delayed, no attributes.
		{"deferral in 90 s", envelope.Spec{Body: "b2", Delay: 90 * time.Second}, envelope.Envelope{Body: "b2", DelaySeconds: 90}},
		{"deferral in 14m59.4s", envelope.Spec{Body: "b2", Delay: 14*time.Minute + 59400*time.Millisecond}, envelope.Envelope{Body: "b2", DelaySeconds: 899}},

		// The consumer's pacing: the same body and attributes, delayed, capped at 900 s.
		{"paced 2.5 s", envelope.Spec{Body: "b", Delay: 2500 * time.Millisecond, Attributes: kept}, envelope.Envelope{Body: "b", DelaySeconds: 2, Attributes: kept}},
		{"paced 20 min", envelope.Spec{Body: "b", Delay: 20 * time.Minute, Attributes: kept}, envelope.Envelope{Body: "b", DelaySeconds: 900, Attributes: kept}},

		// The consumer's dead letter: the letter's attributes; on FIFO the record's group and its message id.
		{"dead letter", envelope.Spec{Body: "garbage", Attributes: letter, Dedup: envelope.ForDeadLetter("acct-17", "m-1")},
			envelope.Envelope{Body: "garbage", Attributes: letter}},
		{"dead letter FIFO", envelope.Spec{Kind: envelope.FIFO, Body: "garbage", Attributes: letter, Dedup: envelope.ForDeadLetter("acct-17", "m-1")},
			envelope.Envelope{Body: "garbage", Group: "acct-17", DeduplicationID: "m-1", Attributes: letter}},
		{"dead letter FIFO, no group", envelope.Spec{Kind: envelope.FIFO, Body: "garbage", Attributes: letter, Dedup: envelope.ForDeadLetter("", "m-1")},
			envelope.Envelope{Body: "garbage", Group: "nudge-dead-letters", DeduplicationID: "m-1", Attributes: letter}},

		// The redrive: the letter's attributes kept; on FIFO its group and "<messageId>-redrive-<n>".
		{"redrive", envelope.Spec{Body: "b", Attributes: kept, Dedup: envelope.ForRedrive("acct-1", "m-9", 1)}, envelope.Envelope{Body: "b", Attributes: kept}},
		{"redrive FIFO", envelope.Spec{Kind: envelope.FIFO, Body: "b", Attributes: kept, Dedup: envelope.ForRedrive("acct-1", "m-9", 1)},
			envelope.Envelope{Body: "b", Group: "acct-1", DeduplicationID: "m-9-redrive-1", Attributes: kept}},
		{"redrive FIFO, third time, no group", envelope.Spec{Kind: envelope.FIFO, Body: "b", Attributes: kept, Dedup: envelope.ForRedrive("", "m-9", 3)},
			envelope.Envelope{Body: "b", Group: "nudge-redrive", DeduplicationID: "m-9-redrive-3", Attributes: kept}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := envelope.Build(tc.spec); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Build(%+v)\n = %+v\nwant %+v", tc.spec, got, tc.want)
			}
		})
	}
}

func TestDelaySeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		due  time.Duration
		want int32
	}{{-time.Hour, 0}, {0, 0}, {time.Nanosecond, 0}, {999 * time.Millisecond, 0}, {time.Second, 1}, {time.Second + 1, 1}, {1999 * time.Millisecond, 1},
		{10 * time.Minute, 600}, {899500 * time.Millisecond, 899}, {900 * time.Second, 900}, {20 * time.Minute, 900}, {math.MinInt64, 0}} {
		if got := envelope.DelaySeconds(tc.due); got != tc.want {
			t.Errorf("due in %v: delay %d, want %d", tc.due, got, tc.want)
		}
	}
	// Far ahead: the difference saturates at the largest Duration.
	if got := envelope.DelaySeconds(time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC).Sub(now)); got != 900 {
		t.Errorf("due in 2500: delay %d, want 900", got)
	}
}

// TestSendAndEntryCarryTheEnvelope: both converters carry every field, and
// leave the FIFO fields unset (nil, not "") on a standard queue.
func TestSendAndEntryCarryTheEnvelope(t *testing.T) {
	t.Parallel()
	attrs := map[string]types.MessageAttributeValue{"a": str("1")}
	fifo := envelope.Envelope{Body: "b", Group: "g", DeduplicationID: "d", Attributes: attrs}
	in := fifo.Send("https://sqs/q.fifo")
	if aws.ToString(in.QueueUrl) != "https://sqs/q.fifo" || aws.ToString(in.MessageBody) != "b" || aws.ToString(in.MessageGroupId) != "g" ||
		aws.ToString(in.MessageDeduplicationId) != "d" || in.DelaySeconds != 0 || !reflect.DeepEqual(in.MessageAttributes, attrs) {
		t.Errorf("Send = %+v", in)
	}
	ent := fifo.Entry("7")
	if aws.ToString(ent.Id) != "7" || aws.ToString(ent.MessageBody) != "b" || aws.ToString(ent.MessageGroupId) != "g" ||
		aws.ToString(ent.MessageDeduplicationId) != "d" || ent.DelaySeconds != 0 || !reflect.DeepEqual(ent.MessageAttributes, attrs) {
		t.Errorf("Entry = %+v", ent)
	}

	standard := envelope.Envelope{Body: "b", DelaySeconds: 42}
	in = standard.Send("https://sqs/q")
	if in.DelaySeconds != 42 || in.MessageGroupId != nil || in.MessageDeduplicationId != nil || in.MessageAttributes != nil {
		t.Errorf("Send = %+v; want the delay, no group, no deduplication id, no attributes", in)
	}
	ent = standard.Entry("0")
	if ent.DelaySeconds != 42 || ent.MessageGroupId != nil || ent.MessageDeduplicationId != nil || ent.MessageAttributes != nil {
		t.Errorf("Entry = %+v; want the delay, no group, no deduplication id, no attributes", ent)
	}
}

// TestKeptAttributes: a Lambda record's attributes as a copy sends them.
func TestKeptAttributes(t *testing.T) {
	t.Parallel()
	if got := envelope.Kept(nil); got != nil {
		t.Errorf("Kept(nil) = %v, want nil", got)
	}
	if got := envelope.Kept(map[string]events.SQSMessageAttribute{}); got != nil {
		t.Errorf("Kept(empty) = %v, want nil", got)
	}
	got := envelope.Kept(map[string]events.SQSMessageAttribute{
		"nudge-error-class": {DataType: "String", StringValue: aws.String("exhausted")},
		"nudge-attempts":    {DataType: "Number", StringValue: aws.String("3")},
		"untyped":           {StringValue: aws.String("x")},
		"bytes":             {DataType: "Binary", BinaryValue: []byte{1, 2}},
		"no value":          {DataType: "String"},
	})
	want := map[string]types.MessageAttributeValue{
		"nudge-error-class": str("exhausted"),
		"nudge-attempts":    {DataType: aws.String("Number"), StringValue: aws.String("3")},
		"untyped":           str("x"),
		"bytes":             {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Kept = %v\nwant %v", got, want)
	}
}

func TestKindOf(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]envelope.Kind{
		"https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-work":      envelope.Standard,
		"https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-work.fifo": envelope.FIFO,
		"work": envelope.Standard, "dlq.fifo": envelope.FIFO, "": envelope.Standard,
	} {
		if got := envelope.KindOf(url); got != want {
			t.Errorf("KindOf(%q) = %v, want %v", url, got, want)
		}
	}
}
