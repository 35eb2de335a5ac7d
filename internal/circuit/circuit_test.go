package circuit_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/circuit"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

type bundle struct {
	b       *circuit.Breaker
	clk     *clock.Fake
	mu      sync.Mutex
	changes []circuit.Change
}

func setup(t *testing.T, cfg circuit.Config) *bundle {
	t.Helper()
	t.Parallel()
	s := &bundle{clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))}
	cfg.Name, cfg.Clock = "webhook", s.clk
	cfg.OnChange = func(c circuit.Change) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.changes = append(s.changes, c)
	}
	var err error
	if s.b, err = circuit.New(cfg); err != nil {
		t.Fatal(err)
	}
	return s
}

// send admits one send and records v; it reports whether it was admitted.
func (s *bundle) send(v circuit.Verdict) bool {
	t, _, ok := s.b.Admit()
	if ok {
		t.Record(v)
	}
	return ok
}

func (s *bundle) transitions() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ""
	for _, c := range s.changes {
		out += fmt.Sprintf("%v→%v ", c.From, c.To)
	}
	return out
}

// open opens the circuit with five unwell sends.
func (s *bundle) open(t *testing.T) {
	t.Helper()
	for range 5 {
		if !s.send(circuit.Unwell) {
			t.Fatal("refused before it opened")
		}
	}
	if s.b.State() != circuit.Open {
		t.Fatalf("state %v after 5 unwell sends; want open", s.b.State())
	}
}

func TestOpensAfterARunOfUnwellSends(t *testing.T) {
	s := setup(t, circuit.Config{})
	// A success breaks the run; a neutral verdict (a 4xx) neither breaks
	// nor extends it.
	for _, v := range []circuit.Verdict{circuit.Unwell, circuit.Unwell, circuit.Unwell, circuit.Unwell, circuit.Healthy,
		circuit.Unwell, circuit.Neutral, circuit.Unwell, circuit.Unwell, circuit.Neutral, circuit.Unwell} {
		s.send(v)
	}
	if s.b.State() != circuit.Closed {
		t.Fatalf("state %v after 4 unwell, a success, 4 unwell and 2 neutral; want closed", s.b.State())
	}
	s.send(circuit.Unwell)
	if s.b.State() != circuit.Open || s.transitions() != "closed→open " {
		t.Fatalf("state %v, changes %s; want open after the fifth unwell send in a row", s.b.State(), s.transitions())
	}
	if c := s.changes[0]; c.Failures != 5 || c.CoolDown != 30*time.Second || !c.Until.Equal(s.clk.Now().Add(30*time.Second)) || c.Name != "webhook" {
		t.Fatalf("change %+v; want 5 failures, a 30s cool-down", c)
	}
}

func TestOpenRefusesUntilTheProbeTime(t *testing.T) {
	s := setup(t, circuit.Config{})
	s.open(t)
	probeAt := s.clk.Now().Add(30 * time.Second)
	s.clk.Advance(29 * time.Second)
	if _, at, ok := s.b.Admit(); ok || !at.Equal(probeAt) {
		t.Fatalf("admitted %v (retry at %v) 1s before the probe time %v", ok, at, probeAt)
	}
	s.clk.Advance(time.Second)
	probe, _, ok := s.b.Admit()
	if !ok || !probe.Probe() || s.b.State() != circuit.HalfOpen {
		t.Fatalf("at the probe time: admitted %v, state %v; want one probe, half-open", ok, s.b.State())
	}
	// While the probe is out, others wait for its end (ProbeTimeout).
	if _, at, ok := s.b.Admit(); ok || !at.Equal(s.clk.Now().Add(11*time.Second)) {
		t.Fatalf("a second send during the probe: admitted %v, retry at %v; want refused until the probe's timeout", ok, at)
	}
	probe.Record(circuit.Healthy)
	if s.b.State() != circuit.Closed || s.transitions() != "closed→open open→half-open half-open→closed " {
		t.Fatalf("state %v, changes %s; want closed by the probe's success", s.b.State(), s.transitions())
	}
	if !s.send(circuit.Healthy) {
		t.Fatal("closed, but refused")
	}
}

func TestTheCoolDownDoublesWhileProbesFailUpToItsBound(t *testing.T) {
	s := setup(t, circuit.Config{})
	s.open(t)
	var got []time.Duration
	wait := 30 * time.Second
	for range 6 {
		s.clk.Advance(wait)
		if !s.send(circuit.Unwell) {
			t.Fatalf("no probe after the %v cool-down", wait)
		}
		_, at, ok := s.b.Admit()
		if ok {
			t.Fatal("admitted after a failed probe")
		}
		wait = at.Sub(s.clk.Now())
		got = append(got, wait)
	}
	if want := "[1m0s 2m0s 4m0s 5m0s 5m0s 5m0s]"; fmt.Sprint(got) != want {
		t.Fatalf("cool-downs %v, want %s", got, want)
	}
	// A success closes it, and the next opening starts from 30 s again.
	s.clk.Advance(wait)
	s.send(circuit.Healthy)
	s.open(t)
	if _, at, _ := s.b.Admit(); at.Sub(s.clk.Now()) != 30*time.Second {
		t.Fatalf("cool-down after closing and opening again %v, want 30s", at.Sub(s.clk.Now()))
	}
}

