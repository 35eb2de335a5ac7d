package outcome_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/pkg/failure"
)

var update = flag.Bool("update", false, "rewrite the sample events in events/ from the code")

// scenarios are a delivery's end for each outcome, as the samples show.
func scenarios() map[outcome.Outcome][2]ledger.Delivery {
	live := delivery("renewal-4821")
	live.Attempts = 2
	// Given in the recipient's time, with a send window.
	live.TimeZone, live.Window = "Europe/Berlin", "08:00-21:00 Europe/Berlin mon-sat"
	at := t0.Add(1500 * time.Millisecond)
	unended := live
	unended.Status, unended.UpdatedAt = ledger.StatusExpired, at
	unended.History = append(append([]ledger.Entry(nil), live.History...),
		ledger.Entry{At: ledger.Format(at), Status: ledger.StatusExpired, Attempt: 2, Class: failure.ClassAmbiguous, Note: ledger.UnendedNote(2)})
	sent := ended(live, ledger.StatusSent, "", "0100018f-ses-message-id", at)
	// The bounced and dead-lettered samples show a delivery naming an SMS
	// fallback; the escalated one a reminder whose late policy escalates.
	withFallback := live
	withFallback.Fallback = ledger.FallbackRef{Channel: "sms", Provider: "sns"}
	escalating := live
	escalating.Late = ledger.LateEscalate
	bounced := feedback(ended(withFallback, ledger.StatusSent, "", "0100018f-ses-message-id", at), ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General 5.1.1", At: at.Add(time.Minute), ID: "fb-1"})
	complained := feedback(sent, ledger.Feedback{Kind: ledger.FeedbackComplained, Detail: "abuse", At: at.Add(time.Minute), ID: "fb-2"})
	rejected := feedback(sent, ledger.Feedback{Kind: ledger.FeedbackRejected, Detail: "Bad content", At: at.Add(time.Minute), ID: "fb-3"})
	delivered := feedback(sent, ledger.Feedback{Kind: ledger.FeedbackDelivered, Detail: "250 2.6.0", At: at.Add(time.Minute), ID: "fb-4"})
	return map[outcome.Outcome][2]ledger.Delivery{
		outcome.Bounced:      {ended(withFallback, ledger.StatusSent, "", "0100018f-ses-message-id", at), bounced},
		outcome.Complained:   {sent, complained},
		outcome.Rejected:     {sent, rejected},
		outcome.Feedback:     {sent, delivered},
		outcome.Sent:         {live, sent},
		outcome.DeadLettered: {withFallback, ended(withFallback, ledger.StatusDead, failure.ClassRejected, "provider answered 400", at)},
		outcome.Escalated:    {escalating, ended(escalating, ledger.StatusExpired, "", "expiresAt 2027-03-02T09:00:00.000Z", at)},
		outcome.Expired:      {live, ended(live, ledger.StatusExpired, "", "expiresAt 2027-03-02T09:00:00.000Z", at)},
		outcome.Cancelled:    {live, ended(live, ledger.StatusCancelled, "", "cancelled by the owner", at)},
		outcome.NeedsReview:  {live, unended},
	}
}

// envelope is e as a rule's target receives it from EventBridge.
func envelope(e outcome.Event) map[string]any {
	var detail map[string]any
	b, _ := json.Marshal(e)
	_ = json.Unmarshal(b, &detail)
	at, _ := time.Parse(time.RFC3339Nano, e.At)
	return map[string]any{"version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718", "detail-type": e.DetailType(), "source": outcome.Source,
		"account": "123456789012", "time": at.UTC().Format(time.RFC3339), "region": "eu-west-1", "resources": []any{}, "detail": detail}
}

func schema(t *testing.T, o outcome.Outcome) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join("..", "..", "docs", "events", string(o)+".schema.json"))
	if err != nil {
		t.Fatalf("docs/events/%s.schema.json: %v", o, err)
	}
	return s
}

