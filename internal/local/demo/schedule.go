package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nudgehq/nudge/internal/local/esm"
)

// ticks count the enqueue's runs on the demo's schedule.
type ticks struct {
	runs, failures atomic.Int64
	cut            atomic.Int64 // runs the time budget cut
	slow           atomic.Int64 // cut runs whose requests the reserve cancelled
}

// tick invokes the enqueue function on the demo's schedule, one run at a
// time, as EventBridge Scheduler would every minute.
func (r *run) tick(ctx context.Context) {
	t := time.NewTicker(r.cfg.Tick)
	defer t.Stop()
	for {
		// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
		at := time.Now().UTC()
		ev := fmt.Sprintf(`{"source":"aws.scheduler","scheduledTime":%q,"executionId":"demo-%d"}`, at.Format(time.RFC3339), r.ticks.runs.Load()+1)
		killsBefore := r.kills.enqueue.Load()
		resp, err := r.h.Enqueue.Invoke(context.WithoutCancel(ctx), []byte(ev))
		r.ticks.runs.Add(1)
		if err == nil {
			if _, ferr := esm.Acknowledged(emptyEvent, resp); ferr != nil {
				err = ferr
			}
			var rep struct {
				Cut         bool
				Interrupted int
			}
			if json.Unmarshal(resp, &rep) == nil && rep.Cut {
				r.ticks.cut.Add(1)
				if rep.Interrupted > 0 {
					r.ticks.slow.Add(1)
				}
			}
		}
		if err != nil && r.kills.enqueue.Load() > killsBefore {
			// Killed mid-run on purpose: the next run resumes from the
			// cursors, and what this one published without moving its
			// cursor is published again (a duplicate the consumer
			// recognises).
			err = nil
		}
		if err != nil {
			r.ticks.failures.Add(1)
			r.problems.add("enqueue run at %s failed: %v", at.Format(time.TimeOnly), err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var emptyEvent = esm.Event(nil, "arn:aws:sqs:us-east-1:000000000000:none")
