package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LogPath is where a run of the stage keeps its log name: the stand-in
// folder's logs, named by the stage (.local/logs/demo-consumer-1.log for
// make demo, chaos-… for make chaos), so that runs of other stages, such
// as the tests', leave each other's evidence alone.
func LogPath(dir, stage, name string) string {
	return filepath.Join(dir, "logs", stage+"-"+name)
}

// runLogs are a run's logs, each in a file at LogPath: every function
// instance's output, read as CloudWatch would (functionLog), and the event
// source mapping's lines, counted by kind.
type runLogs struct {
	consumer, enqueue, intake, outcomes, feedback logs
	byName                                        map[string]*functionLog // "consumer-1", …, "enqueue", "intake", "outcomes", "feedback"
	mappingErrors                                 *errorKinds
	mappingFile                                   *os.File
	files                                         []*os.File
	dir, stage                                    string
	mu                                            sync.Mutex // output's, for the logs it adds
}

// openLogs creates the log files of a run of the stage with the given
// consumer instances, in dir's logs.
func openLogs(dir, stage string, consumers int) (l *runLogs, err error) {
	l = &runLogs{byName: map[string]*functionLog{}, mappingErrors: newErrorKinds(10), dir: dir, stage: stage}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return l, err
	}
	create := func(name string) (*os.File, error) {
		f, err := os.Create(LogPath(dir, stage, name))
		if err == nil {
			l.files = append(l.files, f)
		}
		return f, err
	}
	names := []string{"enqueue", "intake", "outcomes", "feedback"}
	for i := range consumers {
		names = append(names, fmt.Sprintf("consumer-%d", i+1))
	}
	for _, name := range names {
		f, err := create(name + ".log")
		if err != nil {
			return l, err
		}
		fl := newFunctionLog(f)
		l.byName[name] = fl
		switch {
		case name == "enqueue":
			l.enqueue = append(l.enqueue, fl)
		case name == "intake":
			l.intake = append(l.intake, fl)
		case name == "outcomes":
			l.outcomes = append(l.outcomes, fl)
		case name == "feedback":
			l.feedback = append(l.feedback, fl)
		default:
			l.consumer = append(l.consumer, fl)
		}
	}
	// The mapping's own line per failed invocation: a kill's, or one the
	// run reports (its kinds, counted, go into the violation).
	l.mappingFile, err = create("esm.log")
	return l, err
}

// output is where a function instance's output goes (local.HarnessConfig).
// A consumer instance openLogs did not name (a provider's own queue's,
// consumer-ses-1, …) gets its log when it starts, and counts with the
// others.
func (l *runLogs) output(name string) io.Writer {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fl, ok := l.byName[name]; ok {
		return fl
	}
	if !strings.HasPrefix(name, "consumer-") {
		return nil
	}
	fl := newFunctionLog(nil)
	if f, err := os.Create(LogPath(l.dir, l.stage, name+".log")); err == nil {
		l.files = append(l.files, f)
		fl.file = f
	} // else its lines are still read and counted, only not kept in a file
	l.byName[name] = fl
	l.consumer = append(l.consumer, fl)
	return fl
}

// mapping is where the mapping's lines go.
func (l *runLogs) mapping() io.Writer { return io.MultiWriter(l.mappingErrors, l.mappingFile) }

// close closes the files.
func (l *runLogs) close() {
	for _, f := range l.files {
		f.Close()
	}
}

// functionLog receives a function instance's output (its JSON log lines,
// EMF metric lines, and the emulator's START/END/REPORT lines), copies it
// to a file and adds up the metrics, as CloudWatch would.
type functionLog struct {
	file io.Writer

	mu      sync.Mutex
	partial []byte
	metrics map[string]float64
	reports int
	errors  []string // log lines at level ERROR, and runtime errors
	// billed is the billed duration of the invocations (REPORT lines), and
	// bytes what CloudWatch Logs would ingest: every line but the
	// emulator's own diagnostics.
	billed time.Duration
	bytes  int64
	// ledgerFailed counts, by delivery key, the sends the provider
	// accepted that the consumer could not record (its complete failed):
	// the ambiguous retry repeats them with the same key.
	ledgerFailed map[string]int
}

func newFunctionLog(file io.Writer) *functionLog {
	return &functionLog{file: file, metrics: map[string]float64{}, ledgerFailed: map[string]int{}}
}

