package deployment

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/provider/registry"
)

// PacedQueue is a provider's own work queue and the event source mapping
// that feeds it to the consumer: a paced provider's, or an unpaced one's
// but the stage's first (Stage.PacedQueue). A provider is paced when the stage
// gives it a sending rate (Stage.Rates, or its contract's
// provider.Contract.Rate): its records are not mixed with the others', and
// its mapping runs only as many instances as share its rate, each sending
// at rate ÷ PacedConcurrency and waiting in-process for its turn, so that a
// batch fits one invocation and no record goes back to the queue for want
// of a turn.
type PacedQueue struct {
	// Provider is the provider the queue carries.
	Provider string
	// Rate is the stage's sending rate to it, per second; 0 for an
	// unpaced provider's queue.
	Rate float64
	// Name is the queue's name: the work queue's + "-" + Provider. It has
	// the work queue's attributes, DLQ and redrive policy.
	Name string
	// MaxConcurrency is its mapping's maximum concurrency: the stage's
	// PacedConcurrency.
	MaxConcurrency int
	// BatchSize is its mapping's batch size: the records one instance
	// sends at its share of the rate in the time an invocation has to wait
	// for turns (Stage.PaceWindow), at most 10.
	BatchSize int
}

// Interval is the time between two sends of one instance of the queue's
// mapping: MaxConcurrency ÷ Rate; 0 for an unpaced provider's queue.
func (q PacedQueue) Interval() time.Duration {
	if q.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(q.MaxConcurrency) / q.Rate * float64(time.Second))
}

// DefaultProvider is the provider whose records use the default work
// queue: the first provider, in the registry's order, that the stage runs
// without a rate; "" if every one has a rate (the default queue then
// carries only what is forwarded). The registry's order, not the stage's
// list: listing the same providers in another order must not move the
// default queue, which would remove a queue that holds messages.
func (s Stage) DefaultProvider() string {
	for _, p := range registry.Names() {
		if s.Runs(p) && s.Rate(p) <= 0 {
			return p
		}
	}
	return ""
}

// ErrUnpaced is PacedQueue's error for a provider without a rate: its
// records go to the default work queue.
var ErrUnpaced = errors.New("deployment: the provider has no sending rate; it uses the default work queue")

// MaxPacedBatch is the largest batch of a paced queue's mapping: ten, the
// most one receive returns, so that the mapping needs no batching window
// to fill it and a batch is what one receive took.
const MaxPacedBatch = 10

// PaceWindow is how long a record may wait for its turn in an invocation
// that started with the batch: the consumer timeout less the time a send
// needs after its turn (the provider timeout and the ledger writes) and
// less the cut-off margin in which no record starts.
func (s Stage) PaceWindow() time.Duration {
	return s.ConsumerTimeout - s.sendTime() - consumer.DefaultCutoffMargin(s.ProviderTimeout)
}

// sendTime is what a record needs after its turn: the consumer's SendTime.
func (s Stage) sendTime() time.Duration { return s.ProviderTimeout + consumer.LedgerAllowance }

// PacedQueueName is the name of provider p's own work queue.
func (s Stage) PacedQueueName(p string) string { return s.WorkQueueName() + "-" + p }

// PacedQueue returns provider p's queue and mapping, ErrUnpaced if the
// stage gives p no rate, or an error naming the rate, the timeout and the
// fix when not one record fits an invocation at an instance's share of the
// rate.
//
// An unpaced provider has a queue of its own too, unless it is the stage's
// first unpaced one (DefaultProvider), which keeps the default work queue:
// so that a provider that hangs or fails holds only its own mapping's
// instances, never another provider's (isolation), and so that a deploy
// never replaces the queue holding messages in flight. Its mapping is the
// default's: the stage's batch size and maximum concurrency, no rate.
func (s Stage) PacedQueue(p string) (PacedQueue, error) {
	rate := s.Rate(p)
	if rate <= 0 {
		if p == s.DefaultProvider() {
			return PacedQueue{}, ErrUnpaced
		}
		return PacedQueue{Provider: p, Name: s.PacedQueueName(p), MaxConcurrency: s.MaxConcurrency, BatchSize: s.BatchSize}, nil
	}
	q := PacedQueue{Provider: p, Rate: rate, Name: s.PacedQueueName(p), MaxConcurrency: s.PacedConcurrency}
	if q.MaxConcurrency < 1 {
		return q, fmt.Errorf("deployment: stage %q: paced concurrency %d; use 2 to 1000", s.Name, q.MaxConcurrency)
	}
	window := s.PaceWindow()
	// The records one instance sends in the window; the epsilon keeps a
	// product that is whole on paper (7/s × 7 s) whole in floating point.
	fits := math.Floor(rate/float64(q.MaxConcurrency)*window.Seconds() + 1e-9)
	if fits < 1 {
		minRate := float64(q.MaxConcurrency) / max(window.Seconds(), 1e-9)
		minTimeout := (q.Interval() + s.ConsumerTimeout - window + time.Second - 1).Truncate(time.Second)
		return q, fmt.Errorf("deployment: stage %q: provider %s's rate %v per second gives each of its queue's %d instances one send every %v, "+
			"but an invocation has %v to wait for turns (the %v consumer timeout − %v to send − the %v cut-off margin): not one record fits a batch; "+
			"raise the rate to %.3g or more (-c rates=%s=%.3g), raise the consumer timeout to %v or more (-c consumerTimeout=%d), or remove the limit (-c rates=%s=0)",
			s.Name, p, rate, q.MaxConcurrency, q.Interval().Round(time.Millisecond), max(window, 0), s.ConsumerTimeout, s.sendTime(),
			consumer.DefaultCutoffMargin(s.ProviderTimeout), math.Ceil(minRate*1000)/1000, p, math.Ceil(minRate*1000)/1000, minTimeout, int(minTimeout.Seconds()), p)
	}
	q.BatchSize = int(min(fits, MaxPacedBatch))
	return q, nil
}

// PacedQueues are the queues of the paced providers the stage runs, in
// the order of Providers. A provider whose queue cannot be sized
// (PacedQueue's error; Validate refuses the stage) has batch size 0.
func (s Stage) PacedQueues() []PacedQueue {
	var out []PacedQueue
	for _, p := range s.Providers {
		q, err := s.PacedQueue(p)
		if errors.Is(err, ErrUnpaced) {
			continue
		}
		out = append(out, q)
	}
	return out
}

// WorkQueueNames are every work queue's name: the default's, then each
// paced provider's.
func (s Stage) WorkQueueNames() []string {
	names := []string{s.WorkQueueName()}
	for _, q := range s.PacedQueues() {
		names = append(names, q.Name)
	}
	return names
}

// routeEnv adds the paced providers' queues to a producer's environment.
func (s Stage) routeEnv(env map[string]string, r Resources) {
	var pairs []string
	for _, q := range s.PacedQueues() {
		if url := r.ProviderQueueURLs[q.Provider]; url != "" {
			pairs = append(pairs, q.Provider+"="+url)
		}
	}
	if len(pairs) > 0 {
		env[envelope.EnvProviderQueues] = strings.Join(pairs, ",")
	}
}
