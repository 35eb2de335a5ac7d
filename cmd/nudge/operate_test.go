package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// opsT0 is when the test's reminders were scheduled and handled.
var opsT0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// opsFixture is a provisioned stage with one reminder: its email delivery
// sent, its sms delivery dead-lettered (ledger and DLQ, as the consumer
// leaves them), and a poison body in the DLQ.
type opsFixture struct {
	t     *testing.T
	ctx   context.Context
	stage string
	res   local.Provisioned
	db    *dynamodb.Client
	sqs   *sqs.Client
	l     *ledger.Ledger
}

func opsSetup(t *testing.T) *opsFixture {
	t.Helper()
	db, q := standintest.DynamoDB(t), standintest.SQS(t)
	f := &opsFixture{t: t, ctx: context.Background(), db: db, sqs: q}
	stage := deployment.Dev()
	stage.Name = strings.TrimPrefix(standintest.Name("ops"), "ops-")
	f.stage = stage.Name
	var err error
	if f.res, err = local.Provision(f.ctx, stage, db, q); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(f.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(f.res.Table)})
		_, _ = q.DeleteQueue(f.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(f.res.WorkURL)})
		_, _ = q.DeleteQueue(f.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(f.res.DLQURL)})
	})
	clk := clock.NewFake(opsT0.Add(-time.Hour))
	if f.l, err = ledger.New(db, ledger.Config{Table: f.res.Table, Clock: clk}); err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: f.l, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Validator().Validate(schedule.Input{ID: "rem-ops-1", AccountRef: "acct-7", DueAt: "2026-11-02T09:00:00Z", Metadata: map[string]string{"plan": "pro"},
		Deliveries: []schedule.DeliveryInput{{Channel: "email", Provider: "webhook", RecipientRef: "acct-7/contact-1", TemplateRef: "renewal-v3"},
			{Channel: "sms", Provider: "webhook", RecipientRef: "acct-7/phone-1", TemplateRef: "renewal-v3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(f.ctx, r); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	email := message.DeliveryKey{ReminderID: "rem-ops-1", Channel: "email", Provider: "webhook"}
	sms := message.DeliveryKey{ReminderID: "rem-ops-1", Channel: "sms", Provider: "webhook"}
	c, err := f.l.Claim(f.ctx, ledger.Claim{Key: email, Token: "t1", LeaseUntil: opsT0.Add(time.Minute), DueBy: opsT0})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(300 * time.Millisecond)
	if _, err := f.l.Complete(f.ctx, c, "prov-msg-1"); err != nil {
		t.Fatal(err)
	}
	c, err = f.l.Claim(f.ctx, ledger.Claim{Key: sms, Token: "t2", LeaseUntil: opsT0.Add(time.Minute), DueBy: opsT0})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if _, err := f.l.DeadLetter(f.ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400"}); err != nil {
		t.Fatal(err)
	}
	body, _ := message.Encode(message.Message{ReminderID: "rem-ops-1", Channel: "sms", Provider: "webhook", DueAt: opsT0})
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	f.toDLQ(string(body), map[string]types.MessageAttributeValue{deadletter.AttrErrorClass: str("rejected"), deadletter.AttrReason: str("provider answered 400"),
		deadletter.AttrDeliveryKey: str(sms.String()), deadletter.AttrAttempts: {DataType: aws.String("Number"), StringValue: aws.String("1")}})
	time.Sleep(10 * time.Millisecond) // the DLQ's timestamps order the list
	f.toDLQ("not json at all", map[string]types.MessageAttributeValue{deadletter.AttrErrorClass: str("decode"), deadletter.AttrReason: str("message: the body is not JSON")})
	return f
}

func (f *opsFixture) toDLQ(body string, attrs map[string]types.MessageAttributeValue) {
	f.t.Helper()
	if _, err := f.sqs.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(f.res.DLQURL), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
		f.t.Fatal(err)
	}
}

// run runs one nudge command in process, with the stage's flags added.
func (f *opsFixture) run(stdin string, args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	withStage := append([]string{args[0]}, args[1:]...)
	if len(args) > 1 && (args[0] == "reminder" || args[0] == "dlq" || args[0] == "ledger") {
		withStage = append([]string{args[0], args[1], "--stage", f.stage}, args[2:]...)
	} else if args[0] == "status" {
		withStage = append([]string{"status", "--stage", f.stage}, args[1:]...)
	}
	code := run(withStage, strings.NewReader(stdin), &out, &errs)
	return code, out.String(), errs.String()
}

var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"(messageId|newMessageId)": "[^"]+"`), `"$1": "<id>"`},
	{regexp.MustCompile(`"(deadLetteredAt)": "[^"]+"`), `"$1": "<time>"`},
	{regexp.MustCompile(`"(ageSeconds|dlqOldestAgeSeconds)": \d+`), `"$1": 0`},
}

