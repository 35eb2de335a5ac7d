package enqueue

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
)

// publisher publishes index entries to the work queues: the enqueue's
// hand-off and repair, and a writer's short-notice hand-off (HandOff).
type publisher struct {
	queue    Publisher
	routes   envelope.Routes // each provider's work queue
	attempts int             // PublishAttempts
	// early shortens every delay: a writer whose clock may be behind
	// publishes that much before due (HandOffConfig.ClockSkew).
	early  time.Duration
	clock  clock.Clock
	logger *slog.Logger
}

// publish sends one id-only message per entry with SendMessageBatch, ten
// at a time, each to its provider's work queue (Config.Routes), batches in
// parallel, each delayed from the moment its batch is
// sent (not the start of the run) until due. Entries SQS refuses are sent again with
// backoff, up to PublishAttempts; those it still refuses are returned.
// republished counts entries re-sent after a whole call failed, which SQS
// may have accepted: possible duplicates.
func (e *publisher) publish(ctx context.Context, entries []ledger.IndexEntry) (failed []ledger.IndexEntry, republished int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	byQueue := map[string][]ledger.IndexEntry{}
	var urls []string // in the order of the entries' first of each queue
	for _, en := range entries {
		url := e.routes.For(en.Key.Provider)
		if _, ok := byQueue[url]; !ok {
			urls = append(urls, url)
		}
		byQueue[url] = append(byQueue[url], en)
	}
	for _, url := range urls {
		entries := byQueue[url]
		for start := 0; start < len(entries); start += 10 {
			batch := entries[start:min(start+10, len(entries))]
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				f, rp := e.publishBatch(ctx, url, batch, e.clock.Now())
				mu.Lock()
				failed = append(failed, f...)
				republished += rp
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return failed, republished
}

func (e *publisher) publishBatch(ctx context.Context, url string, batch []ledger.IndexEntry, now time.Time) (failed []ledger.IndexEntry, republished int) {
	pending := map[string]ledger.IndexEntry{}
	var entries []types.SendMessageBatchRequestEntry
	for i, en := range batch {
		id := strconv.Itoa(i)
		ent, err := e.entry(id, envelope.KindOf(url), en, now)
		if err != nil { // only a corrupt index entry gets here
			e.logger.Error("cannot encode a message", "deliveryKey", en.Key.String(), "error", err.Error())
			failed = append(failed, en)
			continue
		}
		pending[id] = en
		entries = append(entries, ent)
	}
	wait := 100 * time.Millisecond
	callFailed := false
	for attempt := 1; len(entries) > 0; attempt++ {
		if callFailed {
			republished += len(entries)
		}
		out, err := e.queue.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		callFailed = err != nil
		var retry []types.SendMessageBatchRequestEntry
		if err != nil {
			retry = entries
			e.logger.Warn("SendMessageBatch failed", "entries", len(entries), "attempt", attempt, "error", err.Error())
		} else {
			for _, ok := range out.Successful {
				delete(pending, aws.ToString(ok.Id))
			}
			for _, f := range out.Failed {
				e.logger.Warn("SQS refused a message", "deliveryKey", pending[aws.ToString(f.Id)].Key.String(),
					"code", aws.ToString(f.Code), "senderFault", f.SenderFault, "attempt", attempt)
				for _, en := range entries {
					if aws.ToString(en.Id) == aws.ToString(f.Id) {
						retry = append(retry, en)
					}
				}
			}
		}
		if len(retry) == 0 || attempt >= e.attempts || ctx.Err() != nil {
			break
		}
		entries = retry
		// The wall clock, not Clock: this pause is for SQS to recover,
		// and must pass even under a test's stopped clock.
		select {
		case <-time.After(wait): // wall clock: see above
		case <-ctx.Done():
		}
		wait *= 2
	}
	for _, en := range pending {
		failed = append(failed, en)
	}
	return failed, republished
}

// entry is the message for one index entry: the contract of internal/message,
// delayed until due on a standard queue; on a FIFO queue grouped by reminder
// and deduplicated by delivery and publish time (envelope.ForHandOff).
func (e *publisher) entry(id string, kind envelope.Kind, en ledger.IndexEntry, now time.Time) (types.SendMessageBatchRequestEntry, error) {
	body, err := message.Encode(message.Message{V: message.Version, ReminderID: en.Key.ReminderID, Channel: en.Key.Channel, Provider: en.Key.Provider, DueAt: en.DueAt})
	if err != nil {
		return types.SendMessageBatchRequestEntry{}, err
	}
	env := envelope.Build(envelope.Spec{Kind: kind, Body: string(body), Delay: en.DueAt.Sub(now) - e.early, Dedup: envelope.ForHandOff(en.Key, en.PublishAt)})
	return env.Entry(id), nil
}
