package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Handler handles one SQS record. Returning nil acknowledges the record;
// returning an error leaves it on the queue to be retried.
type Handler interface {
	Handle(ctx context.Context, rec events.SQSMessage) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, rec events.SQSMessage) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, rec events.SQSMessage) error { return f(ctx, rec) }

// VisibilityAPI is the part of the SQS client the processor uses.
type VisibilityAPI interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ VisibilityAPI = (*sqs.Client)(nil)

// Config configures a Processor.
type Config struct {
	// Concurrency is how many records (in FIFO mode: message groups) run at
	// once. Default 10.
	Concurrency int
	// CutoffMargin is how long before the invocation deadline the processor
	// stops starting records. It should exceed the time one record can take.
	// Default 5s.
	CutoffMargin time.Duration
	// Reserve is how long before the invocation deadline the records still
	// running are cancelled (their context ends), so that the invocation
	// reports them as failures and answers in time. Without it a record
	// slower than the margin (a DynamoDB slowdown, say) runs into the
	// deadline, Lambda ends the invocation as timed out, and the whole
	// batch returns to the queue, the records that succeeded with it.
	// Default 1s, or a quarter of CutoffMargin if that is less.
	Reserve time.Duration
	// Visibility changes the visibility of records that failed with a delay
	// and of records left unstarted. Nil leaves every failed record to the
	// queue's visibility timeout.
	Visibility VisibilityAPI
	// QueueURL maps a record's eventSourceARN to its queue URL, for
	// visibility changes. Default QueueURLFromARN.
	QueueURL func(arn string) string
	// Deadline returns the invocation deadline on Clock. Default
	// ctx.Deadline, which is on Lambda's clock, brought onto Clock (the
	// time left of it, from Clock's now).
	Deadline func(ctx context.Context) (time.Time, bool)
	// FIFO forces FIFO mode. Default: on when a record carries a
	// MessageGroupId attribute or its queue's ARN ends in ".fifo".
	FIFO bool
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
	// Logger receives a line per record that fails for a reason the handler
	// did not log itself (panics, unreportable ids, visibility errors).
	// Default slog.Default().
	Logger *slog.Logger
	// Middleware wraps the handler, the first outermost, inside Recover.
	Middleware []Middleware
}

// DefaultReserve is the Reserve a cut-off margin gets by default: 1 s, or
// a quarter of the margin if that is less.
func DefaultReserve(cutoffMargin time.Duration) time.Duration {
	return min(time.Second, cutoffMargin/4)
}

// Processor runs a Handler over SQS events. It is safe for concurrent use.
type Processor struct {
	h   Handler
	cfg Config
}

