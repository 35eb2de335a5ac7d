package metrics

import (
	"bytes"
	"encoding/json"
	"strings"
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

// TestAddByWritesADimensionSetPerSplit: counters recorded by channel and
// error class are written one line per combination, each declaring the
// recorder's dimensions alone and with each split, never the combination.
func TestAddByWritesADimensionSetPerSplit(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"Function": "consumer"})
	r.Add("Received", 3)
	r.AddBy("Retried", 1, map[string]string{"Channel": "email", "ErrorClass": "server"})
	r.AddBy("Retried", 1, map[string]string{"Channel": "email", "ErrorClass": "server"})
	r.AddBy("Retried", 1, map[string]string{"Channel": "sms", "ErrorClass": "throttled"})
	if r.Count("Retried") != 3 {
		t.Fatalf("Count = %v", r.Count("Retried"))
	}
	var buf bytes.Buffer
	if err := r.Flush(&buf, time.Now()); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want one per split and one for the rest:\n%s", len(lines), buf.String())
	}
	var doc struct {
		AWS struct {
			CloudWatchMetrics []struct{ Dimensions [][]string }
		} `json:"_aws"`
		Function, Channel, ErrorClass string
		Retried                       float64
	}
	if err := json.Unmarshal(lines[0], &doc); err != nil {
		t.Fatal(err)
	}
	sets := doc.AWS.CloudWatchMetrics[0].Dimensions
	if doc.Channel != "email" || doc.ErrorClass != "server" || doc.Retried != 2 || len(sets) != 3 ||
		strings.Join(sets[0], ",") != "Function" || strings.Join(sets[1], ",") != "Function,Channel" || strings.Join(sets[2], ",") != "Function,ErrorClass" {
		t.Fatalf("first split: %s", lines[0])
	}
}
