package demo

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/local/sesevents"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// kind is a reminder's place in the mix.
type kind string

const (
	dueNow     kind = "due now"
	dueSoon    kind = "due soon"
	future     kind = "future"
	expired    kind = "expired"
	cancelled  kind = "cancelled"      // cancelled before its hand-off
	lateCancel kind = "cancelled late" // cancelled after its message was published
	// Due now, each delivery with a send window (recipient.go): one that
	// opens within the run, one open already, one that opens only after
	// the run.
	windowWaits kind = "waits for its window"
	windowOpen  kind = "in its window"
	windowShut  kind = "window shut all run"
	// Series whose first occurrence falls due in the run.
	daily  kind = "daily series"
	weekly kind = "weekly series"
)

// kinds in the order the summary lists them.
var kinds = []kind{dueNow, dueSoon, future, expired, cancelled, lateCancel, windowWaits, windowOpen, windowShut, daily, weekly}

// The providers, by channel: e-mail goes out through SES for half the
// reminders and the webhook for the other half; SMS is published to SNS,
// for the team's own SMS gateway.
const (
	sesShare = 0.5
	smsShare = 0.3
)

// simulatorShare of the SES deliveries due now without a fault go to SES's
// mailbox simulator, its addresses taken in turn; the others to
// <id>@customers.example, which SES delivers.
const simulatorShare = 0.1

// simulator are the mailbox simulator's addresses, each with the feedback
// SES's events about an e-mail to it leave standing (sesevents stands in
// for them as SES behaves in AWS).
var simulator = []struct {
	address  string
	feedback ledger.Feedback
}{
	{sesevents.Success, ledger.Feedback{Kind: ledger.FeedbackDelivered}},
	{sesevents.Bounce, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true}},
	{sesevents.Complaint, ledger.Feedback{Kind: ledger.FeedbackComplained}},
	{sesevents.OutOfOffice, ledger.Feedback{Kind: ledger.FeedbackDelivered}},
	{sesevents.SuppressionList, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true}},
}

// share of the reminders per kind; due now takes the rest.
var shares = map[kind]float64{dueSoon: 0.35, future: 0.10, expired: 0.05, cancelled: 0.03, lateCancel: 0.03,
	windowWaits: 0.03, windowOpen: 0.02, windowShut: 0.02, daily: 0.01, weekly: 0.01}

// plannedReminder is one reminder of the mix.
type plannedReminder struct {
	id         string
	kind       kind
	soon       time.Duration // how far ahead of its creation a due-soon reminder falls due
	deliveries []check.Planned
	// fallbacks are the fallbacks it names, by the index in deliveries of
	// the delivery each stands in for.
	fallbacks map[int]check.Planned
	// zone is the recipient's, for a reminder with send windows or a
	// series; start its first occurrence (a series') or its window's
	// (windowed kinds), drawn once, at its first creation attempt.
	zone     string
	window   localtime.Window
	windowIn *schedule.WindowInput
	opens    time.Time
	start    localtime.Wall
}

// plan is the whole mix, drawn from a seeded source, and what each of its
// deliveries must end as (check.Plan).
type plan struct {
	check.Plan
	reminders []*plannedReminder
	poison    []string
	cfg       Config

	// rejected counts the deliveries planned rejected, as planFallbacks
	// meets them.
	rejected int

	mu    sync.Mutex
	rnd   *rand.Rand      // for latencies, drawn as requests arrive
	fixed map[string]bool // fault kinds whose cause an operator fixed (fix)
}

