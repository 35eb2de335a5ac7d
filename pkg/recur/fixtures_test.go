package recur_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/recur"
)

// fixture is one case of testdata/fixtures.json, which
// testdata/fixtures.py writes with python-dateutil: each occurrence as
// [wall, UTC instant].
type fixture struct {
	Name        string      `json:"name"`
	Rule        string      `json:"rule"`
	Start       string      `json:"start"`
	Zone        string      `json:"zone"`
	Complete    bool        `json:"complete"` // dateutil gave no more than these
	Occurrences [][2]string `json:"occurrences"`
}

func loadFixtures(t *testing.T) []fixture {
	t.Helper()
	data, err := os.ReadFile("testdata/fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []fixture `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) < 40 {
		t.Fatalf("%d fixture cases, want 40 at least", len(doc.Cases))
	}
	return doc.Cases
}

func (f fixture) series(t *testing.T) recur.Series {
	t.Helper()
	r, err := recur.Parse(f.Rule)
	if err != nil {
		t.Fatal(err)
	}
	return recur.Series{Rule: r, Start: mustWall(t, f.Start), Zone: mustZone(t, f.Zone)}
}

func (f fixture) at(t *testing.T, i int) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, f.Occurrences[i][1])
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// Every case's occurrences are dateutil's, Wall and At exactly, and end
// where dateutil's end.
func TestFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			it := f.series(t).Iter()
			for i, want := range f.Occurrences {
				o, ok := it.Next()
				if !ok {
					t.Fatalf("ended after %d occurrences, want %d (%s)", i, len(f.Occurrences), want[0])
				}
				if o.N != i+1 || o.Wall.String() != want[0] || !o.At.Equal(f.at(t, i)) || o.At.Location() != time.UTC {
					t.Fatalf("occurrence %d = %d %s %s, want %s %s", i+1, o.N, o.Wall, o.At.Format(time.RFC3339), want[0], want[1])
				}
			}
			if o, ok := it.Next(); ok && f.Complete {
				t.Errorf("occurrence %d %s after dateutil's last", o.N, o.Wall)
			}
		})
	}
}

// After, from any point of a case, gives the occurrences that follow with
// their places in the series: the same as iterating from the start.
func TestFixturesAfter(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.series(t)
			n := len(f.Occurrences)
			for i := range n {
				for _, t0 := range []time.Time{f.at(t, i).Add(-time.Second), f.at(t, i)} {
					got := s.After(t0, 3)
					from := i
					if t0.Equal(f.at(t, i)) {
						from = i + 1
					}
					want := min(3, n-from)
					if len(got) < want || (f.Complete && len(got) != want) {
						t.Fatalf("After(%s, 3) gave %d, want %d", t0.Format(time.RFC3339), len(got), want)
					}
					for j := range want {
						if got[j].N != from+j+1 || got[j].Wall.String() != f.Occurrences[from+j][0] || !got[j].At.Equal(f.at(t, from+j)) {
							t.Fatalf("After(%s, 3)[%d] = %d %s, want %d %s", t0.Format(time.RFC3339), j, got[j].N, got[j].Wall,
								from+j+1, f.Occurrences[from+j][0])
						}
					}
				}
			}
		})
	}
}
