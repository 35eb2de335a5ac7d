package enqueue_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
)

// stallingHTTP holds every due index query of one shard until its request
// is cancelled, as DynamoDB starved of capacity would: the SDK's own
// client, errors and context handling are the real ones.
type stallingHTTP struct {
	next  aws.HTTPClient
	shard string
}

func (s stallingHTTP) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".Query") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"`+s.shard+`"`)) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
	}
	return s.next.Do(req)
}

// TestSlowDynamoDBCutsTheRunInsteadOfTimingItOut: one shard's queries
// hang. The run cancels them Reserve before its deadline and answers in
// time as cut, without an error; the other shards are handed off and the
// next run hands off the rest, each delivery once. A run its caller
// cancels still fails.
func TestSlowDynamoDBCutsTheRunInsteadOfTimingItOut(t *testing.T) {
	b := setupLocal(t, 4)
	inShard0 := b.scheduleHundred(t, 4)
	b.clk.Advance(time.Minute)
	cfg := standintest.AWSConfig(t)
	next := cfg.HTTPClient
	if next == nil {
		next = http.DefaultClient
	}
	cfg.HTTPClient = stallingHTTP{next: next, shard: ledger.ShardKey(0)}
	cfg.RetryMaxAttempts = 1
	slow := awsclient.DynamoDB(cfg)
	e := b.enqueuer(t, func(c *enqueue.Config) {
		c.Ledger = b.ledgerOn(t, slow)
		c.CutoffMargin = 1200 * time.Millisecond
		c.Reserve = 500 * time.Millisecond
	})

	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	rep, err := e.Run(ctx)
	early := time.Until(deadline)
	if err != nil {
		t.Fatalf("run failed: %v; want it cut", err)
	}
	if early < 300*time.Millisecond {
		t.Errorf("the run answered %v before its deadline; want about the 500ms reserve", early)
	}
	if !rep.Cut || rep.Caught || rep.Interrupted == 0 || rep.Enqueued != 100-inShard0 {
		t.Fatalf("report %+v; want a cut run that handed off the %d deliveries of the healthy shards", rep, 100-inShard0)
	}

	// The caller's own cancellation is not the budget: it fails the run.
	ctx, cancel = context.WithCancel(b.ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := e.Run(ctx); err == nil {
		t.Fatal("a run its caller cancelled reported success")
	}

	if rep := b.run(t, b.enqueuer(t, nil)); rep.Enqueued != inShard0 || !rep.Caught {
		t.Fatalf("next run: %+v, want the %d of shard 0", rep, inShard0)
	}
	got := keysOf(b.pub.take())
	if len(got) != 100 {
		t.Fatalf("%d distinct published, want 100", len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("%s published %d times", k, n)
		}
	}
}

// stallingQueue holds every SendMessageBatch until its request is
// cancelled, as SQS answering too slowly for the run's time would.
type stallingQueue struct{}

func (stallingQueue) SendMessageBatch(ctx context.Context, _ *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAPublishTheReserveCutIsNotARefusal: SQS answers too slowly for the
// run, whose reserve cancels the publishes in flight. They are counted as
// cut (PublishCut), not as refused (PublishFailed, whose alarm calls an
// operator; the local runs' checker holds it to 0), and nothing is lost:
// the next run, or the repair, hands each delivery off once.
func TestAPublishTheReserveCutIsNotARefusal(t *testing.T) {
	b := setup(t, 2)
	b.scheduleHundred(t, 2)
	b.clk.Advance(time.Minute)
	slow := b.enqueuer(t, func(c *enqueue.Config) {
		c.Queue = stallingQueue{}
		c.CutoffMargin = 1200 * time.Millisecond
		c.Reserve = 400 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second) // wall clock: the run's deadline is Lambda's
	defer cancel()
	rep, err := slow.Run(ctx)
	if err != nil {
		t.Fatalf("run failed: %v; want it cut", err)
	}
	if rep.PublishFailed != 0 || rep.PublishCut == 0 || rep.Enqueued != 0 {
		t.Fatalf("report %+v; want every publish counted as cut, none as refused", rep)
	}
	// The next runs, with SQS healthy: the cursor's next hand-off, and, a
	// repair window on, the repair of what could not be handed back, send
	// each delivery once.
	b.run(t, b.enqueuer(t, nil))
	b.clk.Advance(11 * time.Minute)
	b.run(t, b.enqueuer(t, nil))
	got := keysOf(b.pub.take())
	if len(got) != 100 {
		t.Fatalf("%d distinct published after the cut, want 100", len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("%s published %d times", k, n)
		}
	}
}
