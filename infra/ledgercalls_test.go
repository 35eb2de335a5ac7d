package main

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/outcome"
)

// ddbCall is one item a DynamoDB request acts on: its action, as IAM names
// it, and its partition key.
type ddbCall struct{ action, pk string }

// spyDB records the items each request acts on and answers as DynamoDB
// would for the calls under test: the registry's shard count, a delivery
// item for any other read or write.
type spyDB struct {
	mu    sync.Mutex
	calls []ddbCall
	item  map[string]ddbtypes.AttributeValue
}

func (s *spyDB) add(action string, key map[string]ddbtypes.AttributeValue) {
	pk, _ := key["PK"].(*ddbtypes.AttributeValueMemberS)
	s.mu.Lock()
	defer s.mu.Unlock()
	if pk != nil {
		s.calls = append(s.calls, ddbCall{action, pk.Value})
	}
}

func (s *spyDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.add("dynamodb:GetItem", in.Key)
	if pk := in.Key["PK"].(*ddbtypes.AttributeValueMemberS); pk.Value == ledger.RegistryPartition {
		return &dynamodb.GetItemOutput{Item: map[string]ddbtypes.AttributeValue{"shards": &ddbtypes.AttributeValueMemberN{Value: "8"},
			"at": &ddbtypes.AttributeValueMemberS{Value: ledger.Format(t0)}}}, nil
	}
	return &dynamodb.GetItemOutput{Item: s.item}, nil
}

func (s *spyDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	s.add("dynamodb:PutItem", in.Item)
	return &dynamodb.PutItemOutput{}, nil
}

func (s *spyDB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.add("dynamodb:UpdateItem", in.Key)
	return &dynamodb.UpdateItemOutput{Attributes: s.item}, nil
}

func (s *spyDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	for _, r := range in.RequestItems {
		for _, k := range r.Keys {
			s.add("dynamodb:BatchGetItem", k)
		}
	}
	return &dynamodb.BatchGetItemOutput{}, nil
}

func (s *spyDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	s.add("dynamodb:Query", nil)
	return &dynamodb.QueryOutput{}, nil
}

func (s *spyDB) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	s.add("dynamodb:Scan", nil)
	return &dynamodb.ScanOutput{}, nil
}

