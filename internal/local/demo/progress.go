package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/status"
)

// snapshot is the system's state at one moment.
type snapshot struct {
	byStatus map[ledger.Status]int
	dueLive  int // deliveries due by now that have not ended
	queue    int // work queue: visible, in flight and delayed
	work     status.Depth
	dlq      int
	accepted int
}

// scan reads the ledger into snap.
func (r *run) scan(ctx context.Context, snap *snapshot) error {
	byStatus, dueLive := map[ledger.Status]int{}, 0
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	now := time.Now()
	err := r.h.Ledger.ScanDeliveries(ctx, func(d ledger.Delivery) error {
		byStatus[d.Status]++
		if !d.Status.Terminal() && d.Status != ledger.StatusHeld && !d.DueAt.After(now) {
			dueLive++ // a held fallback is due only once taken
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A series whose time for its next occurrences has come is live work
	// too: the enqueue's next run extends it.
	for shard := range r.h.Stage.Shards {
		ids, err := r.h.Ledger.DueSeries(ctx, shard, now, 100)
		if err != nil {
			return err
		}
		dueLive += len(ids)
	}
	snap.byStatus, snap.dueLive = byStatus, dueLive
	return nil
}

// queues reads the queues' depths into snap.
func (r *run) queues(ctx context.Context, snap *snapshot) error {
	var err error
	if snap.work, err = r.h.WorkDepth(ctx); err != nil { // every work queue's
		return fmt.Errorf("demo: %w", err)
	}
	snap.queue = snap.work.Total()
	if snap.dlq, err = r.depth(ctx, r.h.Resources.DLQURL); err != nil {
		return err
	}
	snap.accepted = r.ch.acceptedSoFar()
	return nil
}

// depth is a queue's messages: visible, in flight and delayed.
func (r *run) depth(ctx context.Context, url string) (int, error) {
	d, err := status.QueueDepth(ctx, r.h.SQS, url)
	if err != nil {
		return 0, fmt.Errorf("demo: %w", err)
	}
	return d.Total(), nil
}

// progress shows counts by state as the run goes.
type progress struct {
	out  io.Writer
	live bool
	last time.Time
	drew bool
}

func newProgress(out io.Writer, live bool) *progress { return &progress{out: out, live: live} }

func (p *progress) show(elapsed time.Duration, s snapshot) {
	if s.byStatus == nil { // a large run: the ledger is read at the end
		p.print(fmt.Sprintf("%5.0fs  sent %d (the provider's count; the ledger is read at the end) | queue %d  DLQ %d",
			elapsed.Seconds(), s.accepted, s.queue, s.dlq))
		return
	}
	by := s.byStatus
	p.print(fmt.Sprintf("%5.0fs  pending %d  queued %d  sending %d  retrying %d | sent %d  dead %d  expired %d  cancelled %d | queue %d  DLQ %d",
		elapsed.Seconds(), by[ledger.StatusPending], by[ledger.StatusQueued], by[ledger.StatusSending], by[ledger.StatusRetrying],
		max(by[ledger.StatusSent], s.accepted), by[ledger.StatusDead], by[ledger.StatusExpired], by[ledger.StatusCancelled], s.queue, s.dlq))
}

func (p *progress) print(line string) {
	if p.live {
		fmt.Fprintf(p.out, "\r\033[K%s", line)
		p.drew = true
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		fmt.Fprintln(p.out, line)
		// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
		p.last = time.Now()
	}
}

// note prints a line of its own, under the progress line.
func (p *progress) note(line string) {
	p.done()
	fmt.Fprintln(p.out, line)
}

func (p *progress) done() {
	if p.drew {
		fmt.Fprintln(p.out)
		p.drew = false
	}
}
