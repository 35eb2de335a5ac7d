package message

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func TestDecodeValid(t *testing.T) {
	t.Parallel()
	m, err := Decode([]byte(`{"v":1,"reminderId":"rem-184","channel":"email","provider":"webhook","dueAt":"2026-11-30T10:00:00+01:00","traceId":"t-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Message{V: 1, ReminderID: "rem-184", Channel: "email", Provider: "webhook", DueAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), TraceID: "t-1"}
	if m != want {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	if got := m.Key().String(); got != "rem-184:email:webhook" {
		t.Fatalf("key = %q", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	valid := `"reminderId":"rem-1","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"`
	cases := []struct {
		name, body, field, reason string
	}{
		{"empty", ``, "", "empty body"},
		{"whitespace", "  \n", "", "not a JSON object"},
		{"not json", `not json`, "", "not a JSON object"},
		{"array", `[1,2]`, "", "not a JSON object"},
		{"truncated", `{"v":1,`, "", "not valid JSON"},
		{"trailing data", `{"v":1,` + valid + `} {}`, "", "data after"},
		{"invalid utf8", "{\"v\":1,\"reminderId\":\"\xff\"}", "", "UTF-8"},
		{"oversize", `{"v":1,` + valid + `,"traceId":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, "", "limit"},
		{"missing version", `{` + valid + `}`, "v", "missing"},
		{"unknown version", `{"v":2,` + valid + `}`, "v", "unsupported schema version 2"},
		{"fractional version", `{"v":1.5,` + valid + `}`, "v", "unsupported"},
		{"string version", `{"v":"1",` + valid + `}`, "v", "want a number"},
		{"missing reminderId", `{"v":1,"channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`, "reminderId", "missing"},
		{"empty reminderId", `{"v":1,"reminderId":"","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`, "reminderId", "empty"},
		{"colon in reminderId", `{"v":1,"reminderId":"a:b","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`, "reminderId", "character"},
		{"dot reminderId", `{"v":1,"reminderId":".","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`, "reminderId", "path segment"},
		{"dot-dot reminderId", `{"v":1,"reminderId":"..","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`, "reminderId", "path segment"},
		{"long reminderId", `{"v":1,"reminderId":"` + strings.Repeat("r", 129) + `","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`, "reminderId", "limit is 128"},
		{"numeric channel", `{"v":1,"reminderId":"rem-1","channel":7,"provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`, "channel", "want a string"},
		{"upper-case provider", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"Webhook","dueAt":"2026-11-30T09:00:00Z"}`, "provider", "character"},
		{"missing dueAt", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"webhook"}`, "dueAt", "missing"},
		{"bad dueAt", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"webhook","dueAt":"tomorrow"}`, "dueAt", "RFC 3339"},
		{"null dueAt", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"webhook","dueAt":null}`, "dueAt", "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode([]byte(tc.body))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode(%q) error = %v, want *DecodeError", tc.body, err)
			}
			if de.Field != tc.field || !strings.Contains(de.Error(), tc.reason) {
				t.Fatalf("Decode(%q) = field %q, %q; want field %q containing %q", tc.body, de.Field, de.Error(), tc.field, tc.reason)
			}
		})
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	in := Message{ReminderID: "rem-9", Channel: "sms", Provider: "webhook", DueAt: time.Date(2026, 12, 1, 8, 30, 0, 0, time.FixedZone("x", 3600))}
	body, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":1,"reminderId":"rem-9","channel":"sms","provider":"webhook","dueAt":"2026-12-01T07:30:00Z"}`; string(body) != want {
		t.Fatalf("Encode = %s, want %s", body, want)
	}
	out, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if !out.DueAt.Equal(in.DueAt) || out.Key() != in.Key() {
		t.Fatalf("round trip changed %+v into %+v", in, out)
	}
	if _, err := Encode(Message{ReminderID: "rem-9", Channel: "sms", Provider: "webhook"}); err == nil {
		t.Fatal("Encode accepted a message without dueAt")
	}
}

func TestParseDeliveryKey(t *testing.T) {
	t.Parallel()
	k, err := ParseDeliveryKey("rem-1:email:webhook")
	if err != nil || k != (DeliveryKey{"rem-1", "email", "webhook"}) {
		t.Fatalf("ParseDeliveryKey = %+v, %v", k, err)
	}
	for _, bad := range []string{"", "rem-1", "rem-1:email", "a:b:c:d", "rem 1:email:webhook"} {
		if _, err := ParseDeliveryKey(bad); err == nil {
			t.Errorf("ParseDeliveryKey(%q) succeeded", bad)
		}
	}
}

// FuzzDecode checks that Decode never panics, that it either returns a valid
// message or a *DecodeError, and that what it accepts re-encodes to a body it
// accepts again. The corpus is seeded with every body in events/.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("../../events/sqs-*.json")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		for _, r := range ev.Records {
			f.Add([]byte(r.Body))
		}
	}
	f.Add([]byte(`{"v":1,"reminderId":"r","channel":"c","provider":"p","dueAt":"2026-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Decode(body)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode returned %T, want *DecodeError", err)
			}
			return
		}
		again, err := Encode(m)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", body, err)
		}
		m2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded body %q rejected: %v", again, err)
		}
		if m2.Key() != m.Key() || !m2.DueAt.Equal(m.DueAt) {
			t.Fatalf("round trip changed %+v into %+v", m, m2)
		}
	})
}
