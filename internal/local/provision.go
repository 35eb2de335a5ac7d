package local

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider"
)

// queueAPI is what Provision needs of SQS.
type queueAPI interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, opts ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

var _ queueAPI = (*sqs.Client)(nil)

// Provisioned names the resources Provision made.
type Provisioned struct {
	Table            string
	WorkURL, WorkARN string
	DLQURL, DLQARN   string
	// Own are the providers' own work queues, by provider
	// (deployment.Stage.ProviderQueues), with their mappings' settings.
	Own map[string]ProviderQueue
	// OutcomesURL and OutcomesARN are the queue the local bus's rule
	// delivers the outcome events to (the stack's outcomeQueue example).
	OutcomesURL, OutcomesARN string
	// FeedbackURL and FeedbackARN are the queue the local bus's rule
	// delivers SES's sending events to, which the feedback function reads,
	// when the stage runs ses (empty otherwise).
	FeedbackURL, FeedbackARN string
	// Topic is the sns provider's topic and its subscriber queue, when the
	// stage runs sns.
	Topic Topic
	// Operators is the operators' topic (OperatorsTopicName) and its
	// subscriber queue, told of escalations.
	Operators Topic
}

// ProviderQueue is a provider's own work queue as provisioned.
type ProviderQueue struct {
	deployment.ProviderQueue
	URL, ARN string
}

// WorkURLs are every work queue: the default's, then the providers'
// own, in the stage's order of providers.
func (p Provisioned) WorkURLs() []string {
	urls := []string{p.WorkURL}
	for _, q := range p.ownInOrder() {
		urls = append(urls, q.URL)
	}
	return urls
}

// Routes are the work queues as the producers route to them.
func (p Provisioned) Routes() envelope.Routes {
	r := envelope.Routes{Default: p.WorkURL, ByProvider: map[string]string{}}
	for name, q := range p.Own {
		r.ByProvider[name] = q.URL
	}
	return r
}

// ownInOrder are the providers' own queues, by provider name.
func (p Provisioned) ownInOrder() []ProviderQueue {
	var out []ProviderQueue
	for _, name := range slices.Sorted(maps.Keys(p.Own)) {
		out = append(out, p.Own[name])
	}
	return out
}

// Resources returns the function resources of stage s for p, with each
// provider's from what its stand-in made (l, whose TopicARN is p's topic's).
func (p Provisioned) Resources(s deployment.Stage, l provider.Local) deployment.Resources {
	l.TopicARN = p.Topic.ARN
	res := deployment.Resources{Table: p.Table, WorkQueueURL: p.WorkURL, DLQURL: p.DLQURL, Providers: map[string]map[string]string{},
		ProviderQueueURLs: map[string]string{}}
	for name, q := range p.Own {
		res.ProviderQueueURLs[name] = q.URL
	}
	for _, name := range s.Providers {
		if d, ok := registry.Lookup(name); ok && d.StandIn.Resources != nil {
			res.Providers[name] = d.StandIn.Resources(l)
		}
	}
	return res
}

// StandInStage returns s running every registered provider, each with the
// settings its stand-in needs (provider.StandIn.Settings): the stage of
// the local runs and `nudge local invoke`.
func StandInStage(s deployment.Stage) deployment.Stage {
	s.Providers = registry.Names()
	s.ProviderSettings = maps.Clone(s.ProviderSettings)
	if s.ProviderSettings == nil {
		s.ProviderSettings = map[string]string{}
	}
	for _, d := range registry.All() {
		maps.Copy(s.ProviderSettings, d.StandIn.Settings)
	}
	return s
}

