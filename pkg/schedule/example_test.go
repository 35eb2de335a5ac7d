package schedule_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// A Validator turns what an application sends (an Input, the API's JSON)
// into a Reminder, with its defaults applied: expiresAt is dueAt plus the
// lateness window. Its Now is the caller's clock (a reminder already
// expired is refused). The intake API and the CLI validate with the same
// Validator, so a reminder refused at one door is refused at the other.
func ExampleValidator_Validate() {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)) // clock.Real{} in production
	v := schedule.Validator{Now: clk.Now, Lateness: 12 * time.Hour}

	r, err := v.Validate(schedule.Input{
		ID:         "rem-184",
		AccountRef: "acct-1",
		DueAt:      "2026-12-01T09:00:00Z",
		Deliveries: []schedule.DeliveryInput{{Channel: "sms", Provider: "webhook", RecipientRef: "contact-2", TemplateRef: "renewal"}},
		Metadata:   map[string]string{"plan": "gold"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.ID, "due", schedule.FormatTime(r.DueAt), "expires", schedule.FormatTime(r.ExpiresAt))
	for _, d := range r.Deliveries {
		fmt.Println(r.Key(d), d.RecipientRef, d.TemplateRef)
	}
	// Output:
	// rem-184 due 2026-12-01T09:00:00.000Z expires 2026-12-01T21:00:00.000Z
	// rem-184:sms:webhook contact-2 renewal
}

// A refused Input is a *ValidationError: the field (a JSON path), what is
// wrong with it and how to fix it; the intake API answers it as a 400
// problem with the same three. ParseJSON, the API's door, also refuses
// fields a reminder does not have, so a misspelt one is not silently
// replaced by its default.
func ExampleValidationError() {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)) // clock.Real{} in production
	v := schedule.Validator{Now: clk.Now}

	_, fax := v.Validate(schedule.Input{
		ID:         "rem-185",
		AccountRef: "acct-1",
		DueAt:      "2026-12-01T09:00:00Z",
		Deliveries: []schedule.DeliveryInput{
			{Channel: "sms", Provider: "webhook", RecipientRef: "contact-2", TemplateRef: "renewal"},
			{Channel: "fax", Provider: "webhook", RecipientRef: "contact-2", TemplateRef: "renewal"},
		},
	})
	_, misspelt := v.ParseJSON([]byte(`{"id":"rem-186","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","expireAt":"2026-12-02T09:00:00Z",
		"deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"contact-2","templateRef":"renewal"}]}`))
	for _, err := range []error{fax, misspelt} {
		var ve *schedule.ValidationError
		if errors.As(err, &ve) {
			fmt.Printf("field %s: %s\n  fix: %s\n", ve.Field, ve.Problem, ve.Fix)
		}
	}
	// Output:
	// field deliveries[1].channel: "fax" is not a known channel
	//   fix: use one of email, sms, push, voice, webhook
	// field expireAt: is not a reminder field
	//   fix: known fields are id, accountRef, dueAt, expiresAt, timeZone, dueLocal, expiresLocal, recur, deliveries (channel, provider, recipientRef, templateRef, address, window, fallback), metadata and late
}
