package envelope_test

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nudgehq/nudge/internal/envelope"
)

// A redrive to a FIFO work queue: the letter's group, and a deduplication
// id per redrive. The delay is ignored on FIFO.
func ExampleBuild() {
	url := "https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-work.fifo"
	env := envelope.Build(envelope.Spec{Kind: envelope.KindOf(url), Body: `{"v":1}`, Delay: time.Minute,
		Dedup: envelope.ForRedrive("acct-1", "m-9", 2)})
	in := env.Send(url)
	fmt.Println(aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId), in.DelaySeconds)

	// The same body to a standard queue, due in 90.2 s: delayed 90 s (rounded down: the consumer holds it the last 0.2 s).
	fmt.Println(envelope.Build(envelope.Spec{Body: `{"v":1}`, Delay: 90200 * time.Millisecond}).Entry("0").DelaySeconds)
	// Output:
	// acct-1 m-9-redrive-2 0
	// 90
}
