package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
)

// TestEveryEventNamesItsFunction: each sample event is for the consumer or
// the enqueue, and an event for neither is refused with what it is.
func TestEveryEventNamesItsFunction(t *testing.T) {
	files, _ := filepath.Glob("../../events/*.json")
	if len(files) < 7 {
		t.Fatalf("found %d sample events", len(files))
	}
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		fn, err := functionFor(raw)
		if strings.HasPrefix(filepath.Base(f), "outcome-") {
			if err == nil || !strings.Contains(err.Error(), "an outcome event Nudge publishes") {
				t.Errorf("%s: %q, %v; want it named an outcome event, no function's input", f, fn, err)
			}
			continue
		}
		want := "consumer"
		if strings.HasPrefix(filepath.Base(f), "schedule") {
			want = "enqueue"
		}
		if err != nil || fn != want {
			t.Errorf("%s: %q, %v; want %s", f, fn, err, want)
		}
	}
	for raw, want := range map[string]string{
		`{"Records":[{"eventSource":"aws:s3"}]}`:           "come from \"aws:s3\"",
		`{"source":"aws.codecommit","detail-type":"Push"}`: "neither an SQS event",
		`[1,2]`: "not a JSON object",
	} {
		if _, err := functionFor([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", raw, err, want)
		}
	}
}

// TestLocalInvokeRunsEverySampleEvent runs the real bootstraps under the
// Lambda runtime interface emulator against fresh stand-ins with each file
// in events/, and checks what `make invoke` shows for it.
func TestLocalInvokeRunsEverySampleEvent(t *testing.T) {
	standintest.AWSConfig(t) // skips (or fails under CI) without the stand-ins
	bins := standintest.Bootstraps(t, "consumer", "enqueue")
	sent, dead, pending, expired := ledger.StatusSent, ledger.StatusDead, ledger.StatusPending, ledger.StatusExpired
	for _, c := range []struct {
		event, fault string
		statuses     map[string]ledger.Status
		check        func(*invokeResult) string
	}{
		{"sqs-batch.json", "rem-185=400", map[string]ledger.Status{"rem-184:email:webhook": sent, "rem-185:sms:webhook": dead, "rem-186:email:webhook": sent},
			func(r *invokeResult) string {
				if len(r.SQSResponse.BatchItemFailures) != 0 || r.Accepted != 2 || r.DLQ.Visible != 1 {
					return "want no failures, 2 accepted, 1 dead-lettered"
				}
				return ""
			}},
		{"sqs-duplicates.json", "", map[string]ledger.Status{"rem-500:email:webhook": sent},
			func(r *invokeResult) string {
				if r.Accepted != 1 {
					return "the duplicate reached the provider"
				}
				return ""
			}},
		{"sqs-fifo-batch.json", "", map[string]ledger.Status{"rem-300:email:webhook": sent, "rem-301:email:webhook": sent, "rem-302:email:webhook": sent}, nil},
		{"sqs-poison.json", "", map[string]ledger.Status{"rem-402:email:webhook": sent},
			func(r *invokeResult) string {
				if r.DLQ.Visible != 3 || len(r.SQSResponse.BatchItemFailures) != 0 {
					return "want the 3 poison bodies dead-lettered, and no failures"
				}
				return ""
			}},
		{"sqs-redriven.json", "", map[string]ledger.Status{"rem-600:email:webhook": sent}, nil},
		{"sqs-email.json", "", map[string]ledger.Status{"rem-701:email:ses": sent, "rem-702:email:ses": sent},
			func(r *invokeResult) string {
				if len(r.Emails) != 2 || r.Emails[0].Subject == "" || !strings.Contains(r.Emails[0].Subject, "Pro") {
					return "want 2 rendered e-mails in the SES stand-in"
				}
				return ""
			}},
		{"sqs-sns.json", "", map[string]ledger.Status{"rem-801:sms:sns": sent, "rem-802:push:sns": sent},
			func(r *invokeResult) string {
				if len(r.Published) != 2 || r.Accepted != 0 {
					return "want 2 messages at the topic's subscriber and none at the webhook"
				}
				return ""
			}},
		// The enqueue hands off by cursor: a published delivery stays
		// pending in the ledger (no write per delivery); the queue shows it.
		{"scheduled.json", "", map[string]ledger.Status{"rem-201:email:webhook": pending, "rem-201:sms:webhook": pending, "rem-202:email:webhook": pending,
			"rem-203:email:webhook": pending, "rem-204:push:webhook": expired},
			func(r *invokeResult) string {
				if r.Report.Enqueued != 3 || r.Report.Expired != 1 || r.Work.Visible != 2 || r.Work.Delayed != 1 {
					return "want 3 enqueued (2 ready, 1 delayed) and 1 expired"
				}
				return ""
			}},
		{"scheduler.json", "", map[string]ledger.Status{"rem-204:push:webhook": expired},
			func(r *invokeResult) string {
				if r.Report.Enqueued != 3 || r.Work.Visible != 2 || r.Work.Delayed != 1 {
					return "want 3 enqueued (2 ready, 1 delayed)"
				}
				return ""
			}},
	} {
		t.Run(c.event, func(t *testing.T) {
			var out bytes.Buffer
			fn := "consumer"
			if strings.HasPrefix(c.event, "schedule") {
				fn = "enqueue"
			}
			res, err := invoke(context.Background(), &out, invokeOptions{event: "../../events/" + c.event, bootstrap: filepath.Join(bins, fn, "bootstrap"), fault: c.fault})
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if res.Function != fn {
				t.Errorf("ran the %s", res.Function)
			}
			for k, s := range c.statuses {
				if res.Statuses[k] != s {
					t.Errorf("%s is %q, want %q", k, res.Statuses[k], s)
				}
			}
			if c.check != nil {
				if problem := c.check(res); problem != "" {
					t.Error(problem)
				}
			}
			for _, line := range []string{"REPORT RequestId", `"_aws"`} {
				if !strings.Contains(res.Output, line) {
					t.Errorf("function output lacks %q", line)
				}
			}
			if t.Failed() {
				t.Log(out.String())
			}
		})
	}
	var out bytes.Buffer
	if _, err := invoke(context.Background(), &out, invokeOptions{event: "../../events/scheduled.json", function: "consumer"}); err == nil ||
		!strings.Contains(err.Error(), "is an event for the enqueue function, not the consumer") {
		t.Errorf("a schedule event for the consumer: %v", err)
	}
}

// TestTheSeedOfAnEventDatedAheadLivesPastItsDueTime: make invoke seeds each
// delivery an event names to live a day past the later of now and its due
// time, so an event dated ahead of the machine's clock (a deferral to try,
// or a machine whose clock is behind the sample events) seeds too: before,
// it was refused for expiring before it was due.
func TestTheSeedOfAnEventDatedAheadLivesPastItsDueTime(t *testing.T) {
	t.Parallel()
	led, err := ledger.NewMemory(ledger.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(400 * 24 * time.Hour).UTC().Truncate(time.Second)
	body, _ := message.Encode(message.Message{ReminderID: "rem-ahead", Channel: "email", Provider: "webhook", DueAt: ahead})
	keys, err := seed(context.Background(), led, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: string(body)}}})
	if err != nil || len(keys) != 1 {
		t.Fatalf("seed: %v, %v", keys, err)
	}
	d, err := led.Get(context.Background(), keys[0])
	if err != nil || !d.ExpiresAt.Equal(ahead.Add(24*time.Hour)) {
		t.Fatalf("seeded %+v, %v; want it to expire a day after %s", d.ExpiresAt, err, ahead)
	}
}