func newPlan(cfg Config) *plan {
	rnd := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6e75646765))
	p := &plan{Plan: check.Plan{Deliveries: map[message.DeliveryKey]check.Planned{}}, cfg: cfg, rnd: rand.New(rand.NewPCG(uint64(cfg.Seed), 1))}
	n := cfg.Reminders
	counts := map[kind]int{dueNow: n}
	for _, k := range kinds[1:] {
		counts[k] = int(math.Round(shares[k] * float64(n)))
		counts[dueNow] -= counts[k]
	}
	// Expired reminders go first, so they expire before the first tick;
	// the rest are shuffled.
	var order, rest []kind
	for _, k := range kinds {
		for range counts[k] {
			if k == expired {
				order = append(order, k)
			} else {
				rest = append(rest, k)
			}
		}
	}
	rnd.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	order = append(order, rest...)

	f := *cfg.Faults
	// The simulator's share is drawn from a source of its own, so that the
	// mix of a seed is what it was before.
	sim, simulated := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x73696d)), 0
	// So are the fallbacks.
	fbr := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x66616c6c))
	for i, k := range order {
		r := &plannedReminder{id: fmt.Sprintf("rem-%05d", i+1), kind: k, soon: time.Duration(1 + rnd.Int64N(int64(cfg.Spread)))}
		r.zone = zoneOf(k, i)
		if k.series() {
			// Its occurrences are the checker's to plan (check.Plan.Series):
			// their ids and times come from the first, drawn at creation.
			p.reminders = append(p.reminders, r)
			continue
		}
		email := stoodIn(provider.SinkStandIn)
		if rnd.Float64() < sesShare {
			email = stoodIn(provider.EmailStandIn)
		}
		keys := []message.DeliveryKey{{ReminderID: r.id, Channel: "email", Provider: email}}
		if rnd.Float64() < smsShare {
			keys = append(keys, message.DeliveryKey{ReminderID: r.id, Channel: "sms", Provider: stoodIn(provider.TopicStandIn)})
		}
		for _, key := range keys {
			d := check.Planned{Key: key, Kind: string(k)}
			switch k {
			case future:
				d.Expect = ledger.StatusPending
			case expired:
				d.Expect = ledger.StatusExpired
			case cancelled, lateCancel:
				d.Expect = ledger.StatusCancelled
			case windowShut:
				d.Expect = ledger.StatusPending
			case windowWaits, windowOpen:
				d.Expect = ledger.StatusSent // no fault: the run checks the window
			default:
				d.Fault = drawFault(rnd.Float64(), f)
				d.Expect, d.Class = check.Expect(key.Provider, d.Fault)
			}
			if key.Provider == stoodIn(provider.EmailStandIn) {
				// What SES's events say once it sent the e-mail.
				d.Feedback = ledger.Feedback{Kind: ledger.FeedbackDelivered}
				if k == dueNow && d.Fault == "" && sim.Float64() < simulatorShare {
					m := simulator[simulated%len(simulator)]
					d.Simulator, d.Feedback = m.address, m.feedback
					simulated++
				}
			}
			r.deliveries = append(r.deliveries, d)
			p.Deliveries[d.Key] = d
		}
		p.planFallbacks(r, keys, fbr)
		p.reminders = append(p.reminders, r)
	}
	p.everyFault(f)
	for i := range cfg.Poison {
		p.poison = append(p.poison, poisonBodies[i%len(poisonBodies)])
	}
	p.Poison = len(p.poison)
	return p
}

// Shares of the deliveries that name a fallback: every e-mail to a mailbox
// of SES's simulator that fails (bounce@, complaint@, suppressionlist@);
// of those the provider rejects (400, dead-lettered), every other one; of
// the expired ones, fallbackShare; of the others, heldShare (their
// fallback stays held).
const (
	fallbackShare = 0.25
	heldShare     = 0.02
)

