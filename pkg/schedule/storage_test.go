package schedule

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/localtime"
)

// fullReminder is a reminder with every field set: times to the
// millisecond (the ledger's precision), metadata, a creator, and an
// address on the delivery whose provider sends to one.
func mustWindow(spec string) localtime.Window {
	w, err := localtime.ParseWindowSpec(spec)
	if err != nil {
		panic(err)
	}
	return w
}

func fullReminder() Reminder {
	return Reminder{ID: "rem-rt", AccountRef: "acct-9",
		DueAt:     time.Date(2026, 12, 1, 9, 0, 0, 123_000_000, time.UTC),
		ExpiresAt: time.Date(2026, 12, 2, 9, 30, 15, 456_000_000, time.UTC),
		Deliveries: []Delivery{
			{Channel: "email", Provider: "ses", RecipientRef: "acct-9/contact-1", TemplateRef: "renewal-notice", Address: "ana@example.com"},
			{Channel: "sms", Provider: "webhook", RecipientRef: "acct-9/contact-2", TemplateRef: "renewal-sms", Window: mustWindow("08:00-21:00 Europe/Berlin mon-fri"),
				Fallback: &Fallback{Channel: "push", Provider: "webhook", RecipientRef: "acct-9/device-1", TemplateRef: "renewal-push", Within: 90 * time.Minute,
					Window: mustWindow("07:00-22:00 Europe/Berlin")}},
		},
		Metadata:  map[string]string{"plan": "Pro", "renewsOn": "2026-12-31"},
		CreatedBy: "arn:aws:sts::123456789012:assumed-role/billing/session",
		Late:      LatePolicy{Policy: LateSendLate, Within: 2 * time.Hour},
		Local:     Local{TimeZone: "Europe/Berlin", DueLocal: "2026-12-01T10:00", ExpiresLocal: "2026-12-02T10:30:15"},
		Recur:     "FREQ=MONTHLY", // a series' field, as Series is an occurrence's: both set here for the round trip
		Series:    "rem-series",
	}
}

// unsetFields names the fields of type t that are zero in every one of vs
// (for a slice of structs, in every element of every v): a fixture that
// leaves one unset would let a conversion drop it unnoticed.
func unsetFields(t reflect.Type, vs []reflect.Value, path string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		var set []reflect.Value
		for _, v := range vs {
			if fv := v.Field(i); !fv.IsZero() {
				set = append(set, fv)
			}
		}
		switch {
		case len(set) == 0:
			out = append(out, path+f.Name)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			var elems []reflect.Value
			for _, s := range set {
				for j := range s.Len() {
					elems = append(elems, s.Index(j))
				}
			}
			out = append(out, unsetFields(f.Type.Elem(), elems, path+f.Name+"[].")...)
		}
	}
	return out
}