// New returns a Processor for h.
func New(h Handler, cfg Config) (*Processor, error) {
	if h == nil {
		return nil, errors.New("batch: handler is nil")
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 10
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("batch: concurrency %d is negative; use at least 1", cfg.Concurrency)
	}
	if cfg.CutoffMargin == 0 {
		cfg.CutoffMargin = 5 * time.Second
	}
	if cfg.CutoffMargin < 0 {
		return nil, fmt.Errorf("batch: cutoff margin %v is negative", cfg.CutoffMargin)
	}
	if cfg.Reserve == 0 {
		cfg.Reserve = DefaultReserve(cfg.CutoffMargin)
	}
	if cfg.Reserve < 0 || cfg.Reserve >= cfg.CutoffMargin {
		return nil, fmt.Errorf("batch: reserve %v must be positive and below the cutoff margin %v", cfg.Reserve, cfg.CutoffMargin)
	}
	if cfg.QueueURL == nil {
		cfg.QueueURL = QueueURLFromARN
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Deadline == nil {
		clk := cfg.Clock
		cfg.Deadline = func(ctx context.Context) (time.Time, bool) {
			// wall clock: the invocation's deadline is on Lambda's clock;
			// what is left of it counts from the processor's clock.
			dl, ok := ctx.Deadline()
			if !ok {
				return time.Time{}, false
			}
			return clk.Now().Add(time.Until(dl)), true // wall clock: as above
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h = Chain(h, append([]Middleware{Recover(cfg.Logger)}, cfg.Middleware...)...)
	return &Processor{h: h, cfg: cfg}, nil
}

// Status is what became of one record.
type Status int

// Record statuses.
const (
	// Succeeded: the handler returned nil; the record is acknowledged.
	Succeeded Status = iota + 1
	// Failed: the handler returned an error; the record is retried.
	Failed
	// Unstarted: the deadline was near; the record was returned at once.
	Unstarted
	// Skipped: an earlier record of its FIFO group failed.
	Skipped
)

func (s Status) String() string {
	return [...]string{"", "succeeded", "failed", "unstarted", "skipped"}[s]
}

// Result is the outcome of one record.
type Result struct {
	MessageID string
	Status    Status
	// Err is the handler's error, for Failed.
	Err error
	// Visibility is the visibility the record was given, if it was changed.
	Visibility *time.Duration
}

// Report is the outcome of one event.
type Report struct {
	// Results are in the order of the event's records.
	Results []Result
}

// Count returns how many records ended with status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// Response builds the partial batch response: every record that is not
// Succeeded, once each, never with an empty identifier.
func (r Report) Response() events.SQSEventResponse {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	seen := map[string]bool{}
	for _, res := range r.Results {
		if res.Status == Succeeded || res.MessageID == "" || seen[res.MessageID] {
			continue
		}
		seen[res.MessageID] = true
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: res.MessageID})
	}
	return resp
}

// Process handles ev and returns the partial batch response. Its error is
// always nil: a failing record fails alone. The signature matches
// lambda.Start.
func (p *Processor) Process(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return p.Run(ctx, ev).Response(), nil
}

// Run handles ev and returns what became of each record.
func (p *Processor) Run(ctx context.Context, ev events.SQSEvent) Report {
	results := make([]Result, len(ev.Records))
	for i, rec := range ev.Records {
		results[i].MessageID = rec.MessageId
	}
	deadline, hasDeadline := p.cfg.Deadline(ctx)
	cutoff := deadline.Add(-p.cfg.CutoffMargin)
	tooLate := func() bool { return hasDeadline && !p.cfg.Clock.Now().Before(cutoff) }
	// Records run under a context that ends Reserve before the deadline
	// (measured on the processor's clock).
	recCtx := ctx
	if hasDeadline {
		var cancel context.CancelFunc
		// wall clock: a context's timer runs on it; the time left is
		// measured on the processor's clock, as the cut-off's is.
		recCtx, cancel = context.WithTimeout(ctx, deadline.Sub(p.cfg.Clock.Now())-p.cfg.Reserve)
		defer cancel()
	}
	if len(ev.Records) > 0 && tooLate() {
		p.cfg.Logger.Error("the invocation started past its cut-off: no record will run; make the cut-off margin shorter than the function timeout",
			"cutoffMargin", p.cfg.CutoffMargin.String(), "timeLeft", cutoff.Add(p.cfg.CutoffMargin).Sub(p.cfg.Clock.Now()).String())
	}

	run := func(i int) Status {
		if tooLate() {
			results[i].Status = Unstarted
			return Unstarted
		}
		err := p.h.Handle(recCtx, ev.Records[i])
		if err == nil {
			results[i].Status = Succeeded
			return Succeeded
		}
		results[i].Status, results[i].Err = Failed, err
		return Failed
	}

	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	if p.fifo(ev) {
		for _, group := range groups(ev) {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				failed := false
				for _, i := range group {
					if failed {
						results[i].Status = Skipped
						continue
					}
					if s := run(i); s != Succeeded {
						failed = true
					}
				}
			}()
		}
	} else {
		for i := range ev.Records {
			sem <- struct{}{} // wait for a slot before looking at the clock
			if tooLate() {
				results[i].Status = Unstarted
				<-sem
				continue
			}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				run(i)
			}()
		}
	}
	wg.Wait()
	p.changeVisibility(ctx, ev, results)
	for i, res := range results {
		if res.Status != Succeeded && res.MessageID == "" {
			p.cfg.Logger.Error("record has no messageId and cannot be reported as failed; it will be deleted",
				"index", i, "status", res.Status.String(), "error", errString(res.Err))
		}
	}
	return Report{Results: results}
}

