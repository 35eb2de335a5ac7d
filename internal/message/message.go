package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nudgehq/nudge/internal/text"
)

// Version is the schema version this package writes and reads.
const Version = 1

// Channels are the channels Nudge knows: intake accepts these unless told
// otherwise, and the consumer's metrics are split by them (any other counts
// as "other").
var Channels = []string{"email", "sms", "push", "voice", "webhook"}

// MaxBodyBytes is the largest body Decode accepts. Real bodies are about 150
// bytes; anything near SQS's 1 MiB limit is not a Nudge message.
const MaxBodyBytes = 4096

// Limits on identifiers. Identifiers use a restricted alphabet so that the
// delivery key "reminderId:channel:provider" is unambiguous.
const (
	MaxReminderIDLen = 128
	MaxNameLen       = 32
)

// Message is one hand-off from the calendar to the consumer: which delivery of
// which reminder is due, and when.
type Message struct {
	// V is the schema version; always Version when produced by this package.
	V int `json:"v"`
	// ReminderID identifies the reminder: 1–128 of [A-Za-z0-9._-].
	ReminderID string `json:"reminderId"`
	// Channel is the delivery channel, such as "email" or "sms": 1–32 of [a-z0-9_-].
	Channel string `json:"channel"`
	// Provider names the provider that sends on the channel: 1–32 of [a-z0-9_-].
	Provider string `json:"provider"`
	// DueAt is when the delivery is due.
	DueAt time.Time `json:"dueAt"`
	// TraceID optionally correlates logs across functions.
	TraceID string `json:"traceId,omitempty"`
}

// Key returns the delivery key.
func (m Message) Key() DeliveryKey {
	return DeliveryKey{ReminderID: m.ReminderID, Channel: m.Channel, Provider: m.Provider}
}

// DeliveryKey is the unit of idempotency: one reminder, sent once on one
// channel through one provider.
type DeliveryKey struct {
	ReminderID string
	Channel    string
	Provider   string
}

// String returns "reminderId:channel:provider", the form used in logs, DLQ
// attributes and as the provider's idempotency key.
func (k DeliveryKey) String() string {
	return k.ReminderID + ":" + k.Channel + ":" + k.Provider
}

// ParseDeliveryKey parses "reminderId:channel:provider".
func ParseDeliveryKey(s string) (DeliveryKey, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return DeliveryKey{}, fmt.Errorf("delivery key %q: want reminderId:channel:provider", s)
	}
	k := DeliveryKey{ReminderID: parts[0], Channel: parts[1], Provider: parts[2]}
	if err := k.Validate(); err != nil {
		return DeliveryKey{}, err
	}
	return k, nil
}

// Validate reports the first identifier of k that breaks the contract.
func (k DeliveryKey) Validate() error {
	if err := ValidReminderID(k.ReminderID); err != nil {
		return err
	}
	if err := checkID("channel", k.Channel, MaxNameLen, isNameChar); err != nil {
		return err
	}
	return checkID("provider", k.Provider, MaxNameLen, isNameChar)
}

// DecodeError says why a body is not a valid message. The consumer
// dead-letters such a body at once: retrying cannot fix it.
type DecodeError struct {
	// Field is the JSON field at fault, or "" for the body as a whole.
	Field string
	// Reason says what is wrong and what was expected.
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "message: " + e.Reason
	}
	return fmt.Sprintf("message: field %q: %s", e.Field, e.Reason)
}

// wire is the body as it arrives, with pointers to tell missing from zero.
type wire struct {
	V          json.RawMessage `json:"v"`
	ReminderID *string         `json:"reminderId"`
	Channel    *string         `json:"channel"`
	Provider   *string         `json:"provider"`
	DueAt      *string         `json:"dueAt"`
	TraceID    *string         `json:"traceId"`
}

