package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"

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
	Providers []string `dynamodbav:"providers"`
	// Env are the providers' variables the intake's checks read (a
	// template prefix, say), as the stack gives them to the enqueue.
	Env map[string]string `dynamodbav:"providerEnv,omitempty"`
}

// RecordStage records f, replacing what an earlier deploy recorded: the
// stack's current settings win.
func (l *Ledger) RecordStage(ctx context.Context, f StageFacts) error {
	av, err := attributevalue.Marshal(slices.Clone(f.Providers))
	if err != nil {
		return err
	}
	env, err := attributevalue.Marshal(maps.Clone(f.Env))
	if err != nil {
		return err
	}
	if f.Env == nil {
		env = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
	}
	_, err = l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table),
		Key: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: registryPK}, attrSK: &types.AttributeValueMemberS{Value: registryStageSK},
		},
		UpdateExpression:          aws.String("SET providers = :p, #e = :e"),
		ExpressionAttributeNames:  map[string]string{"#e": "providerEnv"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": av, ":e": env},
	})
	if err != nil {
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
	if err := attributevalue.UnmarshalMap(out.Item, &f); err != nil {
		return StageFacts{}, false, fmt.Errorf("ledger: the stage record in %q: %w", l.cfg.Table, err)
	}
	return f, len(f.Providers) > 0, nil
}

// RecordStage is Ledger.RecordStage.
func (m *Memory) RecordStage(_ context.Context, f StageFacts) error {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	f.Providers, f.Env = slices.Clone(f.Providers), maps.Clone(f.Env)
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