func (p *Processor) fifo(ev events.SQSEvent) bool {
	if p.cfg.FIFO {
		return true
	}
	for _, rec := range ev.Records {
		if rec.Attributes["MessageGroupId"] != "" || strings.HasSuffix(rec.EventSourceARN, ".fifo") {
			return true
		}
	}
	return false
}

// groups returns the record indexes of each message group, in event order.
func groups(ev events.SQSEvent) [][]int {
	var order []string
	byGroup := map[string][]int{}
	for i, rec := range ev.Records {
		g := rec.Attributes["MessageGroupId"]
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], i)
	}
	out := make([][]int, 0, len(order))
	for _, g := range order {
		out = append(out, byGroup[g])
	}
	return out
}

type visibilityChange struct {
	index   int
	handle  string
	seconds int32
}

// changeVisibility applies retry delays and returns unstarted and skipped
// records at once, ten per request and queue.
func (p *Processor) changeVisibility(ctx context.Context, ev events.SQSEvent, results []Result) {
	if p.cfg.Visibility == nil {
		return
	}
	byQueue := map[string][]visibilityChange{}
	var queues []string
	for i, res := range results {
		var d time.Duration
		switch res.Status {
		case Unstarted, Skipped:
			d = 0
		case Failed:
			var fe *failure.Error
			if !errors.As(res.Err, &fe) || fe.After <= 0 || fe.Kind == failure.KindPermanent {
				continue
			}
			d = fe.After
		default:
			continue
		}
		rec := ev.Records[i]
		if rec.ReceiptHandle == "" {
			continue
		}
		url := p.cfg.QueueURL(rec.EventSourceARN)
		if url == "" {
			p.cfg.Logger.Warn("no queue URL for the record's source; its visibility is left as it is", "messageId", rec.MessageId, "eventSourceARN", rec.EventSourceARN)
			continue
		}
		if _, ok := byQueue[url]; !ok {
			queues = append(queues, url)
		}
		byQueue[url] = append(byQueue[url], visibilityChange{index: i, handle: rec.ReceiptHandle, seconds: int32(d / time.Second)})
	}
	// The changes must land even if the handlers used up the context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second) // wall clock: a limit on real requests
	defer cancel()
	for _, url := range queues {
		changes := byQueue[url]
		for start := 0; start < len(changes); start += 10 {
			chunk := changes[start:min(start+10, len(changes))]
			entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
			for j, c := range chunk {
				entries[j] = types.ChangeMessageVisibilityBatchRequestEntry{
					Id:                aws.String(strconv.Itoa(c.index)),
					ReceiptHandle:     aws.String(c.handle),
					VisibilityTimeout: c.seconds,
				}
			}
			out, err := p.cfg.Visibility.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
			if err != nil {
				p.cfg.Logger.Warn("could not change visibility; the records return after the queue's visibility timeout", "queue", url, "records", len(chunk), "error", err.Error())
				continue
			}
			failed := map[string]bool{}
			for _, f := range out.Failed {
				failed[aws.ToString(f.Id)] = true
				p.cfg.Logger.Warn("could not change visibility of a record", "entry", aws.ToString(f.Id), "code", aws.ToString(f.Code), "message", aws.ToString(f.Message))
			}
			for _, c := range chunk {
				if !failed[strconv.Itoa(c.index)] {
					d := time.Duration(c.seconds) * time.Second
					results[c.index].Visibility = &d
				}
			}
		}
	}
}

// QueueURLFromARN returns the public AWS queue URL for a queue ARN
// ("arn:aws:sqs:eu-west-1:123456789012:nudge-work" →
// "https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-work"). It returns
// "" for anything that is not an SQS ARN.
func QueueURLFromARN(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return ""
	}
	host := "amazonaws.com"
	if parts[1] == "aws-cn" {
		host = "amazonaws.com.cn"
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", parts[3], host, parts[4], parts[5])
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
