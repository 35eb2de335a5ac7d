package sink

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

// Fault is what the sink does with one request.
type Fault struct {
	// Kind is "ok", "429", "500", "400", "hang" or "drop".
	Kind string
	// Delay is added before answering (latency).
	Delay time.Duration
	// RetryAfter is sent with 429 (and 500) when set.
	RetryAfter time.Duration
}

// Plan chooses the fault for the attempt-th request (1-based) of a
// delivery key.
type Plan func(key string, attempt int) Fault

// Script returns a Plan that plays each reminder's faults in order, then
// answers ok. Keys are reminder ids.
func Script(faults map[string][]Fault) Plan {
	return func(key string, attempt int) Fault {
		id, _, _ := strings.Cut(key, ":")
		seq := faults[id]
		if attempt <= len(seq) {
			return seq[attempt-1]
		}
		return Fault{Kind: "ok"}
	}
}

// ParseScript parses "rem-1=500,500;rem-2=400;rem-3=429/30s,ok;rem-4=ok+200ms"
// into a Plan: per reminder, the faults of its first requests in order.
func ParseScript(spec string) (Plan, error) {
	faults := map[string][]Fault{}
	for _, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, list, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("sink: fault %q: want reminderId=fault,fault…", part)
		}
		for _, f := range strings.Split(list, ",") {
			fault, err := parseFault(f)
			if err != nil {
				return nil, fmt.Errorf("sink: fault %q for %s: %w", f, id, err)
			}
			faults[id] = append(faults[id], fault)
		}
	}
	return Script(faults), nil
}

func parseFault(s string) (Fault, error) {
	var f Fault
	s, delay, hasDelay := strings.Cut(s, "+")
	if hasDelay {
		d, err := time.ParseDuration(delay)
		if err != nil {
			return f, err
		}
		f.Delay = d
	}
	kind, after, hasAfter := strings.Cut(s, "/")
	if hasAfter {
		d, err := time.ParseDuration(after)
		if err != nil {
			return f, err
		}
		f.RetryAfter = d
	}
	switch kind {
	case "ok", "429", "500", "400", "hang", "drop":
		f.Kind = kind
		return f, nil
	}
	return f, fmt.Errorf("unknown fault %q; use ok, 429, 500, 400, hang or drop", kind)
}

// Sink is the stand-in provider. Its zero value answers ok to everything
// and checks no signature.
type Sink struct {
	// Secret, if set, is checked against each request's signature.
	Secret []byte
	// Plan picks faults; nil answers ok.
	Plan Plan

	mu         sync.Mutex
	requests   map[string]int
	accepted   map[string]Accepted
	answeredTo map[string]string // the sender was told the key was accepted, at this path
	resent     map[string]int
	dupes      int
}

// Accepted is a send the sink accepted.
type Accepted struct {
	Key     string
	Receipt string
	Request provider.Request
	// At is when the sink accepted it, and Received when the request it
	// accepted arrived (before any injected latency).
	At, Received time.Time
	// Repeats counts requests with this key that found it already accepted.
	Repeats int
}

// ServeHTTP handles one webhook POST.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, "want a POST with a JSON body", http.StatusBadRequest)
		return
	}
	if s.Secret != nil {
		if err := (webhook.Verifier{Secrets: [][]byte{s.Secret}}).Verify(r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
	}
	key := r.Header.Get(webhook.HeaderIdempotencyKey)
	var req provider.Request
	if key == "" || json.Unmarshal(body, &req) != nil {
		http.Error(w, "want an Idempotency-Key and a JSON delivery", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if s.requests == nil {
		s.requests, s.accepted, s.answeredTo, s.resent = map[string]int{}, map[string]Accepted{}, map[string]string{}, map[string]int{}
	}
	s.requests[key]++
	attempt := s.requests[key]
	s.mu.Unlock()

	fault := Fault{Kind: "ok"}
	if s.Plan != nil {
		fault = s.Plan(key, attempt)
	}
	if fault.Delay > 0 {
		select {
		case <-time.After(fault.Delay):
		case <-r.Context().Done():
			return
		}
	}
	switch fault.Kind {
	case "hang":
		<-r.Context().Done()
		return
	case "429", "500":
		if fault.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(fault.RetryAfter/time.Second)))
		}
		code, _ := strconv.Atoi(fault.Kind)
		http.Error(w, "injected fault", code)
		return
	case "400":
		http.Error(w, "injected fault: unknown recipient", http.StatusBadRequest)
		return
	}
	receipt := s.accept(key, req, received)
	if fault.Kind == "drop" {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := fmt.Fprintf(w, `{"id":%q}`, receipt); err == nil {
		s.mu.Lock()
		if _, ok := s.answeredTo[key]; !ok { // the first answer, which a repeat follows
			s.answeredTo[key] = r.URL.Path
		}
		s.mu.Unlock()
	}
}

func (s *Sink) accept(key string, req provider.Request, received time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.accepted[key]; ok {
		if _, ok := s.answeredTo[key]; ok {
			s.resent[key]++
		}
		a.Repeats++
		s.accepted[key] = a
		s.dupes++
		return a.Receipt
	}
	receipt := fmt.Sprintf("sink-%d", len(s.accepted)+1)
	s.accepted[key] = Accepted{Key: key, Receipt: receipt, Request: req, At: time.Now(), Received: received}
	return receipt
}

// Sends returns how many distinct deliveries were accepted for key: 0 or 1,
// since the sink deduplicates; see Repeats for suppressed duplicates.
func (s *Sink) Sends(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accepted[key]; ok {
		return 1
	}
	return 0
}

// Requests returns how many requests arrived for key.
func (s *Sink) Requests(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[key]
}

// RequestTotal returns how many requests arrived, for every key.
func (s *Sink) RequestTotal() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		n += r
	}
	return n
}

// Accepted returns what was accepted for key.
func (s *Sink) Accepted(key string) (Accepted, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accepted[key]
	return a, ok
}

// Totals returns the distinct deliveries accepted and the duplicate
// requests suppressed.
func (s *Sink) Totals() (accepted, duplicates int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.accepted), s.dupes
}

// Resent returns the keys sent again after the sender had been told they
// were accepted, with how many times. A repeat after a dropped or timed-out
// answer is the sender's rightful retry (the sink suppresses it); a repeat
// after a delivered answer means the sender sent the same delivery twice.
func (s *Sink) Resent() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.resent))
	for k, v := range s.resent {
		out[k] = v
	}
	return out
}

// Resend is a key sent again after the sender had been told it was
// accepted.
type Resend struct {
	Key   string
	Times int
	// AnsweredTo is the request path the acceptance was answered on, which
	// tells senders sharing the sink apart (each can post to its own path).
	AnsweredTo string
}

// Resends returns the keys sent again after an answered acceptance, with
// where the answer went; see Resent.
func (s *Sink) Resends() []Resend {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Resend, 0, len(s.resent))
	for k, v := range s.resent {
		out = append(out, Resend{Key: k, Times: v, AnsweredTo: s.answeredTo[k]})
	}
	return out
}

// Keys returns every key accepted.
func (s *Sink) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.accepted))
	for k := range s.accepted {
		out = append(out, k)
	}
	return out
}
