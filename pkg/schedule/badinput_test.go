package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestBadImportRows: each kind of bad row is reported on its own line with
// what is wrong and how to fix it, and never stops the valid row after it.
func TestBadImportRows(t *testing.T) {
	t.Parallel()
	v := schedule.Validator{Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) }}
	const delivery = `"deliveries":[{"channel":"email","provider":"webhook","recipientRef":"acct-1/contact-1","templateRef":"renewal-v3"}]`
	jsonl := func(body string) string {
		return body + "\n" + `{"id":"imp-ok","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z",` + delivery + "}\n"
	}
	const header = "id,accountRef,dueAt,expiresAt,channel,provider,recipientRef,templateRef\n"
	const okCSV = "csv-ok,acct-1,2026-12-01T09:00:00Z,,email,webhook,acct-1/contact-1,renewal-v3\n"
	for _, tc := range []struct {
		name   string
		format schedule.Format
		file   string
		want   string // in the first row's error
	}{
		{"jsonl: malformed JSON", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":`), "JSON"},
		{"jsonl: not an object", schedule.JSONLines, jsonl(`["imp-1"]`), "JSON"},
		{"jsonl: wrong-typed field", schedule.JSONLines, jsonl(`{"id":7,"accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z",` + delivery + `}`), "id"},
		{"jsonl: missing id", schedule.JSONLines, jsonl(`{"accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z",` + delivery + `}`), "id"},
		{"jsonl: misspelt field", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","expires":"2026-12-02T09:00:00Z",` + delivery + `}`), "expires"},
		{"jsonl: bad time", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"acct-1","dueAt":"next Tuesday",` + delivery + `}`), "dueAt"},
		{"jsonl: time without a zone", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00",` + delivery + `}`), "dueAt"},
		{"jsonl: expires before due", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","expiresAt":"2026-12-01T08:00:00Z",` + delivery + `}`), "expiresAt"},
		{"jsonl: already expired", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"acct-1","dueAt":"2026-11-01T09:00:00Z","expiresAt":"2026-11-02T09:00:00Z",` + delivery + `}`), "expiresAt"},
		{"jsonl: unknown channel", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","deliveries":[{"channel":"fax","provider":"webhook","recipientRef":"r","templateRef":"t"}]}`), "fax"},
		{"jsonl: no deliveries", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","deliveries":[]}`), "deliveries"},
		{"jsonl: two objects on a line", schedule.JSONLines, jsonl(`{"id":"imp-1"} {"id":"imp-2"}`), "more than one"},
		{"jsonl: invalid UTF-8", schedule.JSONLines, jsonl("{\"id\":\"imp-\xff\",\"accountRef\":\"acct-1\",\"dueAt\":\"2026-12-01T09:00:00Z\"," + delivery + "}"), "id"},
		{"jsonl: oversized line", schedule.JSONLines, jsonl(`{"id":"imp-1","accountRef":"` + strings.Repeat("a", schedule.MaxLineBytes) + `"}`), "over the 65536-byte limit"},
		{"csv: too few fields", schedule.CSV, header + "csv-1,acct-1,2026-12-01T09:00:00Z\n" + okCSV, "fields"},
		{"csv: stray quote", schedule.CSV, header + "csv-1,ac\"ct-1,2026-12-01T09:00:00Z,,email,webhook,r,t\n" + okCSV, "not valid CSV"},
		{"csv: bad time", schedule.CSV, header + "csv-1,acct-1,31/12/2026,,email,webhook,r,t\n" + okCSV, "dueAt"},
		{"csv: one id, two due times", schedule.CSV, header + "csv-1,acct-1,2026-12-01T09:00:00Z,,email,webhook,r,t\ncsv-1,acct-1,2026-12-02T09:00:00Z,,sms,webhook,r,t\n" + okCSV, "repeats the id"},
		{"csv: same delivery twice", schedule.CSV, header + "csv-1,acct-1,2026-12-01T09:00:00Z,,email,webhook,r,t\ncsv-1,acct-1,2026-12-01T09:00:00Z,,email,webhook,r,t\n" + okCSV, "email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rows, err := schedule.ReadRows(strings.NewReader(tc.file), tc.format, v)
			if err != nil {
				t.Fatalf("the file was refused as a whole: %v", err)
			}
			if len(rows) != 2 {
				t.Fatalf("%d rows, want the bad one and the valid one: %+v", len(rows), rows)
			}
			bad, ok := rows[0], rows[1]
			var ve *schedule.ValidationError
			if bad.Line != 1 && bad.Line != 2 || !errors.As(bad.Err, &ve) || !strings.Contains(bad.Err.Error(), tc.want) {
				t.Fatalf("bad row: line %d, error %v; want a validation error on its line naming %q", bad.Line, bad.Err, tc.want)
			}
			if ok.Err != nil || !strings.HasSuffix(ok.Reminder.ID, "-ok") {
				t.Fatalf("the valid row after it: %+v", ok)
			}
			t.Logf("line %d: %v", bad.Line, bad.Err)
		})
	}
	// An unterminated quote makes the rest of the file one field, by the
	// rules of CSV: that is reported, and nothing after it is imported.
	rows, err := schedule.ReadRows(strings.NewReader(header+"csv-1,\"acct-1,2026-12-01T09:00:00Z,,email,webhook,r,t\n"+okCSV), schedule.CSV, v)
	if err != nil || len(rows) != 1 || rows[0].Err == nil || !strings.Contains(rows[0].Err.Error(), "quoted-field") {
		t.Errorf("unterminated quote: rows %+v, %v; want one invalid row naming the quoted field", rows, err)
	}
	// A file that is not one the importer can read at all says so.
	for _, file := range []string{"id,accountRef,when\n", "id,accountRef\n"} {
		if _, err := schedule.ReadRows(strings.NewReader(file), schedule.CSV, v); err == nil || !strings.Contains(err.Error(), "column") {
			t.Errorf("header %q: %v, want an error naming the column", file, err)
		}
	}
}

