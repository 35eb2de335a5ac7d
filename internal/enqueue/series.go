package enqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// SeriesExtender creates a series' next occurrences (schedule.Store).
type SeriesExtender interface {
	Extend(ctx context.Context, id string) (schedule.Extended, error)
}

var _ SeriesExtender = (*schedule.Store)(nil)

// SeriesLedger lists the series due for extension (the ledger).
type SeriesLedger interface {
	DueSeries(ctx context.Context, shard int, by time.Time, limit int) ([]string, error)
}

// MetricOccurrencesCreated counts the occurrences of series the run
// created; MetricOccurrencesMissed those that had expired before they
// could be created, or could never be sent (their window opens only after
// their expiry): an alarm watches it.
const (
	MetricOccurrencesCreated = "OccurrencesCreated"
	MetricOccurrencesMissed  = "OccurrencesMissed"
)

// seriesPerShard is the most series one run extends per shard; the rest
// wait for the next run, a minute later.
const seriesPerShard = 25

// extendSeries extends every series whose time has come (Config.Series),
// shard by shard, while the run has time: each creates its occurrences
// due within the store's horizon. A series that fails is left for the
// next run, and said in the run's error.
func (r *run) extendSeries(ctx context.Context, shards int) error {
	c := r.e.cfg
	if c.Series == nil || c.SeriesLedger == nil {
		return nil
	}
	// Half of what the hand-off left of its share: the rest is the
	// overdue scan's, which repairs lost hand-offs.
	stop := r.handOffBy.Add(r.stopBy.Sub(r.handOffBy) / 2)
	offset := int(r.now.Unix()/60) % shards // a backlog in one shard does not always go first
	var errs []error
	for i := range shards {
		shard := (offset + i) % shards
		if !c.Clock.Now().Before(stop) || ctx.Err() != nil {
			r.add(func(rep *Report) { rep.Cut = true })
			break
		}
		ids, err := c.SeriesLedger.DueSeries(ctx, shard, c.Clock.Now(), seriesPerShard)
		if err != nil {
			if !r.interrupted(err) {
				errs = append(errs, err)
			}
			continue
		}
		for _, id := range ids {
			if !c.Clock.Now().Before(stop) || ctx.Err() != nil {
				break
			}
			ext, err := c.Series.Extend(ctx, id)
			r.add(func(rep *Report) {
				rep.SeriesExtended++
				rep.OccurrencesCreated += len(ext.Created)
				rep.OccurrencesMissed += ext.Missed
			})
			if err != nil && !r.interrupted(err) && !errors.Is(err, schedule.ErrNoReminder) {
				errs = append(errs, fmt.Errorf("enqueue: extend series %q: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}