// golden compares got, with its volatile values (message ids, the DLQ's own
// timestamps, the stage's random name) replaced, to testdata/name.
func (f *opsFixture) golden(name, got string) {
	f.t.Helper()
	got = strings.ReplaceAll(got, f.stage, "<stage>")
	for _, v := range volatile {
		got = v.re.ReplaceAllString(got, v.with)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatalf("%v (run `go test ./cmd/nudge -run %s -update` to write it)", err, f.t.Name())
	}
	if got != string(want) {
		f.t.Errorf("%s changed; the --json output is an interface. Got:\n%s\nWant:\n%s", path, got, want)
	}
}

// TestOperatorCommands runs status, reminder show, dlq list, a dry run and
// a reviewed redrive, and a purge, as an operator would, against DynamoDB
// Local and fauxqs; the --json outputs are compared with golden files.
// Not parallel: TestLocalInvokeRunsEverySampleEvent points this process's
// environment at a stack of its own while it runs.
func TestOperatorCommands(t *testing.T) {
	f := opsSetup(t)
	t.Setenv("NUDGE_OPERATOR", "ops@example")

	code, out, errs := f.run("", "reminder", "show", "--json", "rem-ops-1")
	if code != exitOK {
		t.Fatalf("show: %d %s", code, errs)
	}
	f.golden("reminder-show.json", out)
	code, out, _ = f.run("", "reminder", "show", "rem-ops-1")
	if code != exitOK || !hasLine(out, "rem-ops-1:sms:webhook", "dead", "1", "rejected: provider answered 400") ||
		!hasLine(out, "rem-ops-1:email:webhook", "sent", "prov-msg-1") || !hasLine(out, "2026-11-02T09:00:01.300Z", "rem-ops-1:sms:webhook", "dead", "attempt 1") {
		t.Errorf("show as a table:\n%s", out)
	}

	code, out, errs = f.run("", "status", "--json")
	if code != exitOK {
		t.Fatalf("status: %d %s", code, errs)
	}
	f.golden("status.json", out)

	code, out, errs = f.run("", "dlq", "list", "--json")
	if code != exitOK {
		t.Fatalf("dlq list: %d %s", code, errs)
	}
	f.golden("dlq-list.json", out)

	code, out, _ = f.run("", "dlq", "redrive", "--max", "5", "--dry-run", "--json")
	if code != exitOK {
		t.Fatalf("dry run: %d", code)
	}
	f.golden("dlq-redrive-dry-run.json", out)

	// Declined at the prompt: nothing moves.
	code, out, _ = f.run("n\n", "dlq", "redrive", "--max", "5")
	if code != exitRefused || !strings.Contains(out, "Would move 1 to nudge-"+f.stage+"-work") || !strings.Contains(out, "Nothing was moved.") ||
		!strings.Contains(out, "1  the body is not a delivery") {
		t.Errorf("declined redrive: %d\n%s", code, out)
	}
	if d, _ := f.l.Get(f.ctx, message.DeliveryKey{ReminderID: "rem-ops-1", Channel: "sms", Provider: "webhook"}); d.Status != ledger.StatusDead {
		t.Fatalf("a declined redrive changed the ledger: %s", d.Status)
	}

	code, out, errs = f.run("", "dlq", "redrive", "--max", "5", "--yes", "--json")
	if code != exitOK {
		t.Fatalf("redrive: %d %s %s", code, out, errs)
	}
	f.golden("dlq-redrive.json", out)
	d, _ := f.l.Get(f.ctx, message.DeliveryKey{ReminderID: "rem-ops-1", Channel: "sms", Provider: "webhook"})
	if d.Status != ledger.StatusQueued || !strings.Contains(d.History[len(d.History)-1].Note, "redriven by ops@example") {
		t.Fatalf("after the redrive the sms delivery is %+v", d)
	}

	// The calendar commands take --stage too.
	var cout, cerrs bytes.Buffer
	if code := run([]string{"cancel", "--stage", f.stage, "rem-ops-1"}, strings.NewReader(""), &cout, &cerrs); code != 1 || !strings.Contains(cout.String(), "rem-ops-1:email:webhook: not cancelled: it was already sent") {
		t.Errorf("cancel --stage: %d %s %s", code, cout.String(), cerrs.String())
	}

	// The retention backfill: everything written now has its TTL already.
	if code, out, errs := f.run("", "ledger", "retain", "--dry-run"); code != exitOK || !strings.Contains(out, "items read; 0 would be given their reminder's TTL") {
		t.Errorf("ledger retain --dry-run: %d %s %s", code, out, errs)
	}
	if code, out, errs := f.run("", "ledger", "retain", "--json"); code != exitOK || !strings.Contains(out, `"extended": 0`) {
		t.Errorf("ledger retain --json: %d %s %s", code, out, errs)
	}

	// Purge: declined, then done; then it is gone.
	if code, out, _ := f.run("no\n", "reminder", "purge", "rem-ops-1"); code != exitRefused || !strings.Contains(out, "Nothing was deleted.") {
		t.Errorf("declined purge: %d %s", code, out)
	}
	code, out, errs = f.run("y\n", "reminder", "purge", "rem-ops-1")
	if code != exitOK || !strings.Contains(out, "purged rem-ops-1: removed 2 deliveries with their history and the reminder item.") {
		t.Fatalf("purge: %d %s %s", code, out, errs)
	}
	if code, _, errs := f.run("", "reminder", "show", "rem-ops-1"); code != exitNotFound || !strings.Contains(errs, "no such reminder") {
		t.Errorf("show after purge: %d %s", code, errs)
	}
}

