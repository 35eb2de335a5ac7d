package metrics

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestFlushWritesOneEMFLine(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"Function": "consumer"})
	r.Add("Sent", 1)
	r.Add("Sent", 2)
	r.Observe("DueToSentSeconds", 1.5)
	var buf bytes.Buffer
	if err := r.Flush(&buf, time.UnixMilli(1796029200000)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function         string
		Sent             float64
		DueToSentSeconds []float64
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	m := doc.AWS.CloudWatchMetrics[0]
	if doc.AWS.Timestamp != 1796029200000 || m.Namespace != "Nudge" || m.Dimensions[0][0] != "Function" || doc.Function != "consumer" ||
		doc.Sent != 3 || len(doc.DueToSentSeconds) != 1 || len(m.Metrics) != 2 || m.Metrics[0].Name != "DueToSentSeconds" || m.Metrics[0].Unit != "Seconds" {
		t.Fatalf("EMF document = %s", buf.String())
	}
	buf.Reset()
	_ = r.Flush(&buf, time.Now())
	if buf.Len() != 0 {
		t.Fatalf("second flush wrote %s", buf.String())
	}
	var nilRec *Recorder
	nilRec.Add("x", 1) // must not panic
}

func TestFlushSplitsMoreThan100Values(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"Function": "consumer"})
	r.Add("Sent", 250)
	for i := 0; i < 250; i++ {
		r.Observe("DueToSentSeconds", float64(i))
	}
	var buf bytes.Buffer
	if err := r.Flush(&buf, time.Now()); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (100+100+50 values)", len(lines))
	}
	total, sent := 0, 0.0
	for _, l := range lines {
		var doc struct {
			Sent             float64
			DueToSentSeconds []float64
		}
		if err := json.Unmarshal(l, &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.DueToSentSeconds) > 100 {
			t.Fatalf("a line carries %d values", len(doc.DueToSentSeconds))
		}
		total += len(doc.DueToSentSeconds)
		sent += doc.Sent
	}
	if total != 250 || sent != 250 {
		t.Fatalf("values %d, Sent %v; want 250 and 250 counted once", total, sent)
	}
}
