package main

// What nudge local invoke runs: the event's function under the Lambda
// emulator, against fresh stand-ins seeded with what the event names.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/esm"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// invokeOptions are local invoke's flags.
type invokeOptions struct {
	event, function, bootstrap, fault string
}

// invokeResult is what one local invocation did.
type invokeResult struct {
	Function string
	// Response is the function's answer; SQSResponse it read as the
	// consumer's, Report as the enqueue's.
	Response    json.RawMessage
	SQSResponse events.SQSEventResponse
	Report      enqueue.Report
	Statuses    map[string]ledger.Status
	Accepted    int
	Duplicates  int
	DLQ         status.Depth
	Work        status.Depth
	Output      string
	// Emails are the e-mails the SES stand-in sent for the event's
	// deliveries; Published the bodies the SNS topic's subscriber got.
	Emails    []standin.SentEmail
	Published []string
}

// emailsFor are the e-mails the SES stand-in holds for keys.
func emailsFor(ctx context.Context, endpoint string, keys []message.DeliveryKey) ([]standin.SentEmail, error) {
	all, err := standin.SentEmails(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k.String()] = true
	}
	var out []standin.SentEmail
	for _, e := range all {
		if want[e.Header(ses.HeaderDeliveryKey)] && len(e.Destination.To) == 1 {
			out = append(out, e)
		}
	}
	return out, nil
}

// publishedTo drains the subscriber queue of the delivery topic.
func publishedTo(ctx context.Context, q *sqs.Client, url string) ([]string, error) {
	var out []string
	for {
		m, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			return nil, err
		}
		if len(m.Messages) == 0 {
			return out, nil
		}
		for _, msg := range m.Messages {
			out = append(out, aws.ToString(msg.Body))
			_, _ = q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: msg.ReceiptHandle})
		}
	}
}

// functionFor names the function an event is for.
func functionFor(raw []byte) (string, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if json.Unmarshal(raw, &probe) == nil && len(probe.Records) > 0 {
		if probe.Records[0].EventSource == "aws:sqs" {
			return "consumer", nil
		}
		return "", fmt.Errorf("the event's records come from %q; the consumer takes SQS events (aws:sqs)", probe.Records[0].EventSource)
	}
	var bus struct {
		Source string `json:"source"`
	}
	if json.Unmarshal(raw, &bus) == nil && bus.Source == outcome.Source {
		return "", errors.New("an outcome event Nudge publishes (docs/events.md), for your rules and targets: no Nudge function takes it")
	}
	if _, err := enqueue.DecodeTick(raw); err != nil {
		return "", fmt.Errorf("neither an SQS event (consumer) nor a schedule event (enqueue): %w", err)
	}
	return "enqueue", nil
}

