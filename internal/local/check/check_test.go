package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// reviewer is a provider of this package's tests whose contract reviews a
// send that may have gone out: dead-lettered as ambiguous, never sent
// again (SES's policy before it recorded; a stage's sesAmbiguous=review is
// not visible to the checker, which reads the contract). It reports
// nothing.
const reviewer = "mailer"

func init() {
	drivers[reviewer] = provider.Driver{Name: reviewer, Title: "Mailer", Contract: provider.Contract{Ambiguous: provider.AmbiguousReview}}
}

// faultKinds are the faults a run injects; "" is none.
var faultKinds = []string{"", "500", "429", "400", "hang", "drop", "down"}

// testPlan is a plan with a delivery due now for every provider (the
// webhook and SNS retry, SES records, the reviewer reviews) and fault, one
// due next month, one expired and one cancelled for each provider, and
// three poison messages. Keys read rem-<provider>-<fault or kind>.
func testPlan() Plan {
	p := Plan{Deliveries: map[message.DeliveryKey]Planned{}, Poison: 3}
	for _, prov := range []string{webhook.Name, ses.Name, sns.Name, reviewer} {
		add := func(name, kind, fault string, end ledger.Status) {
			k := message.DeliveryKey{ReminderID: "rem-" + prov + "-" + name, Channel: "email", Provider: prov}
			if prov == sns.Name {
				k.Channel = "sms"
			}
			d := Planned{Key: k, Kind: kind, Fault: fault, Expect: end}
			if end == "" {
				d.Expect, d.Class = Expect(prov, fault)
			}
			p.Deliveries[k] = d
		}
		for _, f := range faultKinds {
			add(cmp.Or(f, "ok"), "due now", f, "")
		}
		add("future", "future", "", ledger.StatusPending)
		add("expired", "expired", "", ledger.StatusExpired)
		add("cancelled", "cancelled", "", ledger.StatusCancelled)
	}
	return p
}

// key is testPlan's key of prov's delivery named name.
func key(prov, name string) message.DeliveryKey {
	k := message.DeliveryKey{ReminderID: "rem-" + prov + "-" + name, Channel: "email", Provider: prov}
	if prov == sns.Name {
		k.Channel = "sms"
	}
	return k
}

// set changes the ledger's record of k.
func set(ev *Evidence, k message.DeliveryKey, change func(*ledger.Delivery)) {
	d := ev.Ledger[k]
	change(&d)
	ev.Ledger[k] = d
}

// waitedAt is when the first attempt of waitedHistory started.
var waitedAt = perfectEnd.Add(-time.Hour)

// waitedHistory is the history of a delivery at SES whose first attempt
// may have gone out, which waited for SES's record, then was
// dead-lettered for review by the attempt that found the longest wait
// passed.
func waitedHistory() []ledger.Entry {
	at := func(d time.Duration) string { return ledger.Format(waitedAt.Add(d)) }
	return []ledger.Entry{{At: at(-time.Second), Status: ledger.StatusQueued}, {At: at(0), Status: ledger.StatusSending, Attempt: 1},
		{At: at(2 * time.Second), Status: ledger.StatusRetrying, Attempt: 1, Class: failure.ClassAmbiguous, Note: "awaits ses record to 10:00:00Z"},
		{At: at(time.Hour), Status: ledger.StatusSending, Attempt: 2}, {At: at(time.Hour), Status: ledger.StatusDead, Attempt: 2, Class: failure.ClassAmbiguous}}
}

// reviewedUnsettled makes k dead as ambiguous after it waited for SES's
// record (waitedHistory), with copies in SES's record and its DLQ message.
func reviewedUnsettled(k message.DeliveryKey, copies int) func(*Evidence) {
	return func(ev *Evidence) {
		set(ev, k, func(d *ledger.Delivery) {
			d.Status, d.LastErrorClass, d.Attempts, d.History = ledger.StatusDead, failure.ClassAmbiguous, 2, waitedHistory()
		})
		ev.Recorded[k] = copies
		ev.DLQ = append(ev.DLQ, DeadLetter{Key: k, Class: failure.ClassAmbiguous})
	}
}

// history is a ledger history of the given statuses; "wait" stands for a
// wait for SES's record (retrying, class ambiguous).
func history(sts ...ledger.Status) []ledger.Entry {
	var h []ledger.Entry
	for _, st := range sts {
		e := ledger.Entry{Status: st}
		if st == "wait" {
			e = ledger.Entry{Status: ledger.StatusRetrying, Class: failure.ClassAmbiguous, Note: "awaits ses record to 09:20:00Z"}
		}
		h = append(h, e)
	}
	return h
}

