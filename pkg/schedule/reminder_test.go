package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/schedule"
)

var now = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func validator() schedule.Validator {
	return schedule.Validator{Now: func() time.Time { return now }}
}

const good = `{"id":"rem-1","accountRef":"acct-1","dueAt":"2026-12-01T10:00:00+01:00","deliveries":[{"channel":"email","provider":"webhook","recipientRef":"acct-1/contact-2","templateRef":"renewal-v3"}]}`

// TestMaxAheadIsASetting: within the limit a reminder is accepted; a
// store may set its own limit.
func TestMaxAheadIsASetting(t *testing.T) {
	t.Parallel()
	edit := func(due string) []byte { return []byte(strings.Replace(good, `2026-12-01T10:00:00+01:00`, due, 1)) }
	if _, err := validator().ParseJSON(edit(`2031-11-28T09:00:00Z`)); err != nil {
		t.Fatalf("due in just under 5 years: %v", err)
	}
	v := validator()
	v.MaxAhead = 90 * 24 * time.Hour
	if _, err := v.ParseJSON(edit(`2027-03-30T09:00:00Z`)); err == nil || !strings.Contains(err.Error(), "more than 90 days ahead") {
		t.Fatalf("due in 120 days with a 90-day limit: %v", err)
	}
}

func TestValidReminderGetsDefaults(t *testing.T) {
	t.Parallel()
	r, err := validator().ParseJSON([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if !r.DueAt.Equal(due) || !r.ExpiresAt.Equal(due.Add(24*time.Hour)) || r.DueAt.Location() != time.UTC {
		t.Fatalf("times = %v, %v; want UTC dueAt and dueAt+24h", r.DueAt, r.ExpiresAt)
	}
	if len(r.Deliveries) != 1 || r.Deliveries[0].RecipientRef != "acct-1/contact-2" {
		t.Fatalf("deliveries = %+v", r.Deliveries)
	}
}

// TestInvalidRemindersNameTheFieldAndTheFix is the table of refusals: each
// error names the field and says what to do.
func TestInvalidRemindersNameTheFieldAndTheFix(t *testing.T) {
	t.Parallel()
	edit := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	for _, tc := range []struct {
		name, json, field, says string
	}{
		{"missing id", edit(`"id":"rem-1",`, ""), "id", "is missing"},
		{"bad id charset", edit(`rem-1`, `rem 1`), "id", "' '"},
		{"id too long", edit(`rem-1`, strings.Repeat("r", 129)), "id", "limit is 128"},
		{"missing account", edit(`"accountRef":"acct-1",`, ""), "accountRef", "is missing"},
		{"due not RFC 3339", edit(`2026-12-01T10:00:00+01:00`, `tomorrow`), "dueAt", "RFC 3339"},
		{"due without zone", edit(`2026-12-01T10:00:00+01:00`, `2026-12-01T10:00:00`), "dueAt", "RFC 3339"},
		{"expires before due", edit(`"dueAt"`, `"expiresAt":"2026-12-01T08:00:00Z","dueAt"`), "expiresAt", "is not after dueAt"},
		{"already expired", edit(`2026-12-01T10:00:00+01:00`, `2026-11-20T10:00:00Z`), "expiresAt", "has passed"},
		{"unknown channel", edit(`"email"`, `"fax"`), "deliveries[0].channel", "not a known channel"},
		{"bad provider", edit(`"webhook"`, `"Web Hook"`), "deliveries[0].provider", "'W'"},
		{"no deliveries", edit(`[{"channel":"email","provider":"webhook","recipientRef":"acct-1/contact-2","templateRef":"renewal-v3"}]`, `[]`), "deliveries", "has 0 entries"},
		{"repeated delivery", edit(`}]`, `},{"channel":"email","provider":"webhook","recipientRef":"b","templateRef":"c"}]`), "deliveries[1].provider", "repeats"},
		{"missing recipient", edit(`"recipientRef":"acct-1/contact-2",`, ""), "deliveries[0].recipientRef", "is missing"},
		{"control char", edit(`renewal-v3`, `renewal\u0007`), "deliveries[0].templateRef", "control character"},
		{"misspelt field", edit(`"dueAt"`, `"due_at"`), "due_at", "not a reminder field"},
		{"wrong type", edit(`"acct-1"`, `17`), "accountRef", "want a string"},
		{"bad metadata key", edit(`"deliveries"`, `"metadata":{"a b":"c"},"deliveries"`), "metadata", "key \"a b\""},
		{"not json", `{"id":`, "", "not valid JSON"},
		{"two objects", good + good, "", "more than one JSON value"},
		{"due beyond five years", edit(`2026-12-01T10:00:00+01:00`, `2031-12-01T10:00:00Z`), "dueAt", "more than 5 years ahead"},
		{"due in the year 9999", edit(`2026-12-01T10:00:00+01:00`, `9999-12-31T23:59:59Z`), "dueAt", "NUDGE_MAX_AHEAD"},
		{"expires beyond five years", edit(`"dueAt"`, `"expiresAt":"2032-01-01T00:00:00Z","dueAt"`), "expiresAt", "more than 5 years ahead"},
		{"default expiry beyond five years", edit(`2026-12-01T10:00:00+01:00`, `2031-11-28T12:00:00Z`), "expiresAt", "the default lateness 24h0m0s: give an expiresAt within the limit, or a shorter lateness"},
		{"oversized", edit(`"deliveries"`, `"metadata":{"k":"`+strings.Repeat("v", 9000)+`"},"deliveries"`), "", "limit is 8192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validator().ParseJSON([]byte(tc.json))
			var ve *schedule.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error = %v, want a *ValidationError", err)
			}
			if ve.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error = %q (field %q), want field %q and %q", err, ve.Field, tc.field, tc.says)
			}
			if ve.Fix == "" {
				t.Fatalf("error %q says nothing about how to fix it", err)
			}
		})
	}
}
