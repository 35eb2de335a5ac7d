package demo

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/provider/registry"
)

// Config configures a demo run. The zero value runs the default demo.
type Config struct {
	// Reminders is how many reminders to schedule. Default 300.
	Reminders int
	// Rates are the stage's sending rates per second, by provider, which
	// the consumers share. Default each provider's stand-in's
	// (provider.StandIn.Rate: SES's 20); negative for no limit.
	Rates map[string]float64
	// Rate is how many reminders the intake creates per second. Default 100.
	Rate float64
	// Spread is how far ahead of their creation the "due soon" reminders
	// fall due: evenly within (0, Spread]. Default 30s.
	Spread time.Duration
	// BatchSize, BatchingWindow and MaxConcurrency configure the event
	// source mapping. Defaults: the dev stage's batch size (10) and window
	// (1s; negative for none), and a maximum concurrency of 2 (each is one
	// emulator instance).
	BatchSize      int
	BatchingWindow time.Duration
	MaxConcurrency int
	// Faults are the provider faults' shares of due deliveries. Default
	// DefaultFaults.
	Faults *Faults
	// Latency is the provider's mean answer time (exponentially
	// distributed, capped at 10×). Default 20ms; negative for none.
	Latency time.Duration
	// Serve runs the system with no plan, for the operator (nudge local
	// serve): nothing is scheduled, faulted or checked; Keep is called at
	// once, with a nil summary, and the system runs until it returns.
	Serve bool
	// Poison is how many malformed messages are put on the work queue.
	// Default 1% of Reminders, at least 3; negative for none.
	Poison int
	// Duplicates is the share of due-now deliveries whose message is sent a
	// second time, as at-least-once delivery may. Default 0.05; negative
	// for none.
	Duplicates float64
	// Tick is the enqueue schedule's period (EventBridge Scheduler's is one
	// minute). Default 2s.
	Tick time.Duration
	// Deadline is how long the run may take before it stops and reports
	// what is left as overdue. Default 3 min plus 30 ms per reminder plus
	// one visibility timeout (6× the consumer timeout: a batch SQS
	// delivers again comes back within the run), and with kills 150 ms per
	// kill plus a visibility timeout for each attempt of the budget but the
	// first.
	Deadline time.Duration
	// Kills is how many times a consumer's runtime is killed (SIGKILL, as a
	// crash or an out-of-memory kill does) in the middle of a batch, at
	// moments spread over the run. Default 0.
	Kills int
	// ConsumerTimeout is the consumer function's timeout; the work queue's
	// visibility timeout is 6× it, which is how long the records of a
	// killed batch wait to return. Default the dev stage's (30s).
	ConsumerTimeout time.Duration
	// EnqueueKills is how many times the enqueue's runtime is killed
	// (SIGKILL) in the middle of a run, spread over the run as Kills are:
	// the run fails, and the next tick's run resumes from the cursors.
	EnqueueKills int
	// OutcomeKills is how many times the outcomes function's runtime is
	// killed (SIGKILL) in the middle of a batch of the ledger's stream,
	// spread over the run: the stream mapping retries the batch, and its
	// events are put again with their eventIds.
	OutcomeKills int
	// EventFaults is the share of outcome events the local bus fails
	// (EventBridge's retryable InternalFailure), and half of it the share
	// of its PutEvents requests answered 500: the outcomes function puts
	// them again, or the stream mapping retries its batch. Default 0.
	EventFaults float64
	// EnqueueBudget, if set, is each enqueue run's time budget: the
	// function gets a timeout of its cut-off margin plus this, so a run
	// with more to hand off is cut and the next resumes from the cursors.
	// Default: the dev stage's 55 s timeout.
	EnqueueBudget time.Duration
	// Seed seeds the mix and the faults, so a run can be repeated.
	// Default 1.
	Seed int64
	// Stage names the local resources (nudge-<stage>-ledger, …). Default
	// "demo".
	Stage string
	// Dir is the stand-ins' folder. Default standin.DefaultDir().
	Dir string
	// Bootstraps is the folder holding consumer/bootstrap and
	// enqueue/bootstrap built for this machine. Default "build/local".
	Bootstraps string
	// DynamoDBEndpoint, SQSEndpoint and SESEndpoint use running stand-ins;
	// when any is empty, Run starts its own and stops them at the end.
	DynamoDBEndpoint, SQSEndpoint, SESEndpoint string
	// Out receives progress and the summary. Default io.Discard.
	Out io.Writer
	// Live redraws the progress line in place (for a terminal); otherwise
	// a progress line is written every 5 s.
	Live bool
	// Keep, if set, is called with the summary once the run is over, while
	// the system keeps running (the schedule ticks, the consumers consume)
	// so that an operator can try the nudge commands on it — review the
	// DLQ, redrive — with local's environment. Everything stops when Keep
	// returns or ctx ends.
	Keep func(ctx context.Context, sum *Summary, local Local)
}

