package demo

import (
	"context"
	"sync"
	"time"
)

// serve keeps the system running for the operator until Keep returns: the
// schedule ticks, the consumers consume, the intake answers. Nothing is
// scheduled, faulted or checked.
func (r *run) serve(ctx context.Context) error {
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	r.started = time.Now()
	keep, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); r.tick(keep) }()
	go func() { defer wg.Done(); r.h.RunMappings(keep) }()
	go func() { defer wg.Done(); r.ch.drain(keep) }()
	r.cfg.Keep(keep, nil, r.local())
	stop()
	wg.Wait()
	return nil
}
