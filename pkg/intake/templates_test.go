package intake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// noTemplates is SES with no template: it counts the reads.
type noTemplates struct{ calls atomic.Int32 }

func (n *noTemplates) GetEmailTemplate(context.Context, *sesv2.GetEmailTemplateInput, ...func(*sesv2.Options)) (*sesv2.GetEmailTemplateOutput, error) {
	n.calls.Add(1)
	return nil, &smithy.GenericAPIError{Code: "NotFoundException", Message: "Template does not exist"}
}

// TestABatchOfUnknownTemplatesMakesOneSESCall: the intake knows the stack's
// templates from its catalogue (no SES call), and a batch naming a hundred
// templates nobody deployed asks SES once, not a hundred times: it cannot
// throttle the account's template reads, and with them every other SES
// create of the stage. Each unknown one is refused, naming the field.
func TestABatchOfUnknownTemplatesMakesOneSESCall(t *testing.T) {
	clk := clock.NewFake(now)
	led := memoryLedger(t, clk)
	api := &noTemplates{}
	templates := &ses.DeployedTemplates{Catalog: ses.Catalog{"renewal": {"plan"}}, SES: api, Prefix: "nudge-dev-", Clock: clk}
	store := newStore(t, schedule.Config{Ledger: led, Clock: clk, Providers: []string{"webhook", "ses"},
		Doors: map[string]provider.Door{ses.Name: ses.NewDoor("nudge-dev-", templates)}})
	f := serve(t, clk, led, newHandler(t, intake.Config{Store: store}), nil)

	email := func(id, template string) map[string]any {
		r := reminder(id)
		r["id"] = id
		r["deliveries"] = []map[string]string{{"channel": "email", "provider": "ses", "recipientRef": "c-2", "templateRef": template, "address": "ana.silva@example.com"}}
		return r
	}
	if a := f.json("PUT", "/v1/reminders/rem-known", email("rem-known", "renewal")); a.status != 201 {
		t.Fatalf("a reminder with the stack's template: %d %s", a.status, a.body)
	}
	if n := api.calls.Load(); n != 0 {
		t.Fatalf("%d SES calls for a template the stack deployed; want none", n)
	}

	var batch []map[string]any
	for i := range intake.MaxBatch {
		batch = append(batch, email(fmt.Sprintf("rem-%d", i), fmt.Sprintf("typo-%d", i)))
	}
	a := f.json("POST", "/v1/reminders", map[string]any{"reminders": batch})
	if a.status != 200 {
		t.Fatalf("batch: %d %s", a.status, a.body)
	}
	var res intake.BatchResult
	if err := json.Unmarshal(a.body, &res); err != nil || len(res.Results) != intake.MaxBatch {
		t.Fatalf("batch answer %s: %v", a.body, err)
	}
	for i, r := range res.Results {
		if r.Status != 400 || r.Problem == nil || r.Problem.Field != "deliveries[0].templateRef" {
			t.Fatalf("reminders[%d]: %+v; want 400 naming deliveries[0].templateRef", i, r)
		}
	}
	if n := api.calls.Load(); n > 1 {
		t.Errorf("%d SES calls for a batch of %d unknown templates; want at most 1", n, intake.MaxBatch)
	}
}
