package schedule

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Format is an import file format.
type Format string

// Import formats.
const (
	// JSONLines is one reminder JSON object (see Input) per line.
	JSONLines Format = "jsonl"
	// CSV has a header row naming the columns id, accountRef, dueAt (or
	// dueLocal and timeZone), expiresAt or expiresLocal (optional),
	// channel, provider, recipientRef, templateRef, address (optional: for
	// SES), window (optional: the delivery's send window, as
	// ParseWindowSpec reads it, "08:00-21:00 mon-sat"),
	// and metadata.<key> (optional). Each row is one delivery; consecutive
	// rows with the same id are one reminder with several deliveries.
	CSV Format = "csv"
)

// FormatOf picks the format from a file name: .csv is CSV; .jsonl, .ndjson
// and .json are JSON Lines.
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return CSV, nil
	case ".jsonl", ".ndjson", ".json":
		return JSONLines, nil
	}
	return "", fmt.Errorf("import: cannot tell the format of %q from its extension; name it .jsonl or .csv, or pass --format jsonl|csv", path)
}

// Row is one reminder read from an import file.
type Row struct {
	// Line is the line number of the reminder (its first row in CSV).
	Line     int
	Reminder Reminder
	// Err is why the row is invalid; nil if it is valid.
	Err error
}

// ReadRows reads every reminder of an import file and validates each.
// An invalid row is returned with its Err and never stops the others; an
// error return means the file as a whole is unreadable (a CSV header that
// names an unknown column, say).
func ReadRows(r io.Reader, f Format, v Validator) ([]Row, error) {
	switch f {
	case JSONLines:
		return readJSONLines(r, v)
	case CSV:
		return readCSV(r, v)
	}
	return nil, fmt.Errorf("import: unknown format %q; use jsonl or csv", f)
}

// MaxLineBytes is the longest JSON Lines row read; a longer one is
// reported invalid and skipped, and the rows after it are still read.
const MaxLineBytes = 64 << 10

func readJSONLines(r io.Reader, v Validator) ([]Row, error) {
	br := bufio.NewReaderSize(r, MaxLineBytes)
	var rows []Row
	for line := 1; ; line++ {
		text, size, err := readLine(br)
		if size > MaxLineBytes {
			rows = append(rows, Row{Line: line, Err: &ValidationError{
				Problem: fmt.Sprintf("is %d bytes, over the %d-byte limit for one reminder", size, MaxLineBytes),
				Fix:     "check that the file has one reminder per line; metadata is meant to be small"}})
		} else if t := strings.TrimSpace(string(text)); t != "" {
			rem, perr := v.ParseJSON([]byte(t))
			rows = append(rows, Row{Line: line, Reminder: rem, Err: perr})
		}
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, fmt.Errorf("import: read line %d: %w", line, err)
		}
	}
}