// Decode parses and validates a message body.
func Decode(body []byte) (Message, error) {
	if len(body) == 0 {
		return Message{}, &DecodeError{Reason: "empty body; want a JSON object with v, reminderId, channel, provider, dueAt"}
	}
	if len(body) > MaxBodyBytes {
		return Message{}, &DecodeError{Reason: fmt.Sprintf("body is %d bytes, over the %d-byte limit; messages carry identifiers only", len(body), MaxBodyBytes)}
	}
	if !utf8.Valid(body) {
		return Message{}, &DecodeError{Reason: "body is not valid UTF-8"}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Message{}, &DecodeError{Reason: "body is not a JSON object"}
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&w); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return Message{}, &DecodeError{Field: typeErr.Field, Reason: fmt.Sprintf("is a JSON %s, want %s", typeErr.Value, typeName(typeErr.Type.String()))}
		}
		return Message{}, &DecodeError{Reason: "body is not valid JSON: " + err.Error()}
	}
	if dec.More() {
		return Message{}, &DecodeError{Reason: "body has data after the JSON object"}
	}
	if len(w.V) == 0 || string(w.V) == "null" {
		return Message{}, &DecodeError{Field: "v", Reason: fmt.Sprintf("missing; want the schema version %d", Version)}
	}
	if w.V[0] != '-' && (w.V[0] < '0' || w.V[0] > '9') {
		return Message{}, &DecodeError{Field: "v", Reason: fmt.Sprintf("is %s, want a number", text.Clip(string(w.V), 43))}
	}
	if string(w.V) != "1" {
		return Message{}, &DecodeError{Field: "v", Reason: fmt.Sprintf("unsupported schema version %s; this consumer reads version %d", text.Clip(string(w.V), 43), Version)}
	}
	m := Message{V: Version}
	for _, f := range []struct {
		name string
		src  *string
		dst  *string
	}{
		{"reminderId", w.ReminderID, &m.ReminderID},
		{"channel", w.Channel, &m.Channel},
		{"provider", w.Provider, &m.Provider},
		{"dueAt", w.DueAt, nil},
	} {
		if f.src == nil {
			return Message{}, &DecodeError{Field: f.name, Reason: "missing"}
		}
		if f.dst != nil {
			*f.dst = *f.src
		}
	}
	if err := m.Key().Validate(); err != nil {
		return Message{}, err
	}
	due, err := time.Parse(time.RFC3339Nano, *w.DueAt)
	if err != nil {
		return Message{}, &DecodeError{Field: "dueAt", Reason: fmt.Sprintf("%q is not an RFC 3339 time such as 2026-11-30T09:00:00Z", text.Clip(*w.DueAt, 43))}
	}
	m.DueAt = due.UTC()
	if w.TraceID != nil {
		if len(*w.TraceID) > 128 {
			return Message{}, &DecodeError{Field: "traceId", Reason: "longer than 128 bytes"}
		}
		m.TraceID = *w.TraceID
	}
	return m, nil
}

// Encode returns the JSON body for m, after checking it against the contract.
func Encode(m Message) ([]byte, error) {
	m.V = Version
	if err := m.Key().Validate(); err != nil {
		return nil, err
	}
	if m.DueAt.IsZero() {
		return nil, &DecodeError{Field: "dueAt", Reason: "missing"}
	}
	m.DueAt = m.DueAt.UTC()
	return json.Marshal(m)
}

func checkID(field, s string, max int, ok func(rune) bool) error {
	if s == "" {
		return &DecodeError{Field: field, Reason: "empty"}
	}
	if len(s) > max {
		return &DecodeError{Field: field, Reason: fmt.Sprintf("%d bytes long; the limit is %d", len(s), max)}
	}
	for _, r := range s {
		if !ok(r) {
			return &DecodeError{Field: field, Reason: fmt.Sprintf("%q has the character %q; allowed are %s", text.Clip(s, 43), r, allowed(field))}
		}
	}
	return nil
}

// ValidReminderID is the one rule for a reminder id, which every way in
// (the API's routes and batch, the CLI, the import) and the consumer's
// decoding apply: 1 to MaxReminderIDLen letters, digits, '.', '_' or '-',
// and not "." or "..", which are path segments: the API's router takes no
// path that is not in its clean form, so no route could reach such a
// reminder to read or cancel it.
func ValidReminderID(id string) error {
	if err := checkID("reminderId", id, MaxReminderIDLen, isIDChar); err != nil {
		return err
	}
	if id == "." || id == ".." {
		return &DecodeError{Field: "reminderId", Reason: fmt.Sprintf("%q is a path segment, which no route of the API can reach; use at least one letter, digit, '_' or '-'", id)}
	}
	return nil
}

func allowed(field string) string {
	if field == "reminderId" {
		return "letters, digits, '.', '_' and '-'"
	}
	return "lower-case letters, digits, '_' and '-'"
}

func isIDChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

func typeName(goType string) string {
	switch goType {
	case "string":
		return "a string"
	}
	return goType
}