func invoke(ctx context.Context, out io.Writer, o invokeOptions) (*invokeResult, error) {
	raw, err := os.ReadFile(o.event)
	if err != nil {
		return nil, fmt.Errorf("%w (the sample events are in events/)", err)
	}
	fn, err := functionFor(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.event, err)
	}
	if o.function != "" && o.function != fn {
		return nil, fmt.Errorf("%s is an event for the %s function, not the %s (use FN=%s, or leave FN out)", o.event, fn, o.function, fn)
	}
	var ev events.SQSEvent
	if fn == "consumer" {
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", o.event, err)
		}
	}
	plan, err := sink.ParseScript(o.fault)
	if err != nil {
		return nil, err
	}
	bootstrap := o.bootstrap
	if bootstrap == "" {
		bootstrap = filepath.Join("build", "local", fn, "bootstrap")
	}
	if _, err := os.Stat(bootstrap); err != nil {
		return nil, fmt.Errorf("%s not found; run `make build-local` first (or use `make invoke`)", bootstrap)
	}
	stage := local.StandInStage(deployment.Dev())
	sys, err := local.Start(ctx, local.Config{Stage: stage, Plan: plan, Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	db, q, res := sys.DB, sys.SQS, sys.Resources
	var seeded []message.DeliveryKey
	led, err := ledger.New(db, ledger.Config{Table: res.Table, Shards: stage.Shards})
	if err != nil {
		return nil, err
	}
	if fn == "consumer" {
		if seeded, err = seed(ctx, led, ev); err != nil {
			return nil, err
		}
	} else if seeded, err = seedCalendar(ctx, db, res.Table, stage.Shards, out); err != nil {
		return nil, err
	}

	logs := &lockedBuffer{}
	env, err := sys.Env(fn, sys.Endpoints(), 0)
	if err != nil {
		return nil, err
	}
	lambda, err := sys.StartFunction(ctx, bootstrap, env, logs)
	if err != nil {
		return nil, err
	}
	defer lambda.Stop()

	body, ierr := lambda.Invoke(ctx, raw)
	time.Sleep(200 * time.Millisecond) // wall clock: let the emulator print its REPORT line

	result := &invokeResult{Function: fn, Response: body, Statuses: map[string]ledger.Status{}, Output: logs.String()}
	if fn == "consumer" {
		_ = json.Unmarshal(body, &result.SQSResponse)
	} else {
		_ = json.Unmarshal(body, &result.Report)
	}
	fmt.Fprintf(out, "== %s output\n", fn)
	fmt.Fprint(out, result.Output)
	fmt.Fprintln(out, "== response")
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		fmt.Fprintln(out, pretty.String())
	} else {
		fmt.Fprintln(out, string(body))
	}
	fmt.Fprintln(out, "== ledger")
	if fn == "enqueue" {
		fmt.Fprintln(out, "(the enqueue hands off by cursor: a published delivery stays pending until the consumer claims it)")
	}
	for _, k := range seeded {
		d, err := led.Get(ctx, k)
		if err != nil {
			fmt.Fprintf(out, "%-28s %v\n", k, err)
			continue
		}
		result.Statuses[k.String()] = d.Status
		fmt.Fprintf(out, "%-28s %-9s due %s attempts=%d receipt=%q lastError=%q\n", k, d.Status, d.DueAt.Format(time.RFC3339), d.Attempts, d.Receipt, d.LastError)
	}
	result.Accepted, result.Duplicates = sys.Sink.Totals()
	if result.DLQ, err = status.QueueDepth(ctx, q, res.DLQURL); err != nil {
		return result, err
	}
	for _, url := range res.WorkURLs() { // the work queue and the providers' own
		d, err := status.QueueDepth(ctx, q, url)
		if err != nil {
			return result, err
		}
		result.Work.Visible, result.Work.InFlight, result.Work.Delayed = result.Work.Visible+d.Visible, result.Work.InFlight+d.InFlight, result.Work.Delayed+d.Delayed
	}
	if fn == "consumer" {
		fmt.Fprintf(out, "== webhook sink: %d accepted, %d duplicates suppressed; DLQ: %d messages\n", result.Accepted, result.Duplicates, result.DLQ.Total())
		if result.Emails, err = emailsFor(ctx, sys.SESEndpoint, seeded); err != nil {
			return result, err
		}
		if result.Published, err = publishedTo(ctx, q, res.Topic.QueueURL); err != nil {
			return result, err
		}
		fmt.Fprintf(out, "== SES stand-in: %d e-mails (read them at %s/); SNS topic's subscriber: %d messages\n", len(result.Emails), sys.SESEndpoint, len(result.Published))
		for _, e := range result.Emails {
			fmt.Fprintf(out, "   e-mail %s  to %s  %q\n", e.Header(ses.HeaderDeliveryKey), ledger.MaskAddress(e.Destination.To[0]), e.Subject)
		}
		for _, m := range result.Published {
			fmt.Fprintf(out, "   sns    %s\n", m)
		}
	} else {
		fmt.Fprintf(out, "== work queue: %d messages ready, %d delayed until their due time\n", result.Work.Visible, result.Work.Delayed)
	}
	if ierr != nil {
		return result, ierr
	}
	if _, err := esm.Acknowledged(events.SQSEvent{}, body); err != nil && strings.Contains(err.Error(), "function error") {
		return result, fmt.Errorf("the function failed: %w", err)
	}
	return result, nil
}

// deliveryCreator is what seed needs of the ledger.
type deliveryCreator interface {
	Create(ctx context.Context, d ledger.Delivery) error
}