// readLine reads one line without its newline. A line longer than
// MaxLineBytes is read to its end and dropped: size tells its length.
func readLine(br *bufio.Reader) (text []byte, size int, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if size <= MaxLineBytes+1 {
			text = append(text, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		text = bytes.TrimSuffix(text, []byte("\n"))
		if n := len(chunk); n > 0 && chunk[n-1] == '\n' {
			size-- // the newline is not part of the line
		}
		if size > MaxLineBytes {
			text = nil
		}
		return text, size, err
	}
}

var csvColumns = []string{"id", "accountRef", "dueAt", "expiresAt", "timeZone", "dueLocal", "expiresLocal", "channel", "provider", "recipientRef",
	"templateRef", "address", "window"}

func readCSV(r io.Reader, v Validator) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("import: read the CSV header: %w", err)
	}
	col := map[string]int{}
	for i, name := range header {
		name = strings.TrimSpace(strings.TrimPrefix(name, "\ufeff"))
		if !slices.Contains(csvColumns, name) && !strings.HasPrefix(name, "metadata.") {
			return nil, fmt.Errorf("import: CSV column %q is unknown; the columns are %s and metadata.<key>", name, strings.Join(csvColumns, ", "))
		}
		col[name] = i
	}
	if _, ok := col["dueLocal"]; !ok {
		if _, ok := col["dueAt"]; !ok {
			return nil, fmt.Errorf("import: CSV header lacks the column \"dueAt\" (or \"dueLocal\" with \"timeZone\"); it needs %s", strings.Join(csvColumns, ", "))
		}
	}
	for _, need := range []string{"id", "channel", "provider", "recipientRef", "templateRef", "accountRef"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("import: CSV header lacks the column %q; it needs %s", need, strings.Join(csvColumns, ", "))
		}
	}
	var rows []Row
	var group []Input
	var groupLine int
	var groupErr error
	flush := func() {
		if groupLine == 0 {
			return
		}
		row := Row{Line: groupLine, Err: groupErr}
		if row.Err == nil {
			in := group[0]
			for _, g := range group[1:] {
				in.Deliveries = append(in.Deliveries, g.Deliveries...)
			}
			row.Reminder, row.Err = v.Validate(in)
		}
		rows = append(rows, row)
		group, groupLine, groupErr = nil, 0, nil
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				flush()
				rows = append(rows, Row{Line: pe.Line, Err: &ValidationError{Problem: "is not valid CSV: " + pe.Err.Error(), Fix: "quote fields that contain commas or quotes"}})
				continue
			}
			return rows, fmt.Errorf("import: read CSV: %w", err)
		}
		line, _ := cr.FieldPos(0)
		get := func(name string) string {
			if i, ok := col[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		in := Input{ID: get("id"), AccountRef: get("accountRef"), DueAt: get("dueAt"), ExpiresAt: get("expiresAt"),
			TimeZone: get("timeZone"), DueLocal: get("dueLocal"), ExpiresLocal: get("expiresLocal"),
			Deliveries: []DeliveryInput{{Channel: get("channel"), Provider: get("provider"), RecipientRef: get("recipientRef"), TemplateRef: get("templateRef"), Address: get("address")}}}
		for name := range col {
			if k, ok := strings.CutPrefix(name, "metadata."); ok && get(name) != "" {
				if in.Metadata == nil {
					in.Metadata = map[string]string{}
				}
				in.Metadata[k] = get(name)
			}
		}
		var rowErr error
		if len(rec) != len(header) {
			rowErr = &ValidationError{ID: in.ID, Problem: fmt.Sprintf("has %d fields; the header has %d", len(rec), len(header)), Fix: "give every row the header's columns"}
		}
		if w, err := ParseWindowSpec(get("window")); err != nil && rowErr == nil {
			rowErr = &ValidationError{ID: in.ID, Field: "window", Problem: problemOf(err), Fix: fixOf(err)}
		} else {
			in.Deliveries[0].Window = w
		}
		if groupLine != 0 && in.ID == group[0].ID && in.ID != "" {
			first := group[0]
			if groupErr == nil && rowErr == nil && (in.AccountRef != first.AccountRef || in.DueAt != first.DueAt || in.ExpiresAt != first.ExpiresAt ||
				in.TimeZone != first.TimeZone || in.DueLocal != first.DueLocal || in.ExpiresLocal != first.ExpiresLocal) {
				rowErr = &ValidationError{ID: in.ID, Problem: fmt.Sprintf("line %d repeats the id with a different accountRef or times (dueAt, expiresAt, "+
					"timeZone, dueLocal, expiresLocal)", line), Fix: "rows of one reminder must agree on them; use another id for another reminder"}
			}
			group = append(group, in)
			if groupErr == nil {
				groupErr = rowErr
			}
			continue
		}
		flush()
		group, groupLine, groupErr = []Input{in}, line, rowErr
	}
	flush()
	return rows, nil
}

// Creator creates one reminder; *Store is one.
type Creator interface {
	Create(ctx context.Context, r Reminder) (Outcome, error)
}

