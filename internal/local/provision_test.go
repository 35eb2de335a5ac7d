package local_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
)

// TestProvisionMakesWhatTheStackDefines: the table with its due index, the
// work queue and the paced provider's own with the stage's visibility and
// redrive policy, the DLQ with its retention and a redrive-allow policy
// naming both; twice is harmless.
func TestProvisionMakesWhatTheStackDefines(t *testing.T) {
	t.Parallel()
	db, q := standintest.DynamoDB(t), standintest.SQS(t)
	stage := deployment.Dev()
	stage.Name = strings.TrimPrefix(standintest.Name("p"), "p-")
	stage.Providers = []string{"webhook", "ses"}
	stage.ProviderSettings = map[string]string{"sesFrom": "reminders@example.com"}
	ctx := context.Background()
	p, err := local.Provision(ctx, stage, db, q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(p.Table)})
		for _, url := range p.WorkURLs() {
			_, _ = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		}
		_, _ = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(p.DLQURL)})
	})
	again, err := local.Provision(ctx, stage, db, q)
	if err != nil || !reflect.DeepEqual(again, p) {
		t.Fatalf("a second Provision: %+v, %v; want %+v", again, err, p)
	}
	table, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(p.Table)})
	if err != nil {
		t.Fatalf("table %s: %v", p.Table, err)
	}
	var indexes []string
	for _, g := range table.Table.GlobalSecondaryIndexes {
		indexes = append(indexes, aws.ToString(g.IndexName))
	}
	if slices.Sort(indexes); strings.Join(indexes, ",") != ledger.AccountIndexName+","+ledger.IndexName {
		t.Fatalf("table %s has indexes %v; want the due and account indexes", p.Table, indexes)
	}
	attrs := func(url string) map[string]string {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes
	}
	work, dlq := attrs(p.WorkURL), attrs(p.DLQURL)
	if work["VisibilityTimeout"] != "180" || !strings.Contains(work["RedrivePolicy"], p.DLQARN) || !strings.Contains(work["RedrivePolicy"], `"maxReceiveCount":10`) {
		t.Errorf("work queue %v", work)
	}
	ses := p.Own["ses"]
	if len(p.Own) != 1 || ses.Name != stage.WorkQueueName()+"-ses" || ses.BatchSize != 10 || ses.MaxConcurrency != 2 || !strings.HasSuffix(ses.URL, ses.Name) {
		t.Fatalf("paced queues %+v", p.Own)
	}
	if paced := attrs(ses.URL); paced["VisibilityTimeout"] != "180" || paced["RedrivePolicy"] != work["RedrivePolicy"] {
		t.Errorf("the paced queue %v; want the work queue's visibility and redrive policy", paced)
	}
	if allow := dlq["RedriveAllowPolicy"]; dlq["MessageRetentionPeriod"] != "1209600" || !strings.Contains(allow, p.WorkARN) || !strings.Contains(allow, ses.ARN) {
		t.Errorf("DLQ %v", dlq)
	}
}
