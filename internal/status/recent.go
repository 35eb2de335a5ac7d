package status

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
)

// recentAPI is what Recent needs of the ledger.
type recentAPI interface {
	ReadRecent(ctx context.Context, q ledger.RecentQuery) (ledger.RecentPage, error)
}

var (
	_ recentAPI = (*ledger.Ledger)(nil)
	_ recentAPI = (*ledger.Memory)(nil)
)

// The bounds of a RecentConfig.
const (
	// DefaultRecentHours is the window Recent reads by default.
	DefaultRecentHours = 6
	// MaxRecentHours is the longest window.
	MaxRecentHours = 72
	// DefaultRecentRead is the most items Recent reads by default.
	DefaultRecentRead = 20_000
)

// RecentConfig configures Recent.
type RecentConfig struct {
	// Ledger is read for the deliveries changed in the window (a bounded
	// scan: ReadRecent). Required.
	Ledger recentAPI
	// Hours is the window: the last Hours hours, 1 to MaxRecentHours.
	// Default DefaultRecentHours.
	Hours int
	// MaxRead is the most items the scan reads, of every kind (priced by
	// what it reads: a read unit per 4 KB, strongly consistent); past it
	// the activity is of those read, and says Sampled. Default
	// DefaultRecentRead.
	MaxRead int
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Counts are a window's transitions of one kind each.
type Counts struct {
	// Sent counts the deliveries the provider accepted.
	Sent int `json:"sent"`
	// Retried counts the failed attempts that wait for a retry (and the
	// waits for a provider's record of an ambiguous attempt).
	Retried int `json:"retried"`
	// DeadLettered counts the deliveries that ended dead.
	DeadLettered int `json:"deadLettered"`
	// Expired counts the deliveries that expired unsent.
	Expired int `json:"expired"`
}

// ProviderActivity is one provider's counts.
type ProviderActivity struct {
	Provider string `json:"provider"`
	Counts
}

// LateBucket is one bar of the lateness histogram: the sent deliveries
// whose due→sent lateness is at least From and less than To (To zero: no
// upper bound).
type LateBucket struct {
	// Label names the range: "<1s", "1–5s", …, "≥1h".
	Label string `json:"label"`
	// From and To are the range's bounds in seconds.
	From  float64 `json:"fromSeconds"`
	To    float64 `json:"toSeconds,omitempty"`
	Count int     `json:"count"`
}

// Lateness is how late the window's sent deliveries went: sentAt − dueAt
// (a delivery sent before its due time, which the claim forbids, counts
// as 0).
type Lateness struct {
	// Sent counts the deliveries measured: those sent in the window.
	Sent int `json:"sent"`
	// Buckets is the histogram, shortest lateness first.
	Buckets []LateBucket `json:"buckets"`
	// P50, P90, P99 and Max are percentiles (nearest rank) and the
	// greatest, in seconds; 0 when none was sent.
	P50 float64 `json:"p50Seconds"`
	P90 float64 `json:"p90Seconds"`
	P99 float64 `json:"p99Seconds"`
	Max float64 `json:"maxSeconds"`
}

// Activity is what happened over the last hours, from the ledger: each
// delivery's transitions in the window (its history keeps the last few:
// the ledger's history limit), by provider, and the lateness of those
// sent.
type Activity struct {
	// Hours is the window; Since and Until its bounds.
	Hours int       `json:"hours"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Total is the counts over every provider; Providers each one's, by
	// name.
	Total     Counts             `json:"total"`
	Providers []ProviderActivity `json:"providers"`
	Lateness  Lateness           `json:"lateness"`
	// Read counts the items the scan read; Sampled is set when it stopped
	// at its bound before the table's end, the figures then being of the
	// items read alone. Source says so in words.
	Read    int    `json:"read"`
	Sampled bool   `json:"sampled"`
	Source  string `json:"source"`
}

// lateBound is a histogram bucket's label and upper bound (0: none).
type lateBound struct {
	label string
	to    time.Duration
}

// lateBounds are the histogram's buckets.
var lateBounds = []lateBound{
	{"<1s", time.Second}, {"1–5s", 5 * time.Second}, {"5–15s", 15 * time.Second}, {"15s–1m", time.Minute},
	{"1–5m", 5 * time.Minute}, {"5–15m", 15 * time.Minute}, {"15m–1h", time.Hour}, {"≥1h", 0},
}

// Recent reads the activity of the last cfg.Hours: one bounded scan of the
// ledger (ReadRecent) for the deliveries whose last change falls in the
// window, each counted by the transitions its history holds in the window
// (sent, retrying, dead, expired), by provider; the sent ones' sentAt −
// dueAt in a histogram.
func Recent(ctx context.Context, cfg RecentConfig) (Activity, error) {
	if cfg.Ledger == nil {
		return Activity{}, errors.New("status: recent activity: Ledger is required")
	}
	if cfg.Hours == 0 {
		cfg.Hours = DefaultRecentHours
	}
	if cfg.Hours < 1 || cfg.Hours > MaxRecentHours {
		return Activity{}, fmt.Errorf("status: recent activity over %d hours; ask for 1 to %d", cfg.Hours, MaxRecentHours)
	}
	if cfg.MaxRead == 0 {
		cfg.MaxRead = DefaultRecentRead
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	now := cfg.Clock.Now().UTC()
	a := Activity{Hours: cfg.Hours, Since: now.Add(-time.Duration(cfg.Hours) * time.Hour), Until: now, Providers: []ProviderActivity{}}
	page, err := cfg.Ledger.ReadRecent(ctx, ledger.RecentQuery{Since: a.Since, Read: cfg.MaxRead})
	if err != nil {
		return a, fmt.Errorf("status: recent activity: %w", err)
	}
	a.Read, a.Sampled = page.Scanned, page.Next != ""
	a.Source = fmt.Sprintf("exact: a scan of the table (%d items read)", a.Read)
	if a.Sampled {
		a.Source = fmt.Sprintf("sampled: the scan stopped at its bound of %d items read, before the table's end; the figures are of those", cfg.MaxRead)
	}
	since := ledger.Format(a.Since)
	by := map[string]*Counts{}
	var late []time.Duration
	for _, d := range page.Deliveries {
		c := by[d.Provider]
		if c == nil {
			c = &Counts{}
			by[d.Provider] = c
		}
		for _, e := range d.Transitions() {
			if e.At < since {
				continue
			}
			switch e.Status {
			case ledger.StatusSent:
				c.Sent++
			case ledger.StatusRetrying:
				c.Retried++
			case ledger.StatusDead:
				c.DeadLettered++
			case ledger.StatusExpired:
				c.Expired++
			}
		}
		if d.Status == ledger.StatusSent && !d.SentAt.Before(a.Since) {
			late = append(late, max(0, d.SentAt.Sub(d.DueAt)))
		}
	}
	for p, c := range by {
		if *c == (Counts{}) {
			continue
		}
		a.Providers = append(a.Providers, ProviderActivity{Provider: p, Counts: *c})
		a.Total.Sent, a.Total.Retried, a.Total.DeadLettered, a.Total.Expired =
			a.Total.Sent+c.Sent, a.Total.Retried+c.Retried, a.Total.DeadLettered+c.DeadLettered, a.Total.Expired+c.Expired
	}
	slices.SortFunc(a.Providers, func(x, y ProviderActivity) int { return strings.Compare(x.Provider, y.Provider) })
	a.Lateness = lateness(late)
	return a, nil
}

// lateness is the histogram and percentiles of late.
func lateness(late []time.Duration) Lateness {
	l := Lateness{Sent: len(late)}
	from := time.Duration(0)
	for _, b := range lateBounds {
		l.Buckets = append(l.Buckets, LateBucket{Label: b.label, From: from.Seconds(), To: b.to.Seconds()})
		from = b.to
	}
	for _, d := range late {
		l.Buckets[slices.IndexFunc(lateBounds, func(b lateBound) bool { return b.to == 0 || d < b.to })].Count++
	}
	if len(late) == 0 {
		return l
	}
	slices.Sort(late)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(late)))) - 1 // nearest rank
		return late[min(max(i, 0), len(late)-1)].Seconds()
	}
	l.P50, l.P90, l.P99, l.Max = rank(0.50), rank(0.90), rank(0.99), late[len(late)-1].Seconds()
	return l
}
