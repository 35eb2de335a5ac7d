package demo

import (
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

// TestTheSummaryTellsWhatSESsRecordSettled: the per-provider lines say, for
// SES (its policy is record), how many sends that may have gone out its
// record settled, how many were sent again, and how many were reviewed;
// for the webhook (retry), its extra copies; and nothing of a record for a
// provider whose record had nothing to settle.
func TestTheSummaryTellsWhatSESsRecordSettled(t *testing.T) {
	t.Parallel()
	sum := &Summary{ByProvider: map[string]*check.ProviderCounts{
		ses.Name:     {Deliveries: 40, Sent: 37, Recorded: 37, Settled: 4, SentAgain: 5, Reviewed: 2, Probes: 1},
		webhook.Name: {Deliveries: 40, Sent: 38, Recorded: 38, Copies: 3},
	}}
	var out strings.Builder
	sum.Write(&out)
	got := out.String()
	for _, want := range []string{
		"SES: of the sends that may have gone out, 4 settled by SES's record (recorded sent, not sent again), " +
			"5 sent again (not in SES's record, which had later e-mails; probes sent for a quiet stage: 1),",
		"2 reviewed (dead-lettered as ambiguous: SES's record did not settle them within the longest wait), of which 0 did go out",
		"3 extra copies reached its stand-in",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the summary does not say %q:\n%s", want, got)
		}
	}
	sum.ByProvider[ses.Name] = &check.ProviderCounts{Deliveries: 40, Sent: 40, Recorded: 40}
	out.Reset()
	sum.Write(&out)
	if strings.Contains(out.String(), "SES: of the sends") {
		t.Errorf("the summary tells of SES's record with nothing for it to settle:\n%s", out.String())
	}
}
