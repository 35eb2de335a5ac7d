package envelope_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/envelope"
)

const (
	work    = "https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-prod-work"
	workSES = "https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-prod-work-ses"
)

func TestRoutesSendAPacedProviderToItsQueueAndTheRestToTheDefault(t *testing.T) {
	t.Parallel()
	r, err := envelope.ParseRoutes(work, " ses="+workSES+" ,")
	if err != nil {
		t.Fatal(err)
	}
	if r.For("ses") != workSES || r.For("webhook") != work || r.For("") != work {
		t.Fatalf("For: ses %s, webhook %s", r.For("ses"), r.For("webhook"))
	}
	if got := r.URLs(); !slices.Equal(got, []string{work, workSES}) {
		t.Fatalf("URLs = %v", got)
	}
	if r.String() != "ses="+workSES {
		t.Fatalf("String = %q", r.String())
	}
	back, err := envelope.ParseRoutes(work, r.String())
	if err != nil || back.For("ses") != workSES {
		t.Fatalf("the round trip: %v, %v", back, err)
	}
}

func TestRoutesTellAMisroutedRecord(t *testing.T) {
	t.Parallel()
	r, _ := envelope.ParseRoutes(work, "ses="+workSES)
	arn := func(name string) string { return "arn:aws:sqs:eu-west-1:123456789012:" + name }
	for _, tc := range []struct {
		provider, source, want string
		misrouted              bool
	}{
		{"ses", arn("nudge-prod-work"), workSES, true},      // in flight across the deploy that added its queue
		{"ses", arn("nudge-prod-work-ses"), "", false},      // where it belongs
		{"webhook", arn("nudge-prod-work-ses"), work, true}, // a redrive to the wrong queue
		{"webhook", arn("nudge-prod-work"), "", false},
		{"ses", "", "", false},                   // unknown source: a test's record
		{"ses", arn("somebody-else"), "", false}, // not a work queue of these routes
	} {
		got, ok := r.Misrouted(tc.provider, tc.source)
		if got != tc.want || ok != tc.misrouted {
			t.Errorf("Misrouted(%s, %s) = %q, %v; want %q, %v", tc.provider, tc.source, got, ok, tc.want, tc.misrouted)
		}
	}
}

func TestParseRoutesRefusesNonsenseByName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ def, spec, want string }{
		{"", "", "NUDGE_QUEUE_URL"},
		{work, "ses", "is not provider=queueURL"},
		{work, "=" + workSES, "is not provider=queueURL"},
		{work, "ses=", "is not provider=queueURL"},
		{work, "ses=" + workSES + ",ses=" + workSES + "2", "twice"},
		{work, "ses=" + work, "the default work queue"},
		{work, "ses=" + workSES + ".fifo", "kind"},
	} {
		_, err := envelope.ParseRoutes(tc.def, tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRoutes(%q, %q) = %v; want an error saying %q", tc.def, tc.spec, err, tc.want)
		}
	}
}