// TestReferencesHoldNoAddressesAndValuesNoFormatCharacters: a recipientRef
// or accountRef holding an e-mail address or a telephone number is
// refused (they spread to the reminder item, the account index, queue
// messages, SNS and webhook bodies and conflict errors), with a fix that
// names the address field for SES; a metadata value holding a bidirectional
// override or another invisible format character is refused (it can spoof
// a subject in e-mail sent from the stage's domain). Plain references,
// customer numbers and emoji stay accepted.
func TestReferencesHoldNoAddressesAndValuesNoFormatCharacters(t *testing.T) {
	t.Parallel()
	v := schedule.Validator{Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) }}
	in := func(account, recipient, meta string) schedule.Input {
		return schedule.Input{ID: "rem-pii", AccountRef: account, DueAt: "2026-12-01T09:00:00Z",
			Deliveries: []schedule.DeliveryInput{{Channel: "sms", Provider: "webhook", RecipientRef: recipient, TemplateRef: "renewal"}},
			Metadata:   map[string]string{"plan": meta}}
	}
	for _, tc := range []struct {
		name, account, recipient, meta string
		field, want                    string // "" for accepted
	}{
		{"plain", "acct-1042", "acct-1/contact-77", "gold", "", ""},
		{"a customer number", "10428812344", "5551234567", "gold", "", ""},
		{"a tenant handle with @", "acct@tenant", "contact@crm", "gold", "", ""},
		{"emoji with a joiner", "acct-1", "contact-1", "👨\u200d👩\u200d👧 family plan", "", ""},
		{"an e-mail in recipientRef", "acct-1", "jane.doe@example.com", "gold", "deliveries[0].recipientRef", "e-mail address"},
		{"an e-mail inside recipientRef", "acct-1", "acct-1/jane@example.co.uk", "gold", "deliveries[0].recipientRef", "e-mail address"},
		{"an e-mail in accountRef", "billing@example.org", "contact-1", "gold", "accountRef", "e-mail address"},
		{"a phone in recipientRef", "acct-1", "+44 20 7946 0958", "gold", "deliveries[0].recipientRef", "telephone number"},
		{"a compact phone", "acct-1", "+15551234567", "gold", "deliveries[0].recipientRef", "telephone number"},
		{"a phone in accountRef", "+1 (555) 123-4567", "contact-1", "gold", "accountRef", "telephone number"},
		{"a tel: URI", "acct-1", "tel:5551234567", "gold", "deliveries[0].recipientRef", "tel: URI"},
		{"a mailto: URI", "acct-1", "MAILTO:jane", "gold", "deliveries[0].recipientRef", "mailto: URI"},
		{"a right-to-left override in metadata", "acct-1", "contact-1", "Invoice \u202egnp.exe", "metadata.plan", "U+202E"},
		{"a zero-width space in metadata", "acct-1", "contact-1", "pay\u200bpal", "metadata.plan", "U+200B"},
		{"a byte-order mark in metadata", "acct-1", "contact-1", "\ufeffgold", "metadata.plan", "U+FEFF"},
		{"an isolate in a reference", "acct-1", "contact\u2066-1", "gold", "deliveries[0].recipientRef", "U+2066"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Validate(in(tc.account, tc.recipient, tc.meta))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *schedule.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Problem, tc.want) {
				t.Fatalf("error %v; want field %s saying %q", err, tc.field, tc.want)
			}
			if strings.Contains(err.Error(), "jane") || strings.Contains(err.Error(), "7946") {
				t.Errorf("the error quotes the personal data: %v", err)
			}
		})
	}
	// For SES the fix names the address field.
	_, err := v.Validate(schedule.Input{ID: "rem-pii", AccountRef: "acct-1", DueAt: "2026-12-01T09:00:00Z",
		Deliveries: []schedule.DeliveryInput{{Channel: "email", Provider: "ses", RecipientRef: "jane@example.com", Address: "jane@example.com", TemplateRef: "renewal"}}})
	var ve *schedule.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Fix, "address field") {
		t.Errorf("an SES recipientRef holding the address: %v; want a fix naming the address field", err)
	}
}