// TestPurgeRefusesAReminderBeingSent: a delivery under a live lease stops
// the purge, and nothing is removed.
func TestPurgeRefusesAReminderBeingSent(t *testing.T) {
	f := opsSetup(t)
	real, err := ledger.New(f.db, ledger.Config{Table: f.res.Table})
	if err != nil {
		t.Fatal(err)
	}
	k := message.DeliveryKey{ReminderID: "rem-ops-2", Channel: "email", Provider: "webhook"}
	if err := real.Create(f.ctx, ledger.Delivery{ReminderID: k.ReminderID, Channel: k.Channel, Provider: k.Provider, DueAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := real.Claim(f.ctx, ledger.Claim{Key: k, Token: "t", LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()}); err != nil {
		t.Fatal(err)
	}
	code, _, errs := f.run("", "reminder", "purge", "--yes", "rem-ops-2")
	if code != exitRefused || !strings.Contains(errs, "being sent now") || !strings.Contains(errs, "nothing was removed") {
		t.Fatalf("purge in flight: %d %s", code, errs)
	}
	if _, err := real.Get(f.ctx, k); err != nil {
		t.Fatalf("the delivery is gone: %v", err)
	}
}

// TestOperatorErrorsSayWhatToDo: usage mistakes, a missing table and a
// missing reminder each get their message and exit code.
func TestOperatorErrorsSayWhatToDo(t *testing.T) {
	standintest.AWSConfig(t)
	t.Setenv("NUDGE_STAGE", "")
	t.Setenv("NUDGE_TABLE", "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status"}, exitUsage, "no ledger table: pass --stage NAME"},
		{[]string{"dlq", "redrive", "--table", "t", "--queue-url", "q", "--dlq-url", "d"}, exitUsage, "give --max N"},
		{[]string{"dlq", "redrive", "--all"}, exitUsage, "--all and --via-move-task go together"},
		{[]string{"dlq", "redrive", "--max", "3", "--json"}, exitUsage, "--json cannot ask for confirmation"},
		{[]string{"reminder", "show", "--table", "nudge-missing-ledger", "rem-1"}, exitNotFound, `the table "nudge-missing-ledger" does not exist`},
		{[]string{"reminder", "frobnicate"}, exitUsage, "want show or purge"},
	} {
		var out, errs bytes.Buffer
		code := run(c.args, strings.NewReader(""), &out, &errs)
		if code != c.code || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errs.String(), c.code, c.want)
		}
	}
	f := opsSetup(t)
	if code, _, errs := f.run("", "reminder", "show", "rem-nope"); code != exitNotFound || !strings.Contains(errs, "no such reminder") {
		t.Errorf("an unknown reminder: %d %s", code, errs)
	}
}

