package intake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// An application calls the API with a Client: each request signed with
// SigV4 for the service "lambda", as the intake's function URL (AWS_IAM
// auth) requires. In production, URL is the stack's IntakeUrl and Region
// and Credentials come from the SDK's configuration (config.LoadDefaultConfig:
// cfg.Region, cfg.Credentials). Here the real Handler runs on an in-memory
// ledger and a fake clock behind an httptest server, which, unlike the
// function URL, verifies no signature.
//
// Put is idempotent by id: the same reminder again is "unchanged", so a
// call that timed out is simply sent again. A refusal is an *intake.Error
// whose Problem names the field and the fix.
func ExampleClient() {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	led, _ := ledger.NewMemory(ledger.MemoryConfig{Clock: clk, Shards: 2})
	store, _ := schedule.New(schedule.Config{Ledger: led, Clock: clk})
	handler, _ := intake.New(intake.Config{Store: store})
	srv := httptest.NewServer(handler)
	defer srv.Close()

	api := &intake.Client{URL: srv.URL, Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")}
	ctx := context.Background()
	in := schedule.Input{
		ID:         "rem-184",
		AccountRef: "acct-1",
		DueAt:      "2026-12-01T09:00:00Z",
		Deliveries: []schedule.DeliveryInput{{Channel: "sms", Provider: "webhook", RecipientRef: "contact-2", TemplateRef: "renewal"}},
	}
	for range 2 {
		created, err := api.Put(ctx, in)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("put:", created.ID, created.Outcome)
	}

	doc, err := api.Get(ctx, "rem-184")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("get:", doc.Reminder.ID, "due", schedule.FormatTime(doc.Reminder.DueAt), "expires", schedule.FormatTime(doc.Reminder.ExpiresAt))
	for _, d := range doc.Deliveries {
		fmt.Println("    ", d.Key, d.Status, "attempts", d.Attempts)
	}

	in.ID, in.DueAt = "rem-185", "1 December"
	_, err = api.Put(ctx, in)
	var refused *intake.Error
	if errors.As(err, &refused) {
		fmt.Println("refused:", refused.Status, refused.Problem.Type, refused.Problem.Field)
		fmt.Println("    fix:", refused.Problem.Fix)
	}
	// Output:
	// put: rem-184 created
	// put: rem-184 unchanged
	// get: rem-184 due 2026-12-01T09:00:00.000Z expires 2026-12-02T09:00:00.000Z
	//      rem-184:sms:webhook pending attempts 0
	// refused: 400 urn:nudge:problem:invalid-request dueAt
	//     fix: write an RFC 3339 time with a zone, like 2026-12-01T09:00:00Z, or a local time and its zone (dueLocal, timeZone)
}
