package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// MaxDelaySeconds is the longest delay SQS gives a message at send time.
const MaxDelaySeconds = 900

// Kind is the kind of queue a message is sent to.
type Kind int

const (
	// Standard queues take a per-message delay, and no group.
	Standard Kind = iota
	// FIFO queues take a message group and a deduplication id, and no
	// per-message delay (the consumer defers an early FIFO message with its
	// visibility instead).
	FIFO
)

// KindOf returns the kind of the queue at url: FIFO when its name ends in
// ".fifo", as SQS requires of a FIFO queue's name.
func KindOf(url string) Kind {
	if strings.HasSuffix(url, ".fifo") {
		return FIFO
	}
	return Standard
}

// Dedup is a producer's rule for a FIFO queue: the message group a message
// joins, and the deduplication id that makes a second send of the same
// message within SQS's five-minute window a no-op. A standard queue ignores
// it. Each producer's rule is one of the constructors below.
type Dedup struct {
	// Group is the message group id.
	Group string
	// ID is the deduplication id.
	ID string
}

// ForHandOff is the enqueue's rule (its hand-off and its repair): the
// message groups by reminder, and is deduplicated by delivery and publish
// time, so that a hand-off sent twice is one message and a repair, which
// publishes at a later time, is another. The id is the hex SHA-256 of
// "reminderId:channel:provider#publishAt", publishAt as the ledger writes it.
func ForHandOff(key message.DeliveryKey, publishAt time.Time) Dedup {
	sum := sha256.Sum256([]byte(key.String() + "#" + ledger.Format(publishAt)))
	return Dedup{Group: key.ReminderID, ID: hex.EncodeToString(sum[:])}
}

// ForDeadLetter is the consumer's rule for a dead letter: the group of the
// message dead-lettered ("nudge-dead-letters" if it had none), deduplicated
// by its message id, so that a record dead-lettered twice is one letter.
func ForDeadLetter(group, messageID string) Dedup {
	if group == "" {
		group = "nudge-dead-letters"
	}
	return Dedup{Group: group, ID: messageID}
}

// ForRedrive is the redrive's rule: the group of the dead letter
// ("nudge-redrive" if it had none), deduplicated as
// "<messageId>-redrive-<redrive>", redrive counting from 1, so that each
// redrive of a letter is a new message and a retried one is not.
func ForRedrive(group, messageID string, redrive int) Dedup {
	if group == "" {
		group = "nudge-redrive"
	}
	return Dedup{Group: group, ID: messageID + "-redrive-" + strconv.Itoa(redrive)}
}

// ForForward is the consumer's rule for a message it forwards to its
// provider's work queue (it arrived on another): the record's group
// ("nudge-forward" if it had none), deduplicated as "<messageId>-forward",
// so that a record forwarded twice is one message.
func ForForward(group, messageID string) Dedup {
	if group == "" {
		group = "nudge-forward"
	}
	return Dedup{Group: group, ID: messageID + "-forward"}
}

// Spec is what a producer decided to send.
type Spec struct {
	// Kind is the kind of queue it goes to (KindOf its URL, or what the
	// producer knows of it).
	Kind Kind
	// Body is the message body.
	Body string
	// Delay is how long the message stays invisible after it is sent, on a
	// standard queue: see DelaySeconds. For a due time, due.Sub(now), which
	// saturates rather than overflows for a due time centuries ahead.
	// A FIFO queue ignores it.
	Delay time.Duration
	// Attributes are the message attributes sent with it, as they are: the
	// ones kept from the source message (Kept converts a Lambda record's)
	// and any the producer adds. Nil sends none.
	Attributes map[string]types.MessageAttributeValue
	// Dedup is the producer's rule for a FIFO queue. A standard queue
	// ignores it; a FIFO queue refuses a message without a group.
	Dedup Dedup
}

// Envelope is what a producer sends: the body and what SQS needs around it.
// It becomes a SendMessage input (Send) or a SendMessageBatch entry (Entry).
type Envelope struct {
	// Body is the message body.
	Body string
	// DelaySeconds is the delay, 0 to MaxDelaySeconds; always 0 on FIFO.
	DelaySeconds int32
	// Group is the FIFO message group id; "" on a standard queue.
	Group string
	// DeduplicationID is the FIFO deduplication id; "" on a standard queue.
	DeduplicationID string
	// Attributes are the message attributes; nil for none.
	Attributes map[string]types.MessageAttributeValue
}

// Build applies the queue's rules to s: a standard queue gets the delay in
// whole seconds and no group, a FIFO queue the producer's group and
// deduplication id and no delay.
func Build(s Spec) Envelope {
	e := Envelope{Body: s.Body, Attributes: s.Attributes}
	if s.Kind == FIFO {
		e.Group, e.DeduplicationID = s.Dedup.Group, s.Dedup.ID
		return e
	}
	e.DelaySeconds = DelaySeconds(s.Delay)
	return e
}

// DelaySeconds is d as SQS takes a delay: whole seconds, rounded down, 0
// for d ≤ 0 and MaxDelaySeconds for anything longer. Rounded down, a
// message is visible up to a second before it is due, never after: the
// consumer holds a record that arrives that early until its due time
// (consumer.Config.EarlyWait), so that its lateness never comes from the
// rounding. Rounded up, every message would be up to a second late.
func DelaySeconds(d time.Duration) int32 {
	switch {
	case d <= 0:
		return 0
	case d >= MaxDelaySeconds*time.Second:
		return MaxDelaySeconds
	}
	return int32(d / time.Second)
}

// Send returns e as a SendMessage input to the queue at queueURL.
func (e Envelope) Send(queueURL string) *sqs.SendMessageInput {
	return &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(e.Body), DelaySeconds: e.DelaySeconds,
		MessageAttributes: e.Attributes, MessageGroupId: optional(e.Group), MessageDeduplicationId: optional(e.DeduplicationID)}
}

// Entry returns e as the SendMessageBatch entry id.
func (e Envelope) Entry(id string) types.SendMessageBatchRequestEntry {
	return types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(e.Body), DelaySeconds: e.DelaySeconds,
		MessageAttributes: e.Attributes, MessageGroupId: optional(e.Group), MessageDeduplicationId: optional(e.DeduplicationID)}
}

// Kept returns a Lambda record's message attributes as a copy of it sends
// them: nil for none; an attribute without a value is left out (SQS refuses
// it), and one without a data type is a String.
func Kept(attrs map[string]events.SQSMessageAttribute) map[string]types.MessageAttributeValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(attrs))
	for k, a := range attrs {
		v := types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
		if v.StringValue == nil && v.BinaryValue == nil {
			continue // SQS refuses an attribute without a value
		}
		if a.DataType == "" {
			v.DataType = aws.String("String")
		}
		out[k] = v
	}
	return out
}

// optional is s as the SDK takes an optional string: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}
