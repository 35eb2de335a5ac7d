package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/intake"
)

// roleStatements are the statements of every policy attached to the role
// with the logical id role, as JSON.
func roleStatements(tp template, role string) []map[string]any {
	var out []map[string]any
	for _, p := range tp.resources("AWS::IAM::Policy") {
		roles, _ := json.Marshal(props(p)["Roles"])
		if !strings.Contains(string(roles), `"Ref":"`+role+`"`) {
			continue
		}
		for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out = append(out, st.(map[string]any))
		}
	}
	return out
}

func statementActions(st map[string]any) []string {
	switch a := st["Action"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, x := range a {
			out = append(out, x.(string))
		}
		return out
	}
	return nil
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTheIntake checks the HTTP intake of each stage: the function with the
// stage's sizes and environment, a function URL that takes SigV4-signed
// requests only, a role that may read and conditionally write the ledger
// and nothing else, the callers' policy, the outputs and the alarms.
func TestTheIntake(t *testing.T) {
	prod := deployment.Prod()
	prod.AlarmEmail = "oncall@example.com"
	for _, s := range []deployment.Stage{deployment.Dev(), prod} {
		t.Run(s.Name, func(t *testing.T) {
			n, tpl := synth(t, s)
			tp := toJSON(t, tpl)
			var fnID, roleID, tableID, urlID, policyID string
			must(t, func() {
				fnID = *n.Stack.GetLogicalId(n.Intake.Node().DefaultChild().(awscdk.CfnElement))
				roleID = *n.Stack.GetLogicalId(n.Intake.Role().Node().DefaultChild().(awscdk.CfnElement))
				tableID = *n.Stack.GetLogicalId(n.Table.Node().DefaultChild().(awscdk.CfnElement))
				urlID = *n.Stack.GetLogicalId(n.IntakeURL.Node().DefaultChild().(awscdk.CfnElement))
				policyID = *n.Stack.GetLogicalId(n.IntakeCallers.Node().DefaultChild().(awscdk.CfnElement))
			})

			// The function: the stage's sizes and environment.
			fn := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-intake"))
			if num64(t, fn["MemorySize"]) != float64(s.IntakeMemoryMB) || num64(t, fn["Timeout"]) != s.IntakeTimeout.Seconds() {
				t.Errorf("intake memory %v MB, timeout %v s; want %d, %v", fn["MemorySize"], fn["Timeout"], s.IntakeMemoryMB, s.IntakeTimeout.Seconds())
			}
			env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
			want := s.IntakeEnv(deployment.Resources{Table: "TABLE"})
			if len(env) != len(want) {
				t.Errorf("intake environment %v; want the keys of %v", env, want)
			}
			for k, v := range want {
				got := env[k]
				if k == "NUDGE_TABLE" {
					if asJSON(got) != `{"Ref":"`+tableID+`"}` {
						t.Errorf("NUDGE_TABLE = %v, want the ledger table (%s)", got, tableID)
					}
					continue
				}
				if k == "NUDGE_QUEUE_URL" { // the short-notice hand-off's
					if !strings.Contains(asJSON(got), `{"Ref":"WorkQueue`) {
						t.Errorf("NUDGE_QUEUE_URL = %v, want the work queue", got)
					}
					continue
				}
				if got != v {
					t.Errorf("intake %s = %v, want %s", k, got, v)
				}
			}
			if got := fn["ReservedConcurrentExecutions"]; (s.IntakeReservedConcurrency == 0) != (got == nil) || got != nil && num64(t, got) != float64(s.IntakeReservedConcurrency) {
				t.Errorf("intake reserved concurrency %v, want %d", got, s.IntakeReservedConcurrency)
			}
			if s.Name == "prod" && num64(t, fn["ReservedConcurrentExecutions"]) != 20 {
				t.Errorf("prod's intake reserves %v instances, want 20", fn["ReservedConcurrentExecutions"])
			}
			if !strings.Contains(asJSON(fn["LoggingConfig"]), "IntakeLogs") {
				t.Errorf("the intake does not log to its own log group: %v", fn["LoggingConfig"])
			}
			props(tp.one(t, "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/nudge-"+s.Name+"-intake"))

			// The URL: signed requests only, buffered, no CORS; and no
			// resource-based permission opens the function to anyone.
			urls := tp.resources("AWS::Lambda::Url")
			if len(urls) != 1 {
				t.Fatalf("%d function URLs, want the intake's", len(urls))
			}
			u := props(urls[urlID])
			if u["AuthType"] != "AWS_IAM" || u["InvokeMode"] != "BUFFERED" || u["Cors"] != nil ||
				asJSON(u["TargetFunctionArn"]) != `{"Fn::GetAtt":["`+fnID+`","Arn"]}` {
				t.Errorf("the intake's URL: %v; want AWS_IAM, BUFFERED, no CORS, on the intake", u)
			}
			for id, p := range tp.resources("AWS::Lambda::Permission") {
				if strings.Contains(asJSON(props(p)["FunctionName"]), fnID) {
					t.Errorf("permission %s on the intake: %v; callers are allowed by their identity policy", id, props(p))
				}
			}

			// The callers' policy: both actions, each with its condition, on
			// the intake function alone.
			caller := props(tp.one(t, "AWS::IAM::ManagedPolicy", "ManagedPolicyName", "nudge-"+s.Name+"-intake-callers"))
			sts := caller["PolicyDocument"].(map[string]any)["Statement"].([]any)
			fnArn := map[string]any{"Fn::GetAtt": []any{fnID, "Arn"}}
			wantSts := map[string]map[string]any{
				"lambda:InvokeFunctionUrl": {"StringEquals": map[string]any{"lambda:FunctionUrlAuthType": "AWS_IAM"}},
				"lambda:InvokeFunction":    {"Bool": map[string]any{"lambda:InvokedViaFunctionUrl": "true"}},
			}
			if len(sts) != len(wantSts) {
				t.Errorf("the callers' policy has %d statements, want %d: %s", len(sts), len(wantSts), asJSON(sts))
			}
			for _, st := range sts {
				st := st.(map[string]any)
				action, _ := st["Action"].(string)
				cond, ok := wantSts[action]
				if !ok {
					t.Errorf("the callers' policy allows %v", st["Action"])
					continue
				}
				delete(wantSts, action)
				if st["Effect"] != "Allow" || !reflect.DeepEqual(st["Resource"], fnArn) || !reflect.DeepEqual(st["Condition"], cond) {
					t.Errorf("the callers' %s: %s; want it on the intake function with %s", action, asJSON(st), asJSON(cond))
				}
			}
			for action := range wantSts {
				t.Errorf("the callers' policy lacks %s", action)
			}
			// No other policy lets anyone invoke the intake.
			for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
				for id, p := range tp.resources(typ) {
					if id != policyID && strings.Contains(asJSON(props(p)), `"`+fnID+`"`) {
						t.Errorf("%s %s refers to the intake: %s", typ, id, asJSON(props(p)))
					}
				}
			}

			// Outputs.
			outputs := tp["Outputs"].(map[string]any)
			for name, value := range map[string]string{
				"IntakeUrl":             `{"Fn::GetAtt":["` + urlID + `","FunctionUrl"]}`,
				"IntakeCallerPolicyArn": `{"Ref":"` + policyID + `"}`,
				"IntakeFunction":        `{"Ref":"` + fnID + `"}`,
			} {
				o, ok := outputs[name].(map[string]any)
				if !ok || asJSON(o["Value"]) != value {
					t.Errorf("output %s = %v, want %s", name, o, value)
				}
			}

			// The role: reads and conditional writes on the table, Query on
			// its indexes, its log group, sends to the work queues (the
			// short-notice hand-off); no scan, no delete, no SES here.
			granted := map[string]bool{}
			for _, st := range roleStatements(tp, roleID) {
				res := asJSON(st["Resource"])
				for _, a := range statementActions(st) {
					granted[a] = true
					switch {
					case strings.HasPrefix(a, "dynamodb:") && a != "dynamodb:Query" && !strings.Contains(res, tableID) || strings.Contains(res, "/index/") && a != "dynamodb:Query":
						t.Errorf("the intake's %s is on %s", a, res)
					case strings.HasPrefix(a, "logs:") && !strings.Contains(res, "IntakeLogs"):
						t.Errorf("the intake's %s is on %s", a, res)
					case a == "sqs:SendMessage" && (!strings.Contains(res, "WorkQueue") || strings.Contains(res, "DLQ")):
						// The short-notice hand-off: the work queues alone.
						t.Errorf("the intake's %s is on %s", a, res)
					}
				}
				if strings.Contains(res, `"*"`) {
					t.Errorf("the intake's role grants on every resource: %s", asJSON(st))
				}
			}
			var got []string
			for a := range granted {
				got = append(got, a)
			}
			slices.Sort(got)
			wantActions := []string{"dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem",
				"logs:CreateLogStream", "logs:PutLogEvents", "sqs:SendMessage"}
			if !slices.Equal(got, wantActions) {
				t.Errorf("the intake's role allows %v, want exactly %v", got, wantActions)
			}
			for _, never := range []string{"dynamodb:Scan", "dynamodb:DeleteItem", "ses:GetEmailTemplate"} {
				if granted[never] {
					t.Errorf("the intake's role allows %s", never)
				}
			}
			// Query on each of the table's indexes, and on no other.
			queried := ""
			for _, st := range roleStatements(tp, roleID) {
				if strings.Contains(asJSON(st["Resource"]), "/index/") {
					queried += asJSON(st["Resource"])
				}
			}
			if len(n.TableIndexes) == 0 {
				t.Fatal("the stack knows no index of the ledger table")
			}
			for _, name := range n.TableIndexes {
				if !strings.Contains(queried, `"/index/`+name+`"`) {
					t.Errorf("the intake may not query the %s index: %s", name, queried)
				}
			}
			if c := strings.Count(queried, "/index/"); c != len(n.TableIndexes) {
				t.Errorf("the intake may query %d indexes, the table has %d: %s", c, len(n.TableIndexes), queried)
			}

			// The alarms: an error (a 5xx) or a throttle (a 429) in 5 minutes.
			for name, metric := range map[string]string{"intake-errors": "Errors", "intake-throttles": "Throttles"} {
				a := props(tp.one(t, "AWS::CloudWatch::Alarm", "AlarmName", "nudge-"+s.Name+"-"+name))
				if a["MetricName"] != metric || a["Namespace"] != "AWS/Lambda" || !strings.Contains(asJSON(a["Dimensions"]), `{"Ref":"`+fnID+`"}`) ||
					num64(t, a["Threshold"]) != 0 || num64(t, a["EvaluationPeriods"]) != 5 || num64(t, a["DatapointsToAlarm"]) != 1 || num64(t, a["Period"]) != 60 ||
					a["Statistic"] != "Sum" || a["ComparisonOperator"] != "GreaterThanThreshold" {
					t.Errorf("alarm %s: %s; want the intake's %s summed per minute, > 0 in 1 of 5", name, asJSON(a), metric)
				}
			}
			// The intake's own 500s and 503s complete the invocation, so
			// Errors never counts them: its EMF count of 5xx answers does.
			a := props(tp.one(t, "AWS::CloudWatch::Alarm", "AlarmName", "nudge-"+s.Name+"-intake-5xx"))
			if a["MetricName"] != intake.MetricAnswered5xx || a["Namespace"] != "Nudge" || asJSON(a["Dimensions"]) != `[{"Name":"Function","Value":"intake"}]` ||
				num64(t, a["Threshold"]) != 0 || num64(t, a["EvaluationPeriods"]) != 5 || num64(t, a["DatapointsToAlarm"]) != 1 || num64(t, a["Period"]) != 60 ||
				a["Statistic"] != "Sum" || a["ComparisonOperator"] != "GreaterThanThreshold" {
				t.Errorf("alarm intake-5xx: %s; want Nudge/%s of Function intake summed per minute, > 0 in 1 of 5", asJSON(a), intake.MetricAnswered5xx)
			}
		})
	}
}

