package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
)

// ExampleClaim: a claim is the conditional write that starts an attempt.
// One consumer wins it; a second copy of the message is refused while the
// lease holds, and once the send is recorded every later copy is refused
// as already sent, with the delivery as it was, from the refused write
// itself (no extra read). The in-memory ledger refuses exactly as the
// DynamoDB ledger does (the conformance suite holds both to it).
func ExampleClaim() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	l, _ := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	key := message.DeliveryKey{ReminderID: "rem-184", Channel: "email", Provider: "webhook"}
	_ = l.Create(ctx, ledger.Delivery{ReminderID: key.ReminderID, Channel: key.Channel, Provider: key.Provider,
		DueAt: clk.Now(), ExpiresAt: clk.Now().Add(24 * time.Hour)})

	claim := func(token string) (ledger.Delivery, error) {
		return l.Claim(ctx, ledger.Claim{Key: key, Token: token, LeaseUntil: clk.Now().Add(time.Minute), DueBy: clk.Now()})
	}
	first, err := claim("consumer-a")
	fmt.Println(first.Status, first.Attempts, err)

	_, err = claim("consumer-b") // a duplicate message, while consumer-a sends
	var refused *ledger.RefusedError
	fmt.Println(errors.Is(err, ledger.ErrLeased), errors.As(err, &refused) && refused.Current.ClaimToken == "consumer-a")

	sent, _ := l.Complete(ctx, first, "msg-1")
	_, err = claim("consumer-c") // a late copy, after the send
	fmt.Println(sent.Status, errors.Is(err, ledger.ErrAlreadySent))
	// Output:
	// sending 1 <nil>
	// true true
	// sent true
}