func (s *spyDB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		switch {
		case it.Update != nil:
			s.add("dynamodb:UpdateItem", it.Update.Key)
		case it.ConditionCheck != nil:
			s.add("dynamodb:ConditionCheckItem", it.ConditionCheck.Key)
		case it.Put != nil:
			s.add("dynamodb:PutItem", it.Put.Item)
		case it.Delete != nil:
			s.add("dynamodb:DeleteItem", it.Delete.Key)
		}
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

var _ ledger.API = (*spyDB)(nil)

// allowed reports whether role's statements in tp allow call on the
// table (tableID's ARN): an Allow of its action on the table whose
// dynamodb:LeadingKeys condition, if any, admits its partition key.
func allowed(tp template, role, tableID string, call ddbCall) bool {
	return allowedBy(roleStatements(tp, role), tableID, call)
}

// allowedBy reports whether statements allow call on the table, as
// allowed says.
func allowedBy(statements []map[string]any, tableID string, call ddbCall) bool {
	tableArn := `{"Fn::GetAtt":["` + tableID + `","Arn"]}`
	for _, st := range statements {
		if st["Effect"] != "Allow" || !slices.Contains(statementActions(st), call.action) || !strings.Contains(asJSON(st["Resource"]), tableArn) {
			continue
		}
		cond, _ := st["Condition"].(map[string]any)
		if cond == nil {
			return true
		}
		admits := false
		for op, byKey := range cond {
			keys, ok := byKey.(map[string]any)["dynamodb:LeadingKeys"].([]any)
			if !ok {
				continue
			}
			for _, k := range keys {
				switch op {
				case "ForAllValues:StringLike":
					if ok, _ := path.Match(k.(string), call.pk); ok {
						admits = true
					}
				case "ForAllValues:StringEquals":
					admits = admits || k == call.pk
				}
			}
		}
		if admits {
			return true
		}
	}
	return false
}

// TestTheRolesAllowWhatTheLedgerCalls runs, against a DynamoDB that records
// each item a request acts on, the ledger calls each function makes
// beyond the consumer's and the enqueue's tested paths — the outcomes
// function taking a fallback (as its ledger is configured), the feedback
// function recording a report, settling a delivery and writing the mark,
// the consumer reading the mark, the intake creating a reminder or a series
// (two puts in one transaction: its item and its claim of the id) and
// cancelling a series, the enqueue creating a series' occurrence — and
// checks that the function's role, as
// synthesized for a stage running ses, allows every one: action and
// partition key. IAM is not enforced locally, so this is where a call the
// role does not allow is caught.
func TestTheRolesAllowWhatTheLedgerCalls(t *testing.T) {
	n, tpl := synth(t, sesStage(deployment.Dev()))
	tp := toJSON(t, tpl)
	var consumerRole, feedbackRole, outcomesRole, intakeRole, enqueueRole, tableID string
	must(t, func() {
		id := func(c awscdk.CfnElement) string { return *n.Stack.GetLogicalId(c) }
		consumerRole = id(n.Consumer.Role().Node().DefaultChild().(awscdk.CfnElement))
		feedbackRole = id(n.Feedback.Role().Node().DefaultChild().(awscdk.CfnElement))
		outcomesRole = id(n.Outcomes.Role().Node().DefaultChild().(awscdk.CfnElement))
		intakeRole = id(n.Intake.Role().Node().DefaultChild().(awscdk.CfnElement))
		enqueueRole = id(n.Enqueue.Role().Node().DefaultChild().(awscdk.CfnElement))
		tableID = id(n.Table.Node().DefaultChild().(awscdk.CfnElement))
	})
	ctx := context.Background()
	primary := delivery(ledger.StatusDead)
	primary.Fallback = ledger.FallbackRef{Channel: "sms", Provider: "sns"}
	held := delivery(ledger.StatusHeld)
	held.Channel, held.Provider, held.FallbackOf = "sms", "sns", ledger.FallbackRef{Channel: "email", Provider: "ses"}
	img, err := ledger.Image(held)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role, who string
		cfg       ledger.Config
		run       func(l *ledger.Ledger) error
	}{
		{outcomesRole, "the outcomes function taking a fallback", outcome.Settings{Table: "T"}.LedgerConfig(), func(l *ledger.Ledger) error {
			_, err := l.TakeFallback(ctx, primary, "dead (rejected)")
			return err
		}},
		{feedbackRole, "the feedback function recording a report", ledger.Config{Table: "T"}, func(l *ledger.Ledger) error {
			_, err := l.RecordFeedback(ctx, primary.Key(), ledger.Feedback{Kind: ledger.FeedbackDelivered, At: t0, ID: "fb-1"})
			return err
		}},
		{feedbackRole, "the feedback function settling a delivery", ledger.Config{Table: "T"}, func(l *ledger.Ledger) error {
			d := primary
			d.LastErrorClass = "ambiguous"
			_, err := l.SettleSent(ctx, d, "ses-msg-1", "sent, by SES's record")
			return err
		}},
		{feedbackRole, "the feedback function writing the mark", ledger.Config{Table: "T"}, func(l *ledger.Ledger) error {
			return l.RecordFeedbackMark(ctx, "ses", t0.Add(time.Minute))
		}},
		{consumerRole, "the consumer reading the mark", ledger.Config{Table: "T"}, func(l *ledger.Ledger) error {
			_, err := l.FeedbackMark(ctx, "ses")
			return err
		}},
		{intakeRole, "the intake writing a delivery it hands off", ledger.Config{Table: "T", ShardsFromRegistry: true}, func(l *ledger.Ledger) error {
			d := delivery(ledger.StatusPending)
			d.HandOff = true
			return l.Create(ctx, d)
		}},
		{intakeRole, "the intake giving back a hand-off SQS refused", ledger.Config{Table: "T", ShardsFromRegistry: true}, func(l *ledger.Ledger) error {
			_, err := l.GiveBack(ctx, primary.Key(), primary.DueAt, "hand-off failed; the enqueue hands it off")
			return err
		}},
		{intakeRole, "the intake creating a reminder", ledger.Config{Table: "T", ShardsFromRegistry: true}, func(l *ledger.Ledger) error {
			_, _, err := l.CreateReminder(ctx, reminderItem("rem-1", ""))
			return err
		}},
		{intakeRole, "the intake creating a series (its item and its claim of the id, in one transaction)", ledger.Config{Table: "T", ShardsFromRegistry: true},
			func(l *ledger.Ledger) error {
				_, _, err := l.CreateSeries(ctx, ledger.Series{Item: reminderItem("ser-1", "FREQ=DAILY"), Next: 1, ExtendAt: t0})
				return err
			}},
		{intakeRole, "the intake cancelling a series (its item, then its claim)", ledger.Config{Table: "T", ShardsFromRegistry: true}, func(l *ledger.Ledger) error {
			_, err := l.CancelSeries(ctx, "ser-1")
			return err
		}},
		{enqueueRole, "the enqueue creating a series' occurrence (its item, and the check of the series' start, in one transaction)",
			ledger.Config{Table: "T", ShardsFromRegistry: true}, func(l *ledger.Ledger) error {
				it := reminderItem("ser-1.20261201T0900", "")
				it.Series = "ser-1"
				_, _, err := l.CreateOccurrence(ctx, it, ledger.Start{DueAt: t0.Add(time.Hour), Next: 1})
				return err
			}},
		{enqueueRole, "the enqueue settling a series' restart", ledger.Config{Table: "T", ShardsFromRegistry: true}, func(l *ledger.Ledger) error {
			return l.SettleRestart(ctx, "ser-1", 1)
		}},
		{intakeRole, "the intake restarting a series (a reschedule), and creating its occurrences", ledger.Config{Table: "T", ShardsFromRegistry: true},
			func(l *ledger.Ledger) error {
				if err := l.RestartSeries(ctx, "ser-1", ledger.Start{DueAt: t0.Add(time.Hour), Next: 1}, t0.Add(2*time.Hour), t0.Add(3*time.Hour), ledger.Local{}, t0); err != nil {
					return err
				}
				it := reminderItem("ser-1.20261201T1000", "")
				it.Series = "ser-1"
				_, _, err := l.CreateOccurrence(ctx, it, ledger.Start{DueAt: t0.Add(2 * time.Hour), Next: 1, Restarts: 1})
				return err
			}},
		{intakeRole, "the intake noting an occurrence created ahead (a cancel or a reschedule of it alone)", ledger.Config{Table: "T", ShardsFromRegistry: true},
			func(l *ledger.Ledger) error { return l.NoteEarly(ctx, "ser-1", "ser-1.20270601T0900") }},
		{consumerRole, "the consumer claiming a probe", ledger.Config{Table: "T"}, func(l *ledger.Ledger) error {
			_, err := l.ClaimProbe(ctx, "ses", t0, t0.Add(15*time.Minute), 15*time.Minute)
			return err
		}},
	} {
		spy := &spyDB{item: img}
		l, err := ledger.New(spy, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.run(l) // the spy's answers need not satisfy every check after the calls
		if len(spy.calls) == 0 {
			t.Errorf("%s made no DynamoDB call", c.who)
		}
		for _, call := range spy.calls {
			if !allowed(tp, c.role, tableID, call) {
				t.Errorf("%s calls %s on partition %s, which its role does not allow", c.who, call.action, call.pk)
			}
		}
	}
}

// TestTheOperatorPolicyAllowsWhatTheConsoleCalls runs, against the
// recording DynamoDB, the ledger's writes the console (and the CLI) make
// as the operator — a reschedule's transaction (its condition checks on
// the deliveries it keeps), a cancel, the reveal of an address — and
// checks that the operator policy allows each, action and partition key.
func TestTheOperatorPolicyAllowsWhatTheConsoleCalls(t *testing.T) {
	n, tpl := synth(t, sesStage(deployment.Dev()))
	tp := toJSON(t, tpl)
	var tableID string
	must(t, func() { tableID = *n.Stack.GetLogicalId(n.Table.Node().DefaultChild().(awscdk.CfnElement)) })
	var statements []map[string]any
	for _, p := range tp.resources("AWS::IAM::ManagedPolicy") {
		if !strings.HasSuffix(fmt.Sprint(props(p)["ManagedPolicyName"]), "-operator") {
			continue
		}
		for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			statements = append(statements, st.(map[string]any))
		}
	}
	if len(statements) == 0 {
		t.Fatal("no operator policy in the template")
	}
	ctx := context.Background()
	live, kept := delivery(ledger.StatusPending), delivery(ledger.StatusSent)
	kept.Channel, kept.Provider = "sms", "sns"
	img, err := ledger.Image(live)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who string
		run func(l *ledger.Ledger) error
	}{
		{"a reschedule", func(l *ledger.Ledger) error {
			return l.MoveReminder(ctx, ledger.MovePlan{ID: live.ReminderID, Live: []ledger.Delivery{live}, Kept: []ledger.Delivery{kept},
				To: ledger.Move{DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(2 * time.Hour), Note: "rescheduled by ana (console): ticket"}})
		}},
		{"a cancel", func(l *ledger.Ledger) error {
			_, err := l.Cancel(ctx, live.Key(), "cancelled by ana (console): ticket")
			return err
		}},
		{"a reveal", func(l *ledger.Ledger) error {
			_, err := l.RecordReveal(ctx, live.Key(), ledger.Reveal{By: "ana", Reason: "ticket 4821"})
			return err
		}},
	} {
		spy := &spyDB{item: img}
		l, err := ledger.New(spy, ledger.Config{Table: "T", ShardsFromRegistry: true, ClockSkew: ledger.OperatorClockSkew})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.run(l)
		if len(spy.calls) == 0 {
			t.Errorf("%s made no DynamoDB call", c.who)
		}
		for _, call := range spy.calls {
			if !allowedBy(statements, tableID, call) {
				t.Errorf("%s calls %s on partition %s, which the operator policy does not allow", c.who, call.action, call.pk)
			}
		}
	}
}

// reminderItem is a reminder item (recur: a series') of one delivery.
func reminderItem(id, recur string) ledger.ReminderItem {
	return ledger.ReminderItem{ID: id, AccountRef: "acct-1", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(25 * time.Hour), Recur: recur,
		Deliveries: []ledger.ReminderDelivery{{Channel: "email", Provider: "ses", RecipientRef: "c-1", TemplateRef: "t"}}}
}