// TestRedriveViaMoveTaskReportsProgress drives `--all --via-move-task`'s
// path with a fake move task API (fauxqs has none).
func TestRedriveViaMoveTaskReportsProgress(t *testing.T) {
	var out, errs bytes.Buffer
	o := addOperation(newCommand("t", "", "", streams{strings.NewReader(""), &out, &errs}))
	old := moveTaskPoll
	moveTaskPoll = time.Millisecond
	defer func() { moveTaskPoll = old }()
	api := &moveTasks{results: []types.ListMessageMoveTasksResultEntry{
		{TaskHandle: aws.String("h-1"), Status: aws.String("RUNNING"), ApproximateNumberOfMessagesMoved: 4, ApproximateNumberOfMessagesToMove: aws.Int64(9)},
		{Status: aws.String("COMPLETED"), ApproximateNumberOfMessagesMoved: 9, ApproximateNumberOfMessagesToMove: aws.Int64(9)}}}
	if code := o.runMoveTask(context.Background(), api, "arn:aws:sqs:eu-west-1:1:nudge-prod-dlq", "arn:aws:sqs:eu-west-1:1:nudge-prod-work", 20); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "move task h-1: RUNNING, 4 of 9 moved") || !strings.Contains(out.String(), "COMPLETED, 9 of 9 moved") {
		t.Fatalf("progress:\n%s", out.String())
	}
}

type moveTasks struct {
	results []types.ListMessageMoveTasksResultEntry
	n       int
}

func (m *moveTasks) StartMessageMoveTask(context.Context, *sqs.StartMessageMoveTaskInput, ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: aws.String("h-1")}, nil
}

func (m *moveTasks) ListMessageMoveTasks(context.Context, *sqs.ListMessageMoveTasksInput, ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	r := m.results[min(m.n, len(m.results)-1)]
	m.n++
	return &sqs.ListMessageMoveTasksOutput{Results: []types.ListMessageMoveTasksResultEntry{r}}, nil
}

var _ redrive.MoveTaskAPI = (*moveTasks)(nil)

// hasLine reports whether a line of out holds every one of parts, in order.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestExplainSaysWhatToDo: each kind of AWS failure gets a message naming
// the fix and its exit code.
func TestExplainSaysWhatToDo(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	for _, c := range []struct {
		err  error
		code int
		want string
	}{
		{&smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "Requested resource not found"}, exitNotFound, `the table "nudge-prod-ledger" does not exist in eu-west-1: check --stage/--table and AWS_REGION`},
		{&smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}, exitNotFound, "a queue does not exist in eu-west-1"},
		{&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User: arn:aws:iam::1:user/x is not authorized to perform: dynamodb:Scan"}, exitAccess, "managed policy nudge-<stage>-operator (output OperatorPolicyArn)"},
		{&smithy.GenericAPIError{Code: "ExpiredTokenException", Message: "The security token included in the request is expired"}, exitAccess, "refresh them (aws sso login, or AWS_PROFILE)"},
		{fmt.Errorf("find the queue nudge-prod-dlq: %w", &smithy.GenericAPIError{Code: "QueueDoesNotExist"}), exitNotFound, "check --stage/--queue-url/--dlq-url"},
		{errors.New(`dial tcp: lookup dynamodb.eu-west-1.amazonaws.com: no such host`), exitAccess, "cannot reach AWS"},
		{fmt.Errorf("x: %w", schedule.ErrNoReminder), exitNotFound, "no such reminder"},
		{&ledger.InFlightError{ReminderID: "rem-1"}, exitRefused, "nothing was removed"},
		{usageError("no ledger table"), exitUsage, "no ledger table"},
	} {
		msg, code := explain(c.err, "nudge-prod-ledger", "https://sqs/1/nudge-prod-work", "https://sqs/1/nudge-prod-dlq")
		if code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%v: %q (exit %d); want %q (exit %d)", c.err, msg, code, c.want, c.code)
		}
	}
}

