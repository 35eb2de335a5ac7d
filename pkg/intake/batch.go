package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// Batch is the body of a batch create.
type Batch struct {
	Reminders []jsonRaw `json:"reminders"`
}

// BatchResult is the answer to a batch create: one result per reminder,
// in order.
type BatchResult struct {
	Results []ItemResult `json:"results"`
}

// ItemResult is one reminder's result in a batch: the status its own PUT
// would have answered, its outcome, or its problem.
type ItemResult struct {
	ID      string           `json:"id,omitempty"`
	Status  int              `json:"status"`
	Outcome schedule.Outcome `json:"outcome,omitempty"`
	Problem *Problem         `json:"problem,omitempty"`
}

type jsonRaw = json.RawMessage

// decodeBatch decodes a batch body: {"reminders": [ … ]}, 1 to MaxBatch.
func decodeBatch(body []byte) (Batch, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var b Batch
	if err := dec.Decode(&b); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return Batch{}, &schedule.ValidationError{Field: strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`),
				Problem: "is not a batch field", Fix: `send {"reminders": [ … ]}`}
		}
		return Batch{}, &schedule.ValidationError{Problem: "is not a batch: " + err.Error(), Fix: `send {"reminders": [ … ]}, each a reminder as PUT takes it, with its id`}
	}
	if dec.More() {
		return Batch{}, &schedule.ValidationError{Problem: "has more than one JSON value", Fix: `send one object: {"reminders": [ … ]}`}
	}
	if len(b.Reminders) == 0 || len(b.Reminders) > MaxBatch {
		return Batch{}, &schedule.ValidationError{Field: "reminders", Problem: fmt.Sprintf("has %d entries", len(b.Reminders)), Fix: fmt.Sprintf("send 1 to %d reminders a batch", MaxBatch)}
	}
	return b, nil
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	body, p := readBody(w, r, MaxBatchBytes)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	b, err := decodeBatch(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	stop := time.Time{}
	// wall clock: the deadline is the invocation's, on Lambda's clock
	if dl, ok := ctx.Deadline(); ok {
		stop = dl.Add(-h.cfg.Margin / 2) // ServeHTTP took the other half
	}
	results := make([]ItemResult, len(b.Reminders))
	seen := map[string]int{}
	var todo []int
	rems := make([]schedule.Reminder, len(b.Reminders))
	for i, raw := range b.Reminders {
		if len(raw) > schedule.MaxInputBytes {
			results[i] = ItemResult{Status: http.StatusRequestEntityTooLarge, Problem: tooLarge(int64(len(raw)), schedule.MaxInputBytes)}
			continue
		}
		rem, err := h.cfg.Store.Validator().ParseJSON(raw)
		if err != nil {
			results[i] = h.itemProblem(r, err)
			continue
		}
		if j, dup := seen[rem.ID]; dup {
			results[i] = h.itemProblem(r, &schedule.ValidationError{ID: rem.ID, Field: "id", Problem: fmt.Sprintf("repeats reminders[%d]", j), Fix: "give each reminder of a batch once"})
			continue
		}
		seen[rem.ID] = i
		rems[i], results[i].ID = rem, rem.ID
		todo = append(todo, i)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(h.cfg.BatchConcurrency, max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				// wall clock: stop is the invocation's deadline, on Lambda's clock
				if !stop.IsZero() && time.Now().After(stop) {
					results[i] = h.itemProblem(r, context.DeadlineExceeded)
					continue
				}
				h.createOne(ctx, r, rems[i], &results[i])
			}
		}()
	}
	for _, i := range todo {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for i := range results {
		if results[i].Problem != nil {
			results[i].Problem.Instance = requestID(r)
			if results[i].ID == "" {
				results[i].ID = rems[i].ID
			}
		}
	}
	writeJSON(w, http.StatusOK, BatchResult{Results: results})
}

// createOne creates one reminder of a batch into res; a panic is that
// reminder's 500, not the whole batch's.
func (h *Handler) createOne(ctx context.Context, r *http.Request, rem schedule.Reminder, res *ItemResult) {
	defer func() {
		if p := recover(); p != nil {
			h.cfg.Logger.Error("intake: panic", "panic", fmt.Sprint(p), "reminder", rem.ID, "requestId", requestID(r))
			*res = h.itemProblem(r, fmt.Errorf("panic: %v", p))
			res.ID = rem.ID
		}
	}()
	outcome, err := h.cfg.Store.CreateAs(ctx, h.caller(r), rem)
	if err != nil {
		*res = h.itemProblem(r, err)
		res.ID = rem.ID
		return
	}
	res.Outcome, res.Status = outcome, http.StatusOK
	if outcome == schedule.Created {
		res.Status = http.StatusCreated
	}
}

func (h *Handler) itemProblem(r *http.Request, err error) ItemResult {
	p := h.problemFor(r, err)
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	id := ""
	var ve *schedule.ValidationError
	if errors.As(err, &ve) {
		id = ve.ID
	}
	return ItemResult{ID: id, Status: p.Status, Problem: p}
}
