package consumer

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/internal/circuit"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/heartbeat"
)

// The circuit's metrics, by provider.
const (
	// MetricCircuit counts each provider's circuit changes, by Provider
	// and State (the state it changed to: open, or closed): an open
	// circuit counts again each time a probe fails, at least every
	// MaxCoolDown while it stays open. An alarm watches State=open.
	MetricCircuit = "ProviderCircuit"
	// MetricCircuitDeferred counts records deferred because their
	// provider's circuit was open, by Provider.
	MetricCircuitDeferred = "CircuitDeferred"
)

// newCircuits makes a circuit breaker for each provider of cfg, from
// cfg.Circuit; a probe is out at most a send's time (SendTime).
func (c *Consumer) newCircuits() error {
	c.circuits = make(map[string]*circuit.Breaker, len(c.cfg.Providers))
	for name := range c.cfg.Providers {
		cc := c.cfg.Circuit
		cc.Name, cc.Clock, cc.OnChange = name, c.cfg.Clock, c.circuitChanged
		cc.ProbeTimeout = cmp.Or(cc.ProbeTimeout, c.cfg.SendTime)
		b, err := circuit.New(cc)
		if err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		c.circuits[name] = b
	}
	return nil
}

// circuitChanged writes a circuit's change of state: one log line, and
// the metric for open and closed.
func (c *Consumer) circuitChanged(ch circuit.Change) {
	kv := []any{"provider", ch.Name, "from", ch.From.String(), "to", ch.To.String()}
	if ch.To == circuit.Open {
		kv = append(kv, "coolDown", ch.CoolDown.String(), "probeAt", ch.Until.UTC().Format(time.RFC3339))
		if ch.Failures > 0 {
			kv = append(kv, "failures", ch.Failures)
		}
		c.cfg.Logger.Warn("provider circuit", kv...)
	} else {
		c.cfg.Logger.Info("provider circuit", kv...)
	}
	if ch.To != circuit.HalfOpen {
		c.cfg.Metrics.AddBy(MetricCircuit, 1, map[string]string{"Provider": ch.Name, "State": ch.To.String()})
	}
}

// admit asks the circuit of msg's provider whether the record may be
// sent. If not (ok false), the record is deferred until the circuit's
// next probe, unclaimed: no attempt is spent, and it is never
// dead-lettered for it. On a standard queue it is re-published to the
// queue it came from with a delay, so that no receive is spent either; a
// FIFO queue has no per-message delay, and it waits by its visibility (a
// receive, which the queue's ReceiveMargin covers for a short outage;
// past maxReceiveCount SQS moves it to the DLQ, and the enqueue's repair
// publishes it again once overdue). The ticket must be ended (Record, or
// Release if the send never starts).
func (c *Consumer) admit(ctx context.Context, r *record, msg message.Message) (*circuit.Ticket, Outcome, bool) {
	b := c.circuits[msg.Provider]
	t, retryAt, ok := b.Admit()
	if ok {
		if t.Probe() {
			r.log = r.log.With("probe", true)
		}
		return t, Outcome{}, true
	}
	c.cfg.Metrics.AddBy(MetricCircuitDeferred, 1, map[string]string{"Provider": msg.Provider})
	wait := time.Duration(max(ceilSeconds(retryAt.Sub(c.cfg.Clock.Now())), 1)) * time.Second
	reason := "provider circuit open: " + msg.Provider
	if r.rec.Attributes["MessageGroupId"] != "" { // FIFO: no per-message delay
		return nil, Outcome{Transition: Deferred, Next: wait, Via: "visibility", Reason: reason,
			Err: failure.Retryable(circuit.ErrOpen, wait)}, false
	}
	// The copy is the record's body and attributes, unchanged: a message
	// back from the DLQ keeps the dead letter's, which let its claim
	// revive the delivery.
	env := envelope.Build(envelope.Spec{Kind: envelope.Standard, Body: r.rec.Body, Delay: wait, Attributes: envelope.Kept(r.rec.MessageAttributes)})
	if _, err := c.cfg.Queue.SendMessage(ctx, env.Send(c.cfg.Routes.For(msg.Provider))); err != nil {
		return nil, Outcome{Err: failure.Retryable(err, 0)}, false
	}
	return nil, Outcome{Transition: Deferred, Next: wait, Via: "republish", Reason: reason}, false
}

// verdict is what a send that ended with err says of its provider. A send
// the heartbeat stopped (another consumer may have the message) says
// nothing.
func (c *Consumer) verdict(ctx context.Context, err error) circuit.Verdict {
	switch {
	case err == nil:
		return circuit.Healthy
	case heartbeat.Watched(ctx).Err() != nil:
		return circuit.Neutral
	}
	return circuit.Judge(c.cfg.Classifier.Classify(err))
}
