package demo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/local/sink"
	"github.com/nudgehq/nudge/pkg/message"
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
)

// kinds in the order the summary lists them.
var kinds = []kind{dueNow, dueSoon, future, expired, cancelled, lateCancel}

// share of the reminders per kind; due now takes the rest.
var shares = map[kind]float64{dueSoon: 0.35, future: 0.10, expired: 0.05, cancelled: 0.03, lateCancel: 0.03}

// planned is one delivery of the mix, with the outcome its faults call for.
type planned struct {
	key    message.DeliveryKey
	kind   kind
	fault  string // a Faults kind ("500", …) or ""
	expect ledger.Status
	// class is the failure class a dead delivery must carry.
	class failure.Class
}

// plannedReminder is one reminder of the mix.
type plannedReminder struct {
	id         string
	kind       kind
	soon       time.Duration // how far ahead of its creation a due-soon reminder falls due
	deliveries []*planned
}

// plan is the whole mix, drawn from a seeded source.
type plan struct {
	reminders []*plannedReminder
	byKey     map[message.DeliveryKey]*planned
	poison    []string
	cfg       Config

	mu    sync.Mutex
	rnd   *rand.Rand      // for latencies, drawn as requests arrive
	fixed map[string]bool // fault kinds whose cause an operator fixed (fix)
}

func newPlan(cfg Config) *plan {
	rnd := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6e75646765))
	p := &plan{byKey: map[message.DeliveryKey]*planned{}, cfg: cfg, rnd: rand.New(rand.NewPCG(uint64(cfg.Seed), 1))}
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
	for i, k := range order {
		r := &plannedReminder{id: fmt.Sprintf("rem-%05d", i+1), kind: k, soon: time.Duration(1 + rnd.Int64N(int64(cfg.Spread)))}
		email := webhook.Name
		if rnd.Float64() < sesShare {
			email = ses.Name
		}
		keys := []message.DeliveryKey{{ReminderID: r.id, Channel: "email", Provider: email}}
		if rnd.Float64() < smsShare {
			keys = append(keys, message.DeliveryKey{ReminderID: r.id, Channel: "sms", Provider: sns.Name})
		}
		for _, key := range keys {
			d := &planned{key: key, kind: k}
			switch k {
			case future:
				d.expect = ledger.StatusPending
			case expired:
				d.expect = ledger.StatusExpired
			case cancelled, lateCancel:
				d.expect = ledger.StatusCancelled
			default:
				d.fault = drawFault(rnd.Float64(), f)
				d.expect, d.class = expectFor(key.Provider, d.fault)
			}
			r.deliveries = append(r.deliveries, d)
			p.byKey[d.key] = d
		}
		p.reminders = append(p.reminders, r)
	}
	for i := range cfg.Poison {
		p.poison = append(p.poison, poisonBodies[i%len(poisonBodies)])
	}
	return p
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
var poisonBodies = []string{
	`not json at all`,
	`{"v":2,"reminderId":"rem-from-the-future","channel":"email","provider":"webhook","dueAt":"2026-01-01T00:00:00Z"}`,
	`{"v":1,"channel":"email","provider":"webhook","dueAt":"2026-01-01T00:00:00Z"}`,
	`{"v":1,"reminderId":"rem bad id","channel":"email","provider":"webhook","dueAt":"2026-01-01T00:00:00Z"}`,
	`{"v":1,"reminderId":"rem-1","channel":"email","provider":"webhook","dueAt":"tomorrow"}`,
	`{"v":1,"reminderId":"rem-purged-long-ago","channel":"email","provider":"webhook","dueAt":"2026-01-01T00:00:00Z"}`,
	`[1,2,3]`,
}

// input is the reminder's intake record, with times relative to now.
func (p *plan) input(r *plannedReminder, now time.Time, soon time.Duration) schedule.Input {
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
		di := schedule.DeliveryInput{Channel: d.key.Channel, Provider: d.key.Provider,
			RecipientRef: fmt.Sprintf("contact/%s/%d", r.id, i), TemplateRef: "renewal-notice-v3"}
		if d.key.Provider == ses.Name {
			di.TemplateRef, di.Address = "renewal-notice", r.id+"@customers.example"
		}
		in.Deliveries = append(in.Deliveries, di)
	}
	return in
}

// lateCancelDue is how far ahead a late-cancelled reminder falls due: far
// enough that its message is published (delayed) and still waiting when
// the cancel comes, a few ticks after the intake ends.
func (p *plan) lateCancelDue() time.Duration {
	return max(p.cfg.Spread, 8*p.cfg.Tick) + 5*time.Second
}

// repeats reports whether a fault meets every request of its delivery, as
// the real thing does, or only the first. What a provider does on the
// next attempt (docs/reliability.md, "The fault model"):
//
//	500   a transient server error: the next attempt is answered
//	429   throttled: the next attempt, after Retry-After, is answered
//	hang  no answer before the timeout: the next attempt is answered
//	drop  accepted, the answer lost: the next attempt is answered (the
//	      webhook by its idempotency key, as a duplicate)
//	400   a permanent rejection: every attempt is rejected again — the
//	      request is invalid, so a retry after a crash is too
//	down  an outage for the run: every attempt fails
func repeats(fault string) bool { return fault == "400" || fault == "down" }

// repeats is the package's repeats, unless an operator fixed the cause of
// that kind of fault since (fix).
func (p *plan) repeats(fault string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return repeats(fault) && !p.fixed[fault]
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

// sinkPlan is the provider's behaviour: each delivery's fault on its first
// request, or on every request for a fault that repeats, and a random
// latency on all.
func (p *plan) sinkPlan() sink.Plan {
	return func(key string, attempt int) sink.Fault {
		k, err := message.ParseDeliveryKey(key)
		var fault string
		if d, ok := p.byKey[k]; ok && err == nil {
			fault = d.fault
		}
		f := sink.Fault{Kind: "ok", Delay: p.latency()}
		if attempt > 1 && !p.repeats(fault) {
			return f
		}
		switch fault {
		case "500", "down":
			f.Kind = "500"
		case "429":
			f.Kind, f.RetryAfter = "429", retryAfter
		case "400", "hang", "drop":
			f.Kind = fault
		}
		return f
	}
}

func (p *plan) latency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	mean := float64(p.cfg.Latency)
	return time.Duration(min(p.rnd.ExpFloat64()*mean, 10*mean))
}

// count returns how many deliveries of the plan satisfy ok.
func (p *plan) count(ok func(*planned) bool) int {
	n := 0
	for _, d := range p.byKey {
		if ok(d) {
			n++
		}
	}
	return n
}

// duplicates is how many due-now deliveries get a second message.
func (p *plan) duplicates() int {
	return int(math.Round(p.cfg.Duplicates * float64(p.count(func(d *planned) bool { return d.kind == dueNow }))))
}
