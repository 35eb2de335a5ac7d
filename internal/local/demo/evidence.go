package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/status"
)

// evidence gathers what the run left behind, for the checker: the ledger
// (once SES's events are recorded in it) and the DLQ, read as an operator
// would; the work queue; each provider's own record (channels.evidence);
// the outcome events; the kills; the functions' logs; and the problems the
// run met on the way.
func (r *run) evidence(ctx context.Context) (check.Evidence, error) {
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	ev := check.Evidence{End: time.Now(), Ledger: map[message.DeliveryKey]ledger.Delivery{}, PoisonIDs: r.poisonIDs,
		Kills: r.kills.killed(), InvocationTimeout: r.cfg.ConsumerTimeout, Budget: r.h.Stage.MaxAttempts}
	// SES's events of every e-mail sent so far are recorded before the
	// ledger is read: a sent e-mail without its feedback is then one the
	// path lost (the outcomes' drain below waits for these writes too).
	// Its wait outlasts the feedback queue's visibility timeout: a receive
	// the local mapping lost (fauxqs closes a long poll's connection now
	// and then) hides its records until then, as in AWS.
	drain, cancel := context.WithTimeout(ctx, deployment.VisibilityFactor*r.h.Stage.FeedbackTimeout+time.Minute)
	err := r.h.DrainFeedback(drain)
	cancel()
	if err != nil {
		r.problems.add("the feedback function did not record SES's events: %v", err)
	}
	ev.FeedbackRead = err == nil && r.h.FeedbackMapping != nil
	if err := r.h.Ledger.ScanDeliveries(ctx, func(d ledger.Delivery) error {
		ev.Ledger[d.Key()] = d
		return nil
	}); err != nil {
		return ev, err
	}
	// The series, as an operator reads one (nudge reminder show).
	for _, rem := range r.plan.reminders {
		if !rem.kind.series() {
			continue
		}
		st, err := r.h.Ledger.ReadReminder(ctx, rem.id)
		if err != nil {
			return ev, err
		}
		if st.Series != nil {
			if ev.Series == nil {
				ev.Series = map[string]ledger.Series{}
			}
			ev.Series[rem.id] = *st.Series
		}
	}
	if ev.DLQ, err = readDLQ(ctx, r.h.SQS, r.h.Resources, 20*time.Second, r.problems.add); err != nil {
		return ev, err
	}
	if err := r.ch.evidence(ctx, r.started, &ev); err != nil {
		return ev, err
	}
	// Every change made so far reaches the outcomes function before the
	// events are read: a change without its event is then one the bus
	// never got.
	drain, cancel = context.WithTimeout(ctx, 2*time.Minute)
	err = r.h.DrainOutcomes(drain)
	cancel()
	if err != nil {
		r.problems.add("the outcomes function did not catch up with the ledger's stream: %v", err)
	}
	if ev.Events, err = readEvents(ctx, r.h.SQS, r.h.Resources.OutcomesURL, r.problems.add); err != nil {
		return ev, err
	}
	ev.EventsRead = true
	if work, err := r.h.WorkDepth(ctx); err != nil {
		ev.QueueLeft = -1
	} else {
		ev.QueueLeft = work.Total()
	}
	ev.BatchFailures = r.h.MappingStats().BatchFailures
	ev.ErrorLines = append(r.logs.mappingErrors.Lines(), r.logs.consumer.errorLines()...)
	ev.LedgerFailed = r.logs.consumer.ledgerFailed()
	ev.PublishFailed = r.logs.enqueue.metric(enqueue.MetricPublishFailed)
	ev.Problems, ev.Stall = r.problems.all(), r.stall.lastReport() // after the events, whose reads may add problems
	return ev, nil
}

// readDLQ reads every DLQ message, as an operator's review does: read,
// then made visible again. A receive whose answer is lost hides its
// messages for the read's hold, and one run's reads each came back ten
// short, as if they had (docs/reliability.md, "Found by the chaos run"). So
// a read that returns fewer messages than the queue counts is repeated once
// its hold has ended, and up to three reads are joined by message id. If
// they never add up to the whole DLQ, the run says so as its own problem
// instead of blaming the consumer. The hold is at least minHold, and a
// second for every 100 messages, so that a read of a large DLQ is likely to
// end before the first messages it hid reappear (fauxqs reads about 500
// messages a second when idle); at 10,000 messages (a 100 s hold) the worst
// case, three reads of about 20 s and two waits of 101 s, is under 5 minutes.
func readDLQ(ctx context.Context, q *sqs.Client, res local.Provisioned, minHold time.Duration,
	problem func(format string, args ...any)) ([]check.DeadLetter, error) {
	const reads = 3
	byID := map[string]check.DeadLetter{}
	var ids []string // in the order first read
	for n := 1; ; n++ {
		depth, err := status.QueueDepth(ctx, q, res.DLQURL)
		if err != nil {
			return nil, fmt.Errorf("demo: read the DLQ: %w", err)
		}
		hold := max(minHold, time.Duration(depth.Total()/100)*time.Second)
		r, err := redrive.New(redrive.Config{Queue: q, DLQURL: res.DLQURL, TargetURL: res.WorkURL, Routes: res.Routes(), ReviewHold: hold})
		if err != nil {
			return nil, err
		}
		got, err := r.List(ctx, 1_000_000)
		if err != nil && !errors.Is(err, redrive.ErrNotReleased) {
			return nil, fmt.Errorf("demo: read the DLQ: %w", err)
		}
		// What could not be released reappears after the hold: a read that
		// outlasted its hold costs the next read nothing.
		// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
		read := time.Now()
		// One dead letter per message: the review folds the copies of a
		// delivery into one letter, the checker counts each.
		count := 0
		for _, l := range got {
			key, _ := message.ParseDeliveryKey(l.DeliveryKey)
			for _, m := range l.Messages() {
				count++
				if _, ok := byID[m.MessageID]; ok {
					continue
				}
				byID[m.MessageID] = check.DeadLetter{Key: key, Class: l.ErrorClass, Reason: l.Reason, Source: m.SourceMessageID}
				ids = append(ids, m.MessageID)
			}
		}
		if len(byID) >= depth.Total() {
			break
		}
		if n == reads {
			problem("the DLQ holds %d messages (visible %d, in flight %d, delayed %d), and %d reads returned %d of them (the last read %d): "+
				"the checks below judge those",
				depth.Total(), depth.Visible, depth.InFlight, depth.Delayed, reads, len(byID), count)
			break
		}
		// Whatever this read's lost receives hid is visible again once its
		// hold has ended.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(read.Add(hold + time.Second))):
		}
	}
	out := make([]check.DeadLetter, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out, nil
}
