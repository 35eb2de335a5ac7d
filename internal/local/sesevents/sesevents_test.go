package sesevents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/nudgehq/nudge/internal/local/sesevents"
)

// recorder is a bus that records what is put.
type recorder struct {
	mu      sync.Mutex
	entries []ebtypes.PutEventsRequestEntry
}

func (r *recorder) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, in.Entries...)
	out := &eventbridge.PutEventsOutput{}
	for range in.Entries {
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String("e")})
	}
	return out, nil
}

// byMessage is the detail-types put for each message id, in order, and
// each record.
func (r *recorder) byMessage(t *testing.T) (map[string][]string, map[string][]map[string]any) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	types, records := map[string][]string{}, map[string][]map[string]any{}
	for _, e := range r.entries {
		var rec map[string]any
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &rec); err != nil {
			t.Fatal(err)
		}
		if aws.ToString(e.Source) != "aws.ses" || aws.ToString(e.EventBusName) != "default" {
			t.Fatalf("entry %+v", e)
		}
		id := rec["mail"].(map[string]any)["messageId"].(string)
		types[id] = append(types[id], aws.ToString(e.DetailType))
		records[id] = append(records[id], rec)
	}
	return types, records
}

// TestTheMailboxSimulatorsAddressesGiveSESsEvents: through the front, an
// e-mail to each simulator address (and to any other) gives the events SES
// gives, in its order, with the message's headers and tags and the
// configuration set; one outside a configuration set, or refused, none.
func TestTheMailboxSimulatorsAddressesGiveSESsEvents(t *testing.T) {
	n := 0
	var mu sync.Mutex
	ses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Destination struct{ ToAddresses []string }
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if len(in.Destination.ToAddresses) > 0 && strings.HasPrefix(in.Destination.ToAddresses[0], "refused@") {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"message":"refused"}`)
			return
		}
		mu.Lock()
		n++
		id := fmt.Sprint("msg-", n)
		mu.Unlock()
		fmt.Fprintf(w, `{"MessageId":%q}`, id)
	}))
	defer ses.Close()
	bus := &recorder{}
	f, err := sesevents.Start(sesevents.Config{Target: ses.URL, Events: bus, Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client := sesv2.New(sesv2.Options{BaseEndpoint: aws.String(f.URL()), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	send := func(to, set string) string {
		in := &sesv2.SendEmailInput{FromEmailAddress: aws.String("reminders@nudge.example"), Destination: &sestypes.Destination{ToAddresses: []string{to}},
			Content: &sestypes.EmailContent{Template: &sestypes.Template{TemplateName: aws.String("t"), TemplateData: aws.String("{}"),
				Headers: []sestypes.MessageHeader{{Name: aws.String("X-Nudge-Delivery-Key"), Value: aws.String("rem-1:email:ses")}}}},
			EmailTags: []sestypes.MessageTag{{Name: aws.String("nudge_reminder"), Value: aws.String("rem-1")}}}
		if set != "" {
			in.ConfigurationSetName = aws.String(set)
		}
		out, err := client.SendEmail(context.Background(), in)
		if err != nil {
			return ""
		}
		return aws.ToString(out.MessageId)
	}
	bounceID, suppressedID := send(sesevents.Bounce, "nudge-dev"), send(sesevents.SuppressionList, "nudge-dev")
	want := map[string][]string{
		send(sesevents.Success, "nudge-dev"):       {"Email Sent", "Email Delivered"},
		send(sesevents.OutOfOffice, "nudge-dev"):   {"Email Sent", "Email Delivered"},
		bounceID:                                   {"Email Sent", "Email Bounced"},
		suppressedID:                               {"Email Sent", "Email Bounced"},
		send(sesevents.Complaint, "nudge-dev"):     {"Email Sent", "Email Delivered", "Email Complaint Received"},
		send("pat@customers.example", "nudge-dev"): {"Email Sent", "Email Delivered"},
	}
	send("pat@customers.example", "") // no configuration set: no events
	if id := send("refused@customers.example", "nudge-dev"); id != "" {
		t.Fatal("the refused send answered", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, records := bus.byMessage(t)
	if len(got) != len(want) {
		t.Fatalf("events for %d messages, want %d: %v", len(got), len(want), got)
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("%s: %v, want %v", id, got[id], w)
		}
	}
	for id, recs := range records {
		mail := recs[0]["mail"].(map[string]any)
		tags := mail["tags"].(map[string]any)
		headers, _ := json.Marshal(mail["headers"])
		if fmt.Sprint(tags["ses:configuration-set"]) != "[nudge-dev]" || fmt.Sprint(tags["nudge_reminder"]) != "[rem-1]" ||
			!strings.Contains(string(headers), `"rem-1:email:ses"`) {
			t.Errorf("%s: the mail object %v", id, mail)
		}
	}
	for id, sub := range map[string]string{bounceID: "General", suppressedID: "OnAccountSuppressionList"} {
		if b := records[id][1]["bounce"].(map[string]any); b["bounceType"] != "Permanent" || b["bounceSubType"] != sub {
			t.Errorf("%s: bounce %v, want Permanent/%s", id, b, sub)
		}
	}
	if s := f.Stats(); s.Accepted != 6 || s.Events["Email Sent"] != 6 || s.Failed != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestAnEmailWhoseCallerGaveUpStillHasItsEvents: the caller times out
// while the stand-in is still accepting the e-mail (an SES send whose
// answer is lost: ambiguous to Nudge); SES sent it, so its events come.
func TestAnEmailWhoseCallerGaveUpStillHasItsEvents(t *testing.T) {
	ses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // slower than the caller's patience
		fmt.Fprint(w, `{"MessageId":"msg-slow"}`)
	}))
	defer ses.Close()
	bus := &recorder{}
	f, err := sesevents.Start(sesevents.Config{Target: ses.URL, Events: bus, Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client := sesv2.New(sesv2.Options{BaseEndpoint: aws.String(f.URL()), Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = client.SendEmail(ctx, &sesv2.SendEmailInput{FromEmailAddress: aws.String("reminders@nudge.example"),
		Destination: &sestypes.Destination{ToAddresses: []string{sesevents.Success}}, ConfigurationSetName: aws.String("nudge-dev"),
		Content: &sestypes.EmailContent{Template: &sestypes.Template{TemplateName: aws.String("t"), TemplateData: aws.String("{}")}}})
	if err == nil {
		t.Fatal("the caller heard the answer; the test needs it to give up first")
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.Stats().Events["Email Delivered"] == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got, _ := bus.byMessage(t); !slices.Equal(got["msg-slow"], []string{"Email Sent", "Email Delivered"}) {
		t.Fatalf("events %v; want the send and the delivery of the e-mail SES accepted", got)
	}
}
