package deadletter

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/failure"
)

// The message attributes of a dead letter.
const (
	AttrErrorClass      = "nudge-error-class"       // the failure class (failure.Class)
	AttrReason          = "nudge-reason"            // why, for a person, at most MaxReason bytes
	AttrAttempts        = "nudge-attempts"          // provider attempts the ledger counted (0: none claimed)
	AttrReceives        = "nudge-receives"          // the work-queue message's receive count
	AttrSourceMessageID = "nudge-source-message-id" // the work-queue message dead-lettered
	AttrDeliveryKey     = "nudge-delivery-key"      // the delivery, when the body names one
	AttrRedrives        = "nudge-redrives"          // how many times it was redriven
	AttrRedrivenBy      = "nudge-redriven-by"       // who redrove it last
)

// MaxReason is the most bytes of reason a dead letter carries.
const MaxReason = 256

// ClassMaxReceiveCount is the class Read gives a message SQS moved without
// the consumer's attributes.
const ClassMaxReceiveCount failure.Class = "maxReceiveCount"

// Letter is what a dead letter's attributes say.
type Letter struct {
	Class           failure.Class
	Reason          string
	Attempts        int
	Receives        int
	SourceMessageID string
	DeliveryKey     string
	Redrives        int
	RedrivenBy      string
}

// Attributes are the message attributes that carry l, as the consumer
// writes them (the redrive's two only when set).
func (l Letter) Attributes() map[string]types.MessageAttributeValue {
	attrs := map[string]types.MessageAttributeValue{
		AttrErrorClass:      str(string(l.Class)),
		AttrReason:          str(text.Clip(l.Reason, MaxReason)),
		AttrAttempts:        number(l.Attempts),
		AttrReceives:        number(l.Receives),
		AttrSourceMessageID: str(l.SourceMessageID),
	}
	if l.DeliveryKey != "" {
		attrs[AttrDeliveryKey] = str(l.DeliveryKey)
	}
	if l.Redrives > 0 {
		attrs[AttrRedrives] = number(l.Redrives)
		attrs[AttrRedrivenBy] = str(l.RedrivenBy)
	}
	return attrs
}

// Read returns what attrs say. A message without the consumer's class is
// one SQS moved: ClassMaxReceiveCount, with a reason saying so.
func Read(attrs map[string]types.MessageAttributeValue) Letter {
	get := func(name string) string {
		if v, ok := attrs[name]; ok {
			return aws.ToString(v.StringValue)
		}
		return ""
	}
	atoi := func(name string) int {
		n, _ := strconv.Atoi(get(name))
		return n
	}
	l := Letter{Class: failure.Class(get(AttrErrorClass)), Reason: get(AttrReason), Attempts: atoi(AttrAttempts), Receives: atoi(AttrReceives),
		SourceMessageID: get(AttrSourceMessageID), DeliveryKey: get(AttrDeliveryKey), Redrives: atoi(AttrRedrives), RedrivenBy: get(AttrRedrivenBy)}
	if l.Class == "" {
		l.Class, l.Reason = ClassMaxReceiveCount, "moved by the work queue's redrive policy (the consumer crashed or timed out on it)"
	}
	return l
}

// Redriven returns attrs, copied, with the redrive count raised by one and
// by recorded as the redriver: the attributes of the message a redrive
// sends back to the work queue.
func Redriven(attrs map[string]types.MessageAttributeValue, by string) map[string]types.MessageAttributeValue {
	out := make(map[string]types.MessageAttributeValue, len(attrs)+2)
	for k, v := range attrs {
		out[k] = v
	}
	out[AttrRedrives] = number(Read(attrs).Redrives + 1)
	out[AttrRedrivenBy] = str(by)
	return out
}

func str(s string) types.MessageAttributeValue {
	if s == "" {
		s = "-" // SQS refuses an empty attribute value
	}
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

func number(n int) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(n))}
}
