package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/provider/ses"
)

// TestTheIntakeFollowsWhatTheStageRuns: the CLI reads the providers the
// stack's enqueue recorded, refuses a delivery the stage cannot send (a
// provider it does not run, a template not deployed), keeps an e-mail
// address on the delivery item, and shows it masked unless revealed.
// Not parallel: TestInvoke points this process's environment elsewhere.
func TestTheIntakeFollowsWhatTheStageRuns(t *testing.T) {
	ctx := context.Background()
	db, q := standintest.DynamoDB(t), standintest.SQS(t)
	sesClient, _ := standintest.SES(t)
	stage := deployment.Dev()
	stage.Name = strings.TrimPrefix(standintest.Name("mail"), "mail-")
	stage.Providers, stage.ProviderSettings = []string{"webhook", "ses"}, map[string]string{ses.SettingFrom: "reminders@nudge.local"}
	res, err := local.Provision(ctx, stage, db, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.ProvisionEmail(ctx, stage, sesClient, "../../templates/email"); err != nil {
		t.Fatal(err)
	}
	// The enqueue's first run: the shard count and what the stage runs.
	enq, err := ledger.New(db, ledger.Config{Table: res.Table, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enq.StoredShards(ctx); err != nil {
		t.Fatal(err)
	}
	if err := enq.RecordStage(ctx, ledger.StageFacts{Providers: stage.Providers, Env: map[string]string{ses.EnvTemplatePrefix: ses.TemplatePrefix(stage.Name)}}); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string, args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		if cmd == "show" {
			cmd = "reminder show"
		}
		code := run(append(append(strings.Fields(cmd), "--stage", stage.Name), args...), strings.NewReader(""), &out, &errs)
		return code, out.String(), errs.String()
	}
	due := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	base := []string{"--id", "rem-mail-1", "--account", "acct-1", "--due", due, "--recipient", "acct-1/contact-1", "--meta", "plan=Pro", "--meta", "reference=R-1"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }

	if code, _, errs := run("schedule", with("--channel", "sms", "--provider", "sns", "--template", "t")...); code != 1 ||
		!strings.Contains(errs, `deliveries[0].provider "sns" is not a provider this stage runs; use one of webhook, ses`) {
		t.Fatalf("a provider the stage does not run: %d %q", code, errs)
	}
	if code, _, errs := run("schedule", with("--provider", "ses", "--address", "ana@example.com", "--template", "no-such-template")...); code != 1 ||
		!strings.Contains(errs, `"no-such-template" is not a deployed SES template`) {
		t.Fatalf("a template not deployed: %d %q", code, errs)
	}
	// renewal-notice renders plan, renewsOn and reference.
	if code, _, errs := run("schedule", with("--provider", "ses", "--address", "ana@example.com", "--template", "renewal-notice")...); code != 1 ||
		!strings.Contains(errs, `metadata lacks renewsOn, which template "renewal-notice" renders`) {
		t.Fatalf("metadata the template needs: %d %q", code, errs)
	}
	if code, out, errs := run("schedule", with("--provider", "ses", "--address", "ana@example.com", "--template", "renewal-notice", "--meta", "renewsOn=1 December")...); code != 0 || !strings.HasPrefix(out, "created rem-mail-1") {
		t.Fatalf("schedule an e-mail: %d %q %q", code, out, errs)
	}

	code, out, errs := run("show", "rem-mail-1")
	if code != 0 || !strings.Contains(out, "a•••@example.com") || strings.Contains(out, "ana@example.com") {
		t.Fatalf("show: %d %q %q; want the address masked", code, out, errs)
	}
	code, out, _ = run("show", "--json", "rem-mail-1")
	var doc struct {
		Deliveries []struct{ Address string } `json:"deliveries"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Deliveries) != 1 || doc.Deliveries[0].Address != "a•••@example.com" || strings.Contains(out, "ana@") {
		t.Fatalf("show --json: %d %s", code, out)
	}
	if code, out, _ := run("show", "--reveal", "rem-mail-1"); code != 0 || !strings.Contains(out, "ana@example.com") {
		t.Fatalf("show --reveal: %d %q", code, out)
	}
}
