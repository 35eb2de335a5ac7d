package local_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
)

// lockedLog is a log the functions, the front and the test share.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSystem starts the local system of a dev stage named from prefix on
// the stand-ins, and removes its table and queues at the end of the test.
func startSystem(t testing.TB, prefix string) *local.System {
	return startStage(t, prefix, deployment.Dev())
}

// startStage starts the local system of stage, named from prefix, on the
// stand-ins nudge local exec started, and removes its table and every
// queue it made at the end of the test.
func startStage(t testing.TB, prefix string, stage deployment.Stage) *local.System {
	t.Helper()
	return startStageWith(t, prefix, stage, nil)
}

// startStageWith is startStage with the provider's faults by plan.
func startStageWith(t testing.TB, prefix string, stage deployment.Stage, plan sink.Plan) *local.System {
	t.Helper()
	stage.Name = strings.TrimPrefix(standintest.Name(prefix), prefix+"-")
	ctx := context.Background()
	sys, err := local.Start(ctx, local.Config{Stage: stage, Plan: plan,
		DynamoDBEndpoint: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), SESEndpoint: os.Getenv("AWS_ENDPOINT_URL_SESV2")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sys.Close()
		_, _ = sys.DB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(sys.Resources.Table)})
		res := sys.Resources
		for _, url := range []string{res.WorkURL, res.DLQURL, res.OutcomesURL, res.FeedbackURL, res.Topic.QueueURL, res.Operators.QueueURL} {
			if url != "" {
				_, _ = sys.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
			}
		}
	})
	return sys
}

// startIntake starts the local system on the stand-ins and the intake's
// real bootstrap, instances under the emulator behind its function URL.
func startIntake(t testing.TB, instances int) (*local.System, *local.Intake, *lockedLog) {
	return startIntakeVia(t, instances, nil)
}

// startIntakeVia is startIntake with the intake's DynamoDB calls sent to
// the endpoint db returns (a counting proxy), if db is set.
func startIntakeVia(t testing.TB, instances int, db func(ddbURL string) string) (*local.System, *local.Intake, *lockedLog) {
	t.Helper()
	standintest.AWSConfig(t) // skips (or fails under CI) without the stand-ins
	bins := standintest.Bootstraps(t, "intake")
	sys := startSystem(t, "i")
	ctx := context.Background()
	log := &lockedLog{}
	ep := sys.Endpoints()
	if db != nil {
		ep.DynamoDB = db(ep.DynamoDB)
	}
	in, err := sys.StartIntake(ctx, filepath.Join(bins, "intake", "bootstrap"), instances, ep, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	if len(in.Instances()) != instances {
		t.Fatalf("%d instances; want %d", len(in.Instances()), instances)
	}
	return sys, in, log
}

// TestIntakeAnswersBehindItsFunctionURL: the intake's real bootstrap, two
// instances under the emulator with the stack's environment, behind the
// local function URL: a signed GET of a reminder that does not exist is a
// 404 JSON problem from the function, an unsigned one never reaches it.
func TestIntakeAnswersBehindItsFunctionURL(t *testing.T) {
	_, in, log := startIntake(t, 2)
	ctx := context.Background()
	get := func(signed bool) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, in.URL()+"/v1/reminders/nope", nil)
		if err != nil {
			t.Fatal(err)
		}
		if signed {
			sum := sha256.Sum256(nil)
			creds := aws.Credentials{AccessKeyID: "AKIALOCALTEST", SecretAccessKey: "secret"}
			if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	resp, body := get(true)
	if resp.StatusCode != http.StatusNotFound || !json.Valid(body) || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		t.Errorf("signed GET of a missing reminder: %d %q %s; want a 404 JSON answer\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body, log)
	}
	resp, body = get(false)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned GET: %d %s; want 403", resp.StatusCode, body)
	}
	if lines := strings.Count(log.String(), "urlfront: GET /v1/reminders/nope "); lines != 2 {
		t.Errorf("%d access lines for 2 requests:\n%s", lines, log)
	}
}