// TestExpectIsTheFaultModel: the end each fault calls for at each
// provider (docs/reliability.md, "The fault model"), and which faults meet
// every attempt.
func TestExpectIsTheFaultModel(t *testing.T) {
	t.Parallel()
	type end struct {
		status ledger.Status
		class  failure.Class
	}
	sent, rejected, exhausted, reviewed := end{ledger.StatusSent, ""}, end{ledger.StatusDead, failure.ClassRejected},
		end{ledger.StatusDead, failure.ClassExhausted}, end{ledger.StatusDead, failure.ClassAmbiguous}
	for _, c := range []struct {
		fault                 string
		repeats               bool
		retries, ses, reviews end // the webhook and SNS retry; SES records; the reviewer reviews
	}{
		{"", false, sent, sent, sent},
		{"429", false, sent, sent, sent},
		{"500", false, sent, sent, reviewed},
		{"hang", false, sent, sent, reviewed},
		{"drop", false, sent, sent, reviewed},
		{"400", true, rejected, rejected, rejected},
		{"down", true, exhausted, exhausted, exhausted},
	} {
		if Repeats(c.fault) != c.repeats {
			t.Errorf("Repeats(%q) = %v, want %v", c.fault, !c.repeats, c.repeats)
		}
		for prov, want := range map[string]end{webhook.Name: c.retries, sns.Name: c.retries, ses.Name: c.ses, reviewer: c.reviews, "unknown": c.retries} {
			if st, cl := Expect(prov, c.fault); (end{st, cl}) != want {
				t.Errorf("Expect(%s, %q) = %s %q, want %s %q", prov, c.fault, st, cl, want.status, want.class)
			}
		}
	}
	if !records(ses.Name) || reviews(ses.Name) || !sendsOnce(ses.Name) || !reviews(reviewer) || !sendsOnce(reviewer) || sendsOnce(webhook.Name) {
		t.Error("SES records, the reviewer reviews, both send once; the webhook retries")
	}
}

