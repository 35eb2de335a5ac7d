package deadletter_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/pkg/failure"
)

// TestALetterReadsBackAsWritten: what the consumer writes, the review
// reads; a redrive adds its count and its author and keeps the rest; a
// message without the consumer's attributes is one SQS moved.
func TestALetterReadsBackAsWritten(t *testing.T) {
	t.Parallel()
	in := deadletter.Letter{Class: failure.ClassRejected, Reason: "provider answered 400", Attempts: 2, Receives: 3,
		SourceMessageID: "m-1", DeliveryKey: "rem-1:email:webhook"}
	attrs := in.Attributes()
	if got := deadletter.Read(attrs); got != in {
		t.Errorf("read back %+v, want %+v", got, in)
	}
	for _, by := range []string{"ops@example", "oncall@example"} {
		attrs = deadletter.Redriven(attrs, by)
	}
	got := deadletter.Read(attrs)
	if got.Redrives != 2 || got.RedrivenBy != "oncall@example" || got.Class != in.Class || got.DeliveryKey != in.DeliveryKey {
		t.Errorf("after two redrives: %+v", got)
	}
	if _, ok := in.Attributes()[deadletter.AttrRedrives]; ok {
		t.Error("a letter never redriven carries a redrive count")
	}

	// The reason is bounded, and an empty value is never sent (SQS refuses it).
	long := deadletter.Letter{Class: failure.ClassServer, Reason: strings.Repeat("x", 10_000)}.Attributes()
	if n := len(aws.ToString(long[deadletter.AttrReason].StringValue)); n != deadletter.MaxReason {
		t.Errorf("a 10,000-byte reason is carried as %d bytes", n)
	}
	for name, v := range long {
		if aws.ToString(v.StringValue) == "" {
			t.Errorf("attribute %s is empty", name)
		}
	}

	moved := deadletter.Read(map[string]types.MessageAttributeValue{})
	if moved.Class != deadletter.ClassMaxReceiveCount || !strings.Contains(moved.Reason, "redrive policy") {
		t.Errorf("a message SQS moved reads as %+v", moved)
	}
}
