package standin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestOldLogsArePrunedNewestKept: each start writes a log named by its
// port; only the newest are kept, per service, and other files stay.
func TestOldLogsArePrunedNewestKept(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	for i := range 5 {
		for _, name := range []string{"dynamodb", "sqs"} {
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, 40000-i)) // port order differs from age order
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, t0, t0.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "demo-enqueue.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pruneLogs(dir, "dynamodb", 3)
	var got []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"demo-enqueue.log", "dynamodb-39996.log", "dynamodb-39997.log",
		"sqs-39996.log", "sqs-39997.log", "sqs-39998.log", "sqs-39999.log", "sqs-40000.log"}
	if !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v (the two newest dynamodb logs, room for a third)", got, want)
	}
	pruneLogs(filepath.Join(dir, "missing"), "sqs", 3) // no folder yet: nothing to do
}