// TestViolationsCatchEachBrokenInvariant: each invariant shown holding (a
// perfect run, and every end the evidence explains) and broken, with the
// violation that names it.
func TestViolationsCatchEachBrokenInvariant(t *testing.T) {
	t.Parallel()
	p := testPlan()
	t0 := perfectEnd.Add(-time.Minute)
	var (
		sent, dead, sesSent, snsSent, sesDrop = key("webhook", "ok"), key("webhook", "400"), key("ses", "ok"), key("sns", "ok"), key("ses", "drop")
		ses500, sesHang, ses429               = key("ses", "500"), key("ses", "hang"), key("ses", "429")
		rvSent, rv500, rvDrop                 = key(reviewer, "ok"), key(reviewer, "500"), key(reviewer, "drop")
	)
	// killedAt is the time of a kill during the first attempt that
	// waitedHistory records.
	killedAt := waitedAt.Add(time.Second)
	for _, c := range []struct {
		name   string
		change func(*Evidence)
		want   string // "" when the invariant holds
	}{
		{"a perfect run", func(*Evidence) {}, ""},

		// Nothing sent twice.
		{"a repeat after an answered acceptance", func(ev *Evidence) { ev.Resends = []Resend{{Key: sent.String(), Times: 1}} },
			"sent twice: " + sent.String() + " was sent 1 more time(s) after the provider had answered that it was accepted"},
		{"a repeat after a kill of the instance answered, during its invocation", func(ev *Evidence) {
			ev.Resends = []Resend{{Key: sent.String(), Times: 2, AnsweredTo: "consumer-2", Received: t0}}
			ev.Kills, ev.InvocationTimeout, ev.BatchFailures = []Kill{{Instance: "consumer-2", At: t0.Add(time.Second)}}, 6*time.Second, 1
		}, ""},
		{"a repeat after a kill of another instance", func(ev *Evidence) {
			ev.Resends = []Resend{{Key: sent.String(), Times: 1, AnsweredTo: "consumer-2", Received: t0}}
			ev.Kills, ev.InvocationTimeout, ev.BatchFailures = []Kill{{Instance: "consumer-1", At: t0.Add(time.Second)}}, 6*time.Second, 1
		}, "sent twice: " + sent.String()},
		{"a repeat after the consumer's ledger write failed", func(ev *Evidence) {
			ev.Resends, ev.LedgerFailed = []Resend{{Key: sent.String(), Times: 1}}, map[string]bool{sent.String(): true}
		}, ""},
		{"an e-mail accepted twice", func(ev *Evidence) { ev.Recorded[sesSent] = 2 },
			"sent twice: SES accepted " + sesSent.String() + " 2 times; SES does not deduplicate, so a send that may have gone out is never sent again " +
				"unless SES's record shows it did not"},
		{"an e-mail whose answer was lost, sent again", func(ev *Evidence) { ev.Recorded[sesDrop] = 2 },
			"sent twice: SES accepted " + sesDrop.String() + " 2 times"},
		{"a reviewing provider's message accepted twice", func(ev *Evidence) { ev.Recorded[rvSent] = 2 },
			"sent twice: Mailer accepted " + rvSent.String() + " 2 times; Mailer does not deduplicate, so the review policy must never send again"},
		{"an SNS message delivered twice: a standard topic's copy", func(ev *Evidence) { ev.Recorded[snsSent] = 2 }, ""},

		// Nothing lost.
		{"lost from the ledger", func(ev *Evidence) { delete(ev.Ledger, sent) }, "lost: " + sent.String() + " (due now) is not in the ledger"},
		{"sent but never accepted", func(ev *Evidence) { delete(ev.Recorded, sent) }, sent.String() + " is recorded sent, but the provider never accepted it"},
		{"accepted but not sent", func(ev *Evidence) { ev.Recorded[dead] = 1 }, dead.String() + " was accepted by the provider but is recorded dead"},
		{"accepted and reviewed: it may have gone out", func(ev *Evidence) { ev.Recorded[rv500] = 1 }, ""},
		{"dead without a DLQ message", func(ev *Evidence) {
			ev.DLQ = slices.DeleteFunc(ev.DLQ, func(m DeadLetter) bool { return m.Key == dead })
		}, dead.String() + " is dead in the ledger but has no message in the DLQ"},
		{"a poison message lost", func(ev *Evidence) {
			ev.DLQ = slices.DeleteFunc(ev.DLQ, func(m DeadLetter) bool { return m.Source == "poison-1" })
		}, "3 poison messages were put on the queue, 2 reached the DLQ"},
		{"a poison message dead-lettered twice", func(ev *Evidence) {
			ev.DLQ = append(ev.DLQ, DeadLetter{Class: failure.ClassDecode, Source: "poison-1"})
		}, ""},
		{"messages left in the work queue", func(ev *Evidence) { ev.QueueLeft = 3 }, "3 messages were left in the work queue"},
		{"a work queue that could not be read", func(ev *Evidence) { ev.QueueLeft = -1 }, "-1 messages were left in the work queue (-1: it could not be read)"},

		// Nothing overdue.
		{"due and not ended", func(ev *Evidence) {
			set(ev, sent, func(d *ledger.Delivery) { d.Status, d.DueAt = ledger.StatusRetrying, t0 })
			ev.Recorded[sent] = 0
		}, "1 deliveries were due before the end and had not ended (overdue)"},
		{"overdue after a stall", func(ev *Evidence) {
			set(ev, sent, func(d *ledger.Delivery) { d.Status, d.DueAt = ledger.StatusQueued, t0 })
			ev.Recorded[sent], ev.Stall = 0, "stall: nothing sent"
		}, "(overdue); the run's last stall: nothing sent"},
		{"pending, due after the end", func(ev *Evidence) {
			set(ev, key("webhook", "future"), func(d *ledger.Delivery) { d.DueAt = ev.End.Add(time.Second) })
		}, ""},

		// Each delivery ended as its faults call for.
		{"the wrong end", func(ev *Evidence) { set(ev, sent, func(d *ledger.Delivery) { d.Status = ledger.StatusDead }) },
			sent.String() + ` (due now, fault "") ended dead (` + " ), expected sent"},
		{"the wrong class", func(ev *Evidence) { set(ev, dead, func(d *ledger.Delivery) { d.LastErrorClass = failure.ClassServer }) },
			dead.String() + ` was dead-lettered as "server", expected "rejected"`},
		{"an SES delivery reviewed without a lapsed attempt", func(ev *Evidence) {
			set(ev, sesSent, func(d *ledger.Delivery) { d.Status, d.LastErrorClass = ledger.StatusDead, failure.ClassAmbiguous })
			ev.DLQ = append(ev.DLQ, DeadLetter{Key: sesSent, Class: failure.ClassAmbiguous})
		}, sesSent.String() + ` (due now, fault "") ended dead`},
		{"an SES delivery reviewed after a claim took over a lapsed lease, no copy at SES", func(ev *Evidence) {
			set(ev, sesSent, func(d *ledger.Delivery) {
				d.Status, d.LastErrorClass = ledger.StatusDead, failure.ClassAmbiguous
				d.History = history(ledger.StatusQueued, ledger.StatusSending, ledger.StatusSending, ledger.StatusDead)
			})
			ev.Recorded[sesSent] = 0
			ev.DLQ = append(ev.DLQ, DeadLetter{Key: sesSent, Class: failure.ClassAmbiguous})
		}, ""},
		{"a reviewing provider's delivery reviewed after a claim took over a lapsed lease", func(ev *Evidence) {
			set(ev, rvSent, func(d *ledger.Delivery) {
				d.Status, d.LastErrorClass = ledger.StatusDead, failure.ClassAmbiguous
				d.History = history(ledger.StatusQueued, ledger.StatusSending, ledger.StatusSending, ledger.StatusDead)
			})
			ev.DLQ = append(ev.DLQ, DeadLetter{Key: rvSent, Class: failure.ClassAmbiguous})
		}, ""},
		{"a reviewing provider's delivery reviewed without a lapsed attempt", func(ev *Evidence) {
			set(ev, rvSent, func(d *ledger.Delivery) { d.Status, d.LastErrorClass = ledger.StatusDead, failure.ClassAmbiguous })
			ev.DLQ = append(ev.DLQ, DeadLetter{Key: rvSent, Class: failure.ClassAmbiguous})
		}, rvSent.String() + ` (due now, fault "") ended dead`},
		{"a reviewing provider's answer lost, reviewed, and it did go out", func(ev *Evidence) { ev.Recorded[rvDrop] = 1 }, ""},

		// SES's record settles what may have gone out, or leaves it to
		// review, with no copy at SES.
		{"a 500 SES's record could not settle in the longest wait: reviewed, no copy at SES", reviewedUnsettled(ses500, 0), ""},
		{"a hang SES's record could not settle: reviewed, no copy at SES", reviewedUnsettled(sesHang, 0), ""},
		{"a 500 reviewed, though SES accepted it", reviewedUnsettled(ses500, 1),
			ses500.String() + " is dead as ambiguous (reviewed), but SES accepted it: SES's record shows it sent, and its events, read before the ledger, " +
				"should have settled it sent"},
		{"a 500 reviewed, SES accepted it, its events not waited for", func(ev *Evidence) {
			reviewedUnsettled(ses500, 1)(ev)
			ev.FeedbackRead = false
		}, ""},
		{"a lost answer reviewed, though SES holds it", reviewedUnsettled(sesDrop, 1), sesDrop.String() + " is dead as ambiguous (reviewed), but SES accepted it"},
		{"a lost answer reviewed, and SES holds no copy", reviewedUnsettled(sesDrop, 0), sesDrop.String() + ` (due now, fault "drop") ended dead`},
		{"a 429 reviewed after a wait a kill explains", func(ev *Evidence) {
			reviewedUnsettled(ses429, 0)(ev)
			ev.Kills, ev.InvocationTimeout, ev.BatchFailures = []Kill{{Instance: "consumer-1", At: killedAt}}, 6*time.Second, 1
		}, ""},
		{"a 429 reviewed after a wait no kill explains", func(ev *Evidence) {
			reviewedUnsettled(ses429, 0)(ev)
			ev.Kills, ev.InvocationTimeout, ev.BatchFailures = []Kill{{Instance: "consumer-1", At: killedAt.Add(time.Minute)}}, 6*time.Second, 1
		}, ses429.String() + ` (due now, fault "429") ended dead`},
		{"an e-mail reviewed with neither a fault nor a kill to explain it", reviewedUnsettled(sesSent, 0), sesSent.String() + ` (due now, fault "") ended dead`},

		{"a webhook delivery reviewed after a lapsed lease", func(ev *Evidence) {
			set(ev, sent, func(d *ledger.Delivery) {
				d.Status, d.LastErrorClass = ledger.StatusDead, failure.ClassAmbiguous
				d.History = history(ledger.StatusQueued, ledger.StatusSending, ledger.StatusSending, ledger.StatusDead)
			})
			ev.DLQ = append(ev.DLQ, DeadLetter{Key: sent, Class: failure.ClassAmbiguous})
		}, sent.String() + ` (due now, fault "") ended dead`},

		// No unexplained failure.
		{"an invocation failed beyond the kills", func(ev *Evidence) {
			ev.Kills, ev.BatchFailures, ev.ErrorLines = []Kill{{Instance: "consumer-1"}}, 2, []string{"1× esm: the whole batch failed"}
		}, "1 consumer invocations failed as a whole (beyond those killed); the mapping's failures by kind, kills included, " +
			"then the functions' first errors (all in .local/logs): [1× esm: the whole batch failed]"},
		{"as many failed invocations as kills", func(ev *Evidence) { ev.Kills, ev.BatchFailures = []Kill{{Instance: "consumer-1"}}, 1 }, ""},
		{"a problem on the way", func(ev *Evidence) { ev.Problems = []string{"enqueue run at 10:00:00 failed: boom"} }, "enqueue run at 10:00:00 failed: boom"},
		{"a publish that failed", func(ev *Evidence) { ev.PublishFailed = 2 }, "the enqueue could not publish 2 deliveries"},
	} {
		ev := Perfect(p)
		c.change(&ev)
		v := Check(p, ev)
		switch {
		case c.want == "" && !v.OK():
			t.Errorf("%s: violations %q, want none", c.name, v.Violations)
		case c.want != "" && !strings.Contains(strings.Join(v.Violations, "\n"), c.want):
			t.Errorf("%s: violations %q, want one with %q", c.name, v.Violations, c.want)
		}
	}
}

