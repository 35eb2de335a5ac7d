package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/localtime"
)

// depthAPI is what QueueDepth needs of SQS.
type depthAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// queueAPI is what Read needs of SQS.
type queueAPI interface {
	depthAPI
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
}

var _ queueAPI = (*sqs.Client)(nil)

// ledgerAPI is what Read needs of the ledger: the due index, and the
// whole table when asked to scan it.
type ledgerAPI interface {
	ReadLive(ctx context.Context, now time.Time, overdueAfter time.Duration) (ledger.Live, error)
	ScanDeliveries(ctx context.Context, fn func(ledger.Delivery) error) error
}

var _ ledgerAPI = (*ledger.Ledger)(nil)

// Config configures Read.
type Config struct {
	// Ledger reads the due index and, for Scan or ExpiredSince, scans the
	// table. Required.
	Ledger ledgerAPI
	// Table is the ledger table. Required.
	Table string
	// Queue reads the queues' attributes and samples the DLQ. Required.
	Queue queueAPI
	// WorkURL and DLQURL are the queues. Required.
	WorkURL, DLQURL string
	// ProviderURLs are the providers' own work queues, counted with the
	// work queue. Default none.
	ProviderURLs []string
	// OverdueAfter is how far past due a live delivery counts as overdue:
	// the enqueue's NUDGE_OVERDUE_AFTER. Default 5 min.
	OverdueAfter time.Duration
	// Scan also counts every delivery by state, reading the whole table
	// (priced like a scan: a read unit per 8 KB of table).
	Scan bool
	// ExpiredSince, if above 0, also lists the deliveries that expired
	// unsent this long before now (a scan too).
	ExpiredSince time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Depth is a queue's messages.
type Depth struct {
	Visible  int `json:"visible"`
	InFlight int `json:"inFlight"`
	Delayed  int `json:"delayed"`
}

// Expired is a delivery that expired unsent.
type Expired struct {
	Key       string    `json:"deliveryKey"`
	DueAt     time.Time `json:"dueAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// At is when it was marked expired.
	At time.Time `json:"at"`
}

// Report is the system's state. Sources says, per figure, where it comes
// from and whether it is exact, approximate or sampled.
type Report struct {
	Table string `json:"table"`
	// Live counts the live deliveries (pending, queued, sending,
	// retrying), from the due index.
	Live int `json:"live"`
	// OverduePending counts live deliveries more than OverdueAfter past
	// due; OldestOverdue is the furthest past due of them.
	OverduePending       int    `json:"overduePending"`
	OldestOverdueSeconds int64  `json:"oldestOverdueSeconds"`
	OldestOverdueKey     string `json:"oldestOverdueKey,omitempty"`
	// Deliveries and ByStatus count every delivery by state (with Scan).
	Deliveries int                   `json:"deliveries,omitempty"`
	ByStatus   map[ledger.Status]int `json:"byStatus,omitempty"`
	// Expired lists the deliveries that expired within ExpiredSince.
	Expired []Expired `json:"expired,omitempty"`
	// WorkQueue counts every work queue's messages: the default's and the
	// providers' own. WorkQueues has each, by name, when there are
	// providers' own queues.
	WorkQueue  Depth            `json:"workQueue"`
	WorkQueues map[string]Depth `json:"workQueues,omitempty"`
	DLQ        Depth            `json:"dlq"`
	// DLQOldestAgeSeconds is the age of the oldest DLQ message of the
	// DLQSampled read.
	DLQOldestAgeSeconds int64 `json:"dlqOldestAgeSeconds"`
	DLQSampled          int   `json:"dlqSampled"`
	// TimeZones is the release of the IANA time zone database the
	// binaries embed (pkg/localtime.Version), by which every local time
	// and send window is read: "2025c". The functions and the CLI are
	// built from one tree, so it is the stage's as well as this binary's.
	TimeZones string `json:"timeZones"`
	// Sources says where each figure comes from, and how exact it is.
	Sources map[string]string `json:"sources"`
}

// dlqSample is the most DLQ messages read for the oldest age.
const dlqSample = 100

// Read gathers the report. It reads the due index, the queues' attributes
// and a sample of the DLQ, each message hidden for a second at most; it
// scans the table only when asked.
func Read(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Ledger == nil || cfg.Table == "" || cfg.Queue == nil || cfg.WorkURL == "" || cfg.DLQURL == "" {
		return Report{}, errors.New("status: Ledger, Table, Queue, WorkURL and DLQURL are required")
	}
	if cfg.OverdueAfter == 0 {
		cfg.OverdueAfter = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	now := cfg.Clock.Now()
	rep := Report{Table: cfg.Table, TimeZones: localtime.Version, Sources: map[string]string{
		"live":         "exact: the due index",
		"overdue":      "exact: the due index",
		"queues":       "approximate: SQS's counts",
		"dlqOldestAge": "sampled: the DLQ messages read",
	}}
	live, err := cfg.Ledger.ReadLive(ctx, now, cfg.OverdueAfter)
	if err != nil {
		return rep, err
	}
	rep.Live, rep.OverduePending, rep.OldestOverdueSeconds = live.Deliveries, live.Overdue, int64(live.OldestOverdue/time.Second)
	if live.Overdue > 0 {
		rep.OldestOverdueKey = live.OldestKey.String()
	}
	if cfg.Scan || cfg.ExpiredSince > 0 {
		if cfg.Scan {
			rep.ByStatus = map[ledger.Status]int{}
			rep.Sources["byStatus"] = "exact: a scan of the table"
		}
		if cfg.ExpiredSince > 0 {
			rep.Expired = []Expired{}
			rep.Sources["expired"] = "exact: a scan of the table"
		}
		err := cfg.Ledger.ScanDeliveries(ctx, func(d ledger.Delivery) error {
			if cfg.Scan {
				rep.Deliveries++
				rep.ByStatus[d.Status]++
			}
			if cfg.ExpiredSince > 0 && d.Status == ledger.StatusExpired && !d.UpdatedAt.Before(now.Add(-cfg.ExpiredSince)) {
				rep.Expired = append(rep.Expired, Expired{Key: d.Key().String(), DueAt: d.DueAt, ExpiresAt: d.ExpiresAt, At: d.UpdatedAt})
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		slices.SortFunc(rep.Expired, func(a, b Expired) int { return b.At.Compare(a.At) })
	}
	if rep.WorkQueue, err = QueueDepth(ctx, cfg.Queue, cfg.WorkURL); err != nil {
		return rep, err
	}
	if len(cfg.ProviderURLs) > 0 {
		rep.WorkQueues = map[string]Depth{envelope.QueueName(cfg.WorkURL): rep.WorkQueue}
		for _, url := range cfg.ProviderURLs {
			d, err := QueueDepth(ctx, cfg.Queue, url)
			if err != nil {
				return rep, err
			}
			rep.WorkQueues[envelope.QueueName(url)] = d
			rep.WorkQueue.Visible, rep.WorkQueue.InFlight, rep.WorkQueue.Delayed = rep.WorkQueue.Visible+d.Visible, rep.WorkQueue.InFlight+d.InFlight,
				rep.WorkQueue.Delayed+d.Delayed
		}
	}
	if rep.DLQ, err = QueueDepth(ctx, cfg.Queue, cfg.DLQURL); err != nil {
		return rep, err
	}
	if rep.DLQ.Visible > 0 {
		oldest, read, err := sampleOldest(ctx, cfg.Queue, cfg.DLQURL, min(rep.DLQ.Visible, dlqSample))
		if err != nil {
			return rep, err
		}
		rep.DLQSampled = read
		if read > 0 {
			rep.DLQOldestAgeSeconds = int64(now.Sub(oldest) / time.Second)
		}
		switch {
		case read == 0:
			rep.Sources["dlqOldestAge"] = "unknown: no DLQ message came back to a receive (another reader holds them); run nudge dlq list"
		case read >= rep.DLQ.Visible+rep.DLQ.InFlight:
			rep.Sources["dlqOldestAge"] = "exact: every DLQ message read"
		default:
			rep.Sources["dlqOldestAge"] = fmt.Sprintf("sampled: %d of about %d DLQ messages read", read, rep.DLQ.Visible+rep.DLQ.InFlight)
		}
	}
	return rep, nil
}

// sampleOldest receives up to n messages, each hidden for a second only
// (the shortest visibility a receive can ask for), and returns when the
// oldest of them was sent and how many distinct messages it read. The DLQ
// alarm counts hidden messages too, so a sample never clears it.
func sampleOldest(ctx context.Context, q queueAPI, url string, n int) (time.Time, int, error) {
	seen := map[string]bool{}
	var oldest time.Time
	for empty := 0; len(seen) < n && empty < 2; {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: int32(min(10, n-len(seen))), VisibilityTimeout: 1, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
		})
		if err != nil {
			return oldest, len(seen), fmt.Errorf("status: sample the DLQ %s: %w", url, err)
		}
		fresh := 0
		for _, m := range out.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			fresh++
			if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
				if t := time.UnixMilli(ms); oldest.IsZero() || t.Before(oldest) {
					oldest = t
				}
			}
		}
		if fresh == 0 {
			empty++
		}
	}
	return oldest, len(seen), nil
}

// Total is every message of the queue: visible, in flight and delayed.
func (d Depth) Total() int { return d.Visible + d.InFlight + d.Delayed }

// QueueDepth reads a queue's approximate counts.
func QueueDepth(ctx context.Context, q depthAPI, url string) (Depth, error) {
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
