package metrics

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of Nudge's metrics.
const Namespace = "Nudge"

// maxValues is the most values one EMF document may carry per metric.
const maxValues = 100

// Recorder accumulates metrics until Flush. It is safe for concurrent use.
// A nil *Recorder records nothing.
type Recorder struct {
	dims map[string]string

	mu     sync.Mutex
	counts map[string]float64
	values map[string][]float64
	// split are the counters recorded with AddBy, by their extra
	// dimensions (a canonical key of them).
	split map[string]*splitCounts
}

// splitCounts are counters with the same extra dimensions.
type splitCounts struct {
	by     map[string]string
	counts map[string]float64
}

// AddBy adds n to the counter name, counted by the recorder's dimensions
// and also, one at a time, by each of by's (such as {"Channel": "email",
// "ErrorClass": "server"}): CloudWatch then has name by Function, by
// Function and Channel, and by Function and ErrorClass, but not every
// combination, which would multiply the metric count for no reader. Keep
// by's values few and fixed: each distinct value is a metric, and billed.
func (r *Recorder) AddBy(name string, n float64, by map[string]string) {
	if r == nil {
		return
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	key := ""
	for _, k := range keys {
		key += k + "=" + by[k] + ";"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.split == nil {
		r.split = map[string]*splitCounts{}
	}
	s := r.split[key]
	if s == nil {
		s = &splitCounts{by: by, counts: map[string]float64{}}
		r.split[key] = s
	}
	s.counts[name] += n
}

// New returns a Recorder whose metrics carry the given dimensions, such as
// {"Function": "consumer"}.
func New(dims map[string]string) *Recorder {
	return &Recorder{dims: dims}
}

// Add adds n to the counter name.
func (r *Recorder) Add(name string, n float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[string]float64{}
	}
	r.counts[name] += n
}

// Observe records one value (seconds) of the timing name.
func (r *Recorder) Observe(name string, v float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.values == nil {
		r.values = map[string][]float64{}
	}
	r.values[name] = append(r.values[name], v)
}

// Count returns the counter name's value since the last Flush.
func (r *Recorder) Count(name string) float64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.counts[name]
	for _, s := range r.split {
		n += s.counts[name]
	}
	return n
}

// Flush writes everything recorded since the last Flush and starts over:
// one EMF line, or more when a timing has more than 100 values (the most one
// EMF document may carry per metric; counters go in the first line). It
// writes nothing when nothing was recorded.
func (r *Recorder) Flush(w io.Writer, now time.Time) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	counts, values, split := r.counts, r.values, r.split
	r.counts, r.values, r.split = nil, nil, nil
	r.mu.Unlock()
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := r.write(w, now, split[k].counts, nil, split[k].by); err != nil {
			return err
		}
	}
	for first := true; first || len(values) > 0; first = false {
		chunk := map[string][]float64{}
		for name, v := range values {
			n := min(len(v), maxValues)
			chunk[name] = v[:n]
			if n == len(v) {
				delete(values, name)
			} else {
				values[name] = v[n:]
			}
		}
		if len(counts) == 0 && len(chunk) == 0 {
			return nil
		}
		if err := r.write(w, now, counts, chunk, nil); err != nil {
			return err
		}
		counts = nil
	}
	return nil
}

// write writes one EMF document: the recorder's dimensions, and each of by's
// as a dimension set of its own beside them.
func (r *Recorder) write(w io.Writer, now time.Time, counts map[string]float64, values map[string][]float64, by map[string]string) error {
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	doc := map[string]any{}
	var defs []metric
	for name, v := range counts {
		defs = append(defs, metric{name, "Count"})
		doc[name] = v
	}
	for name, v := range values {
		defs = append(defs, metric{name, "Seconds"})
		doc[name] = v
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	dimNames := make([]string, 0, len(r.dims))
	for k, v := range r.dims {
		dimNames = append(dimNames, k)
		doc[k] = v
	}
	sort.Strings(dimNames)
	sets := [][]string{dimNames}
	extra := make([]string, 0, len(by))
	for k, v := range by {
		extra = append(extra, k)
		doc[k] = v
	}
	sort.Strings(extra)
	for _, k := range extra {
		sets = append(sets, append(append([]string{}, dimNames...), k))
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  Namespace,
			"Dimensions": sets,
			"Metrics":    defs,
		}},
	}
	line, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