// TestTheSchemasDescribeTheEvents: each outcome's event, as the code makes
// it, is valid by its detail-type's schema in docs/events and by no other
// (the schemas tell the types apart), and the sample in events/ is that
// event (go test -run TestTheSchemas ./internal/outcome -update rewrites
// the samples).
func TestTheSchemasDescribeTheEvents(t *testing.T) {
	schemas := map[outcome.Outcome]*jsonschema.Schema{}
	for _, o := range outcome.Outcomes {
		schemas[o] = schema(t, o)
	}
	for o, pair := range scenarios() {
		e, ok := outcome.Of(pair[0], true, pair[1], "prod")
		if o == outcome.Escalated {
			e, ok = outcome.Escalation(e, pair[1])
		}
		if !ok || e.Outcome != o {
			t.Fatalf("%s: the scenario gives %+v", o, e)
		}
		env := envelope(e)
		b, _ := json.MarshalIndent(env, "", "  ")
		b = append(b, '\n')
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for other, s := range schemas {
			err := s.Validate(doc)
			if other == o && err != nil {
				t.Errorf("%s: the event is not valid by its schema: %v\n%s", o, err, b)
			}
			if other != o && err == nil {
				t.Errorf("%s: the event is valid by %s's schema too", o, other)
			}
		}
		sample := filepath.Join("..", "..", "events", "outcome-"+string(o)+".json")
		if *update {
			if err := os.WriteFile(sample, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(sample); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s is not the event the code makes (go test ./internal/outcome -run TestTheSchemas -update): %v", sample, err)
		}
	}
}

// TestEveryDetailFieldIsDocumented: every field of the detail is in the
// schemas, so that a field added to Event fails here until it is described.
func TestEveryDetailFieldIsDocumented(t *testing.T) {
	documented := map[string]bool{}
	for _, o := range outcome.Outcomes {
		var s struct {
			Properties struct {
				Detail struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"detail"`
			} `json:"properties"`
		}
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "events", string(o)+".schema.json"))
		if err != nil || json.Unmarshal(b, &s) != nil {
			t.Fatal(o, err)
		}
		for k := range s.Properties.Detail.Properties {
			documented[k] = true
		}
	}
	ty := reflect.TypeOf(outcome.Event{})
	for i := range ty.NumField() {
		name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
		if !documented[name] {
			t.Errorf("detail field %s is in no schema in docs/events", name)
		}
	}
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outcome.Outcomes {
		for _, want := range []string{o.DetailType(), "events/" + string(o) + ".schema.json", "outcome-" + string(o) + ".json"} {
			if !bytes.Contains(md, []byte(want)) {
				t.Errorf("docs/events.md does not name %q", want)
			}
		}
	}
}

// TestReportsBeforeTheEndAreValidEvents: a report recorded while the
// delivery is live (an SES send whose answer was lost: retrying, no
// receipt yet) is a valid event by its schema, and so is the end that
// follows, carrying the report that stands.
func TestReportsBeforeTheEndAreValidEvents(t *testing.T) {
	retrying := delivery("renewal-4822")
	retrying.Status = ledger.StatusRetrying
	bounced := feedback(retrying, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General 5.1.1", At: t0, ID: "b-1", MessageID: "m-1"})
	sent := ended(bounced, ledger.StatusSent, "", "m-2", t0.Add(time.Minute))
	for _, c := range []struct {
		old, new ledger.Delivery
		want     outcome.Outcome
	}{{retrying, bounced, outcome.Bounced}, {bounced, sent, outcome.Sent}} {
		e, ok := outcome.Of(c.old, true, c.new, "prod")
		if !ok || e.Outcome != c.want {
			t.Fatalf("%+v, %v; want %s", e, ok, c.want)
		}
		b, _ := json.Marshal(envelope(e))
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema(t, c.want).Validate(doc); err != nil {
			t.Errorf("%s: %v\n%s", c.want, err, b)
		}
		if c.want == outcome.Sent && (e.Feedback == nil || !e.Feedback.Failed || e.Feedback.Kind != "bounced") {
			t.Errorf("the end does not carry the report that stands: %+v", e.Feedback)
		}
	}
}