// ImportConfig configures Import.
type ImportConfig struct {
	// Creator writes the reminders. Required.
	Creator Creator
	// Concurrency is how many reminders are written at once. Default 16.
	Concurrency int
	// Attempts is how often a reminder whose write failed for a reason
	// other than a conflict (throttling, a network error) is tried, with
	// backoff; Create is idempotent, so a retry is safe. Default 5.
	Attempts int
	// Backoff is the first wait between attempts, doubling each time.
	// Default 200ms.
	Backoff time.Duration
	// Progress, if set, is called after each reminder is done, one call at
	// a time.
	Progress func(done, total int)
}

// RowError is a row that was not written, with its line.
type RowError struct {
	Line int
	ID   string
	Err  error
}

// Summary is the result of an import.
type Summary struct {
	Rows      int
	Created   int
	Unchanged int
	// Conflicts are rows whose id exists with different content.
	Conflicts []RowError
	// Invalid are rows that failed validation.
	Invalid []RowError
	// Failed are rows whose writes kept failing; running the import again
	// retries them (and reports the written ones unchanged).
	Failed []RowError
}

// OK reports whether every row was created or unchanged.
func (s Summary) OK() bool { return len(s.Conflicts)+len(s.Invalid)+len(s.Failed) == 0 }

// Import writes the valid rows with bounded concurrency and returns what
// happened to each. Invalid rows are reported, never written, and never
// stop the valid ones.
func Import(ctx context.Context, rows []Row, cfg ImportConfig) (Summary, error) {
	if cfg.Creator == nil {
		return Summary{}, errors.New("import: Creator is nil")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	sum := Summary{Rows: len(rows)}
	var mu sync.Mutex
	done := 0
	finish := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, len(rows))
		}
	}
	// Rows with the same id go to the same worker, in file order, so that
	// the first of them is the one created and the others compare to it.
	work := make([]chan Row, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range work {
		work[i] = make(chan Row)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for row := range work[i] {
				outcome, err := createWithRetry(ctx, cfg, row.Reminder)
				var ce *ConflictError
				finish(func() {
					switch {
					case errors.As(err, &ce):
						sum.Conflicts = append(sum.Conflicts, RowError{row.Line, row.Reminder.ID, err})
					case err != nil:
						sum.Failed = append(sum.Failed, RowError{row.Line, row.Reminder.ID, err})
					case outcome == Unchanged:
						sum.Unchanged++
					default:
						sum.Created++
					}
				})
			}
		}()
	}
	for _, row := range rows {
		if row.Err != nil {
			var ve *ValidationError
			id := ""
			if errors.As(row.Err, &ve) {
				id = ve.ID
			}
			finish(func() { sum.Invalid = append(sum.Invalid, RowError{row.Line, id, row.Err}) })
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(row.Reminder.ID))
		select {
		case work[h.Sum32()%uint32(len(work))] <- row:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	for _, w := range work {
		close(w)
	}
	wg.Wait()
	for _, l := range []*[]RowError{&sum.Conflicts, &sum.Invalid, &sum.Failed} {
		slices.SortFunc(*l, func(a, b RowError) int { return a.Line - b.Line })
	}
	return sum, ctx.Err()
}

func createWithRetry(ctx context.Context, cfg ImportConfig, r Reminder) (Outcome, error) {
	wait := cfg.Backoff
	for attempt := 1; ; attempt++ {
		outcome, err := cfg.Creator.Create(ctx, r)
		var ce *ConflictError
		var ve *ValidationError
		if err == nil || errors.As(err, &ce) || errors.As(err, &ve) || attempt >= cfg.Attempts || ctx.Err() != nil {
			return outcome, err
		}
		select {
		case <-time.After(wait): // wall clock: a pause for DynamoDB to recover
		case <-ctx.Done():
			return "", err
		}
		wait *= 2
	}
}
