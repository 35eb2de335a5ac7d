package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

func TestPutCreatesOnceAndNamesTheFieldOfAConflict(t *testing.T) {
	f := setup(t)
	a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1"))
	if a.status != 201 || a.header.Get("Location") != "/v1/reminders/rem-1" {
		t.Fatalf("first PUT: %d %s (Location %q)", a.status, a.body, a.header.Get("Location"))
	}
	var c intake.Created
	if err := json.Unmarshal(a.body, &c); err != nil || c.Outcome != schedule.Created || c.Reminder == nil || c.Reminder.ID != "rem-1" {
		t.Fatalf("created answer %s", a.body)
	}
	if a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1")); a.status != 200 || !strings.Contains(string(a.body), `"unchanged"`) {
		t.Fatalf("the same PUT again: %d %s", a.status, a.body)
	}
	changed := reminder("rem-1")
	changed["dueAt"] = now.Add(2 * time.Hour).Format(time.RFC3339)
	a = f.json("PUT", "/v1/reminders/rem-1", changed)
	if a.status != 409 {
		t.Fatalf("a different reminder under the id: %d %s", a.status, a.body)
	}
	if p := a.problem(t); p.Type != intake.ProblemConflict || p.Field != "dueAt" || !strings.Contains(p.Fix, "reschedule") {
		t.Errorf("conflict problem %+v", p)
	}
	// The id may be repeated in the body, never changed.
	withID := reminder("x")
	withID["id"] = "rem-2"
	if a := f.json("PUT", "/v1/reminders/rem-2", withID); a.status != 201 {
		t.Errorf("PUT with the path's id in the body: %d %s", a.status, a.body)
	}
	if a := f.json("PUT", "/v1/reminders/rem-3", withID); a.status != 400 || a.problem(t).Field != "id" {
		t.Errorf("PUT with another id in the body: %d %s", a.status, a.body)
	}
}

// TestConcurrentPutsOfOneIDCreateItOnce: of many PUTs of the same id at
// once, one creates it and the rest find it (the same content: unchanged;
// other content: conflict), and one reminder is stored.
func TestConcurrentPutsOfOneIDCreateItOnce(t *testing.T) {
	f := setup(t)
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := reminder("")
			if i%2 == 1 {
				r["metadata"] = map[string]string{"plan": "silver"}
			}
			b, _ := json.Marshal(r)
			req, _ := http.NewRequest("PUT", f.srv.URL+"/v1/reminders/rem-race", bytes.NewReader(b))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			mu.Lock()
			counts[res.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts[201] != 1 || counts[200]+counts[409] != 39 || counts[200] < 19 || counts[409] < 19 {
		t.Errorf("answers %v; want one 201, and 200 for the same content, 409 for the other", counts)
	}
	stored, err := f.led.ReadReminder(context.Background(), "rem-race")
	if err != nil || len(stored.Deliveries) != 1 {
		t.Errorf("stored %+v, %v", stored, err)
	}
}

// TestAnIDIsAReminderOrASeriesThroughTheAPI: a PUT of a reminder under a
// series' id, or of a series under a reminder's, is the 409 naming recur,
// saying what the id belongs to and that the fix is another id (neither a
// reschedule nor a cancel frees it).
func TestAnIDIsAReminderOrASeriesThroughTheAPI(t *testing.T) {
	f := setup(t)
	series := reminder("")
	delete(series, "dueAt")
	series["timeZone"], series["dueLocal"], series["recur"] = "UTC", now.Add(time.Hour).Format("2006-01-02T15:04"), "FREQ=DAILY"
	for _, tc := range []struct {
		id            string
		first, second map[string]any
		holder, given string
	}{
		{"both-1", series, reminder(""), "series", "reminder"},
		{"both-2", reminder(""), series, "reminder", "series"},
	} {
		if a := f.json("PUT", "/v1/reminders/"+tc.id, tc.first); a.status != 201 {
			t.Fatalf("%s: the %s: %d %s", tc.id, tc.holder, a.status, a.body)
		}
		a := f.json("PUT", "/v1/reminders/"+tc.id, tc.second)
		if a.status != 409 {
			t.Fatalf("%s: a %s under a %s's id: %d %s", tc.id, tc.given, tc.holder, a.status, a.body)
		}
		p := a.problem(t)
		if p.Type != intake.ProblemConflict || p.Field != "recur" || p.Title != "The id belongs to a "+tc.holder ||
			!strings.Contains(p.Detail, `"`+tc.id+`"`) || !strings.Contains(p.Fix, "choose another id for the "+tc.given) ||
			strings.Contains(p.Fix, "reschedule") {
			t.Errorf("%s: a %s under a %s's id: %+v", tc.id, tc.given, tc.holder, p)
		}
	}
}
