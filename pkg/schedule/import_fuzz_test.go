package schedule_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// FuzzReadRows fuzzes the import parser in both formats. Nothing may
// panic; a file refused as a whole is refused with an error, never with a
// panic; every row carries a line number within the file, in order; an
// invalid row's error is a *ValidationError; and a valid row is a reminder
// the validator accepts: an id, 1–8 deliveries, and an expiry after its
// due time. The corpus is seeded with the test files.
func FuzzReadRows(f *testing.F) {
	for _, file := range []string{"testdata/mixed.jsonl", "testdata/mixed.csv"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, strings.HasSuffix(file, ".csv"))
	}
	f.Add([]byte("id,accountRef,dueAt,expiresAt,channel,provider,recipientRef,templateRef\n\"x\n"), true)
	f.Add([]byte("{}\n\n{\"id\":\"a\"}"), false)
	v := schedule.Validator{Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) }}
	f.Fuzz(func(t *testing.T, file []byte, csv bool) {
		format := schedule.JSONLines
		if csv {
			format = schedule.CSV
		}
		var (
			rows []schedule.Row
			err  error
			done = make(chan struct{})
		)
		go func() { defer close(done); rows, err = schedule.ReadRows(bytes.NewReader(file), format, v) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadRows did not return within 5s for %d bytes (csv %v): %q", len(file), csv, file)
		}
		if err != nil {
			return
		}
		lines := bytes.Count(file, []byte("\n")) + 1
		last := 0
		for _, r := range rows {
			if r.Line < 1 || r.Line > lines || r.Line < last {
				t.Fatalf("row at line %d (previous %d) in a file of %d lines", r.Line, last, lines)
			}
			last = r.Line
			if r.Err != nil {
				var ve *schedule.ValidationError
				if !errors.As(r.Err, &ve) {
					t.Fatalf("line %d: %T %v, want *ValidationError", r.Line, r.Err, r.Err)
				}
				continue
			}
			rem := r.Reminder
			if rem.ID == "" || len(rem.Deliveries) < 1 || len(rem.Deliveries) > 8 || !rem.ExpiresAt.After(rem.DueAt) {
				t.Fatalf("line %d accepted an invalid reminder: %+v", r.Line, rem)
			}
		}
	})
}
