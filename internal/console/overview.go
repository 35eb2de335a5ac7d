package console

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/status"
)

// overviewDoc is the overview's JSON twin: the report `nudge status
// --json` prints, and the recent activity.
type overviewDoc struct {
	status.Report
	Activity status.Activity `json:"activity"`
}

// overviewView is what the overview's template shows.
type overviewView struct {
	Report   status.Report
	Activity status.Activity
	// OldestOverdue is the oldest overdue delivery's key and page; its
	// lateness in words.
	OldestOverdue, OldestOverdueURL, OldestOverdueAge string
	// DLQ is the dead letters' count (visible and in flight); DLQAge the
	// oldest one's age in words, "" when unknown.
	DLQ    int
	DLQAge string
	// Windows are the activity windows offered, Hours the one shown.
	Windows []window
	Hours   int
	Chart   histogram
	// P50 … Max are the lateness's percentiles in words.
	P50, P90, P99, Max string
}

// window is a link to the overview over another number of hours.
type window struct {
	Hours   int
	URL     string
	Current bool
}

// overview is the first page: what `nudge status` shows, and the last
// hours' activity (?hours=, 1 to 72, default 6).
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	hours := status.DefaultRecentHours
	if h := r.URL.Query().Get("hours"); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 1 || n > status.MaxRecentHours {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("hours=%q is not a number of hours from 1 to %d: open /?hours=6, or / for the default (%d)",
				h, status.MaxRecentHours, status.DefaultRecentHours))
			return
		}
		hours = n
	}
	rep, err := s.cfg.Status(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	read := s.cfg.ActivityRead
	if read == 0 {
		read = status.DefaultRecentRead
	}
	act, err := status.Recent(r.Context(), status.RecentConfig{Ledger: s.cfg.Ledger, Hours: hours, MaxRead: read, Clock: s.cfg.Clock})
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	v := overviewView{Report: rep, Activity: act, Hours: hours, Chart: drawHistogram(act.Lateness),
		DLQ: rep.DLQ.Visible + rep.DLQ.InFlight}
	if rep.OldestOverdueKey != "" {
		v.OldestOverdue, v.OldestOverdueAge = rep.OldestOverdueKey, span(time.Duration(rep.OldestOverdueSeconds)*time.Second)
		v.OldestOverdueURL = "/find?q=" + rep.OldestOverdueKey
		if k, err := message.ParseDeliveryKey(rep.OldestOverdueKey); err == nil {
			v.OldestOverdueURL = deliveryURL(k)
		}
	}
	if rep.DLQSampled > 0 {
		v.DLQAge = span(time.Duration(rep.DLQOldestAgeSeconds) * time.Second)
	}
	for _, h := range []int{1, 6, 24, 72} {
		v.Windows = append(v.Windows, window{Hours: h, URL: "/?hours=" + strconv.Itoa(h), Current: h == hours})
	}
	seconds := func(f float64) string { return span(time.Duration(f * float64(time.Second))) }
	l := act.Lateness
	v.P50, v.P90, v.P99, v.Max = seconds(l.P50), seconds(l.P90), seconds(l.P99), seconds(l.Max)
	s.render(w, r, http.StatusOK, "overview", "Overview", v, overviewDoc{Report: rep, Activity: act})
}
