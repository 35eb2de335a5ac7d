package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// registryStageSK is the registry item that records what the deployed
// stack runs, beside the shard count.
const registryStageSK = "STAGE"

// StageFacts are what the deployed stack runs, as its enqueue records them
// in the table: the intake of any door (the operator CLI, a program using
// pkg/schedule) reads them to refuse a delivery the stage cannot send,
// from the stack's own settings rather than a copy of them.
type StageFacts struct {
	// Providers are the providers the consumer runs.
	Providers []string
	// Env are the providers' variables the intake's checks read (a
	// template prefix, say), as the stack gives them to the enqueue, by
	// name (NUDGE_…). Each is one attribute of the record, named by
	// EnvAttribute (NUDGE_SES_TEMPLATE_PREFIX as sesTemplatePrefix), the
	// form every version of the record has had.
	Env map[string]string
}

// EnvAttribute is the record's attribute of variable name: the name
// without NUDGE_, in lower camel case (NUDGE_SES_TEMPLATE_PREFIX is
// sesTemplatePrefix). attributeEnv is its inverse.
func EnvAttribute(name string) string {
	words := strings.Split(strings.ToLower(strings.TrimPrefix(name, "NUDGE_")), "_")
	for i := 1; i < len(words); i++ {
		if words[i] != "" {
			words[i] = strings.ToUpper(words[i][:1]) + words[i][1:]
		}
	}
	return strings.Join(words, "")
}

func attributeEnv(attr string) string {
	var b strings.Builder
	b.WriteString("NUDGE_")
	for i, r := range attr {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// checkEnvNames refuses a variable whose attribute would not read back as
// it (not NUDGE_ and upper case words), or would be one of the record's own.
func checkEnvNames(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if attr := EnvAttribute(k); stageAttributes[attr] || attributeEnv(attr) != k {
			return fmt.Errorf("ledger: variable %q cannot be recorded: its attribute %q would not read back as it", k, attr)
		}
	}
	return nil
}

// stageAttributes are the record's attributes that are not variables.
var stageAttributes = map[string]bool{attrPK: true, attrSK: true, "providers": true}

// RecordStage records f, replacing what an earlier deploy recorded: the
// stack's current settings win. A variable f does not name keeps what an
// earlier deploy recorded; the intake reads the variables of the providers
// the record names only.
func (l *Ledger) RecordStage(ctx context.Context, f StageFacts) error {
	av, err := attributevalue.Marshal(slices.Clone(f.Providers))
	if err != nil {
		return err
	}
	set := []string{"providers = :p"}
	names := map[string]string{}
	values := map[string]types.AttributeValue{":p": av}
	if err := checkEnvNames(f.Env); err != nil {
		return err
	}
	for i, k := range slices.Sorted(maps.Keys(f.Env)) {
		attr := EnvAttribute(k)
		n, v := fmt.Sprintf("#v%d", i), fmt.Sprintf(":v%d", i)
		set = append(set, n+" = "+v)
		names[n], values[v] = attr, &types.AttributeValueMemberS{Value: f.Env[k]}
	}
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table),
		Key: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: registryPK}, attrSK: &types.AttributeValueMemberS{Value: registryStageSK},
		},
		UpdateExpression:          aws.String("SET " + strings.Join(set, ", ")),
		ExpressionAttributeValues: values,
	}
	if len(names) > 0 {
		in.ExpressionAttributeNames = names
	}
	if _, err = l.api.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("ledger: record the stage's providers in %q: %w", l.cfg.Table, err)
	}
	return nil
}

// ReadStage returns what the stack recorded, and false if nothing is
// recorded yet (the enqueue records it on its first run after a deploy).
func (l *Ledger) ReadStage(ctx context.Context) (StageFacts, bool, error) {
	out, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.cfg.Table),
		Key: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: registryPK}, attrSK: &types.AttributeValueMemberS{Value: registryStageSK},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return StageFacts{}, false, fmt.Errorf("ledger: read the stage's providers from %q: %w", l.cfg.Table, err)
	}
	if out.Item == nil {
		return StageFacts{}, false, nil
	}
	var f StageFacts
	if err := attributevalue.Unmarshal(out.Item["providers"], &f.Providers); err != nil {
		return StageFacts{}, false, fmt.Errorf("ledger: the stage record in %q: %w", l.cfg.Table, err)
	}
	for attr, av := range out.Item {
		if s, ok := av.(*types.AttributeValueMemberS); ok && !stageAttributes[attr] {
			if f.Env == nil {
				f.Env = map[string]string{}
			}
			f.Env[attributeEnv(attr)] = s.Value
		}
	}
	return f, len(f.Providers) > 0, nil
}

// RecordStage is Ledger.RecordStage.
func (m *Memory) RecordStage(_ context.Context, f StageFacts) error {
	if err := checkEnvNames(f.Env); err != nil {
		return err
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	env := map[string]string{}
	if m.t.stage != nil {
		maps.Copy(env, m.t.stage.Env) // kept unless f names it, as in the table
	}
	maps.Copy(env, f.Env)
	f.Providers, f.Env = slices.Clone(f.Providers), env
	m.t.stage = &f
	return nil
}

// ReadStage is Ledger.ReadStage.
func (m *Memory) ReadStage(context.Context) (StageFacts, bool, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if m.t.stage == nil {
		return StageFacts{}, false, nil
	}
	f := *m.t.stage
	f.Providers, f.Env = slices.Clone(f.Providers), maps.Clone(f.Env)
	return f, len(f.Providers) > 0, nil
}
