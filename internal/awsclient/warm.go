package awsclient

import (
	"context"
	"sync"
	"time"
)

// WarmLimit bounds a function's warm-up: a small part of Lambda's 10 s
// init, and the most a cold start spends on it when an endpoint does not
// answer.
const WarmLimit = 2 * time.Second

// Warm opens connections during a function's init: it makes n of each
// call at once (n connections, as many as the first event's concurrent
// requests need; the SDK's transport keeps up to 10 idle per host) and
// waits for them, at most limit. Errors are ignored: a request refused
// (access denied, a failed condition) has opened its connection, TCP and
// TLS, as well as one answered.
func Warm(ctx context.Context, limit time.Duration, n int, calls ...func(context.Context) error) {
	// wall clock: the bound is on the process's init, which Lambda times on it
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var wg sync.WaitGroup
	for _, call := range calls {
		for range max(n, 1) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = call(ctx)
			}()
		}
	}
	wg.Wait()
}
