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

// ProviderQueue is a provider's own work queue and the event source mapping
// that feeds it to the consumer: every provider's but the stage's default
// one (Stage.DefaultProvider), paced or not. A provider is paced when the stage
// gives it a sending rate (Stage.Rates, or its contract's
// provider.Contract.Rate): its records are not mixed with the others', and
// its mapping runs only as many instances as share its rate, each sending
// at rate ÷ PacedConcurrency and waiting in-process for its turn, so that a
// batch fits one invocation and no record goes back to the queue for want
// of a turn.
type ProviderQueue struct {
	// Provider is the provider the queue carries.
	Provider string
	// Rate is the stage's sending rate to it, per second; 0 for an
	// unpaced provider's queue.
	Rate float64
	// Name is the queue's name: the work queue's + "-" + Provider. It has
	// the work queue's attributes, DLQ and redrive policy.
	Name string
	// MaxConcurrency is its mapping's maximum concurrency: the stage's
	// PacedConcurrency if paced, else its MaxConcurrency.
	MaxConcurrency int
	// BatchSize is its mapping's batch size: if paced, the records one
	// instance sends at its share of the rate in the time an invocation
	// has to wait for turns (Stage.PaceWindow), at most 10; else the
	// stage's BatchSize.
	BatchSize int
}

// Interval is the time between two sends of one instance of the queue's
// mapping: MaxConcurrency ÷ Rate; 0 for an unpaced provider's queue.
func (q ProviderQueue) Interval() time.Duration {
	if q.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(q.MaxConcurrency) / q.Rate * float64(time.Second))
}

// DefaultProvider is the provider whose records use the default work
// queue: the registry's default provider (registry.Default, the webhook)
// when the stage runs it without a rate; else "", and every provider the
// stage runs has a queue of its own (the default queue then carries only
// what is forwarded). Never another provider: which one keeps the default
// queue must not follow the stage's list, since a provider that moved
// there would have its own queue, holding messages, removed by the
// deploy. So listing the providers in another order, removing the
// webhook, or giving it a rate removes no queue; taking a provider's rate
// away (the webhook's) or no longer running it does (see the
// architecture document: drain it first).
func (s Stage) DefaultProvider() string {
	if d := registry.Default(); s.Runs(d) && s.Rate(d) <= 0 {
		return d
	}
	return ""
}

// ErrDefaultQueue is ProviderQueue's error for the default provider
// (DefaultProvider): its records go to the default work queue.
var ErrDefaultQueue = errors.New("deployment: the provider is the stage's default one, without a sending rate; it uses the default work queue")

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

// ProviderQueueName is the name of provider p's own work queue.
func (s Stage) ProviderQueueName(p string) string { return s.WorkQueueName() + "-" + p }

// ProviderQueue returns provider p's own queue and mapping, ErrDefaultQueue if p
// is the stage's default provider (DefaultProvider), or an error naming
// the rate, the timeout and the fix when not one record fits an invocation
// at an instance's share of p's rate.
//
// Every provider but the default one has a queue of its own, paced or not:
// so that a provider that hangs or fails holds only its own mapping's
// instances, never another provider's (isolation). An unpaced provider's
// mapping is the default's: the stage's batch size and maximum
// concurrency, no rate.
func (s Stage) ProviderQueue(p string) (ProviderQueue, error) {
	rate := s.Rate(p)
	if rate <= 0 {
		if p == s.DefaultProvider() {
			return ProviderQueue{}, ErrDefaultQueue
		}
		return ProviderQueue{Provider: p, Name: s.ProviderQueueName(p), MaxConcurrency: s.MaxConcurrency, BatchSize: s.BatchSize}, nil
	}
	q := ProviderQueue{Provider: p, Rate: rate, Name: s.ProviderQueueName(p), MaxConcurrency: s.PacedConcurrency}
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

// ProviderQueues are the own queues of the providers the stage runs
// (every one but the default provider's), in the order of Providers. A
// provider whose queue cannot be sized (ProviderQueue's error; Validate
// refuses the stage) has batch size 0.
func (s Stage) ProviderQueues() []ProviderQueue {
	var out []ProviderQueue
	for _, p := range s.Providers {
		q, err := s.ProviderQueue(p)
		if errors.Is(err, ErrDefaultQueue) {
			continue
		}
		out = append(out, q)
	}
	return out
}

// WorkQueueNames are every work queue's name: the default's, then each
// provider's own.
func (s Stage) WorkQueueNames() []string {
	names := []string{s.WorkQueueName()}
	for _, q := range s.ProviderQueues() {
		names = append(names, q.Name)
	}
	return names
}

// routeEnv adds the providers' own queues to a producer's environment.
func (s Stage) routeEnv(env map[string]string, r Resources) {
	var pairs []string
	for _, q := range s.ProviderQueues() {
		if url := r.ProviderQueueURLs[q.Provider]; url != "" {
			pairs = append(pairs, q.Provider+"="+url)
		}
	}
	if len(pairs) > 0 {
		env[envelope.EnvProviderQueues] = strings.Join(pairs, ",")
	}
}