// TestReminderShowTellsWhatTheProviderSaid: an e-mail sent, then bounced
// for good, reads sent in the ledger and the --json document (with its
// feedback, failed), and `nudge reminder show` says it in its status and
// on a line of its own.
func TestReminderShowTellsWhatTheProviderSaid(t *testing.T) {
	f := opsSetup(t)
	d := ledger.Delivery{ReminderID: "rem-ops-fb", Channel: "email", Provider: "ses", RecipientRef: "acct-7/contact-1", TemplateRef: "renewal-notice",
		Address: "ana.lima@example.com", DueAt: opsT0, ExpiresAt: opsT0.Add(24 * time.Hour), Status: ledger.StatusQueued}
	if err := f.l.Create(f.ctx, d); err != nil {
		t.Fatal(err)
	}
	c, err := f.l.Claim(f.ctx, ledger.Claim{Key: d.Key(), Token: "t9", LeaseUntil: opsT0.Add(time.Minute), DueBy: opsT0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Complete(f.ctx, c, "ses-msg-1"); err != nil {
		t.Fatal(err)
	}
	bounce := ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General 5.1.1",
		At: time.Date(2026, 11, 2, 9, 0, 2, 669e6, time.UTC), ID: "fb-1", MessageID: "ses-msg-1"}
	if _, err := f.l.RecordFeedback(f.ctx, d.Key(), bounce); err != nil {
		t.Fatal(err)
	}
	code, out, errs := f.run("", "reminder", "show", "rem-ops-fb")
	told := "sent, then bounced (Permanent/General 5.1.1) at 2026-11-02T09:00:02.669Z"
	if code != exitOK || !hasLine(out, "rem-ops-fb:email:ses", told) || !strings.Contains(out, "FAILED AFTER SENDING: rem-ops-fb:email:ses: "+told) ||
		!hasLine(out, "rem-ops-fb:email:ses", "sent", "bounced Permanent/General 5.1.1") {
		t.Errorf("show: %d %s\n%s", code, errs, out)
	}
	code, out, _ = f.run("", "reminder", "show", "--json", "rem-ops-fb")
	var doc schedule.Document
	if err := json.Unmarshal([]byte(out), &doc); code != exitOK || err != nil || len(doc.Deliveries) != 1 {
		t.Fatalf("show --json: %d %v\n%s", code, err, out)
	}
	if dd := doc.Deliveries[0]; dd.Status != schedule.StatusSent || dd.Feedback == nil || !dd.Feedback.Failed || dd.Feedback.Kind != "bounced" {
		t.Errorf("the document's delivery %+v, feedback %+v", dd, dd.Feedback)
	}
	if last := doc.History[len(doc.History)-1]; !last.Feedback || last.Status != schedule.StatusSent {
		t.Errorf("the history's last entry %+v; want the feedback, status sent", last)
	}
}

// TestReminderShowTellsAHeldFallback: a fallback not taken shows held, as
// the fallback of its delivery, with no hand-off; the primary names it.
func TestReminderShowTellsAHeldFallback(t *testing.T) {
	f := opsSetup(t)
	primary := ledger.Delivery{ReminderID: "rem-ops-hold", Channel: "email", Provider: "webhook", RecipientRef: "acct-7/contact-1", TemplateRef: "renewal-v3",
		DueAt: opsT0, ExpiresAt: opsT0.Add(24 * time.Hour), Fallback: ledger.FallbackRef{Channel: "sms", Provider: "webhook"}, FallbackWithin: time.Hour}
	held := ledger.Delivery{ReminderID: "rem-ops-hold", Channel: "sms", Provider: "webhook", RecipientRef: "acct-7/phone-1", TemplateRef: "renewal-v3",
		DueAt: opsT0, ExpiresAt: opsT0.Add(24 * time.Hour), Status: ledger.StatusHeld, FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"},
		FallbackWithin: time.Hour}
	for _, d := range []ledger.Delivery{primary, held} {
		if err := f.l.Create(f.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := f.run("", "reminder", "show", "rem-ops-hold")
	if code != exitOK || !hasLine(out, "rem-ops-hold:sms:webhook", "held: fallback of email:webhook, taken if it fails", " - ") {
		t.Errorf("show: %d %s\n%s", code, errs, out)
	}
	code, out, _ = f.run("", "reminder", "show", "--json", "rem-ops-hold")
	var doc schedule.Document
	if err := json.Unmarshal([]byte(out), &doc); code != exitOK || err != nil || len(doc.Deliveries) != 2 {
		t.Fatalf("show --json: %d %v\n%s", code, err, out)
	}
	if p, h := doc.Deliveries[0], doc.Deliveries[1]; p.Fallback != "sms:webhook" || h.Status != schedule.StatusHeld || h.FallbackOf != "email:webhook" ||
		h.FallbackWithin != "1h" || h.HandedOff != nil {
		t.Errorf("the document's deliveries: %+v\n%+v", p, h)
	}
}