// Faults are shares (0–1) of the due deliveries whose first provider
// request meets a fault. Each delivery gets at most one kind.
type Faults struct {
	Server    float64 // "500": one 500, then accepted
	Throttled float64 // "429": one 429 with Retry-After 1s, then accepted
	Rejected  float64 // "400": a permanent 400; dead-lettered at once
	Hang      float64 // "hang": no answer until the consumer's timeout, then accepted
	Drop      float64 // "drop": accepted, the answer lost; the retry is a duplicate the provider suppresses
	Down      float64 // "down": 500 on every attempt; dead-lettered when the attempt budget runs out
}

// DefaultFaults are the demo's default fault shares.
var DefaultFaults = Faults{Server: 0.05, Throttled: 0.05, Rejected: 0.02, Hang: 0.02, Drop: 0.02, Down: 0.01}

// faultNames maps the spec names to the fields.
func (f *Faults) fields() map[string]*float64 {
	return map[string]*float64{"500": &f.Server, "429": &f.Throttled, "400": &f.Rejected, "hang": &f.Hang, "drop": &f.Drop, "down": &f.Down}
}

// ParseFaults parses "500=0.05,429=0.05,400=0.02,hang=0.02,drop=0.02,down=0.01"
// (shares, or percentages with %). Kinds not named are 0; "none" is no
// faults at all.
func ParseFaults(spec string) (Faults, error) {
	var f Faults
	spec = strings.TrimSpace(spec)
	if spec == "none" || spec == "" {
		return f, nil
	}
	fields := f.fields()
	for _, part := range strings.Split(spec, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		p, known := fields[name]
		if !ok || !known {
			return f, fmt.Errorf("demo: fault %q: want KIND=SHARE with KIND one of %s, e.g. 500=0.05 or 429=5%%", part, strings.Join(faultKinds(), ", "))
		}
		scale := 1.0
		if strings.HasSuffix(val, "%") {
			val, scale = strings.TrimSuffix(val, "%"), 0.01
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || v*scale < 0 || v*scale > 1 {
			return f, fmt.Errorf("demo: fault %q: the share must be between 0 and 1 (or 0%% and 100%%)", part)
		}
		*p = v * scale
	}
	if f.total() > 1 {
		return f, fmt.Errorf("demo: fault shares add up to %.2f; they must not pass 1", f.total())
	}
	return f, nil
}

func faultKinds() []string {
	var f Faults
	var names []string
	for k := range f.fields() {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (f Faults) total() float64 {
	return f.Server + f.Throttled + f.Rejected + f.Hang + f.Drop + f.Down
}

// String renders f as ParseFaults reads it.
func (f Faults) String() string {
	var parts []string
	fields := f.fields()
	for _, k := range faultKinds() {
		if v := *fields[k]; v > 0 {
			parts = append(parts, k+"="+strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Time compression: what the demo shortens so a run takes about a minute.
const (
	settle          = time.Second
	providerTimeout = 2 * time.Second
	backoffBase     = time.Second
	backoffCap      = 8 * time.Second
	retryAfter      = time.Second
	// expiredWindow is how long an "already expired" reminder lives: it
	// expires before the first tick hands it off. Long enough for its
	// create to reach the intake on a loaded machine (a make test run
	// once met a 1 s window passed before the intake checked it).
	expiredWindow = 3 * time.Second
)

func (c Config) withDefaults() (Config, error) {
	c.Rates = maps.Clone(c.Rates)
	for _, d := range registry.All() {
		if c.Rates[d.Name] == 0 && d.StandIn.Rate > 0 {
			if c.Rates == nil {
				c.Rates = map[string]float64{}
			}
			c.Rates[d.Name] = d.StandIn.Rate
		}
	}
	if c.Reminders == 0 && !c.Serve {
		c.Reminders = 300
	}
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.Spread == 0 {
		c.Spread = 30 * time.Second
	}
	dev := deployment.Dev()
	if c.BatchSize == 0 {
		c.BatchSize = dev.BatchSize
	}
	if c.BatchingWindow == 0 {
		c.BatchingWindow = dev.BatchingWindow
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = 2
	}
	if c.Faults == nil {
		f := DefaultFaults
		c.Faults = &f
	}
	if c.Latency == 0 {
		c.Latency = 20 * time.Millisecond
	}
	if c.Poison == 0 && !c.Serve {
		c.Poison = max(3, c.Reminders/100)
	}
	if c.Duplicates == 0 && !c.Serve {
		c.Duplicates = 0.05
	}
	if c.Tick == 0 {
		c.Tick = 2 * time.Second
	}
	if c.ConsumerTimeout == 0 {
		c.ConsumerTimeout = dev.ConsumerTimeout
	}
	if c.Deadline == 0 {
		c.Deadline = 3*time.Minute + time.Duration(c.Reminders)*30*time.Millisecond + deployment.VisibilityFactor*c.ConsumerTimeout
		if c.Kills > 0 {
			// The killed batches are redone (about 150 ms a kill, measured:
			// 10,000 reminders took 270 s with 20 kills, 415 s with 1,000),
			// and the last kills' records wait out the visibility timeout
			// once per attempt the budget has left.
			c.Deadline += time.Duration(c.Kills)*150*time.Millisecond + time.Duration(dev.MaxAttempts-1)*deployment.VisibilityFactor*c.ConsumerTimeout
		}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Stage == "" {
		c.Stage = "demo"
	}
	if c.Bootstraps == "" {
		c.Bootstraps = "build/local"
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	switch {
	case c.Serve && (c.Reminders != 0 || c.Kills != 0 || c.EnqueueKills != 0 || c.OutcomeKills != 0 || c.Keep == nil):
		return c, fmt.Errorf("demo: serving runs no plan (no reminders, no kills) and needs Keep")
	case !c.Serve && (c.Reminders < 10 || c.Reminders > 1_000_000):
		return c, fmt.Errorf("demo: %d reminders; use 10 to 1,000,000", c.Reminders)
	case c.Rate < 0:
		return c, fmt.Errorf("demo: rate %v; use a positive number of reminders per second", c.Rate)
	case c.Spread < time.Second || c.Spread > 10*time.Minute:
		return c, fmt.Errorf("demo: spread %v; use 1s to 10m", c.Spread)
	case c.Duplicates > 1:
		return c, fmt.Errorf("demo: duplicates share %v; use 0 to 1", c.Duplicates)
	case c.Faults.total() > 1:
		return c, fmt.Errorf("demo: fault shares add up to %.2f; they must not pass 1", c.Faults.total())
	case c.Tick < 500*time.Millisecond:
		return c, fmt.Errorf("demo: tick %v; use at least 500ms", c.Tick)
	case c.EventFaults < 0 || c.EventFaults > 0.5:
		return c, fmt.Errorf("demo: event faults %v: use a share from 0 to 0.5 (0.02 fails 2%% of the outcome events put)", c.EventFaults)
	case c.Kills < 0 || c.EnqueueKills < 0 || c.OutcomeKills < 0:
		return c, fmt.Errorf("demo: %d consumer kills, %d enqueue kills, %d outcomes kills; use 0 or more", c.Kills, c.EnqueueKills, c.OutcomeKills)
	case c.ConsumerTimeout > 15*time.Minute: // too short is the stage's to say (Config.stage)
		return c, fmt.Errorf("demo: consumer timeout %v; Lambda allows at most 15m", c.ConsumerTimeout)
	case c.EnqueueBudget < 0 || c.EnqueueBudget > 50*time.Second:
		return c, fmt.Errorf("demo: enqueue budget %v; use 0 (the stage's) to 50s", c.EnqueueBudget)
	}
	c.Poison, c.Duplicates = max(c.Poison, 0), max(c.Duplicates, 0)
	c.BatchingWindow, c.Latency = max(c.BatchingWindow, 0), max(c.Latency, 0)
	return c, nil
}

// Defaults returns the configuration the zero Config runs with.
func Defaults() Config {
	c, _ := Config{}.withDefaults()
	return c
}

// ChaosFaults are the chaos run's provider faults.
var ChaosFaults = Faults{Server: 0.05, Throttled: 0.05, Rejected: 0.01, Hang: 0.01, Drop: 0.01, Down: 0.005}

// tenfold is every stand-in's rate ten times over: the chaos run's load.
func tenfold() map[string]float64 {
	rates := map[string]float64{}
	for _, d := range registry.All() {
		if d.StandIn.Rate > 0 {
			rates[d.Name] = 10 * d.StandIn.Rate
		}
	}
	return rates
}

// ChaosDefaults returns the chaos run's configuration: 10,000 reminders,
// ChaosFaults, 1,000 consumer kills mid-batch, 10 in the enqueue and 10 in
// the outcomes function, 2% of the outcome events failed by the bus, enqueue
// runs cut by a 500 ms budget, 4 consumer instances, and an 8 s consumer
// timeout so that a killed batch's records return within 48 s: the
// shortest that leaves a paced provider's records (SES's own queue) a
// second to wait for their turns after the 2 s provider timeout's send
// time and cut-off margin (deployment.Stage.PaceWindow).
func ChaosDefaults() Config {
	c, _ := Config{
		Reminders: 10_000, Rate: 500, Rates: tenfold(), Spread: time.Minute, MaxConcurrency: 4, Faults: &ChaosFaults,
		Kills: 1000, EnqueueKills: 10, OutcomeKills: 10, EventFaults: 0.02, ConsumerTimeout: 8 * time.Second, EnqueueBudget: 500 * time.Millisecond, Stage: "chaos",
	}.withDefaults()
	f := *c.Faults
	c.Faults = &f
	return c
}

// enqueueCutoff is the enqueue's cut-off margin (its NUDGE_CUTOFF_MARGIN
// default): it stops this long before its deadline.
const enqueueCutoff = 3 * time.Second

// enqueueTimeout is the enqueue function's timeout and cut-off margin for
// the configured budget: the timeout in whole seconds, as Lambda's, and
// the margin the rest.
func (c Config) enqueueTimeout(stage deployment.Stage) (timeout, margin time.Duration) {
	if c.EnqueueBudget == 0 {
		return stage.EnqueueTimeout, enqueueCutoff
	}
	timeout = (c.EnqueueBudget + enqueueCutoff + time.Second - 1).Truncate(time.Second)
	return timeout, timeout - c.EnqueueBudget
}

// stage is the deployment stage the demo provisions and configures the
// functions from: the dev stage with the demo's mapping settings and
// shorter provider timeout.
func (c Config) stage() (deployment.Stage, error) {
	s := deployment.Dev()
	s.Name = c.Stage
	s.BatchSize, s.BatchingWindow, s.MaxConcurrency = c.BatchSize, c.BatchingWindow, c.MaxConcurrency
	s.ProviderTimeout = providerTimeout
	s.ConsumerTimeout = c.ConsumerTimeout
	s = local.StandInStage(s)
	s.Rates = map[string]float64{}
	for name, r := range c.Rates {
		s.Rates[name] = max(r, 0)
	}
	return s, s.Validate()
}