// TestConversionsRoundTripEveryField: a reminder with every field set
// becomes a reminder item and delivery items and comes back the same; the
// address is on the delivery item alone (and back from it on the
// delivery's document), and the reminder read back has none. The stored
// forms share no map with the reminder.
func TestConversionsRoundTripEveryField(t *testing.T) {
	t.Parallel()
	r := fullReminder()
	if unset := unsetFields(reflect.TypeFor[Reminder](), []reflect.Value{reflect.ValueOf(r)}, "Reminder."); len(unset) > 0 {
		t.Fatalf("the fixture leaves %v unset: set every field, so that the round trip covers it", unset)
	}
	it := reminderItem(r)
	unset := unsetFields(reflect.TypeFor[ledger.ReminderItem](), []reflect.Value{reflect.ValueOf(it)}, "ReminderItem.")
	if !slices.Equal(unset, []string{"ReminderItem.TTL"}) {
		t.Errorf("the reminder item leaves %v unset; want only its TTL, which the ledger sets", unset)
	}
	want := r
	want.Deliveries = slices.Clone(r.Deliveries)
	for i := range want.Deliveries {
		want.Deliveries[i].Address = "" // on the delivery item, not the reminder item
	}
	if got := reminderOf(it); !reflect.DeepEqual(got, want) {
		t.Errorf("reminder → item → reminder:\n got  %+v\n want %+v", got, want)
	}
	if got := *reminderRead(&it); !reflect.DeepEqual(got, want) || reminderRead(nil) != nil {
		t.Errorf("reminderRead: %+v", got)
	}
	for _, d := range r.Deliveries {
		di := deliveryItem(r, d)
		if di.Key() != r.Key(d) || di.Address != d.Address || di.RecipientRef != d.RecipientRef || di.TemplateRef != d.TemplateRef ||
			!di.DueAt.Equal(r.DueAt) || !di.ExpiresAt.Equal(r.ExpiresAt.Add(r.Late.Within)) || !di.OnTimeUntil.Equal(r.ExpiresAt) ||
			di.Late != ledger.LateSendLate || di.Status != "" {
			t.Errorf("delivery item of %s: %+v", r.Key(d), di)
		}
		// The fallback's held item, and the primary naming it.
		if f := d.Fallback; f != nil {
			fi := fallbackItem(r, d)
			if fi.Key() != f.Key(r.ID) || fi.Status != ledger.StatusHeld || fi.FallbackOf != (ledger.FallbackRef{Channel: d.Channel, Provider: d.Provider}) ||
				fi.FallbackWithin != f.Within || fi.RecipientRef != f.RecipientRef || fi.TemplateRef != f.TemplateRef ||
				!fi.DueAt.Equal(r.DueAt) || !fi.ExpiresAt.Equal(r.ExpiresAt) || fi.Late != "" {
				t.Errorf("fallback item of %s: %+v", r.Key(d), fi)
			}
			if di.Fallback.Key(r.ID) != f.Key(r.ID) || di.FallbackWithin != f.Within {
				t.Errorf("delivery item of %s names fallback %v within %v", r.Key(d), di.Fallback, di.FallbackWithin)
			}
			doc := deliveryDocument(fi, false)
			if doc.FallbackOf != "sms:webhook" || doc.FallbackWithin != "1h30m" || doc.Told() != "held: fallback of sms:webhook, taken if it fails" {
				t.Errorf("the fallback's document: %+v, told %q", doc, doc.Told())
			}
		}
		// Back from the delivery item, the address is on the delivery's
		// document: whole when revealed, masked otherwise.
		if doc := deliveryDocument(di, true); doc.Address != d.Address || doc.Key != r.Key(d).String() || doc.DueAt != FormatTime(r.DueAt) ||
			doc.ExpiresAt != FormatTime(r.ExpiresAt.Add(r.Late.Within)) || doc.OnTimeUntil != FormatTime(r.ExpiresAt) || doc.Late != LateSendLate ||
			doc.Channel != d.Channel || doc.Provider != d.Provider {
			t.Errorf("the document of %s: %+v", r.Key(d), doc)
		}
		if got := deliveryDocument(di, false).Address; got != MaskAddress(d.Address) {
			t.Errorf("the document of %s shows address %q unrevealed", r.Key(d), got)
		}
		// SES renders the metadata; the webhook carries references only.
		if renders := d.Provider == "ses"; renders != reflect.DeepEqual(di.TemplateData, r.Metadata) || !renders && di.TemplateData != nil {
			t.Errorf("delivery item of %s has template data %v", r.Key(d), di.TemplateData)
		}
	}
	it.Metadata["plan"] = "changed"
	if back := reminderOf(reminderItem(r)); r.Metadata["plan"] != "Pro" || back.Metadata["plan"] != "Pro" {
		t.Error("the reminder item shares its metadata with the reminder")
	}
	// Nil and empty lists stay as they were (the JSON tells null from []).
	for _, ds := range [][]Delivery{nil, {}} {
		if got := reminderOf(reminderItem(Reminder{Deliveries: ds})).Deliveries; (got == nil) != (ds == nil) || len(got) != 0 {
			t.Errorf("deliveries %#v came back %#v", ds, got)
		}
	}
}