// Provision creates the stage's ledger table, work queue, the paced
// providers' work queues and the DLQ as the stack defines them (the same table input, queue attributes and redrive
// policies), the outcomes queue, and, when the stage runs ses, the feedback
// queue (FeedbackQueueName), for the local stand-ins. It is idempotent:
// what exists is kept.
func Provision(ctx context.Context, s deployment.Stage, db ledger.TableAPI, q queueAPI) (Provisioned, error) {
	if err := s.Validate(); err != nil {
		return Provisioned{}, err
	}
	p := Provisioned{Table: s.TableName()}
	if err := ledger.CreateTable(ctx, db, p.Table); err != nil {
		return p, err
	}
	queueARN := func(url string) (string, error) {
		a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", fmt.Errorf("local: queue %s: %w", url, err)
		}
		return a.Attributes[string(types.QueueAttributeNameQueueArn)], nil
	}
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(s.DLQName())})
	if err != nil {
		return p, fmt.Errorf("local: create %s: %w", s.DLQName(), err)
	}
	p.DLQURL = aws.ToString(dlq.QueueUrl)
	if p.DLQARN, err = queueARN(p.DLQURL); err != nil {
		return p, err
	}
	work, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(s.WorkQueueName()), Attributes: s.WorkQueueAttributes(p.DLQARN)})
	if err != nil {
		return p, fmt.Errorf("local: create %s: %w", s.WorkQueueName(), err)
	}
	p.WorkURL = aws.ToString(work.QueueUrl)
	if p.WorkARN, err = queueARN(p.WorkURL); err != nil {
		return p, err
	}
	workARNs := []string{p.WorkARN}
	p.Own = map[string]ProviderQueue{}
	for _, pq := range s.ProviderQueues() {
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(pq.Name), Attributes: s.WorkQueueAttributes(p.DLQARN)})
		if err != nil {
			return p, fmt.Errorf("local: create %s: %w", pq.Name, err)
		}
		own := ProviderQueue{ProviderQueue: pq, URL: aws.ToString(out.QueueUrl)}
		if own.ARN, err = queueARN(own.URL); err != nil {
			return p, err
		}
		p.Own[pq.Provider] = own
		workARNs = append(workARNs, own.ARN)
	}
	if _, err := q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(p.DLQURL), Attributes: s.DLQAttributes(workARNs...)}); err != nil {
		return p, fmt.Errorf("local: set the DLQ's retention and redrive-allow policy: %w", err)
	}
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(OutcomesQueueName(s))})
	if err != nil {
		return p, fmt.Errorf("local: create %s: %w", OutcomesQueueName(s), err)
	}
	p.OutcomesURL = aws.ToString(out.QueueUrl)
	if p.OutcomesARN, err = queueARN(p.OutcomesURL); err != nil {
		return p, err
	}
	if !s.Runs(ses.Name) {
		return p, nil
	}
	fb, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(FeedbackQueueName(s)), Attributes: FeedbackQueueAttributes(s)})
	if err != nil {
		return p, fmt.Errorf("local: create %s: %w", FeedbackQueueName(s), err)
	}
	p.FeedbackURL = aws.ToString(fb.QueueUrl)
	if p.FeedbackARN, err = queueARN(p.FeedbackURL); err != nil {
		return p, err
	}
	return p, nil
}

// FeedbackQueueName is the queue SES's sending events reach on their way
// to the feedback function: a rule on the default bus sends them there.
func FeedbackQueueName(s deployment.Stage) string { return "nudge-" + s.Name + "-feedback" }

// FeedbackQueueAttributes are the feedback queue's: a visibility timeout
// of deployment.VisibilityFactor times the feedback function's timeout, as
// the work queue's is of the consumer's (Lambda wants it at least the
// function's timeout), so that a batch being recorded is not handed out
// again meanwhile.
func FeedbackQueueAttributes(s deployment.Stage) map[string]string {
	visibility := deployment.VisibilityFactor * s.FeedbackTimeout
	return map[string]string{string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(visibility.Seconds()))}
}

// OutcomesQueueName is the queue the outcome events reach locally: the
// name the stack gives its example rule's queue (-c outcomeQueue=true).
func OutcomesQueueName(s deployment.Stage) string { return "nudge-" + s.Name + "-outcomes" }

// RecordShards records the stage's shard count in the table's registry, as
// the enqueue does on its first run: the intake and the operator CLI take
// their count from there and, until one is recorded, refuse to place a
// delivery (ledger.ErrNoShardCount). A larger count already recorded stays.
func RecordShards(ctx context.Context, s deployment.Stage, db ledger.API) error {
	l, err := ledger.New(db, ledger.Config{Table: s.TableName(), Shards: s.Shards})
	if err != nil {
		return err
	}
	if _, err := l.StoredShards(ctx); err != nil {
		return fmt.Errorf("local: record the shard count: %w", err)
	}
	return nil
}