func (l *functionLog) Write(p []byte) (int, error) {
	if l.file != nil {
		_, _ = l.file.Write(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *functionLog) line(b []byte) {
	s := strings.TrimSpace(string(b))
	if !strings.Contains(s, "(rapid)") {
		l.bytes += int64(len(b)) + 1
	}
	switch {
	case strings.HasPrefix(s, "REPORT RequestId"):
		l.reports++
		if _, rest, ok := strings.Cut(s, "Billed Duration: "); ok {
			ms, _, _ := strings.Cut(rest, " ms")
			if v, err := strconv.ParseFloat(ms, 64); err == nil {
				l.billed += time.Duration(v * float64(time.Millisecond))
			}
		}
	case strings.Contains(s, `"_aws"`):
		l.emf([]byte(s))
	case strings.Contains(s, `"outcome":"retry"`) && strings.Contains(s, `"error":"ledger: complete `):
		var t struct{ DeliveryKey string }
		if json.Unmarshal([]byte(s), &t) == nil && t.DeliveryKey != "" {
			l.ledgerFailed[t.DeliveryKey]++
		}
	case strings.Contains(s, `"level":"ERROR"`) || strings.Contains(s, "Runtime.ExitError") || strings.Contains(s, "panic:"):
		if len(l.errors) < 20 {
			l.errors = append(l.errors, s)
		}
	}
}

// emf adds the metrics of one embedded-metric-format line.
func (l *functionLog) emf(b []byte) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		return
	}
	var meta struct {
		CloudWatchMetrics []struct {
			Metrics []struct{ Name, Unit string }
		}
	}
	if json.Unmarshal(doc["_aws"], &meta) != nil {
		return
	}
	for _, set := range meta.CloudWatchMetrics {
		for _, m := range set.Metrics {
			if m.Unit != "Count" {
				continue
			}
			var v float64
			if json.Unmarshal(doc[m.Name], &v) == nil {
				l.metrics[m.Name] += v
			}
		}
	}
}

// Metric returns the sum of a count metric.
func (l *functionLog) Metric(name string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.metrics[name]
}

// logs are the function instances' logs together.
type logs []*functionLog

func (ls logs) metric(name string) float64 {
	var v float64
	for _, l := range ls {
		v += l.Metric(name)
	}
	return v
}

func (ls logs) invocations() int {
	n := 0
	for _, l := range ls {
		l.mu.Lock()
		n += l.reports
		l.mu.Unlock()
	}
	return n
}

func (ls logs) errorLines() []string {
	var out []string
	for _, l := range ls {
		l.mu.Lock()
		out = append(out, l.errors...)
		l.mu.Unlock()
	}
	return out
}

// usage returns the logs' billed duration and the bytes CloudWatch Logs
// would ingest.
func (ls logs) usage() (billed time.Duration, bytes int64) {
	for _, l := range ls {
		l.mu.Lock()
		billed += l.billed
		bytes += l.bytes
		l.mu.Unlock()
	}
	return billed, bytes
}

// ledgerFailed returns the delivery keys whose accepted send a consumer
// could not record.
func (ls logs) ledgerFailed() map[string]bool {
	out := map[string]bool{}
	for _, l := range ls {
		l.mu.Lock()
		for k := range l.ledgerFailed {
			out[k] = true
		}
		l.mu.Unlock()
	}
	return out
}

// requestID matches a request id (a UUID), which every line has its own
// of; digits, a run of digits (a time, a port, a count).
var (
	requestID = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	digits    = regexp.MustCompile(`[0-9]+`)
)

// errorKinds counts the lines written to it (one per write, as slog
// writes them) by kind: the line with its request ids and runs of digits
// (times, ports, counts) masked. It keeps an example of the first max
// kinds, and counts the rest together.
type errorKinds struct {
	mu      sync.Mutex
	max     int
	kinds   []string
	count   map[string]int
	example map[string]string
}

func newErrorKinds(max int) *errorKinds {
	return &errorKinds{max: max, count: map[string]int{}, example: map[string]string{}}
}

func (e *errorKinds) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	kind := digits.ReplaceAllString(requestID.ReplaceAllString(line, "<id>"), "#")
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.count[kind]; !ok && len(e.kinds) < e.max {
		e.kinds = append(e.kinds, kind)
		e.example[kind] = line
	}
	e.count[kind]++
	return len(b), nil
}

// Lines returns a line per kind kept: how many, and the first.
func (e *errorKinds) Lines() []string {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.kinds)+1)
	kept := 0
	for _, k := range e.kinds {
		out = append(out, fmt.Sprintf("%d× %s", e.count[k], e.example[k]))
		kept += e.count[k]
	}
	total := 0
	for _, n := range e.count {
		total += n
	}
	if total > kept {
		out = append(out, fmt.Sprintf("%d× of %d other kinds", total-kept, len(e.count)-len(e.kinds)))
	}
	return out
}