// TestTheAPIsTypesAndTheLedgersHaveTheSameFields: a field added to the
// API's reminder and not to the ledger's reminder item (or the other way
// round) fails here, and so does a tag of the other side's kind: the
// API's types have JSON tags only, the ledger's DynamoDB tags only. The
// exceptions are named, with why.
func TestTheAPIsTypesAndTheLedgersHaveTheSameFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		api, stored reflect.Type
		apiOnly     map[string]string
		storedOnly  map[string]string
	}{
		{reflect.TypeFor[Reminder](), reflect.TypeFor[ledger.ReminderItem](), nil,
			map[string]string{"TTL": "when DynamoDB may delete the item; the API does not tell it"}},
		{reflect.TypeFor[Delivery](), reflect.TypeFor[ledger.ReminderDelivery](),
			map[string]string{"Address": "kept on the delivery item alone (ledger.Delivery.Address), never on the reminder item"}, nil},
		{reflect.TypeFor[Listed](), reflect.TypeFor[ledger.Listed](),
			map[string]string{"Reminder": "embeds the API's reminder", "Now": "the deliveries' states, read apart", "Next": "a series' next occurrence, from its rule"},
			map[string]string{"ReminderItem": "embeds the ledger's reminder item"}},
		{reflect.TypeFor[Event](), reflect.TypeFor[ledger.Entry](),
			map[string]string{"Delivery": "the key of the delivery whose history holds the entry"}, nil},
	} {
		api, stored := fieldsOf(tc.api), fieldsOf(tc.stored)
		for name, f := range api {
			if _, ok := stored[name]; !ok && tc.apiOnly[name] == "" {
				t.Errorf("%s.%s has no field in %s: add it there and to storage.go's conversions, or name it here as the API's alone", tc.api, name, tc.stored)
			}
			if _, ok := f.Tag.Lookup("dynamodbav"); ok {
				t.Errorf("%s.%s has a dynamodbav tag: the API's types are not stored", tc.api, name)
			}
			if _, ok := f.Tag.Lookup("json"); !ok && !f.Anonymous && tc.api != reflect.TypeFor[Listed]() {
				t.Errorf("%s.%s has no json tag", tc.api, name)
			}
		}
		for name, f := range stored {
			if _, ok := api[name]; !ok && tc.storedOnly[name] == "" {
				t.Errorf("%s.%s has no field in %s: add it there and to storage.go's conversions, or name it here as the ledger's alone", tc.stored, name, tc.api)
			}
			if _, ok := f.Tag.Lookup("json"); ok && tc.stored != reflect.TypeFor[ledger.Entry]() {
				t.Errorf("%s.%s has a json tag: the ledger's types are not the API's", tc.stored, name)
			}
		}
		for name, why := range tc.apiOnly {
			if _, ok := stored[name]; ok {
				t.Errorf("%s.%s is named as the API's alone (%s), but %s has it too", tc.api, name, why, tc.stored)
			}
		}
		for name, why := range tc.storedOnly {
			if _, ok := api[name]; ok {
				t.Errorf("%s.%s is named as the ledger's alone (%s), but %s has it too", tc.stored, name, why, tc.api)
			}
		}
	}
	if f, ok := reflect.TypeFor[ledger.Delivery]().FieldByName("Address"); !ok || f.Type.Kind() != reflect.String {
		t.Error("ledger.Delivery has no Address: the delivery item is where a reminder's addresses are kept")
	}
}

// fieldsOf is t's fields, by name.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		out[t.Field(i).Name] = t.Field(i)
	}
	return out
}

