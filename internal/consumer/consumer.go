package consumer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/nudgehq/nudge/pkg/failure/awsfailure"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/circuit"
	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/ratelimit"
	"github.com/nudgehq/nudge/internal/retry"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/heartbeat"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Ledger is the part of the delivery ledger the consumer uses.
type Ledger interface {
	Claim(ctx context.Context, c ledger.Claim) (ledger.Delivery, error)
	Complete(ctx context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error)
	Retry(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	DeadLetter(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	Expire(ctx context.Context, d ledger.Delivery) (ledger.Delivery, error)
	Release(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (ledger.Delivery, error)
	AwaitWindow(ctx context.Context, d ledger.Delivery, opens time.Time) (ledger.Delivery, error)
}

var _ Ledger = (*ledger.Ledger)(nil)

// SenderAPI is the part of the SQS client the consumer uses: dead-lettering
// and re-publishing deferred messages.
type SenderAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ SenderAPI = (*sqs.Client)(nil)

// Metric names.
const (
	MetricReceived     = "Received"
	MetricSent         = "Sent"
	MetricDuplicate    = "Duplicate"
	MetricDeferred     = "Deferred"
	MetricRetried      = "Retried"
	MetricDeadLettered = "DeadLettered"
	MetricExpired      = "Expired"
	MetricLate         = "Late"
	MetricUnstarted    = "Unstarted"
	MetricDueToSent    = "DueToSentSeconds"
	// MetricEarlyHeld observes how early, in seconds, a record arrived that
	// the consumer held until its due time (Config.EarlyWait).
	MetricEarlyHeld = "EarlyHeldSeconds"
	// MetricAmbiguous counts sends that may have reached a provider without
	// an answer, by provider: retried (a possible duplicate where the
	// provider does not deduplicate) or dead-lettered for review.
	MetricAmbiguous = "Ambiguous"
	// MetricPaused counts sends refused because the provider paused the
	// account's sending (SES); an alarm watches it.
	MetricPaused = "ProviderPaused"
	// MetricPaced counts records returned to their queue because the
	// provider's rate limit had no turn for them in the invocation.
	MetricPaced = "Paced"
	// MetricForwarded counts records forwarded to their provider's own
	// work queue from another (envelope.Routes.Misrouted).
	MetricForwarded = "Forwarded"
	// MetricWindowDeferred counts deliveries claimed while their send
	// window was shut and given back to wait for it (no attempt spent).
	MetricWindowDeferred = "WindowDeferred"
)

// Config configures a Consumer.
type Config struct {
	// Ledger is the delivery ledger. Required.
	Ledger Ledger
	// Providers maps a message's provider name to its Provider. Required.
	Providers map[string]provider.Provider
	// Queue sends dead letters and deferred messages. Required.
	Queue SenderAPI
	// QueueURL is the default work queue. Required.
	QueueURL string
	// Routes name each provider's work queue, where its deferred messages
	// are re-published and its records that arrive on another work queue
	// are forwarded. Default: every provider's is QueueURL.
	Routes envelope.Routes
	// DLQURL is the dead-letter queue. Required.
	DLQURL string
	// MaxAttempts is the attempt budget, counted in provider attempts: the
	// claims the ledger records for the delivery, whichever message copy
	// made them. A transient failure on this attempt is dead-lettered with
	// its reason. Receives that never reached the provider (a record left
	// unstarted at the cut-off, a lease held by another copy, a throttled
	// claim, a FIFO deferral) do not spend it, and a repair's republish does
	// not reset it. Default 5.
	MaxAttempts int
	// MaxReceiveCount is the work queue's redrive maxReceiveCount, if known:
	// the safety net below the budget. It must exceed MaxAttempts by at
	// least ReceiveMargin, the receives that may not reach the provider,
	// or the queue would move a message to the DLQ silently before the
	// consumer records why.
	MaxReceiveCount int
	// Backoff is the retry policy. Default retry.New(retry.Config{}).
	Backoff *retry.Backoff
	// Classifier classifies provider and AWS errors. Default awsfailure.Default.
	Classifier failure.Chain
	// EarlyWait is how early a record may arrive and be held in the
	// consumer until its due time, then sent, instead of going back to the
	// queue: a delay is whole seconds, rounded down
	// (envelope.DelaySeconds), so a message is visible up to a second
	// early, and clocks differ a little. A record is held only if the
	// invocation has SendTime left after the wait; otherwise, or if it is
	// earlier than this, it is deferred (re-published). Default 2s.
	EarlyWait time.Duration
	// LateAfter is how late a send may be before it counts as Late.
	// Default 60s.
	LateAfter time.Duration
	// Lease is the claim's lease when the context has no deadline; with a
	// deadline the lease ends 5s after it. Default 5m.
	Lease time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
	// Logger receives one line per transition. Default slog.Default().
	Logger *slog.Logger
	// Metrics records counters. Nil records none.
	Metrics *metrics.Recorder
	// NewToken makes claim tokens. Default: 128 random bits in hex.
	NewToken func() string
	// Ambiguous is each provider's AmbiguousPolicy, by name. A provider
	// not named gets provider.AmbiguousRetry.
	Ambiguous map[string]provider.AmbiguousPolicy
	// RecordWaits is what the consumer waits for the record of each
	// provider under provider.AmbiguousRecord, by name (provider.WaitFor).
	// Required for each such provider.
	RecordWaits map[string]provider.RecordWait
	// Records waits for and settles by a provider's record. Default the
	// Ledger, if it can; required under provider.AmbiguousRecord.
	Records RecordLedger
	// Limits paces each provider's sends, by name (this instance's share
	// of the stage's rate: ratelimit.Share of the rate among the paced
	// queue's instances). A record waits in-process for its turn, up to
	// what its invocation has left after SendTime; one whose turn comes
	// later is returned to its queue with that wait as its visibility,
	// unclaimed, spending no attempt. Default: no limits.
	Limits map[string]*ratelimit.Limiter
	// SendTime is what a record needs after its pacing wait (the provider
	// timeout and the ledger writes): a record waits for its turn only
	// while its context leaves that much after it. Default 11s.
	SendTime time.Duration
	// Circuit configures each provider's circuit breaker (Failures,
	// CoolDown, MaxCoolDown: circuit.Config's defaults, 5, 30s and 5m;
	// ProbeTimeout defaults to SendTime; Name, Clock and OnChange are the
	// consumer's). While a provider's circuit is open its records are
	// deferred until the next probe, unclaimed (Consumer.admit).
	Circuit circuit.Config
}

// Consumer handles delivery records. It implements batch.Handler.
type Consumer struct {
	cfg      Config
	circuits map[string]*circuit.Breaker // by provider
}

// New validates cfg, applies defaults and returns a Consumer.
func New(cfg Config) (*Consumer, error) {
	switch {
	case cfg.Ledger == nil:
		return nil, errors.New("consumer: Ledger is nil")
	case len(cfg.Providers) == 0:
		return nil, errors.New("consumer: no providers configured; configure at least one (NUDGE_PROVIDERS, and its variables)")
	case cfg.Queue == nil:
		return nil, errors.New("consumer: Queue (SQS client) is nil")
	case cfg.QueueURL == "":
		return nil, errors.New("consumer: work queue URL is empty; set NUDGE_QUEUE_URL")
	case cfg.DLQURL == "":
		return nil, errors.New("consumer: dead-letter queue URL is empty; set NUDGE_DLQ_URL")
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.MaxAttempts < 1 {
		return nil, fmt.Errorf("consumer: attempt budget %d is below 1", cfg.MaxAttempts)
	}
	if err := CheckReceiveMargin(cfg.MaxAttempts, cfg.MaxReceiveCount); cfg.MaxReceiveCount > 0 && err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if cfg.Backoff == nil {
		b, err := retry.New(retry.Config{})
		if err != nil {
			return nil, err
		}
		cfg.Backoff = b
	}
	if cfg.Classifier == nil {
		cfg.Classifier = awsfailure.Default
	}
	if cfg.EarlyWait == 0 {
		cfg.EarlyWait = 2 * time.Second
	}
	if cfg.EarlyWait < time.Second || cfg.EarlyWait > time.Minute {
		// Below a second, a message delayed in whole seconds (rounded
		// down) would come back early again and again until due.
		return nil, fmt.Errorf("consumer: early wait %v is outside 1s–1m; it is how long a record that arrives before its due time is held, and delays are whole seconds", cfg.EarlyWait)
	}
	if cfg.LateAfter == 0 {
		cfg.LateAfter = time.Minute
	}
	if cfg.Lease == 0 {
		cfg.Lease = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NewToken == nil {
		cfg.NewToken = randomToken
	}
	for name, p := range cfg.Ambiguous {
		if _, err := provider.ParseAmbiguousPolicy(string(p)); err != nil {
			return nil, fmt.Errorf("consumer: provider %q: %w", name, err)
		}
	}
	if err := checkRecordPolicies(&cfg); err != nil {
		return nil, err
	}
	if cfg.Routes.Default == "" {
		cfg.Routes = envelope.Routes{Default: cfg.QueueURL}
	}
	if cfg.SendTime == 0 {
		cfg.SendTime = 10*time.Second + LedgerAllowance
	}
	c := &Consumer{cfg: cfg}
	if err := c.newCircuits(); err != nil {
		return nil, err
	}
	return c, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ReceiveMargin is how many receives beyond the attempt budget the work
// queue's maxReceiveCount must allow: receives of a delivery that never
// reach the provider (left unstarted at the cut-off, refused by a lease
// another copy holds, a throttled claim or ledger write, a FIFO deferral by
// visibility). Past maxReceiveCount SQS moves the message to the DLQ
// without a reason; the ledger still shows the delivery live, and the
// enqueue's repair publishes it again once it is overdue.
const ReceiveMargin = 3

// CheckReceiveMargin reports whether a queue's maxReceiveCount leaves
// ReceiveMargin receives beyond the attempt budget.
func CheckReceiveMargin(maxAttempts, maxReceiveCount int) error {
	if maxReceiveCount < maxAttempts+ReceiveMargin {
		return fmt.Errorf("the queue's maxReceiveCount %d must be at least the attempt budget %d plus %d receives that may not reach the provider (%d); raise maxReceiveCount or lower the budget, or SQS moves messages to the DLQ without a recorded reason",
			maxReceiveCount, maxAttempts, ReceiveMargin, maxAttempts+ReceiveMargin)
	}
	return nil
}

// record is the state of one record's handling, for logs.
type record struct {
	rec      events.SQSMessage
	receives int // the message's ApproximateReceiveCount
	attempts int // the delivery's provider attempts, this one included, once claimed
	used     int // of those, the ones counted against the budget (since the last redrive)
	channel  string
	dueAt    time.Time // the claimed delivery's due time
	late     bool
	// started, claimed and accepted are when the handling began (after
	// any hold, for an early record), when the claim returned, and when
	// the provider accepted: with the queue's first receive, where a sent
	// delivery's time went (logged with its transition).
	started, claimed, accepted time.Time
	log                        *slog.Logger
}

// Handle processes one SQS record. It returns nil when the record may be
// deleted (sent, duplicate, expired, deferred, or dead-lettered with its
// reason recorded) and an error, usually carrying a retry delay, otherwise.
func (c *Consumer) Handle(ctx context.Context, rec events.SQSMessage) error {
	c.cfg.Metrics.Add(MetricReceived, 1)
	r := &record{rec: rec, receives: receiveCount(rec)}
	r.log = c.cfg.Logger.With("messageId", rec.MessageId, "receive", r.receives)
	o := c.handle(ctx, r)
	c.report(r, o)
	return o.Err
}

// handle decides the record's outcome: every path ends in one.
func (c *Consumer) handle(ctx context.Context, r *record) Outcome {
	msg, err := message.Decode([]byte(r.rec.Body))
	if err != nil {
		return c.deadLetter(ctx, r, nil, failure.ClassDecode, err.Error())
	}
	key := msg.Key()
	r.channel = msg.Channel
	r.log = r.log.With("deliveryKey", key.String(), "dueAt", ledger.Format(msg.DueAt))
	if to, ok := c.cfg.Routes.Misrouted(msg.Provider, r.rec.EventSourceARN); ok {
		return c.forward(ctx, r, msg, to)
	}
	now := c.cfg.Clock.Now()
	if early := msg.DueAt.Sub(now); early > 0 {
		if early > c.cfg.EarlyWait || !c.fits(ctx, early) {
			return c.deferUntil(ctx, r, msg, msg.DueAt)
		}
		// A moment early (a delay rounded down, a batch gathered, a clock
		// a little ahead): held here until due, so that it goes out on
		// time and not a second or more late from the queue.
		c.cfg.Metrics.Observe(MetricEarlyHeld, early.Seconds())
		select {
		case <-c.cfg.Clock.After(early):
		case <-ctx.Done():
			return Outcome{Err: failure.Retryable(ctx.Err(), 0)}
		}
		now = c.cfg.Clock.Now()
	}
	r.started = now
	prov, ok := c.cfg.Providers[msg.Provider]
	if !ok {
		return c.deadLetter(ctx, r, &ledger.Delivery{ReminderID: key.ReminderID, Channel: key.Channel, Provider: key.Provider},
			failure.ClassConfig, fmt.Sprintf("no provider %q is configured in this consumer", msg.Provider))
	}

	// A message the heartbeat already lost (another consumer may have it)
	// is not claimed: the claim would spend an attempt on a send that
	// cannot start.
	if err := context.Cause(heartbeat.Watched(ctx)); err != nil && ctx.Err() == nil {
		return Outcome{Err: failure.Retryable(err, 0)}
	}
	// A provider whose circuit is open is not sent to: the record waits,
	// unclaimed, for the next probe.
	ticket, o, ok := c.admit(ctx, r, msg)
	if !ok {
		return o
	}
	defer ticket.Release() // a record that never reaches the send says nothing
	if lim := c.cfg.Limits[msg.Provider]; lim != nil {
		if o, ok := c.pace(ctx, r, lim); !ok {
			return o
		}
		now = c.cfg.Clock.Now() // after the wait for its turn: the lease and the lateness count from here
	}
	d, err := c.cfg.Ledger.Claim(ctx, ledger.Claim{
		Key: key, Token: c.cfg.NewToken(), LeaseUntil: c.leaseUntil(ctx, now),
		DueBy: now,
		// Only a message back from the DLQ may revive a dead delivery, and
		// only the dead-lettering its attributes record.
		Revive:         r.rec.MessageAttributes[deadletter.AttrErrorClass].StringValue != nil,
		ReviveAttempts: reviveAttempts(r.rec),
	})
	if err != nil {
		return c.refusedClaim(ctx, r, msg, err)
	}
	r.attempts, r.used, r.dueAt, r.claimed = d.Attempts, d.BudgetUsed(), d.DueAt, c.cfg.Clock.Now()
	r.log = r.log.With("attempt", r.attempts)
	// Never outside its send window: a claim made while it is shut (a
	// message back from a retry, a lapsed lease or the DLQ, a fallback
	// taken at night) is given back, the attempt unspent, until it opens.
	if o, shut := c.windowShut(ctx, r, d, now); shut {
		return o
	}
	if late := now.Sub(d.DueAt); late > c.cfg.LateAfter {
		r.late = true
		r.log = r.log.With("lateBy", late.Round(time.Second).String())
	}
	if d.LapsedLeaseTaken() {
		// The attempt before this one claimed the delivery and never
		// recorded an end: its consumer died or lost the message, maybe
		// after the provider accepted.
		c.cfg.Metrics.AddBy(MetricAmbiguous, 1, map[string]string{"Provider": d.Provider})
		if c.policy(d.Provider) == provider.AmbiguousReview {
			return c.deadLetter(ctx, r, &d, failure.ClassAmbiguous, fmt.Sprintf(
				"may have been sent (attempt %d ended without a record); %s does not deduplicate, so it is not sent again: check the provider's record, then redrive to send or leave it dead",
				r.attempts-1, d.Provider))
		}
	}
	if c.policy(d.Provider) == provider.AmbiguousRecord {
		// The provider reported a message of this delivery: it accepted
		// one under this key, whatever brought this claim (a wait, a lapsed
		// lease, a redriven DLQ copy of a delivery the feedback function
		// had not yet settled). It is recorded sent, not sent again.
		if reported(d) {
			return c.settleByRecord(ctx, d)
		}
		// An ambiguous attempt before this claim: the provider's record
		// decides whether this one sends.
		if start, ok := awaitedSince(d); ok {
			if o, done := c.byRecord(ctx, r, d, start); done {
				return o
			}
		}
	}

	// The send stops if the heartbeat loses the message (another consumer
	// may receive it); the ledger writes after it do not.
	receipt, sendErr := prov.Send(heartbeat.Watched(ctx), provider.Request{
		DeliveryKey: key.String(), ReminderID: d.ReminderID, Channel: d.Channel,
		RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, DueAt: d.DueAt, Attempt: r.attempts,
		Address: d.Address, TemplateData: d.TemplateData,
	}, key.String())
	ticket.Record(c.verdict(ctx, sendErr))
	if sendErr == nil {
		r.accepted = c.cfg.Clock.Now()
		return c.complete(ctx, r, d, receipt)
	}
	return c.failed(ctx, r, d, sendErr)
}

// fits reports whether a record held for wait still has SendTime of its
// invocation left after it.
func (c *Consumer) fits(ctx context.Context, wait time.Duration) bool {
	// wall clock: the deadline is the invocation's, on Lambda's clock
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl)-wait >= c.cfg.SendTime // wall clock: as above
}

// leaseUntil is when a claim made at now on the consumer's clock lapses:
// 5 s after the invocation's deadline, or Lease after now.
func (c *Consumer) leaseUntil(ctx context.Context, now time.Time) time.Time {
	// wall clock: the deadline is the invocation's, on Lambda's clock; the
	// time left of it counts from now, on the consumer's.
	if dl, ok := ctx.Deadline(); ok {
		return now.Add(time.Until(dl) + 5*time.Second) // wall clock: as above
	}
	return now.Add(c.cfg.Lease)
}

// refusedClaim acts on a claim the ledger refused.
func (c *Consumer) refusedClaim(ctx context.Context, r *record, msg message.Message, err error) Outcome {
	var re *ledger.RefusedError
	if !errors.As(err, &re) {
		o := c.cfg.Classifier.Classify(err)
		// Nothing reached the provider: back off by receives.
		delay := c.cfg.Backoff.Delay(r.receives, o.RetryAfter)
		return Outcome{Transition: Retry, Class: o.Class, Next: delay, Error: err.Error(),
			Err: failure.Retryable(failure.WithClass(err, o.Class), delay)}
	}
	cur := re.Current
	switch {
	case errors.Is(err, ledger.ErrAlreadySent), errors.Is(err, ledger.ErrFinished), errors.Is(err, ledger.ErrHeld),
		errors.Is(err, ledger.ErrFallbackTaken):
		// A held fallback is sent only once taken, which no message of
		// Nudge's precedes: a message naming one is acknowledged. So is a
		// DLQ copy of a dead primary whose fallback was taken: the
		// fallback stands in for it.
		return Outcome{Transition: Duplicate, Status: cur.Status}
	case errors.Is(err, ledger.ErrNotDue):
		return c.deferUntil(ctx, r, msg, cur.DueAt)
	case errors.Is(err, ledger.ErrExpired):
		// cur carries the claim token of whoever holds it: the ledger never
		// takes it for this copy's lease, and refuses while that holder may
		// still be sending.
		_, xerr := c.cfg.Ledger.Expire(ctx, cur)
		var xre *ledger.RefusedError
		switch {
		case xerr == nil:
			return Outcome{Transition: Expired, ExpiresAt: cur.ExpiresAt}
		case errors.As(xerr, &xre) && errors.Is(xerr, ledger.ErrLeased):
			// Being sent: its holder ends it. This copy comes back after
			// the lease, to find it ended (or expire it, if the holder died).
			wait := max(xre.Current.LeaseUntil.Sub(c.cfg.Clock.Now())+time.Second, time.Second).Round(time.Second)
			return Outcome{Transition: Leased, Next: wait, Err: failure.Retryable(xerr, wait)}
		case errors.Is(xerr, ledger.ErrNotExpired):
			// Rescheduled since the claim read it: the next receive claims
			// it at its new time (or defers until then).
			return Outcome{Err: failure.Retryable(xerr, time.Second)}
		case errors.As(xerr, &xre) && xre.Current.Status == ledger.StatusExpired:
			return Outcome{Transition: Expired, ExpiresAt: xre.Current.ExpiresAt}
		case errors.As(xerr, &xre) && xre.Current.Status.Terminal():
			return Outcome{Transition: Duplicate, Status: xre.Current.Status}
		}
		return Outcome{Err: failure.Retryable(xerr, 0)}
	case errors.Is(err, ledger.ErrLeased):
		wait := max(cur.LeaseUntil.Sub(c.cfg.Clock.Now())+time.Second, time.Second).Round(time.Second)
		return Outcome{Transition: Leased, Next: wait, Err: failure.Retryable(err, wait)}
	case errors.Is(err, ledger.ErrNotFound):
		return c.deadLetter(ctx, r, nil, failure.ClassNotFound, "no delivery "+re.Key.String()+" in the ledger")
	}
	return Outcome{Err: failure.Retryable(err, 0)}
}

// isSettled reports whether a refused write means someone else already
// brought the delivery to an end.
func isSettled(err error) bool {
	return errors.Is(err, ledger.ErrAlreadySent) || errors.Is(err, ledger.ErrFinished)
}

func (c *Consumer) complete(ctx context.Context, r *record, d ledger.Delivery, receipt provider.Receipt) Outcome {
	_, err := c.cfg.Ledger.Complete(ctx, d, receipt.ID)
	switch {
	case err == nil:
		return Outcome{Transition: Sent}
	case errors.Is(err, ledger.ErrAlreadySent), errors.Is(err, ledger.ErrLeaseLost):
		// Another attempt holds or finished the delivery; it sends with the
		// same idempotency key, so this copy of the message is done.
		return Outcome{Transition: Duplicate, Reason: err.Error()}
	}
	// The provider accepted but the ledger did not record it: retry. The
	// retry sends the same idempotency key, which the webhook's receiver
	// and an SNS FIFO topic deduplicate; for SES the retry's claim finds
	// this attempt's lapsed lease and, under review, sends nothing.
	return Outcome{Transition: Retry, Class: failure.ClassAWS, Error: err.Error(), Err: failure.Ambiguous(err)}
}

func (c *Consumer) failed(ctx context.Context, r *record, d ledger.Delivery, sendErr error) Outcome {
	o := c.cfg.Classifier.Classify(sendErr)
	if o.Kind == failure.KindPermanent {
		return c.deadLetter(ctx, r, &d, o.Class, sendErr.Error())
	}
	if o.Class == failure.ClassPaused {
		c.cfg.Metrics.AddBy(MetricPaused, 1, map[string]string{"Provider": d.Provider})
	}
	if o.Kind == failure.KindAmbiguous {
		c.cfg.Metrics.AddBy(MetricAmbiguous, 1, map[string]string{"Provider": d.Provider})
		switch c.policy(d.Provider) {
		case provider.AmbiguousReview:
			return c.deadLetter(ctx, r, &d, failure.ClassAmbiguous, fmt.Sprintf(
				"may have been sent (%s: %v); %s does not deduplicate, so it is not sent again: check the provider's record, then redrive to send or leave it dead",
				o.Class, sendErr, d.Provider))
		case provider.AmbiguousRecord:
			// Not sent again before the provider's record has had its
			// window; the next claim decides by it (byRecord).
			r.log.Info("may have been sent; waiting for the provider's record", "class", string(o.Class), "error", sendErr.Error())
			return c.awaitRecord(ctx, r, d, c.cfg.RecordWaits[d.Provider].Window, false)
		}
	}
	if r.used >= c.cfg.MaxAttempts {
		return c.deadLetter(ctx, r, &d, failure.ClassExhausted,
			fmt.Sprintf("attempts exhausted (%d of %d); last failure %s: %v", r.used, c.cfg.MaxAttempts, o.Class, sendErr))
	}
	delay := c.cfg.Backoff.Delay(r.used, o.RetryAfter)
	now := c.cfg.Clock.Now()
	next := now.Add(delay)
	if opens := windowAfter(d, next); opens.After(next) {
		// A retry that would land outside the window waits for it: the
		// ledger says when; the message comes back within SQS's longest
		// delay, and a claim before the opening gives itself back.
		next, delay = opens, min(opens.Sub(now), retry.MaxDelay)
	}
	if _, err := c.cfg.Ledger.Retry(ctx, d, ledger.Failure{Class: o.Class, Message: sendErr.Error(), NextAttemptAt: next}); err != nil && !errors.Is(err, ledger.ErrLeaseLost) {
		if isSettled(err) {
			return Outcome{Transition: Duplicate, Reason: err.Error()}
		}
		r.log.Warn("could not record the retry in the ledger; the message is retried anyway", "error", err.Error())
	}
	return Outcome{Transition: Retry, Kind: o.Kind, Class: o.Class, Next: delay, Error: sendErr.Error(),
		Err: &failure.Error{Kind: o.Kind, Class: o.Class, After: delay, Err: sendErr}}
}

// policy returns the AmbiguousPolicy of the provider called name.
func (c *Consumer) policy(name string) provider.AmbiguousPolicy {
	if p, ok := c.cfg.Ambiguous[name]; ok {
		return p
	}
	return provider.AmbiguousRetry
}

// pace waits in-process for the provider's rate limit, up to what the
// invocation leaves after the send's own time (SendTime), or for as long as
// it takes without a deadline. A record whose turn comes later is returned
// to its queue with the wait, in whole seconds rounded up, as its
// visibility (ok false): unclaimed, so no attempt is spent. That costs a
// receive, which the paced queue's batch size makes rare: a batch is what
// one instance sends at its share of the rate in an invocation
// (deployment.ProviderQueue). Nothing is re-published.
func (c *Consumer) pace(ctx context.Context, r *record, lim *ratelimit.Limiter) (Outcome, bool) {
	maxWait := time.Duration(math.MaxInt64)
	// wall clock: the deadline is the invocation's, on Lambda's clock
	if dl, ok := ctx.Deadline(); ok {
		maxWait = time.Until(dl) - c.cfg.SendTime // wall clock: as above
	}
	wait, ok := lim.Reserve(max(maxWait, 0))
	if ok {
		if wait > 0 {
			select {
			case <-c.cfg.Clock.After(wait):
			case <-ctx.Done():
				return Outcome{Err: failure.Retryable(ctx.Err(), 0)}, false
			}
		}
		return Outcome{}, true
	}
	c.cfg.Metrics.Add(MetricPaced, 1)
	delay := time.Duration(ceilSeconds(min(wait, retry.MaxDelay))) * time.Second
	return Outcome{Transition: Deferred, Next: delay, Via: "visibility", Reason: "rate limit",
		Err: failure.Retryable(errors.New("rate limit: no turn in this invocation"), delay)}, false
}

// forward sends a record that arrived on another work queue than its
// provider's (in flight across the deploy that gave the provider its
// queue, or redriven to the default work queue) to its provider's queue,
// delayed until due and with its attributes, and acknowledges it. It is
// never sent from the wrong queue: a paced provider's rate is shared by
// its own queue's instances alone.
func (c *Consumer) forward(ctx context.Context, r *record, msg message.Message, to string) Outcome {
	env := envelope.Build(envelope.Spec{Kind: envelope.KindOf(to), Body: r.rec.Body, Delay: msg.DueAt.Sub(c.cfg.Clock.Now()),
		Attributes: envelope.Kept(r.rec.MessageAttributes), Dedup: envelope.ForForward(r.rec.Attributes["MessageGroupId"], r.rec.MessageId)})
	if _, err := c.cfg.Queue.SendMessage(ctx, env.Send(to)); err != nil {
		return Outcome{Err: failure.Retryable(err, 0)}
	}
	c.cfg.Metrics.Add(MetricForwarded, 1)
	return Outcome{Transition: Deferred, Next: time.Duration(env.DelaySeconds) * time.Second, Via: "forward", Reason: "to " + envelope.QueueName(to)}
}

// reviveAttempts is the attempt count a dead letter recorded, 0 if it has
// none (a message SQS moved itself, or one dead-lettered before a claim).
func reviveAttempts(rec events.SQSMessage) int {
	a := rec.MessageAttributes[deadletter.AttrAttempts]
	if a.StringValue == nil {
		return 0
	}
	n, err := strconv.Atoi(*a.StringValue)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// deadLetter sends the original body to the DLQ with the reason, then
// records it in the ledger (when d is known), and acknowledges. If either
// step fails, the record is retried: nothing is lost, at worst the DLQ gets
// the message twice.
func (c *Consumer) deadLetter(ctx context.Context, r *record, d *ledger.Delivery, class failure.Class, reason string) Outcome {
	letter := deadletter.Letter{Class: class, Reason: reason, Attempts: r.attempts, Receives: r.receives, SourceMessageID: r.rec.MessageId}
	if d != nil {
		letter.DeliveryKey = d.Key().String()
	}
	body := r.rec.Body
	if body == "" {
		body = "(empty body)" // SQS refuses empty bodies
	}
	// A FIFO queue's DLQ is FIFO too: the letter keeps the record's group.
	env := envelope.Build(envelope.Spec{Kind: envelope.KindOf(c.cfg.DLQURL), Body: body, Attributes: letter.Attributes(),
		Dedup: envelope.ForDeadLetter(r.rec.Attributes["MessageGroupId"], r.rec.MessageId)})
	if _, err := c.cfg.Queue.SendMessage(ctx, env.Send(c.cfg.DLQURL)); err != nil {
		r.log.Error("could not dead-letter; the message stays on the work queue", "errorClass", class, "error", err.Error())
		return Outcome{Err: failure.Retryable(err, 0)}
	}
	if d != nil {
		if _, err := c.cfg.Ledger.DeadLetter(ctx, *d, ledger.Failure{Class: class, Message: reason}); err != nil && !isSettled(err) && !errors.Is(err, ledger.ErrLeased) && !errors.Is(err, ledger.ErrNotFound) {
			r.log.Error("dead-lettered, but the ledger write failed; retrying", "error", err.Error())
			return Outcome{Err: failure.Retryable(err, 0)}
		}
	}
	return Outcome{Transition: Dead, Class: class, Reason: reason}
}

// deferUntil handles a message that arrived before dueAt, without spending
// a receive: re-published with a delay when due within 15 minutes (FIFO
// queues, which have no per-message delay, get a visibility delay instead),
// otherwise handed back to the calendar.
func (c *Consumer) deferUntil(ctx context.Context, r *record, msg message.Message, dueAt time.Time) Outcome {
	// wait may be anything up to the largest Duration (a due time decades
	// or centuries ahead): it becomes whole seconds only once it is known
	// to be within SQS's limits.
	wait := dueAt.Sub(c.cfg.Clock.Now())
	if r.rec.Attributes["MessageGroupId"] != "" && wait <= retry.MaxDelay {
		// Whole seconds, rounded down as a delay is: back up to a second
		// early, and held until due (EarlyWait). At least a second: a
		// visibility of 0 would leave the message's own (minutes).
		return Outcome{Transition: Deferred, Next: wait.Round(time.Second), Via: "visibility",
			Err: failure.Retryable(errors.New("not yet due"), max(wait.Truncate(time.Second), time.Second))}
	}
	if wait <= envelope.MaxDelaySeconds*time.Second {
		msg.DueAt = dueAt
		body, err := message.Encode(msg)
		if err != nil {
			return c.deadLetter(ctx, r, nil, failure.ClassDecode, err.Error())
		}
		// Standard: a FIFO message waits by its visibility (above) up to 12 h.
		env := envelope.Build(envelope.Spec{Kind: envelope.Standard, Body: string(body), Delay: wait})
		if _, err := c.cfg.Queue.SendMessage(ctx, env.Send(c.cfg.Routes.For(msg.Provider))); err != nil {
			return Outcome{Err: failure.Retryable(err, 0)}
		}
		return Outcome{Transition: Deferred, Next: time.Duration(env.DelaySeconds) * time.Second, Via: "republish"}
	}
	_, err := c.cfg.Ledger.Release(ctx, msg.Key(), dueAt, "released: due "+ledger.Format(dueAt))
	switch {
	case err == nil:
	case isSettled(err), errors.Is(err, ledger.ErrNotReleasable):
		return Outcome{Transition: Duplicate, Reason: err.Error()}
	case errors.Is(err, ledger.ErrNotFound):
		return c.deadLetter(ctx, r, nil, failure.ClassNotFound, "no delivery "+msg.Key().String()+" in the ledger")
	default:
		return Outcome{Err: failure.Retryable(err, 0)}
	}
	return Outcome{Transition: Deferred, Next: wait.Round(time.Second), Via: "calendar"}
}

// ceilSeconds is d in whole seconds, rounded up; d is at most 12 hours.
func ceilSeconds(d time.Duration) int32 {
	return int32((max(d, 0) + time.Second - 1) / time.Second)
}

func receiveCount(rec events.SQSMessage) int {
	n, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}