// seed writes a queued delivery for each valid message of ev.
func seed(ctx context.Context, l deliveryCreator, ev events.SQSEvent) ([]message.DeliveryKey, error) {
	var keys []message.DeliveryKey
	seen := map[message.DeliveryKey]bool{}
	for i, r := range ev.Records {
		m, err := message.Decode([]byte(r.Body))
		if err != nil || seen[m.Key()] {
			continue // poison bodies are the point of some events
		}
		seen[m.Key()] = true
		// The delivery lives a day past the later of now and its due time
		// (wall clock: the function under the emulator runs on it), so an
		// event dated ahead seeds too: the consumer defers it.
		expires := time.Now().Add(24 * time.Hour)
		if m.DueAt.After(expires.Add(-24 * time.Hour)) {
			expires = m.DueAt.Add(24 * time.Hour)
		}
		d := ledger.Delivery{ReminderID: m.ReminderID, Channel: m.Channel, Provider: m.Provider, Status: ledger.StatusQueued,
			RecipientRef: fmt.Sprintf("local/contact-%d", i+1), TemplateRef: "local-template",
			DueAt: m.DueAt, ExpiresAt: expires}
		if drv, _ := registry.Lookup(m.Provider); drv.Intake.Address == provider.EmailAddress {
			// An e-mail: an address, a template from templates/email, and
			// the data it renders.
			d.Address, d.TemplateRef = m.ReminderID+"@customers.example", "renewal-notice"
			d.TemplateData = map[string]string{"plan": "Pro", "renewsOn": m.DueAt.Format("2 January 2006"), "reference": m.ReminderID}
		}
		if err := l.Create(ctx, d); err != nil && !errors.Is(err, ledger.ErrExists) {
			return nil, err
		}
		keys = append(keys, m.Key())
	}
	return keys, nil
}

// seedCalendar schedules a small calendar for an enqueue tick, written a
// minute ago so that the tick sees it past the settle time: due now, due in
// a few minutes (handed off with a delay), due tomorrow (left alone), and
// one whose expiry has passed (ended, never published).
func seedCalendar(ctx context.Context, db *dynamodb.Client, table string, shards int, out io.Writer) ([]message.DeliveryKey, error) {
	now := time.Now().UTC() // wall clock: the function under the emulator runs on it
	written := clock.NewFake(now.Add(-time.Minute))
	led, err := ledger.New(db, ledger.Config{Table: table, Shards: shards, Clock: written})
	if err != nil {
		return nil, err
	}
	store, err := schedule.New(schedule.Config{Ledger: led, Clock: written})
	if err != nil {
		return nil, err
	}
	type entry struct {
		id, note     string
		due, expires time.Time
		channels     []string
	}
	entries := []entry{
		{"rem-201", "due 30 s ago", now.Add(-30 * time.Second), time.Time{}, []string{"email", "sms"}},
		{"rem-202", "due in 3 min", now.Add(3 * time.Minute), time.Time{}, []string{"email"}},
		{"rem-203", "due tomorrow", now.Add(24 * time.Hour), time.Time{}, []string{"email"}},
		{"rem-204", "expired 30 s ago", now.Add(-2 * time.Minute), now.Add(-30 * time.Second), []string{"push"}},
	}
	var keys []message.DeliveryKey
	fmt.Fprintln(out, "== calendar (written a minute ago)")
	for _, e := range entries {
		in := schedule.Input{ID: e.id, AccountRef: "acct-local", DueAt: e.due.Format(time.RFC3339)}
		if !e.expires.IsZero() {
			in.ExpiresAt = e.expires.Format(time.RFC3339)
		}
		for _, ch := range e.channels {
			in.Deliveries = append(in.Deliveries, schedule.DeliveryInput{Channel: ch, Provider: registry.Default(), RecipientRef: "contact/" + e.id, TemplateRef: "local-template"})
		}
		r, err := store.Validator().Validate(in)
		if err != nil {
			return nil, err
		}
		if _, err := store.Create(ctx, r); err != nil {
			return nil, err
		}
		for _, d := range r.Deliveries {
			keys = append(keys, r.Key(d))
		}
		fmt.Fprintf(out, "%-8s %s\n", e.id, e.note)
	}
	return keys, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
