package enqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// scanOverdue reads, per shard, the live entries more than OverdueAfter past
// due: it counts them (OverduePending, OldestOverdue), and those behind the
// cursor whose hand-off looks lost (RepairAfter) or that have expired are
// read from the table and repaired or expired. It reports whether every
// shard was scanned in full.
func (r *run) scanOverdue(ctx context.Context, shards int) (bool, error) {
	c := r.e.cfg
	perShard := max(1, c.RepairLimit/shards)
	var wg sync.WaitGroup
	var mu sync.Mutex
	full := true
	var errs []error
	sem := make(chan struct{}, c.Concurrency)
	for shard := range shards {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			done, err := r.scanShard(ctx, shard, perShard)
			mu.Lock()
			defer mu.Unlock()
			full = full && done
			if err != nil && !r.interrupted(err) {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return full, errors.Join(errs...)
}

func (r *run) scanShard(ctx context.Context, shard, limit int) (bool, error) {
	c := r.e.cfg
	overdueBefore := r.now.Add(-c.OverdueAfter)
	repairBefore := r.now.Add(-c.RepairAfter)
	r.mu.Lock()
	cur, known := r.cursor[shard]
	r.mu.Unlock()
	if !known {
		var err error
		if cur, err = c.Ledger.Cursor(ctx, shard); err != nil {
			return false, err
		}
	}
	// Handed off at least RepairAfter ago: what lies between this and the
	// cursor was handed off since, and its message is fresh however long
	// past due it is.
	settled := handedOffBy(cur, repairBefore)
	var overdue, deferred int
	var oldest time.Duration
	var candidates []ledger.IndexEntry
	inBudget := func() bool { return c.Clock.Now().Before(r.stopBy) && ctx.Err() == nil }
	if !inBudget() {
		return false, nil
	}
	full, err := c.Ledger.DueBy(ctx, shard, overdueBefore, func(page []ledger.IndexEntry) bool {
		for _, en := range page {
			if en.DueAt.Before(overdueBefore) {
				overdue++
				oldest = max(oldest, r.now.Sub(en.DueAt))
			}
			expired := !en.ExpiresAt.After(r.now)
			switch {
			case en.Sort <= cur.Pos && expired:
				candidates = append(candidates, en)
			case en.Sort <= settled && en.DueAt.Before(repairBefore) && r.backlogged[en.Key.Provider]:
				deferred++ // behind its queue's backlog: waiting, not lost
			case en.Sort <= settled && en.DueAt.Before(repairBefore):
				candidates = append(candidates, en)
			}
		}
		return inBudget() // another page only within the time budget
	})
	if err != nil {
		return false, fmt.Errorf("enqueue: scan shard %d for overdue deliveries: %w", shard, err)
	}
	r.add(func(rep *Report) {
		rep.OverduePending += overdue
		rep.OldestOverdue = max(rep.OldestOverdue, oldest)
		rep.RepairsDeferred += deferred
	})
	// Examine at most limit candidates, starting at an offset that rotates
	// each minute, so that many deliveries legitimately waiting for a retry
	// cannot keep a lost one from ever being looked at. This is a bound,
	// not a cut: the report's Cut stays for the time budget alone.
	if len(candidates) > limit {
		// A window of limit that moves by limit each minute: every
		// candidate is looked at within len/limit runs.
		n := int64(len(candidates))
		off := int(r.now.Unix() / 60 % n * (int64(limit) % n) % n)
		candidates = append(candidates[off:], candidates[:off]...)[:limit]
	}
	for start := 0; start < len(candidates); start += 100 {
		if !c.Clock.Now().Before(r.stopBy) || ctx.Err() != nil {
			return false, nil
		}
		if err := r.repair(ctx, candidates[start:min(start+100, len(candidates))]); err != nil {
			return false, err
		}
	}
	return full, nil
}

// stale reports whether d was handed off but no consumer has it: nothing
// took it RepairAfter after the last thing known to precede its hand-off
// (since).
//
// Each repair since the last claim doubles that window (repairWait): a
// delivery not claimed within it is as often waiting behind a backlog as
// lost, and a copy per window would lengthen the very backlog that delays
// it. Doubling bounds the copies to a few per delivery however long the
// queue is. A delivery close to its expiry is not left waiting past half
// the time it has left, so that it gets its copies while they can still
// be sent.
func (r *run) stale(d ledger.Delivery) bool {
	window := r.e.cfg.RepairAfter
	var since time.Time
	switch d.Status {
	case ledger.StatusPending:
		// Handed off by a cursor, which writes nothing: not before it was
		// due, written, or published to the index.
		since = later(d.DueAt, d.UpdatedAt)
		if d.Index != nil {
			since = later(since, d.Index.PublishAt)
		}
	case ledger.StatusQueued:
		since = later(d.DueAt, d.UpdatedAt) // the requeue or redrive
	case ledger.StatusSending:
		since = d.LeaseUntil
	case ledger.StatusRetrying:
		since = d.NextAttemptAt
	default:
		return false
	}
	wait := repairWait(window, d.Repairs)
	if !d.ExpiresAt.IsZero() {
		wait = min(wait, max(window, d.ExpiresAt.Sub(since)/2))
	}
	return since.Before(r.now.Add(-wait))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// trail is the cursor's trail after a move from cur at now: cur's position
// is marked (every entry up to it handed off by cur.MovedAt) once the
// newest mark is half a RepairAfter old, and the newest ledger.MaxTrail
// marks are kept. Every position is so marked within half a window of
// being passed, or the cursor stays there: handedOffBy then knows each
// hand-off at most one and a half windows after it was made.
func (e *Enqueuer) trail(cur ledger.Cursor, now time.Time) []ledger.Mark {
	t := cur.Trail
	if cur.Pos == "" {
		return t // nothing handed off yet
	}
	if n := len(t); n > 0 && now.Sub(t[n-1].At) < e.cfg.RepairAfter/2 {
		return t
	}
	t = append(slices.Clone(t), ledger.Mark{Pos: cur.Pos, At: cur.MovedAt})
	return t[max(0, len(t)-ledger.MaxTrail):]
}

// handedOffBy is the furthest position the cursor cur is known to have
// passed by the time by: everything at or before it was handed off by
// then. A cursor that has not moved since is there; otherwise its trail
// says, and with no mark that old, nothing is known to be ("").
func handedOffBy(cur ledger.Cursor, by time.Time) string {
	if !cur.MovedAt.After(by) {
		return cur.Pos
	}
	for i := len(cur.Trail) - 1; i >= 0; i-- {
		if !cur.Trail[i].At.After(by) {
			return cur.Trail[i].Pos
		}
	}
	return ""
}

// maxRepairDoublings caps the back-off between repairs at 16 × RepairAfter
// (2 h 40 min at the default 10 min), so that a delivery whose message was
// lost again is still repaired within its expiry.
const maxRepairDoublings = 4

// repairWait is how long a delivery repaired n times since its last claim
// waits before the next repair: window, 2 × window, 4 × window, …, up to
// 2^maxRepairDoublings × window.
func repairWait(window time.Duration, n int) time.Duration {
	shift := min(max(n, 0), maxRepairDoublings)
	if window > math.MaxInt64>>shift {
		return math.MaxInt64 // a window of centuries, doubled
	}
	return window << shift
}

// repair reads candidates from the table and, for each, expires it or, if
// its hand-off is lost, requeues it (a condition on the state it was read
// in, so that of two runs only one republishes) and publishes it again.
func (r *run) repair(ctx context.Context, candidates []ledger.IndexEntry) error {
	c := r.e.cfg
	keys := make([]message.DeliveryKey, len(candidates))
	for i, en := range candidates {
		keys[i] = en.Key
	}
	ds, err := c.Ledger.GetMany(ctx, keys)
	if err != nil {
		return fmt.Errorf("enqueue: read overdue deliveries: %w", err)
	}
	var republish []ledger.IndexEntry
	for _, en := range candidates {
		d, ok := ds[en.Key]
		if !ok || d.Status.Terminal() {
			continue // ended since the index was read
		}
		if !d.ExpiresAt.After(r.now) {
			r.expire(ctx, d)
			continue
		}
		if !r.stale(d) {
			continue
		}
		if ctx.Err() != nil {
			break // the reserve began: requeue nothing more
		}
		note := fmt.Sprintf("repair %d: %s and untouched since %s", d.Repairs+1, d.Status, ledger.Format(d.UpdatedAt))
		// A requeue and the publish after it run under r.finish, as a
		// hand-off page does; one cut between them is repaired again.
		if _, err := c.Ledger.Requeue(r.finish, d, note); err != nil {
			if !errors.As(err, new(*ledger.RefusedError)) {
				c.Logger.Warn("cannot requeue a lost delivery", "deliveryKey", en.Key.String(), "error", err.Error())
			}
			continue // changed meanwhile: someone else has it
		}
		c.Logger.Info("transition", "deliveryKey", en.Key.String(), "outcome", "repaired", "was", string(d.Status),
			"dueAt", ledger.Format(d.DueAt), "attempts", d.Attempts, "repairs", d.Repairs+1)
		republish = append(republish, en)
	}
	failed, republished := r.e.pub.publish(r.finish, republish)
	cut := r.finish.Err() != nil
	r.add(func(rep *Report) {
		rep.Repaired += len(republish) - len(failed)
		rep.countFailed(len(failed), cut)
		rep.Republished += republished
	})
	// As a hand-off's: the next run's cursor takes them, without waiting
	// for a repair that the count just made longer.
	r.handBack(r.finish, failed)
	return nil
}

// backlogs reads the depth of each provider's own work queue and returns
// the providers whose queue holds more than Backlog visible messages. A
// queue it cannot read counts as not backlogged: its deliveries are
// repaired as before.
func (r *run) backlogs(ctx context.Context) map[string]bool {
	c := r.e.cfg
	if c.Depths == nil || len(c.Routes.ByProvider) == 0 {
		return nil
	}
	out := map[string]bool{}
	for p, url := range c.Routes.ByProvider {
		got, err := c.Depths.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			c.Logger.Warn("cannot read a provider's queue depth; its deliveries are repaired as usual", "provider", p, "error", err.Error())
			continue
		}
		n, err := strconv.Atoi(got.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		out[p] = err == nil && n > c.Backlog
	}
	return out
}
