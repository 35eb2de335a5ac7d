package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/pkg/awsclient"
	"github.com/nudgehq/nudge/pkg/deployment"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/sink"
	"github.com/nudgehq/nudge/pkg/standin"
)

// localSecret signs webhook requests between the local consumer and sink.
const localSecret = "nudge-local-webhook-secret"

func localInvoke(args []string) int {
	fs := flag.NewFlagSet("nudge local invoke", flag.ContinueOnError)
	eventPath := fs.String("event", "events/sqs-batch.json", "the SQS event to invoke the consumer with")
	bootstrap := fs.String("bootstrap", "build/local/consumer/bootstrap", "the consumer binary, built for this machine (make build-local)")
	fault := fs.String("fault", "", `provider faults per reminder, e.g. "rem-185=500;rem-186=400"`)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := invoke(ctx, os.Stdout, *eventPath, *bootstrap, *fault); err != nil {
		fmt.Fprintln(os.Stderr, "nudge local invoke:", err)
		return 1
	}
	return 0
}

// invokeResult is what one local invocation did.
type invokeResult struct {
	Response   events.SQSEventResponse
	Statuses   map[string]ledger.Status
	Accepted   int
	Duplicates int
	DLQDepth   string
	Output     string
}

func invoke(ctx context.Context, out io.Writer, eventPath, bootstrap, fault string) (*invokeResult, error) {
	raw, err := os.ReadFile(eventPath)
	if err != nil {
		return nil, err
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil || len(ev.Records) == 0 {
		return nil, fmt.Errorf("%s is not an SQS event with records (see events/ for examples)", eventPath)
	}
	plan, err := sink.ParseScript(fault)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bootstrap); err != nil {
		return nil, fmt.Errorf("%s not found; run `make build-local` first (or use `make invoke`)", bootstrap)
	}
	dir, err := standin.DefaultDir()
	if err != nil {
		return nil, err
	}
	stack, err := standin.Up(ctx, dir, os.Stderr)
	if err != nil {
		return nil, err
	}
	defer stack.Stop()
	// Point this process's AWS clients at the stack, and put the
	// environment back afterwards (tests run other commands in-process).
	for _, kv := range stack.Env() {
		k, v, _ := strings.Cut(kv, "=")
		old, had := os.LookupEnv(k)
		os.Setenv(k, v)
		defer func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		}()
	}

	// The provider sink, on a free loopback port.
	snk := &sink.Sink{Secret: []byte(localSecret), Plan: plan}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: snk, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	stage := deployment.Dev()
	res, err := provision(ctx, stage)
	if err != nil {
		return nil, err
	}
	seeded, err := seed(ctx, res.ledger, ev)
	if err != nil {
		return nil, err
	}

	logs := &lockedBuffer{}
	// The environment the stack gives the consumer, with local addresses.
	env := stage.ConsumerEnv(deployment.Resources{Table: res.table, WorkQueueURL: res.workURL, DLQURL: res.dlqURL,
		WebhookURL: "http://" + ln.Addr().String() + "/deliveries", WebhookSecret: localSecret})
	fn, err := standin.StartLambda(ctx, dir, bootstrap, standin.Options{Log: logs, Env: append(append(stack.Env(), deployment.EnvList(env)...),
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", int(stage.ConsumerTimeout.Seconds())),
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", stage.ConsumerMemoryMB),
		"AWS_LAMBDA_FUNCTION_NAME=nudge-"+stage.Name+"-consumer",
	)})
	if err != nil {
		return nil, err
	}
	defer fn.Stop()

	resp, err := http.Post(fn.InvokeURL(), "application/json", bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond) // let the emulator print its REPORT line

	result := &invokeResult{Statuses: map[string]ledger.Status{}, Output: logs.String()}
	_ = json.Unmarshal(body, &result.Response)
	fmt.Fprintln(out, "== function output")
	fmt.Fprint(out, result.Output)
	fmt.Fprintln(out, "== response")
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		fmt.Fprintln(out, pretty.String())
	} else {
		fmt.Fprintln(out, string(body))
	}
	fmt.Fprintln(out, "== ledger")
	for _, k := range seeded {
		d, err := res.ledger.Get(ctx, k)
		if err != nil {
			fmt.Fprintf(out, "%-28s %v\n", k, err)
			continue
		}
		result.Statuses[k.String()] = d.Status
		fmt.Fprintf(out, "%-28s %-9s attempts=%d receipt=%q lastError=%q\n", k, d.Status, d.Attempts, d.Receipt, d.LastError)
	}
	accepted, dupes := snk.Totals()
	result.Accepted, result.Duplicates = accepted, dupes
	dlq, _ := res.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(res.dlqURL), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages"}})
	depth := "?"
	if dlq != nil {
		depth = dlq.Attributes["ApproximateNumberOfMessages"]
	}
	result.DLQDepth = depth
	fmt.Fprintf(out, "== provider sink: %d accepted, %d duplicates suppressed; DLQ: %s messages\n", accepted, dupes, depth)
	if resp.StatusCode != http.StatusOK {
		return result, fmt.Errorf("the emulator answered %s", resp.Status)
	}
	return result, nil
}

