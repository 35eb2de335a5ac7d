package standintest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin"
)

// AWSConfig returns an SDK config for the stand-ins, or skips (fails under
// CI) when they are not running.
func AWSConfig(t testing.TB) aws.Config {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" || os.Getenv("AWS_ENDPOINT_URL_SQS") == "" || os.Getenv("AWS_ENDPOINT_URL_SESV2") == "" {
		if os.Getenv("CI") != "" || os.Getenv("NUDGE_REQUIRE_STANDINS") != "" {
			t.Fatal(standin.ErrNotConfigured)
		}
		t.Skip(standin.ErrNotConfigured)
	}
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRetryMaxAttempts(5),
		// Idle connections close before the stand-ins close them, as the
		// local system's own clients do (standin.KeepIdleShort).
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(standin.KeepIdleShort)),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")),
	)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Name returns a unique resource name with the given prefix.
func Name(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + time.Now().UTC().Format("150405") + "-" + hex.EncodeToString(b)
}

// Table creates a fresh ledger table, deleted when the test ends. Its TTL
// is not enabled: tests write items dated by their fixtures (2026, say),
// and a table that deleted them by the stand-in's clock would make a
// test's verdict depend on today's date. A test of TTL sweeps the table
// itself, by its own clock. (DynamoDB Local 1.25.1 kept an item whose TTL
// had passed a year before for 90 s: it deletes nothing a test would see,
// but no test may lean on that.)
func Table(t testing.TB, db *dynamodb.Client) string {
	t.Helper()
	name := Name("nudge-ledger")
	ctx := context.Background()
	if _, err := db.CreateTable(ctx, ledger.TableInput(name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// Queues are a work queue and its DLQ.
type Queues struct {
	WorkURL, WorkARN, DLQURL, DLQARN string
}

// QueuePair creates a work queue whose redrive policy moves a message to a
// fresh DLQ after maxReceiveCount receives, both deleted when the test ends.
func QueuePair(t testing.TB, client *sqs.Client, visibility time.Duration, maxReceiveCount int) Queues {
	t.Helper()
	base := Name("nudge")
	var q Queues
	q.DLQURL, q.DLQARN = createQueue(t, client, base+"-dlq", map[string]string{"MessageRetentionPeriod": "1209600"})
	q.WorkURL, q.WorkARN = createQueue(t, client, base+"-work", map[string]string{
		"VisibilityTimeout": strconv.Itoa(int(visibility / time.Second)),
		"RedrivePolicy":     `{"deadLetterTargetArn":"` + q.DLQARN + `","maxReceiveCount":"` + strconv.Itoa(maxReceiveCount) + `"}`,
	})
	return q
}

func createQueue(t testing.TB, client *sqs.Client, name string, attrs map[string]string) (url, arn string) {
	t.Helper()
	ctx := context.Background()
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	url = aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("queue %s attributes: %v", name, err)
	}
	arn = a.Attributes[string(types.QueueAttributeNameQueueArn)]
	if !strings.HasPrefix(arn, "arn:") {
		t.Fatalf("queue %s has no ARN: %q", name, arn)
	}
	return url, arn
}

// DynamoDB returns a DynamoDB client for the stand-in.
func DynamoDB(t testing.TB) *dynamodb.Client { return awsclient.DynamoDB(AWSConfig(t)) }

// SQS returns an SQS client for the stand-in.
func SQS(t testing.TB) *sqs.Client { return awsclient.SQS(AWSConfig(t)) }

// SES returns an SES v2 client for the SES stand-in, and its endpoint
// (for its store of sent mail).
func SES(t testing.TB) (*sesv2.Client, string) {
	return sesv2.NewFromConfig(AWSConfig(t)), os.Getenv("AWS_ENDPOINT_URL_SESV2")
}

// SNS returns an SNS client for fauxqs's SNS.
func SNS(t testing.TB) *sns.Client { return sns.NewFromConfig(AWSConfig(t)) }

// Bootstraps builds the named functions' bootstraps (functions/<fn>) for
// this machine into a temporary folder, as <dir>/<fn>/bootstrap (the layout
// of build/local), and returns the folder.
func Bootstraps(t testing.TB, fns ...string) string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("standintest: no go.mod above the working directory")
		}
		root = parent
	}
	dir := t.TempDir()
	for _, fn := range fns {
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(dir, fn, "bootstrap"), "./functions/"+fn)
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", fn, err, msg)
		}
	}
	return dir
}
