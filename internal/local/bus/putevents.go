package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// target is the X-Amz-Target of PutEvents in the AWS JSON 1.1 protocol.
	target      = "AWSEvents.PutEvents"
	contentType = "application/x-amz-json-1.1"
	// timeSize is what an entry's Time counts for in its size, as
	// EventBridge counts it.
	timeSize = 14
	// maxDetailType is the longest DetailType EventBridge takes.
	maxDetailType = 128
)

// requestEntry is a PutEventsRequestEntry as the SDK sends it. Time is in
// epoch seconds, a JSON number (awsJson1_1's timestamp format).
type requestEntry struct {
	Source       *string
	DetailType   *string
	Detail       *string
	EventBusName *string
	Resources    []string
	Time         *json.Number
	TraceHeader  *string
}

type putEventsRequest struct {
	Entries    []requestEntry
	EndpointID *string `json:"EndpointId"`
}

type resultEntry struct {
	EventID      string `json:"EventId,omitempty"`
	ErrorCode    string `json:"ErrorCode,omitempty"`
	ErrorMessage string `json:"ErrorMessage,omitempty"`
}

type putEventsResponse struct {
	Entries          []resultEntry
	FailedEntryCount int
}

// EntrySize is an entry's size as EventBridge counts it against a
// request's limit: the UTF-8 bytes of Source, DetailType, Detail and each
// of Resources, and 14 bytes for a Time (EventBusName and TraceHeader do
// not count).
func EntrySize(source, detailType, detail string, resources []string, hasTime bool) int {
	n := len(source) + len(detailType) + len(detail)
	for _, r := range resources {
		n += len(r)
	}
	if hasTime {
		n += timeSize
	}
	return n
}

