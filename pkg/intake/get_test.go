package intake_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

func TestGetShowsEachDeliveryWithAddressesMasked(t *testing.T) {
	f := setup(t)
	r := reminder("rem-1")
	r["deliveries"] = []map[string]string{{"channel": "email", "provider": "ses", "recipientRef": "c-2", "templateRef": "renewal", "address": "ana.silva@example.com"}}
	if a := f.json("PUT", "/v1/reminders/rem-1", r); a.status != 201 {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	a := f.do("GET", "/v1/reminders/rem-1", "", nil)
	if a.status != 200 || bytes.Contains(a.body, []byte("ana.silva@example.com")) {
		t.Fatalf("GET: %d %s", a.status, a.body)
	}
	var doc schedule.Document
	if err := json.Unmarshal(a.body, &doc); err != nil || doc.Reminder == nil || len(doc.Deliveries) != 1 || len(doc.History) != 1 {
		t.Fatalf("GET document %s: %v", a.body, err)
	}
	if d := doc.Deliveries[0]; d.Status != schedule.StatusPending || d.Address != ledger.MaskAddress("ana.silva@example.com") || d.HandedOff == nil {
		t.Errorf("delivery %+v", d)
	}
	if a := f.do("GET", "/v1/reminders/rem-none", "", nil); a.status != 404 || a.problem(t).Type != intake.ProblemNotFound {
		t.Errorf("GET of no reminder: %d %s", a.status, a.body)
	}
}
