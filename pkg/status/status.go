package status

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/redrive"
)

// queueAPI is what Read and QueueDepth need of SQS besides the DLQ review.
type queueAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ queueAPI = (*sqs.Client)(nil)

// Config configures Read.
type Config struct {
	// DB scans the ledger table. Required.
	DB ledger.ScanAPI
	// Table is the ledger table. Required.
	Table string
	// Queue reads the queues' attributes. Required.
	Queue queueAPI
	// WorkURL and DLQURL are the queues. Required.
	WorkURL, DLQURL string
	// DLQ reviews the DLQ for the age of its oldest message. Optional.
	DLQ *redrive.Redriver
	// OverdueAfter is how far past due a live delivery counts as overdue:
	// the enqueue's NUDGE_OVERDUE_AFTER. Default 5 min.
	OverdueAfter time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Depth is a queue's messages.
type Depth struct {
	Visible  int `json:"visible"`
	InFlight int `json:"inFlight"`
	Delayed  int `json:"delayed"`
}

// Report is the system's state.
type Report struct {
	Table      string                `json:"table"`
	Deliveries int                   `json:"deliveries"`
	ByStatus   map[ledger.Status]int `json:"byStatus"`
	// OverduePending counts live deliveries more than OverdueAfter past
	// due; OldestOverdue is the furthest past due of them.
	OverduePending       int    `json:"overduePending"`
	OldestOverdueSeconds int64  `json:"oldestOverdueSeconds"`
	OldestOverdueKey     string `json:"oldestOverdueKey,omitempty"`
	WorkQueue            Depth  `json:"workQueue"`
	DLQ                  Depth  `json:"dlq"`
	// DLQOldestAgeSeconds is the age of the DLQ's oldest message read;
	// DLQOldestSampled is true when the DLQ held more than could be read,
	// so the figure is the oldest of a sample.
	DLQOldestAgeSeconds int64 `json:"dlqOldestAgeSeconds"`
	DLQOldestSampled    bool  `json:"dlqOldestSampled,omitempty"`
}

// dlqSample is the most DLQ messages read for the oldest age.
const dlqSample = 100

// Read gathers the report.
func Read(ctx context.Context, cfg Config) (Report, error) {
	if cfg.DB == nil || cfg.Table == "" || cfg.Queue == nil || cfg.WorkURL == "" || cfg.DLQURL == "" {
		return Report{}, errors.New("status: DB, Table, Queue, WorkURL and DLQURL are required")
	}
	if cfg.OverdueAfter == 0 {
		cfg.OverdueAfter = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	now := cfg.Clock.Now()
	rep := Report{Table: cfg.Table, ByStatus: map[ledger.Status]int{}}
	err := ledger.ScanDeliveries(ctx, cfg.DB, cfg.Table, func(d ledger.Delivery) error {
		rep.Deliveries++
		rep.ByStatus[d.Status]++
		if late := now.Sub(d.DueAt); !d.Status.Terminal() && late > cfg.OverdueAfter {
			rep.OverduePending++
			if s := int64(late / time.Second); s > rep.OldestOverdueSeconds {
				rep.OldestOverdueSeconds, rep.OldestOverdueKey = s, d.Key().String()
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if rep.WorkQueue, err = QueueDepth(ctx, cfg.Queue, cfg.WorkURL); err != nil {
		return rep, err
	}
	if rep.DLQ, err = QueueDepth(ctx, cfg.Queue, cfg.DLQURL); err != nil {
		return rep, err
	}
	if cfg.DLQ != nil && rep.DLQ.Visible > 0 {
		letters, err := cfg.DLQ.List(ctx, dlqSample)
		if err != nil {
			return rep, err
		}
		read := 0
		for _, l := range letters {
			rep.DLQOldestAgeSeconds = max(rep.DLQOldestAgeSeconds, l.AgeSeconds)
			read += l.Copies
		}
		rep.DLQOldestSampled = rep.DLQ.Visible+rep.DLQ.InFlight > read
	}
	return rep, nil
}

// Total is every message of the queue: visible, in flight and delayed.
func (d Depth) Total() int { return d.Visible + d.InFlight + d.Delayed }

// QueueDepth reads a queue's approximate counts.
func QueueDepth(ctx context.Context, q queueAPI, url string) (Depth, error) {
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return Depth{}, fmt.Errorf("status: queue %s: %w", url, err)
	}
	n := func(name string) int {
		v, _ := strconv.Atoi(out.Attributes[name])
		return v
	}
	return Depth{Visible: n("ApproximateNumberOfMessages"), InFlight: n("ApproximateNumberOfMessagesNotVisible"), Delayed: n("ApproximateNumberOfMessagesDelayed")}, nil
}