// planFallbacks names a fallback for some of r's deliveries (keys): an SMS
// through the topic's stand-in, or, when r already has one, through the
// sink. A fallback meets no fault.
func (p *plan) planFallbacks(r *plannedReminder, keys []message.DeliveryKey, rnd *rand.Rand) {
	for i, d := range r.deliveries {
		if d.Key.Channel != "email" {
			continue // one fallback: the e-mail's
		}
		share := heldShare
		switch {
		case d.Feedback.Failed():
			share = 1
		case d.Expect == ledger.StatusDead && d.Class == failure.ClassRejected:
			// Every other one, the first not: a rejected delivery whose
			// fallback was taken is not redriven, and the demo's operator
			// redrives the rejected ones once their cause is fixed.
			if p.rejected++; p.rejected%2 == 0 {
				share = 1
			} else {
				share = 0
			}
		case d.Expect == ledger.StatusExpired:
			share = fallbackShare
		}
		if rnd.Float64() >= share {
			continue
		}
		fk := message.DeliveryKey{ReminderID: r.id, Channel: "sms", Provider: stoodIn(provider.TopicStandIn)}
		if slices.Contains(keys, fk) {
			fk.Provider = stoodIn(provider.SinkStandIn)
		}
		fb := check.Planned{Key: fk, Kind: "fallback of " + d.Kind, Expect: ledger.StatusHeld, FallbackOf: d.Key}
		if share > heldShare {
			fb.Expect = ledger.StatusSent
		}
		if r.fallbacks == nil {
			r.fallbacks = map[int]check.Planned{}
		}
		r.fallbacks[i] = fb
		p.Deliveries[fk] = fb
	}
}

// mixLine counts the reminders by kind, for the run's first line.
func (p *plan) mixLine() string {
	counts := map[kind]int{}
	for _, r := range p.reminders {
		counts[r.kind]++
	}
	line := ""
	for _, k := range kinds {
		if line != "" {
			line += ", "
		}
		line += fmt.Sprintf("%d %s", counts[k], k)
	}
	return line
}

// everyFault gives each fault kind f asks for that the draw left out to a
// due-now delivery without a fault, a fallback or a simulator mailbox (the
// first in the plan's order): a small run meets every fault it asks for,
// whatever the seed.
func (p *plan) everyFault(f Faults) {
	for _, c := range []struct {
		name  string
		share float64
	}{{"500", f.Server}, {"429", f.Throttled}, {"400", f.Rejected}, {"hang", f.Hang}, {"drop", f.Drop}, {"down", f.Down}} {
		if c.share <= 0 || p.count(func(d check.Planned) bool { return d.Fault == c.name }) > 0 {
			continue
		}
	find:
		for _, r := range p.reminders {
			for i, d := range r.deliveries {
				if _, fb := r.fallbacks[i]; r.kind != dueNow || d.Fault != "" || d.Simulator != "" || fb {
					continue
				}
				d.Fault = c.name
				d.Expect, d.Class = check.Expect(d.Key.Provider, d.Fault)
				r.deliveries[i], p.Deliveries[d.Key] = d, d
				break find
			}
		}
	}
}

// drawFault picks a fault kind for a uniform draw u.
func drawFault(u float64, f Faults) string {
	for _, c := range []struct {
		name  string
		share float64
	}{{"500", f.Server}, {"429", f.Throttled}, {"400", f.Rejected}, {"hang", f.Hang}, {"drop", f.Drop}, {"down", f.Down}} {
		if u < c.share {
			return c.name
		}
		u -= c.share
	}
	return ""
}

// poisonBodies break the queue contract in different ways; the consumer
// must dead-letter each with its reason, never crash or retry.
var poisonBodies = func(p string) []string {
	return []string{
		`not json at all`,
		`{"v":2,"reminderId":"rem-from-the-future","channel":"email","provider":"` + p + `","dueAt":"2026-01-01T00:00:00Z"}`,
		`{"v":1,"channel":"email","provider":"` + p + `","dueAt":"2026-01-01T00:00:00Z"}`,
		`{"v":1,"reminderId":"rem bad id","channel":"email","provider":"` + p + `","dueAt":"2026-01-01T00:00:00Z"}`,
		`{"v":1,"reminderId":"rem-1","channel":"email","provider":"` + p + `","dueAt":"tomorrow"}`,
		`{"v":1,"reminderId":"rem-purged-long-ago","channel":"email","provider":"` + p + `","dueAt":"2026-01-01T00:00:00Z"}`,
		`[1,2,3]`,
	}
}(registry.Default())