// TestViolationsAreCapped: at most 40 are named, then "… and more".
func TestViolationsAreCapped(t *testing.T) {
	t.Parallel()
	p := testPlan()
	ev := Perfect(p)
	for i := range 50 {
		ev.Problems = append(ev.Problems, fmt.Sprint("problem ", i))
	}
	v := Check(p, ev)
	if len(v.Violations) != 41 || v.Violations[39] != "problem 39" || v.Violations[40] != "… and more" {
		t.Fatalf("%d violations, the last %q", len(v.Violations), v.Violations[len(v.Violations)-1])
	}
}

// TestAReviewAfterAKilledAttemptIsExplained: a delivery of a provider
// that reviews whose attempt was killed mid-send, handed back to the queue
// by the repair and then sent to review, is explained by the kill; the
// same end without the ledger's mark of an unended attempt is not. At SES,
// which records, an attempt a kill ended is one the history shows never
// ended, or one followed by a wait for SES's record that started while a
// kill could end it.
func TestAReviewAfterAKilledAttemptIsExplained(t *testing.T) {
	t.Parallel()
	k := message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: reviewer}
	d := ledger.Delivery{Status: ledger.StatusDead, LastErrorClass: failure.ClassAmbiguous, Attempts: 2,
		History: history(ledger.StatusSending, ledger.StatusQueued, ledger.StatusSending, ledger.StatusDead)}
	if reviewedAfterLapse(k, d) {
		t.Error("a review without an unended attempt is explained")
	}
	d.UnendedAttempt = 1
	if !reviewedAfterLapse(k, d) {
		t.Error("a review after the repair requeued a killed attempt is not explained")
	}
	for _, prov := range []string{webhook.Name, ses.Name} {
		if reviewedAfterLapse(message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: prov}, d) {
			t.Errorf("a %s delivery's review is explained as a reviewing provider's", prov)
		}
	}

	timeout := 6 * time.Second
	waited := ledger.Delivery{Status: ledger.StatusDead, LastErrorClass: failure.ClassAmbiguous, Attempts: 2, History: waitedHistory()}
	for _, c := range []struct {
		name  string
		d     ledger.Delivery
		kills []Kill
		want  bool
	}{
		{"a wait after an attempt a kill landed in", waited, []Kill{{Instance: "consumer-3", At: waitedAt.Add(time.Second)}}, true},
		{"a wait after an attempt, the kill just before its request", waited, []Kill{{Instance: "consumer-3", At: waitedAt.Add(-50 * time.Millisecond)}}, true},
		{"a wait after an attempt, the kill before it", waited, []Kill{{At: waitedAt.Add(-time.Second)}}, false},
		{"a wait after an attempt, the kill after its invocation", waited, []Kill{{At: waitedAt.Add(timeout + time.Second)}}, false},
		{"a wait, no kill", waited, nil, false},
		{"the repair's mark of an unended attempt", d, nil, true},
		{"a claim that took over a lapsed lease", ledger.Delivery{History: history(ledger.StatusSending, ledger.StatusSending, ledger.StatusDead)}, nil, true},
	} {
		if got := killedMidSend(c.d, c.kills, timeout); got != c.want {
			t.Errorf("%s: killedMidSend = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestABudgetSpentByKillsIsExplained: a webhook or SNS delivery planned to
// be sent that kills dead-lettered, by ending every attempt of its budget
// but the last, which met its one transient fault, is explained; the
// same end is a violation wherever the evidence says something else
// happened: the provider saw more than that one request, or holds the
// delivery after a fault that was not a lost answer, an attempt recorded a
// failure or ended otherwise, the budget was not spent, or the delivery is
// SES's (which sends the attempt after an unended one to review).
func TestABudgetSpentByKillsIsExplained(t *testing.T) {
	t.Parallel()
	p := testPlan()
	w429, sns429, wDrop, ses429, rv429, plain := key("webhook", "429"), key("sns", "429"), key("webhook", "drop"), key("ses", "429"), key(reviewer, "429"),
		key("webhook", "ok")
	// w stands for a wait for SES's record (retrying, class ambiguous).
	const s, q, r, x, pe, w = ledger.StatusSending, ledger.StatusQueued, ledger.StatusRetrying, ledger.StatusDead, ledger.StatusPending, "wait"
	for _, c := range []struct {
		name                 string
		key                  message.DeliveryKey
		history              []ledger.Status
		attempts, budgetFrom int
		requests, recorded   int
		explained            bool
	}{
		{"four attempts killed, the fifth met the 429", w429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, true},
		{"at SNS too", sns429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, true},
		{"killed attempts, one handed back by the repair; the history cut", w429, []ledger.Status{s, q, s, q, s, s, s, x}, 5, 0, 1, 0, true},
		{"since a redrive", w429, []ledger.Status{s, x, s, s, s, s, s, x}, 10, 5, 1, 0, true},
		{"the last attempt's answer lost after it was accepted", wDrop, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 1, true},
		{"a 429 the provider accepted all the same", w429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 1, false},
		{"a killed attempt had reached the provider", w429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 2, 0, false},
		{"an attempt recorded a failure", w429, []ledger.Status{q, s, r, s, s, s, s, x}, 5, 0, 1, 0, false},
		{"the budget not spent since the redrive", w429, []ledger.Status{s, x, s, s, s, s, s, x}, 8, 5, 1, 0, false},
		{"a reviewing provider reviews instead", rv429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, false},
		{"at SES, four attempts killed, each followed by a wait for SES's record; the fifth met the 429", ses429,
			[]ledger.Status{s, w, s, w, s, w, s, w, s, x}, 5, 0, 1, 0, true},
		{"at SES, a wait after a failure, not a kill", ses429, []ledger.Status{s, w, s, r, s, w, s, w, s, x}, 5, 0, 1, 0, false},
		{"at SES, killed attempts without the wait SES's policy leaves", ses429, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, true},
		{"no fault to fail the last attempt", plain, []ledger.Status{pe, q, s, s, s, s, s, x}, 5, 0, 1, 0, false},
	} {
		ev := Perfect(p)
		ev.Budget, ev.Requests = 5, map[message.DeliveryKey]int{c.key: c.requests}
		set(&ev, c.key, func(d *ledger.Delivery) {
			d.Status, d.LastErrorClass, d.Attempts, d.BudgetFrom, d.History = x, failure.ClassExhausted, c.attempts, c.budgetFrom, history(c.history...)
		})
		ev.Recorded[c.key] = c.recorded
		ev.DLQ = append(ev.DLQ, DeadLetter{Key: c.key, Class: failure.ClassExhausted})
		v := Check(p, ev)
		if c.explained && (!v.OK() || v.KillsExhausted != 1) {
			t.Errorf("%s: violations %q, %d counted as spent by kills", c.name, v.Violations, v.KillsExhausted)
		}
		if !c.explained && (v.OK() || v.KillsExhausted != 0 || !strings.Contains(strings.Join(v.Violations, "\n"), c.key.String())) {
			t.Errorf("%s: violations %q (%d spent by kills), want %s named", c.name, v.Violations, v.KillsExhausted, c.key)
		}
	}
}

// TestARepeatIsExplainedOnlyByAKillDuringItsInvocation: a repeat of an
// answered acceptance is the kill's doing only if the instance the answer
// went to was killed while the invocation that sent it could still run.
func TestARepeatIsExplainedOnlyByAKillDuringItsInvocation(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	kills := []Kill{
		{Instance: "consumer-1", At: t0.Add(-time.Second)},
		{Instance: "consumer-2", At: t0.Add(-50 * time.Millisecond)},
		{Instance: "consumer-3", At: t0.Add(2 * time.Second)},
		{Instance: "consumer-4", At: t0.Add(10 * time.Second)},
	}
	for instance, want := range map[string]bool{
		"consumer-1": false, // killed before the request was sent
		"consumer-2": true,  // the request was in flight as it died
		"consumer-3": true,  // killed during the invocation
		"consumer-4": false, // killed long after the invocation ended
		"consumer-5": false, // never killed
		"":           false, // the record does not say where the answer went
	} {
		if got := killedDuring(kills, instance, t0, 6*time.Second); got != want {
			t.Errorf("killedDuring(%q) = %v, want %v", instance, got, want)
		}
		p := testPlan()
		ev := Perfect(p)
		k := key("webhook", "ok").String()
		ev.Resends, ev.Kills, ev.InvocationTimeout, ev.BatchFailures = []Resend{{Key: k, Times: 1, AnsweredTo: instance, Received: t0}}, kills, 6*time.Second, 4
		if v := Check(p, ev); v.OK() != want || want && v.Resent != 1 {
			t.Errorf("a repeat answered to %q: violations %q, %d counted as after a kill", instance, v.Violations, v.Resent)
		}
	}
}

// TestTheFiguresAreReadFromTheEvidence: the counts by status and by
// provider, the latency and duplicate window, the dead letters by reason
// and their copies, and the repeats after a kill or a failed ledger write.
func TestTheFiguresAreReadFromTheEvidence(t *testing.T) {
	t.Parallel()
	p := testPlan()
	ev := Perfect(p)
	due := ev.End.Add(-time.Minute)
	for i, name := range []string{"ok", "429", "500"} {
		k := key("webhook", name)
		set(&ev, k, func(d *ledger.Delivery) { d.DueAt, d.SentAt = due, due.Add(time.Duration(i+1)*300*time.Millisecond) })
	}
	ev.AcceptedAt = map[message.DeliveryKey]time.Time{key("webhook", "ok"): due.Add(100 * time.Millisecond)}
	ev.DLQ = append(ev.DLQ, DeadLetter{Key: key("webhook", "400"), Class: failure.ClassRejected, Reason: "provider answered 400: unknown recipient"},
		DeadLetter{Class: failure.ClassDecode, Source: "poison-0", Reason: `message: not JSON ("x")`})
	ev.Recorded[key("sns", "ok")] = 3
	ev.ProviderRequests = map[string]int64{webhook.Name: 12, ses.Name: 9, sns.Name: 8}
	ev.Resends = []Resend{{Key: "a", Times: 2, AnsweredTo: "consumer-1", Received: due}, {Key: "b", Times: 1}}
	ev.Kills, ev.InvocationTimeout, ev.BatchFailures, ev.LedgerFailed = []Kill{{Instance: "consumer-1", At: due}}, time.Second, 1, map[string]bool{"b": true}

	v := Check(p, ev)
	if !v.OK() {
		t.Fatalf("violations %q", v.Violations)
	}
	// Each provider: ok, 429 sent, and 500, hang, drop sent by the webhook,
	// SNS and SES (by its record), reviewed by the reviewer; 400 and down
	// dead; future, expired, cancelled.
	want := map[ledger.Status]int{ledger.StatusSent: 17, ledger.StatusDead: 11, ledger.StatusPending: 4, ledger.StatusExpired: 4, ledger.StatusCancelled: 4}
	if !maps.Equal(v.ByStatus, want) {
		t.Errorf("by status %v, want %v", v.ByStatus, want)
	}
	// Three sent 300, 600 and 900 ms after they fell due, the other
	// fourteen at once.
	if v.LatencyP50 != 0 || v.LatencyP99 != 900*time.Millisecond || v.LatencyMax != 900*time.Millisecond ||
		v.Histogram[0].Count != 15 || v.Histogram[1].Count != 2 {
		t.Errorf("latency p50 %v, max %v, histogram %v", v.LatencyP50, v.LatencyMax, v.Histogram)
	}
	if v.WindowMax != 200*time.Millisecond {
		t.Errorf("window max %v, want 200ms", v.WindowMax)
	}
	if v.DeadLettered["rejected: provider answered 400"] != 1 || v.DeadLettered["rejected: "] != 4 || v.DeadLettered["decode: message"] != 1 || v.DLQCopies != 2 {
		t.Errorf("dead-lettered %v, %d copies", v.DeadLettered, v.DLQCopies)
	}
	if v.Resent != 2 || v.ResentLedger != 1 {
		t.Errorf("resent %d after a kill, %d after a ledger write; want 2, 1", v.Resent, v.ResentLedger)
	}
	// SES's record settled the lost answer (drop) and, reporting later
	// e-mails but not the 500's nor the hang's, had them sent again.
	for prov, want := range map[string]ProviderCounts{
		webhook.Name: {Deliveries: 10, Sent: 5, Recorded: 5, Requests: 12},
		ses.Name:     {Deliveries: 10, Sent: 5, Recorded: 5, Settled: 1, SentAgain: 2, Requests: 9},
		sns.Name:     {Deliveries: 10, Sent: 5, Recorded: 5, Copies: 2, Requests: 8},
		reviewer:     {Deliveries: 10, Sent: 2, Recorded: 3, Reviewed: 3, Delivered: 1},
	} {
		if got := v.ByProvider[prov]; got == nil || *got != want {
			t.Errorf("%s: %+v, want %+v", prov, got, want)
		}
	}
}

// TestTheRecordFiguresAreReadFromTheHistory: at SES, the ambiguous sends
// its record settled (by the consumer after a wait, or by the feedback
// function after a review), those sent again after a wait, and those
// reviewed, counted from the ledger's history; the reviewed one with no
// copy at SES is no violation.
func TestTheRecordFiguresAreReadFromTheHistory(t *testing.T) {
	t.Parallel()
	p := testPlan()
	ev := Perfect(p)
	reviewedUnsettled(key(ses.Name, "hang"), 0)(&ev)
	// The lost answer, reviewed, then settled sent by the feedback function
	// when SES's event came.
	drop := key(ses.Name, "drop")
	set(&ev, drop, func(d *ledger.Delivery) {
		d.History = append(waitedHistory(), ledger.Entry{At: ledger.Format(waitedAt.Add(time.Hour + time.Second)), Status: ledger.StatusSent, Attempt: 2,
			Note: "sent, by SES's record"})
	})
	v := Check(p, ev)
	if !v.OK() {
		t.Fatalf("violations %q", v.Violations)
	}
	want := ProviderCounts{Deliveries: 10, Sent: 4, Recorded: 4, Reviewed: 1, Settled: 1, SentAgain: 1}
	if got := v.ByProvider[ses.Name]; *got != want {
		t.Errorf("ses: %+v, want %+v", *got, want)
	}
	// A sent entry noted otherwise, after no wait, is neither.
	if byRecord, again := settledOrSentAgain(ses.Name, ledger.Delivery{History: history(ledger.StatusSending, ledger.StatusSent)}); byRecord || again {
		t.Errorf("a plain send counted as settled %v, sent again %v", byRecord, again)
	}
	// Another provider's sent entry with SES's note is not SES's record.
	if byRecord, _ := settledOrSentAgain(webhook.Name, ev.Ledger[drop]); byRecord {
		t.Error("a webhook delivery counted as settled by a record")
	}
}

// withEvents is ev with the outcome events of its ledger's ends, each
// delivered once.
func withEvents(ev Evidence) Evidence {
	ev.EventsRead, ev.Events = true, nil
	for _, d := range ev.Ledger {
		if e, ok := outcome.Of(ledger.Delivery{}, false, d, "dev"); ok {
			ev.Events = append(ev.Events, e)
		}
	}
	return ev
}

// TestEveryEndHasItsOutcomeEvent: a run's events are checked against the
// ledger's ends: one missing, one of another outcome, one for a delivery
// the ledger does not hold are violations; repeats and earlier ends are
// counted, not violations.
func TestEveryEndHasItsOutcomeEvent(t *testing.T) {
	t.Parallel()
	p := testPlan()
	sent := key("webhook", "ok")
	for _, c := range []struct {
		name   string
		change func(*Evidence)
		want   string
	}{
		{"every end once", func(*Evidence) {}, ""},
		{"an end without its event", func(ev *Evidence) {
			ev.Events = slices.DeleteFunc(ev.Events, func(e outcome.Event) bool { return e.DeliveryKey == sent.String() })
		}, "no outcome event: " + sent.String() + " ended sent (sent), and no \"Delivery Sent\" event"},
		{"an event of another outcome", func(ev *Evidence) {
			for i, e := range ev.Events {
				if e.DeliveryKey == sent.String() {
					ev.Events[i].Outcome = outcome.DeadLettered
				}
			}
		}, "says dead-lettered of " + sent.String() + "; the ledger's end is sent"},
		{"an event for a delivery the ledger does not hold", func(ev *Evidence) {
			ev.Events = append(ev.Events, outcome.Event{EventID: "x1", Outcome: outcome.Sent, DeliveryKey: "rem-gone:email:webhook"})
		}, `names delivery "rem-gone:email:webhook", which is not in the ledger`},
		{"no events read at all", func(ev *Evidence) { ev.Events = nil }, "no outcome event"},
	} {
		ev := withEvents(Perfect(p))
		c.change(&ev)
		v := Check(p, ev)
		got := strings.Join(v.Violations, "\n")
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: violations\n%s\nwant %q", c.name, got, c.want)
		}
	}

	ev := withEvents(Perfect(p))
	ends := len(ev.Events)
	ev.Events = append(ev.Events, ev.Events[0], ev.Events[1]) // put twice: at least once
	earlier := ev.Ledger[sent]
	earlier.Status, earlier.LastErrorClass, earlier.UpdatedAt = ledger.StatusDead, failure.ClassRejected, perfectEnd.Add(-time.Hour)
	e, _ := outcome.Of(ledger.Delivery{}, false, earlier, "dev") // dead-lettered, then revived and sent
	ev.Events = append(ev.Events, e)
	v := Check(p, ev)
	if !v.OK() || v.Events != ends+1 || v.EventRepeats != 2 || v.EarlierEnds != 1 {
		t.Fatalf("violations %v; events %d (want %d), repeats %d, earlier ends %d", v.Violations, v.Events, ends+1, v.EventRepeats, v.EarlierEnds)
	}
}

// TestAnEndLeftSinceStillNeedsItsEvent: a delivery dead-lettered, revived
// and sent has both ends in its history; the event of the first is
// wanted too.
func TestAnEndLeftSinceStillNeedsItsEvent(t *testing.T) {
	t.Parallel()
	p := testPlan()
	sent := key("webhook", "ok")
	ev := Perfect(p)
	set(&ev, sent, func(d *ledger.Delivery) {
		d.History = []ledger.Entry{{At: "2026-12-01T09:00:00.000Z", Status: ledger.StatusDead, Attempt: 1, Class: failure.ClassRejected},
			{At: "2026-12-01T09:05:00.000Z", Status: ledger.StatusPending, Attempt: 1}, {At: "2026-12-01T09:06:00.000Z", Status: ledger.StatusSent, Attempt: 2}}
	})
	ev = withEvents(ev)
	if v := Check(p, ev); !strings.Contains(strings.Join(v.Violations, "\n"), "no outcome event: "+sent.String()+"'s history holds an end it has since left") {
		t.Fatalf("the dead-lettering's event is not wanted: %v", v.Violations)
	}
	d := ev.Ledger[sent]
	dead := d
	dead.Status, dead.History = ledger.StatusDead, d.History[:1]
	e, _ := outcome.End(dead, "dev")
	ev.Events = append(ev.Events, e)
	if v := Check(p, ev); !v.OK() {
		t.Fatalf("with both ends' events: %v", v.Violations)
	}
}

// TestFallbacksAreJudgedByThePlan: a fallback of a delivery the plan fails
// (a bounce at SES's simulator) must be taken and sent, once; one whose
// delivery was sent without a failing report must stay held, and sent it
// is a delivery on two channels.
func TestFallbacksAreJudgedByThePlan(t *testing.T) {
	email := message.DeliveryKey{ReminderID: "rem-fb", Channel: "email", Provider: "ses"}
	sms := message.DeliveryKey{ReminderID: "rem-fb", Channel: "sms", Provider: "sns"}
	plan := func(bounce bool) Plan {
		primary := Planned{Key: email, Kind: "due now", Expect: ledger.StatusSent, Feedback: ledger.Feedback{Kind: ledger.FeedbackDelivered}}
		fb := Planned{Key: sms, Kind: "fallback of due now", Expect: ledger.StatusHeld, FallbackOf: email}
		if bounce {
			primary.Feedback, primary.Simulator, fb.Expect = ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true}, "bounce@simulator.amazonses.com", ledger.StatusSent
		}
		return Plan{Deliveries: map[message.DeliveryKey]Planned{email: primary, sms: fb}}
	}
	for _, tc := range []struct {
		name   string
		bounce bool
		change func(ev *Evidence)
		want   []string
	}{
		{"a bounce, its fallback sent", true, func(*Evidence) {}, nil},
		{"a bounce, its fallback never taken", true, func(ev *Evidence) {
			d := ev.Ledger[sms]
			d.Status = ledger.StatusHeld
			ev.Ledger[sms], ev.Recorded[sms] = d, 0
		}, []string{"rem-fb:sms:sns (fallback of due now, fault \"\") ended held", "expected sent"}},
		{"a delivery sent, its fallback held", false, func(*Evidence) {}, nil},
		{"a delivery sent, its fallback sent too", false, func(ev *Evidence) {
			d := ev.Ledger[sms]
			d.Status = ledger.StatusSent
			ev.Ledger[sms], ev.Recorded[sms] = d, 1
		}, []string{"sent on two channels: rem-fb:email:ses went out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.bounce)
			ev := Perfect(p)
			tc.change(&ev)
			v := Check(p, ev)
			all := strings.Join(v.Violations, "\n")
			if len(tc.want) == 0 && !v.OK() {
				t.Fatalf("violations %v; want none", v.Violations)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("violations %v; want one with %q", v.Violations, w)
				}
			}
		})
	}
}