type resources struct {
	table, workURL, dlqURL string
	ledger                 *ledger.Ledger
	sqs                    *sqs.Client
}

// provision creates the ledger table, the work queue and its DLQ as the
// stack does, from the same settings (pkg/deployment).
func provision(ctx context.Context, stage deployment.Stage) (*resources, error) {
	if err := stage.Validate(); err != nil {
		return nil, err
	}
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	db, q := awsclient.DynamoDB(cfg), awsclient.SQS(cfg)
	r := &resources{table: stage.TableName(), sqs: q}
	if err := ledger.CreateTable(ctx, db, r.table); err != nil {
		return nil, err
	}
	if r.ledger, err = ledger.New(db, ledger.Config{Table: r.table, Shards: stage.Shards}); err != nil {
		return nil, err
	}
	queueARN := func(url *string) (string, error) {
		a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
		if err != nil {
			return "", err
		}
		return a.Attributes["QueueArn"], nil
	}
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(stage.DLQName())})
	if err != nil {
		return nil, err
	}
	r.dlqURL = aws.ToString(dlq.QueueUrl)
	dlqARN, err := queueARN(dlq.QueueUrl)
	if err != nil {
		return nil, err
	}
	work, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(stage.WorkQueueName()), Attributes: stage.WorkQueueAttributes(dlqARN)})
	if err != nil {
		return nil, err
	}
	r.workURL = aws.ToString(work.QueueUrl)
	workARN, err := queueARN(work.QueueUrl)
	if err != nil {
		return nil, err
	}
	if _, err := q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: dlq.QueueUrl, Attributes: stage.DLQAttributes(workARN)}); err != nil {
		return nil, fmt.Errorf("set the DLQ's retention and redrive-allow policy: %w", err)
	}
	return r, nil
}

// seed writes a queued delivery for each valid message of ev.
func seed(ctx context.Context, l *ledger.Ledger, ev events.SQSEvent) ([]message.DeliveryKey, error) {
	var keys []message.DeliveryKey
	seen := map[message.DeliveryKey]bool{}
	for i, r := range ev.Records {
		m, err := message.Decode([]byte(r.Body))
		if err != nil || seen[m.Key()] {
			continue // poison bodies are the point of some events
		}
		seen[m.Key()] = true
		d := ledger.Delivery{ReminderID: m.ReminderID, Channel: m.Channel, Provider: m.Provider, Status: ledger.StatusQueued,
			RecipientRef: fmt.Sprintf("local/contact-%d", i+1), TemplateRef: "local-template",
			DueAt: m.DueAt, ExpiresAt: time.Now().Add(24 * time.Hour)}
		if err := l.Create(ctx, d); err != nil && !errors.Is(err, ledger.ErrExists) {
			return nil, err
		}
		keys = append(keys, m.Key())
	}
	return keys, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
