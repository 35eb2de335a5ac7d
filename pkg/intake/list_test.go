package intake_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/intake"
)

func TestListPagesAnAccountsRemindersWithTheirStates(t *testing.T) {
	f := setup(t)
	for i := range 5 {
		r := reminder("")
		r["dueAt"] = now.Add(time.Duration(i+1) * time.Hour).Format(time.RFC3339)
		if a := f.json("PUT", fmt.Sprintf("/v1/reminders/rem-%d", i), r); a.status != 201 {
			t.Fatal(a.status, string(a.body))
		}
	}
	other := reminder("")
	other["accountRef"] = "acct-2"
	f.json("PUT", "/v1/reminders/rem-other", other)
	f.clk.Advance(time.Hour)
	f.sendOne("rem-0", true)
	var ids []string
	next := ""
	for pages := 0; pages < 5; pages++ {
		a := f.do("GET", "/v1/reminders?account=acct-1&limit=2&next="+next, "", nil)
		var p intake.Page
		if err := json.Unmarshal(a.body, &p); a.status != 200 || err != nil || len(p.Reminders) > 2 {
			t.Fatalf("list: %d %s", a.status, a.body)
		}
		for _, r := range p.Reminders {
			ids = append(ids, r.ID)
			if r.ID == "rem-0" && (r.Deliveries[0].Status != "sent" || r.Deliveries[0].SentAt == "") {
				t.Errorf("rem-0 listed as %+v; want sent", r.Deliveries[0])
			}
		}
		if next = p.Next; next == "" {
			break
		}
	}
	if got := strings.Join(ids, " "); got != "rem-4 rem-3 rem-2 rem-1 rem-0" {
		t.Errorf("listed %s; want latest due first", got)
	}
}