func TestAProbeThatNeverReachedTheProviderHandsTheProbeOn(t *testing.T) {
	s := setup(t, circuit.Config{})
	s.open(t)
	s.clk.Advance(30 * time.Second)
	probe, _, _ := s.b.Admit()
	probe.Release() // its claim was refused, say
	probe.Record(circuit.Unwell)
	next, _, ok := s.b.Admit()
	if !ok || !next.Probe() || s.b.State() != circuit.HalfOpen {
		t.Fatalf("after a released probe: admitted %v, state %v; want the next send as the probe", ok, s.b.State())
	}
}

func TestALostProbeIsReplacedAfterTheProbeTimeout(t *testing.T) {
	s := setup(t, circuit.Config{ProbeTimeout: 15 * time.Second})
	s.open(t)
	s.clk.Advance(30 * time.Second)
	lost, _, _ := s.b.Admit()
	s.clk.Advance(15 * time.Second)
	next, _, ok := s.b.Admit()
	if !ok || !next.Probe() {
		t.Fatal("no new probe after the first was out for the probe timeout")
	}
	lost.Record(circuit.Healthy) // too late: ignored
	if s.b.State() != circuit.HalfOpen {
		t.Fatalf("state %v after the lost probe's late success; want half-open", s.b.State())
	}
	next.Record(circuit.Unwell)
	if s.b.State() != circuit.Open {
		t.Fatalf("state %v after the probe failed; want open", s.b.State())
	}
}

func TestVerdictsOfSendsAdmittedBeforeAChangeAreIgnored(t *testing.T) {
	s := setup(t, circuit.Config{})
	early, _, _ := s.b.Admit() // admitted while closed, answered after it opened
	s.open(t)
	early.Record(circuit.Healthy)
	if s.b.State() != circuit.Open {
		t.Fatalf("state %v; a send admitted before the circuit opened must not close it", s.b.State())
	}
}

// TestOnlyOneProbeWhenManySendsArriveAtOnce: 200 records of the provider
// handled at once, at the probe time: exactly one is admitted.
func TestOnlyOneProbeWhenManySendsArriveAtOnce(t *testing.T) {
	s := setup(t, circuit.Config{})
	s.open(t)
	s.clk.Advance(30 * time.Second)
	var admitted, probes atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	tickets := make(chan *circuit.Ticket, 200)
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if tk, _, ok := s.b.Admit(); ok {
				admitted.Add(1)
				if tk.Probe() {
					probes.Add(1)
				}
				tickets <- tk
			}
		}()
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 1 || probes.Load() != 1 {
		t.Fatalf("%d admitted, %d probes; want exactly one probe", admitted.Load(), probes.Load())
	}
	// And while closed, many at once all pass and their verdicts count.
	(<-tickets).Record(circuit.Healthy)
	var run sync.WaitGroup
	for range 200 {
		run.Add(1)
		go func() { defer run.Done(); s.send(circuit.Healthy) }()
	}
	run.Wait()
	if s.b.State() != circuit.Closed {
		t.Fatalf("state %v", s.b.State())
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    failure.Outcome
		want circuit.Verdict
	}{
		{failure.Outcome{Kind: failure.KindAmbiguous, Class: failure.ClassTimeout}, circuit.Unwell},
		{failure.Outcome{Kind: failure.KindAmbiguous, Class: failure.ClassNetwork}, circuit.Unwell},
		{failure.Outcome{Kind: failure.KindAmbiguous, Class: failure.ClassUnknown}, circuit.Unwell},
		{failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassServer}, circuit.Unwell},
		{failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassTimeout}, circuit.Unwell},
		{failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassNetwork}, circuit.Unwell},
		{failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassPaused}, circuit.Unwell},
		{failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassThrottled}, circuit.Neutral},
		{failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassUnknown}, circuit.Neutral},
		{failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassAWS}, circuit.Neutral},
		{failure.Outcome{Kind: failure.KindPermanent, Class: failure.ClassRejected}, circuit.Neutral},
		{failure.Outcome{Kind: failure.KindPermanent, Class: failure.ClassSuppressed}, circuit.Neutral},
		{failure.Outcome{Kind: failure.KindPermanent, Class: failure.ClassConfig}, circuit.Neutral},
	} {
		if got := circuit.Judge(tc.o); got != tc.want {
			t.Errorf("Judge(%v %s) = %v, want %v", tc.o.Kind, tc.o.Class, got, tc.want)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]circuit.Config{
		"no failures":        {Failures: -1},
		"negative cool-down": {CoolDown: -time.Second},
		"bound below first":  {CoolDown: time.Minute, MaxCoolDown: 30 * time.Second},
	} {
		if _, err := circuit.New(cfg); err == nil {
			t.Errorf("%s: accepted %+v", name, cfg)
		}
	}
	if b, err := circuit.New(circuit.Config{CoolDown: 10 * time.Minute}); err != nil || b.State() != circuit.Closed {
		t.Fatalf("a 10m cool-down with the default bound: %v", err)
	}
}