// input is the reminder's intake record, with times relative to now.
func (p *plan) input(r *plannedReminder, now time.Time, soon time.Duration) (schedule.Input, error) {
	if r.kind.series() {
		return p.seriesInput(r, now), nil
	}
	var window *schedule.WindowInput
	if r.kind.windowed() {
		w, err := r.drawWindow(now, p.cfg.Spread)
		if err != nil {
			return schedule.Input{}, err
		}
		window = &w
	}
	due, expires := now, time.Time{}
	switch r.kind {
	case dueSoon:
		due = now.Add(soon)
	case future:
		due = now.Add(30 * 24 * time.Hour)
	case expired:
		due, expires = now.Add(-10*time.Minute), now.Add(expiredWindow)
	case cancelled:
		due = now.Add(p.cfg.Spread)
	case lateCancel:
		due = now.Add(p.lateCancelDue())
	}
	// The metadata is what the e-mail template renders.
	in := schedule.Input{ID: r.id, AccountRef: "acct-demo", DueAt: due.Format(time.RFC3339Nano),
		Metadata: map[string]string{"demo": string(r.kind), "plan": "Pro", "renewsOn": due.Format("2 January 2006"), "reference": r.id}}
	if !expires.IsZero() {
		in.ExpiresAt = expires.Format(time.RFC3339Nano)
	}
	for i, d := range r.deliveries {
		di := schedule.DeliveryInput{Channel: d.Key.Channel, Provider: d.Key.Provider,
			RecipientRef: fmt.Sprintf("contact/%s/%d", r.id, i), TemplateRef: "renewal-notice-v3", Window: window}
		if drv, _ := registry.Lookup(d.Key.Provider); drv.Intake.Address == provider.EmailAddress {
			di.TemplateRef, di.Address = "renewal-notice", cmp.Or(d.Simulator, r.id+"@customers.example")
		}
		if fb, ok := r.fallbacks[i]; ok {
			di.Fallback = &schedule.FallbackInput{Channel: fb.Key.Channel, Provider: fb.Key.Provider,
				RecipientRef: fmt.Sprintf("contact/%s/%d/sms", r.id, i), TemplateRef: "renewal-notice-v3"}
		}
		in.Deliveries = append(in.Deliveries, di)
	}
	return in, nil
}

// lateCancelDue is how far ahead a late-cancelled reminder falls due: far
// enough that its message is published (delayed) and still waiting when
// the cancel comes, a few ticks after the intake ends.
func (p *plan) lateCancelDue() time.Duration {
	return max(p.cfg.Spread, 8*p.cfg.Tick) + 5*time.Second
}

// repeats is check.Repeats (the fault model), unless an operator fixed the
// cause of that kind of fault since (fix).
func (p *plan) repeats(fault string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return check.Repeats(fault) && !p.fixed[fault]
}

// fix records that an operator fixed the cause of a kind of fault (a
// rejected request: the receiver or the template): a delivery redriven
// after it is answered.
func (p *plan) fix(fault string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fixed == nil {
		p.fixed = map[string]bool{}
	}
	p.fixed[fault] = true
}

func (p *plan) latency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	mean := float64(p.cfg.Latency)
	return time.Duration(min(p.rnd.ExpFloat64()*mean, 10*mean))
}

// count returns how many deliveries of the plan satisfy ok.
func (p *plan) count(ok func(check.Planned) bool) int {
	n := 0
	for _, d := range p.Deliveries {
		if ok(d) {
			n++
		}
	}
	return n
}

// duplicates is how many due-now deliveries get a second message.
func (p *plan) duplicates() int {
	return int(math.Round(p.cfg.Duplicates * float64(p.count(func(d check.Planned) bool { return d.Kind == string(dueNow) }))))
}