// TestTheIntakeReadsTemplatesOnlyWhenSESRuns: with ses, the intake may read
// the stage's SES templates (to check a delivery's template is deployed),
// and is told their prefix; without it (TestTheIntake), neither.
func TestTheIntakeReadsTemplatesOnlyWhenSESRuns(t *testing.T) {
	s := allProviders()
	n, tpl := synth(t, s)
	tp := toJSON(t, tpl)
	var roleID string
	must(t, func() { roleID = *n.Stack.GetLogicalId(n.Intake.Role().Node().DefaultChild().(awscdk.CfnElement)) })
	var grants []string
	for _, st := range roleStatements(tp, roleID) {
		for _, a := range statementActions(st) {
			if strings.HasPrefix(a, "ses:") {
				grants = append(grants, a+" on "+asJSON(st["Resource"]))
			}
		}
	}
	if len(grants) != 1 || !strings.HasPrefix(grants[0], "ses:GetEmailTemplate on ") || !strings.Contains(grants[0], ":template/"+ses.TemplatePrefix(s.Name)+`*"`) {
		t.Errorf("the intake's SES grants: %v; want ses:GetEmailTemplate on template/%s* alone", grants, ses.TemplatePrefix(s.Name))
	}
	fnRes := tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-intake")
	fn := props(fnRes)
	env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
	if env["NUDGE_SES_TEMPLATE_PREFIX"] != ses.TemplatePrefix(s.Name) || env["NUDGE_PROVIDERS"] != "webhook,ses,sns" {
		t.Errorf("the intake's environment %v", env)
	}
	// The templates it deploys, and the variables each renders, so that
	// the intake knows them without asking SES; its configuration changes
	// only once SES has them.
	templates, err := ses.ReadTemplates(os.DirFS(filepath.Join("..", "templates", "email")))
	if err != nil {
		t.Fatal(err)
	}
	if want := ses.CatalogOf(templates).String(); env["NUDGE_SES_TEMPLATES"] != want {
		t.Errorf("the intake's NUDGE_SES_TEMPLATES = %v; want %s", env["NUDGE_SES_TEMPLATES"], want)
	}
	for _, tpl := range n.EmailTemplates {
		var id string
		must(t, func() { id = *n.Stack.GetLogicalId(tpl) })
		if !strings.Contains(asJSON(fnRes["DependsOn"]), `"`+id+`"`) {
			t.Errorf("the intake does not depend on template %s: DependsOn %v", id, fnRes["DependsOn"])
		}
	}
	if msgs := nagFindings(t, n); len(msgs) > 0 {
		t.Fatalf("%d cdk-nag findings:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}

// TestEveryIndexProjectionIsMapped: each global secondary index of the
// table definition becomes one of the table's with its keys and its
// projection, whichever of ALL, KEYS_ONLY and INCLUDE it is (the account
// index projects ALL or INCLUDE, the due index INCLUDE); a definition the
// stack cannot render stops the synthesis.
func TestEveryIndexProjectionIsMapped(t *testing.T) {
	attr := func(name string) ddbtypes.AttributeDefinition {
		return ddbtypes.AttributeDefinition{AttributeName: aws.String(name), AttributeType: ddbtypes.ScalarAttributeTypeS}
	}
	keys := func(hash, sort string) []ddbtypes.KeySchemaElement {
		return []ddbtypes.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String(sort), KeyType: ddbtypes.KeyTypeRange}}
	}
	def := func(indexes ...ddbtypes.GlobalSecondaryIndex) *dynamodb.CreateTableInput {
		return &dynamodb.CreateTableInput{
			TableName:              aws.String("t"),
			AttributeDefinitions:   []ddbtypes.AttributeDefinition{attr("PK"), attr("SK"), attr("dueShard"), attr("dueSort"), attr("accountRef"), attr("dueAt")},
			KeySchema:              keys("PK", "SK"),
			GlobalSecondaryIndexes: indexes,
		}
	}
	indexes := []ddbtypes.GlobalSecondaryIndex{
		{IndexName: aws.String("due"), KeySchema: keys("dueShard", "dueSort"),
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeInclude, NonKeyAttributes: []string{"dueAt", "expiresAt"}}},
		{IndexName: aws.String("account"), KeySchema: keys("accountRef", "dueAt"), Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll}},
		{IndexName: aws.String("accountKeys"), KeySchema: keys("accountRef", "dueAt"), Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly}},
		{IndexName: aws.String("accountSome"), KeySchema: keys("accountRef", "dueAt"),
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeInclude, NonKeyAttributes: []string{"state"}}},
		{IndexName: aws.String("unsaid"), KeySchema: keys("accountRef", "dueAt")}, // DynamoDB's default: keys only
	}
	want := map[string]string{
		"due":         `{"IndexName":"due","KeySchema":[{"AttributeName":"dueShard","KeyType":"HASH"},{"AttributeName":"dueSort","KeyType":"RANGE"}],"Projection":{"NonKeyAttributes":["dueAt","expiresAt"],"ProjectionType":"INCLUDE"}}`,
		"account":     `{"IndexName":"account","KeySchema":[{"AttributeName":"accountRef","KeyType":"HASH"},{"AttributeName":"dueAt","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}`,
		"accountKeys": `{"IndexName":"accountKeys","KeySchema":[{"AttributeName":"accountRef","KeyType":"HASH"},{"AttributeName":"dueAt","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}`,
		"accountSome": `{"IndexName":"accountSome","KeySchema":[{"AttributeName":"accountRef","KeyType":"HASH"},{"AttributeName":"dueAt","KeyType":"RANGE"}],"Projection":{"NonKeyAttributes":["state"],"ProjectionType":"INCLUDE"}}`,
		"unsaid":      `{"IndexName":"unsaid","KeySchema":[{"AttributeName":"accountRef","KeyType":"HASH"},{"AttributeName":"dueAt","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}`,
	}
	gsis := func(t *testing.T, d *dynamodb.CreateTableInput) map[string]string {
		t.Helper()
		var tp template
		must(t, func() {
			stack := awscdk.NewStack(awscdk.NewApp(nil), aws.String("T"), nil)
			newTable(stack, d, false, awscdk.RemovalPolicy_DESTROY)
			tp = toJSON(t, assertions.Template_FromStack(stack, nil))
		})
		out := map[string]string{}
		for _, table := range tp.resources("AWS::DynamoDB::Table") {
			for _, g := range asList(props(table)["GlobalSecondaryIndexes"]) {
				out[g.(map[string]any)["IndexName"].(string)] = asJSON(g)
			}
		}
		return out
	}
	got := gsis(t, def(indexes...))
	for name, w := range want {
		if got[name] != w {
			t.Errorf("index %s:\n got %s\nwant %s", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d indexes in the template, want %d: %v", len(got), len(want), got)
	}

	// The ledger's own definition, whatever indexes it has: each comes out
	// with its projection.
	real := ledger.TableInput("nudge-dev-ledger")
	got = gsis(t, real)
	for _, g := range real.GlobalSecondaryIndexes {
		p := got[*g.IndexName]
		if p == "" {
			t.Errorf("the ledger's index %s is not in the template", *g.IndexName)
			continue
		}
		if !strings.Contains(p, `"ProjectionType":"`+string(g.Projection.ProjectionType)+`"`) {
			t.Errorf("the ledger's index %s projects %s; the template says %s", *g.IndexName, g.Projection.ProjectionType, p)
		}
		for _, a := range g.Projection.NonKeyAttributes {
			if !strings.Contains(p, `"`+a+`"`) {
				t.Errorf("the ledger's index %s projects %s; the template says %s", *g.IndexName, a, p)
			}
		}
	}

	// Definitions the stack cannot render stop the synthesis, naming the
	// index.
	for name, bad := range map[string]ddbtypes.GlobalSecondaryIndex{
		"INCLUDE without attributes": {IndexName: aws.String("x"), KeySchema: keys("accountRef", "dueAt"), Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeInclude}},
		"attributes with ALL": {IndexName: aws.String("x"), KeySchema: keys("accountRef", "dueAt"),
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll, NonKeyAttributes: []string{"state"}}},
		"an unknown projection": {IndexName: aws.String("x"), KeySchema: keys("accountRef", "dueAt"), Projection: &ddbtypes.Projection{ProjectionType: "SOME"}},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "ledger index x") {
					t.Errorf("%s: %v; want a stop naming the index", name, r)
				}
			}()
			newTable(awscdk.NewStack(awscdk.NewApp(nil), aws.String("T"), nil), def(bad), false, awscdk.RemovalPolicy_DESTROY)
		}()
	}
}