// TestTheReminderDocumentIsTheAPIs: a reminder, an event and a delivery
// status are the JSON docs/openapi.yaml describes, byte for byte as they
// were when the reminder was the ledger's type.
func TestTheReminderDocumentIsTheAPIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want string
	}{
		{fullReminder(), `{"id":"rem-rt","accountRef":"acct-9","dueAt":"2026-12-01T09:00:00.123Z","expiresAt":"2026-12-02T09:30:15.456Z",` +
			`"timeZone":"Europe/Berlin","dueLocal":"2026-12-01T10:00","expiresLocal":"2026-12-02T10:30:15",` +
			`"deliveries":[{"channel":"email","provider":"ses","recipientRef":"acct-9/contact-1","templateRef":"renewal-notice"},` +
			`{"channel":"sms","provider":"webhook","recipientRef":"acct-9/contact-2","templateRef":"renewal-sms",` +
			`"fallback":{"channel":"push","provider":"webhook","recipientRef":"acct-9/device-1","templateRef":"renewal-push",` +
			`"window":{"from":"07:00","to":"22:00","timeZone":"Europe/Berlin"},"within":"1h30m"},` +
			`"window":{"from":"08:00","to":"21:00","timeZone":"Europe/Berlin","days":["mon","tue","wed","thu","fri"]}}],` +
			`"metadata":{"plan":"Pro","renewsOn":"2026-12-31"},"createdBy":"arn:aws:sts::123456789012:assumed-role/billing/session",` +
			`"late":{"policy":"send-late","within":"2h"},"recur":"FREQ=MONTHLY","series":"rem-series"}`},
		{Reminder{ID: "rem-1", Deliveries: []Delivery{}},
			`{"id":"rem-1","accountRef":"","dueAt":"0001-01-01T00:00:00Z","expiresAt":"0001-01-01T00:00:00Z","deliveries":[]}`},
		{eventOf(ledger.Entry{At: "2026-12-01T09:00:00.000Z", Status: ledger.StatusRetrying, Attempt: 2, Class: failure.ClassServer, Note: "503"},
			"rem-1:sms:webhook"),
			`{"at":"2026-12-01T09:00:00.000Z","status":"retrying","attempt":2,"class":"server","note":"503",` +
				`"delivery":"rem-1:sms:webhook"}`},
		{eventOf(ledger.Entry{At: "2026-12-01T09:00:00.000Z", Status: ledger.StatusPending}, "rem-1:sms:webhook"),
			`{"at":"2026-12-01T09:00:00.000Z","status":"pending","delivery":"rem-1:sms:webhook"}`},
	} {
		got, err := json.Marshal(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("%T as JSON:\n got  %s (%v)\n want %s", tc.v, got, err, tc.want)
		}
		// A reminder read back by a client is the reminder.
		if r, ok := tc.v.(Reminder); ok {
			var back Reminder
			if err := json.Unmarshal(got, &back); err != nil {
				t.Errorf("the reminder's JSON does not read back: %v", err)
			}
			want := r
			want.Deliveries = slices.Clone(r.Deliveries)
			for i, d := range want.Deliveries {
				want.Deliveries[i].Address = ""
				if d.Fallback != nil {
					f := *d.Fallback
					f.Address = ""
					want.Deliveries[i].Fallback = &f
				}
			}
			if !reflect.DeepEqual(back, want) {
				t.Errorf("the reminder's JSON read back:\n got  %+v\n want %+v", back, want)
			}
		}
	}
}

// TestTheAPIsStatusesAreTheLedgers: every ledger status has the API's
// status of the same value, and no other: a status added to one and not
// the other fails here.
func TestTheAPIsStatusesAreTheLedgers(t *testing.T) {
	t.Parallel()
	api, stored := statusConstants(t, "."), statusConstants(t, "../../internal/ledger")
	if len(stored) == 0 || !reflect.DeepEqual(api, stored) {
		t.Errorf("schedule's statuses %v, the ledger's %v; want the same", api, stored)
	}
	for name, value := range stored {
		if got := statusOf(ledger.Status(value)); string(got) != value {
			t.Errorf("statusOf(ledger.%s) = %q", name, got)
		}
	}
}

// statusConstants reads the constants of type Status declared in the
// package in dir (its production files): name → value.
func statusConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Status" {
					continue
				}
				for i, n := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: %s is not a string literal", name, n.Name)
					}
					v, _ := strconv.Unquote(lit.Value)
					out[n.Name] = v
				}
			}
		}
	}
	return out
}