func (e requestEntry) size() int {
	return EntrySize(deref(e.Source), deref(e.DetailType), deref(e.Detail), e.Resources, e.Time != nil)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ServeHTTP answers one request as EventBridge's PutEvents does, in the AWS
// JSON 1.1 protocol.
func (b *Bus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := newUUID()
	w.Header().Set("X-Amzn-Requestid", id)
	if err := b.authorized(r.Header.Get("Authorization")); err != nil {
		b.refuse(w, id, err)
		return
	}
	if op := r.Header.Get("X-Amz-Target"); op != target {
		b.refuse(w, id, &apiError{http.StatusBadRequest, "UnknownOperationException",
			fmt.Sprintf("operation %q is not served: this stand-in for EventBridge serves only %s (X-Amz-Target: %s)", op, "PutEvents", target)})
		return
	}
	if r.Method != http.MethodPost {
		b.refuse(w, id, &apiError{http.StatusBadRequest, "SerializationException", "PutEvents is a POST; the request was a " + r.Method})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != contentType {
		b.refuse(w, id, &apiError{http.StatusBadRequest, "SerializationException",
			fmt.Sprintf("Content-Type %q is not %s, the AWS JSON 1.1 protocol's", r.Header.Get("Content-Type"), contentType)})
		return
	}
	if b.requestFault() {
		b.count(func(s *Stats) { s.RequestFaults++ })
		b.refuse(w, id, &apiError{http.StatusInternalServerError, "InternalException", "injected fault: the request failed (Faults.RequestRate/RequestEvery)"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		b.refuse(w, id, &apiError{http.StatusBadRequest, "SerializationException", "reading the body: " + err.Error()})
		return
	}
	if len(body) > maxBody {
		b.refuse(w, id, &apiError{http.StatusRequestEntityTooLarge, "ValidationException", "Total size of the entries in the request is over the limit."})
		return
	}
	var in putEventsRequest
	if err := json.Unmarshal(body, &in); err != nil {
		b.refuse(w, id, &apiError{http.StatusBadRequest, "SerializationException", "the body is not a PutEvents request: " + err.Error()})
		return
	}
	if err := b.checkRequest(in); err != nil {
		b.refuse(w, id, err)
		return
	}
	out := putEventsResponse{Entries: make([]resultEntry, len(in.Entries))}
	var accepted []event
	for i, e := range in.Entries {
		ev, res := b.accept(e)
		out.Entries[i] = res
		if res.ErrorCode != "" {
			out.FailedEntryCount++
			b.count(func(s *Stats) { s.Failed[res.ErrorCode]++ })
			continue
		}
		b.count(func(s *Stats) { s.Accepted++ })
		accepted = append(accepted, ev)
	}
	// Delivery before the answer: when PutEvents returns, its events are in
	// their queues (or counted as failed), which keeps tests deterministic.
	for _, ev := range accepted {
		b.deliver(ev)
	}
	b.count(func(s *Stats) { s.Requests++ })
	b.logf("PutEvents 200 request=%s entries=%d failed=%d", id, len(in.Entries), out.FailedEntryCount)
	answer(w, http.StatusOK, out)
}

// checkRequest refuses a request EventBridge refuses whole.
func (b *Bus) checkRequest(in putEventsRequest) error {
	if n := len(in.Entries); n < 1 || n > MaxEntries {
		return &apiError{http.StatusBadRequest, "ValidationException", fmt.Sprintf(
			"1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length between 1 and %d "+
				"(it has %d); send at most %d entries a request", MaxEntries, n, MaxEntries)}
	}
	if in.EndpointID != nil {
		return &apiError{http.StatusBadRequest, "ValidationException",
			"EndpointId is set: the stand-in has no global endpoints; leave EndpointId empty"}
	}
	total := 0
	for _, e := range in.Entries {
		total += e.size()
	}
	if total > b.cfg.MaxRequestBytes {
		return &apiError{http.StatusBadRequest, "ValidationException", fmt.Sprintf(
			"Total size of the entries in the request is over the limit. (%d bytes, over %d: Source, DetailType, Detail and Resources "+
				"in UTF-8, 14 for a Time; send fewer entries a request)", total, b.cfg.MaxRequestBytes)}
	}
	return nil
}

// accept checks one entry and, if it goes through, returns its event.
func (b *Bus) accept(e requestEntry) (event, resultEntry) {
	fail := func(code, msg string) (event, resultEntry) {
		return event{}, resultEntry{ErrorCode: code, ErrorMessage: msg}
	}
	switch {
	case e.Source == nil || *e.Source == "":
		return fail(CodeInvalidArgument, "Parameter Source is not valid. Reason: Source is a required argument.")
	case e.DetailType == nil || *e.DetailType == "":
		return fail(CodeInvalidArgument, "Parameter DetailType is not valid. Reason: DetailType is a required argument.")
	case utf8.RuneCountInString(*e.DetailType) > maxDetailType:
		return fail(CodeInvalidArgument, fmt.Sprintf("Parameter DetailType is not valid. Reason: DetailType is longer than %d characters.", maxDetailType))
	case e.Detail == nil || *e.Detail == "":
		return fail(CodeInvalidArgument, "Parameter Detail is not valid. Reason: Detail is a required argument.")
	}
	detail, ok := jsonObject(*e.Detail)
	if !ok {
		return fail(CodeMalformedDetail, "Detail is malformed: it must be a JSON object ({…}).")
	}
	bus, missing := b.busOf(deref(e.EventBusName))
	if missing != "" {
		return fail(CodeBusNotFound, missing)
	}
	at := b.cfg.Clock.Now()
	if e.Time != nil {
		t, err := epochSeconds(*e.Time)
		if err != nil {
			return fail(CodeInvalidArgument, "Parameter Time is not valid. Reason: "+err.Error())
		}
		at = t
	}
	if code := b.entryFault(); code != "" {
		b.count(func(s *Stats) { s.EntryFaults++ })
		return fail(code, "injected fault: the entry failed (Faults.EntryRate/EntryEvery); send it again")
	}
	resources := e.Resources
	if resources == nil {
		resources = []string{}
	}
	ev := event{bus: bus, envelope: envelope{
		Version: "0", ID: newUUID(), DetailType: *e.DetailType, Source: *e.Source, Account: b.cfg.AccountID,
		Time: at.UTC().Format(timeFormat), Region: b.cfg.Region, Resources: resources, Detail: detail,
	}}
	return ev, resultEntry{EventID: ev.envelope.ID}
}

// jsonObject returns s compacted if it is a JSON object.
func jsonObject(s string) (json.RawMessage, bool) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, false
	}
	return buf.Bytes(), true
}

// busOf resolves an entry's EventBusName, a name or an ARN, to a bus of the
// stand-in's, or says why there is none.
func (b *Bus) busOf(nameOrARN string) (name, missing string) {
	if nameOrARN == "" {
		return DefaultBus, ""
	}
	name = nameOrARN
	if strings.HasPrefix(nameOrARN, "arn:") {
		prefix := b.ARN("")
		rest, ok := strings.CutPrefix(nameOrARN, prefix)
		if !ok {
			return "", fmt.Sprintf("Event bus %s does not exist: the stand-in's buses are %s<name>; give a bus name, or an ARN of its region and account",
				nameOrARN, prefix)
		}
		name = rest
	}
	if !b.buses[name] {
		return "", fmt.Sprintf("Event bus %s does not exist in the stand-in; add it to bus.Config.Buses (in AWS, the stack creates it)", name)
	}
	return name, ""
}

// epochSeconds reads a timestamp in epoch seconds (fractions allowed).
func epochSeconds(n json.Number) (time.Time, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return time.Time{}, fmt.Errorf("time %q is not a timestamp in epoch seconds", n)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC(), nil
}

// authorized checks that a request carries a SigV4 Authorization header for
// service events in the bus's region. The signature is not verified.
func (b *Bus) authorized(h string) error {
	if h == "" {
		return &apiError{http.StatusBadRequest, "MissingAuthenticationTokenException",
			"Request is missing Authentication Token: sign it with SigV4 (any credentials do locally; the signature is not checked)"}
	}
	alg, params, _ := strings.Cut(h, " ")
	if alg != "AWS4-HMAC-SHA256" {
		return &apiError{http.StatusBadRequest, "IncompleteSignatureException", fmt.Sprintf("authorization scheme %q is not AWS4-HMAC-SHA256; sign with SigV4", alg)}
	}
	fields := map[string]string{}
	for _, p := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] == "" || scope[4] != "aws4_request" || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return &apiError{http.StatusBadRequest, "IncompleteSignatureException",
			"the Authorization header is not Credential=KEY/date/region/events/aws4_request, SignedHeaders=…, Signature=…"}
	}
	if scope[3] != "events" {
		return &apiError{http.StatusBadRequest, "InvalidSignatureException",
			fmt.Sprintf("Credential should be scoped to correct service: 'events' (it is %q)", scope[3])}
	}
	if scope[2] != b.cfg.Region {
		return &apiError{http.StatusBadRequest, "InvalidSignatureException",
			fmt.Sprintf("Credential should be scoped to a valid region: the bus is in %s, the request is signed for %q", b.cfg.Region, scope[2])}
	}
	return nil
}

// apiError is a request refused whole, answered as the AWS JSON protocol
// answers errors: {"__type": …, "message": …}.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func (b *Bus) refuse(w http.ResponseWriter, id string, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, "InternalException", err.Error()}
	}
	b.count(func(s *Stats) { s.Requests++; s.Refused[ae.typ]++ })
	b.logf("%d %s request=%s: %s", ae.status, ae.typ, id, ae.msg)
	answer(w, ae.status, map[string]string{"__type": ae.typ, "message": ae.msg})
}

func answer(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
