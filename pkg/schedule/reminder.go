package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Limits on a reminder.
const (
	MaxDeliveries    = 8
	MaxRefLen        = 256
	MaxMetadataKeys  = 16
	MaxMetadataKey   = 64
	MaxMetadataValue = 256
	MaxInputBytes    = 8 << 10
)

// Input is a reminder as a user writes it: JSON with RFC 3339 times.
type Input struct {
	// ID identifies the reminder: 1–128 of [A-Za-z0-9._-]. Creating the
	// same id twice with the same content is harmless.
	ID string `json:"id"`
	// AccountRef is the owning account's reference, not its name.
	AccountRef string `json:"accountRef"`
	// DueAt is when the reminder is due, RFC 3339. Required unless
	// DueLocal is given.
	DueAt string `json:"dueAt,omitempty"`
	// ExpiresAt is when it is no longer worth sending, RFC 3339. Default:
	// DueAt plus the store's lateness window.
	ExpiresAt string `json:"expiresAt,omitempty"`
	// TimeZone is the recipient's IANA zone ("Europe/Berlin"), in which
	// DueLocal and ExpiresLocal are read. Given alone beside dueAt, it is
	// kept for the reminder's local view.
	TimeZone string `json:"timeZone,omitempty"`
	// DueLocal is the due time on the recipient's wall clock
	// ("2027-03-28T09:30"), instead of dueAt or with it (Local's rules).
	DueLocal string `json:"dueLocal,omitempty"`
	// ExpiresLocal is the expiry on the recipient's wall clock, instead of
	// expiresAt or with it.
	ExpiresLocal string `json:"expiresLocal,omitempty"`
	// Deliveries lists where it goes: 1 to MaxDeliveries.
	Deliveries []DeliveryInput `json:"deliveries"`
	// Metadata is optional labels for the operator; never personal data.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Late is what its deliveries do once expiresAt has passed unsent.
	// Default: expire.
	Late *LateInput `json:"late,omitempty"`
	// Recur makes the reminder a series: an RFC 5545 rule ("FREQ=MONTHLY;
	// BYDAY=-1FR"), read in TimeZone from the first occurrence, dueLocal
	// (which the rule must produce). Each occurrence is a reminder of its
	// own, id "<id>.<local date and time>", created ahead by Nudge
	// (docs/api.md#recurring-reminders).
	Recur string `json:"recur,omitempty"`
}

// Late policies (LateInput.Policy, LatePolicy.Policy).
const (
	// LateExpire: a delivery not sent by expiresAt expires (the default).
	LateExpire = "expire"
	// LateSendLate: a delivery keeps trying until expiresAt plus within,
	// and one sent after expiresAt is sent late.
	LateSendLate = string(ledger.LateSendLate)
	// LateEscalate: a delivery not sent by expiresAt expires, and its
	// expiry is published as an escalation (and notifies the stage's
	// operators' topic, if it names one).
	LateEscalate = string(ledger.LateEscalate)
)

// LateInput is an Input's late policy.
type LateInput struct {
	// Policy is expire, send-late or escalate.
	Policy string `json:"policy"`
	// Within is, for send-late only (and required there), how long after
	// expiresAt a delivery may still go: a Go duration ("2h", "90m"),
	// MinSpan to MaxSpan.
	Within string `json:"within,omitempty"`
}

// FallbackInput is a delivery's fallback: another channel and provider,
// taken once if the delivery ends dead, bounced or complained of, or
// expires unsent. It has a delivery's fields, with the same checks, and
// no fallback of its own.
type FallbackInput struct {
	Channel      string `json:"channel"`
	Provider     string `json:"provider"`
	RecipientRef string `json:"recipientRef"`
	TemplateRef  string `json:"templateRef"`
	Address      string `json:"address,omitempty"`
	// Window is the fallback's send window, as a delivery's.
	Window *WindowInput `json:"window,omitempty"`
	// Within is how long the fallback may take once taken: a Go duration
	// ("2h", "90m"), MinSpan to MaxSpan. Default DefaultFallbackWithin.
	Within string `json:"within,omitempty"`
}

// The bounds of a late policy's and a fallback's within, and a fallback's
// default.
const (
	MinSpan               = time.Minute
	MaxSpan               = 7 * 24 * time.Hour
	DefaultFallbackWithin = ledger.DefaultFallbackWithin
)

// DeliveryInput is one delivery of an Input.
type DeliveryInput struct {
	// Channel is a known channel (email, sms, push, voice, webhook).
	Channel string `json:"channel"`
	// Provider names the provider: 1–32 of [a-z0-9_-].
	Provider string `json:"provider"`
	// RecipientRef is a reference the provider resolves to an address.
	RecipientRef string `json:"recipientRef"`
	// TemplateRef is a reference to the message template: for SES, the
	// name of a template in templates/email.
	TemplateRef string `json:"templateRef"`
	// Address is the recipient's address, for a provider that sends to it
	// itself: an e-mail address for SES (required there, refused by the
	// webhook and SNS, which carry references only). It is stored on the
	// delivery item alone and shown masked.
	Address string `json:"address,omitempty"`
	// Fallback is taken, once, if this delivery fails; nil for none.
	Fallback *FallbackInput `json:"fallback,omitempty"`
	// Window is the delivery's send window: it is never sent outside it.
	// Nil for the stage's default for its channel, if any.
	Window *WindowInput `json:"window,omitempty"`
}

// WindowInput is a send window as a user writes it: {"from": "08:00",
// "to": "21:00", "timeZone": "America/New_York", "days": ["mon", …]}.
// TimeZone defaults to the reminder's; Days to every day.
// localtime.ParseWindow has the rules.
type WindowInput struct {
	From     string   `json:"from"`
	To       string   `json:"to"`
	TimeZone string   `json:"timeZone,omitempty"`
	Days     []string `json:"days,omitempty"`
}

// Reminder is a validated reminder: what Validate returns and Create
// takes, and, as read back (View, Document), the API's shape of a
// reminder (docs/openapi.yaml's Reminder). The ledger stores it as a
// ledger.ReminderItem and its delivery items (storage.go converts).
type Reminder struct {
	ID         string    `json:"id"`
	AccountRef string    `json:"accountRef"`
	DueAt      time.Time `json:"dueAt"`
	ExpiresAt  time.Time `json:"expiresAt"`
	// Local is the zone and local times the reminder was given in, if any
	// (its JSON's timeZone, dueLocal and expiresLocal).
	Local
	Deliveries []Delivery `json:"deliveries"`
	// Metadata is the labels the reminder was given (Input.Metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// CreatedBy is the principal that created the reminder through the
	// API (the intake's caller: an IAM role or user), which alone may act
	// on it there, besides the stage's full-access principals. Empty for a
	// reminder the operator's CLI created, and for one created before the
	// intake recorded it: only full-access principals act on those through
	// the API (docs/api.md#who-sees-what). Create sets it from its caller.
	CreatedBy string `json:"createdBy,omitempty"`
	// Late is the reminder's late policy; the zero LatePolicy is the
	// default, expire, and is left out of its JSON.
	Late LatePolicy `json:"late,omitzero"`
	// Recur is, on a series, its rule (recur.Rule's canonical text); its
	// DueAt and Local are its first occurrence's. Empty on a reminder.
	Recur string `json:"recur,omitempty"`
	// Series is, on an occurrence of a series, the series' id.
	Series string `json:"series,omitempty"`
}

// LatePolicy is a validated late policy: Policy is LateSendLate or
// LateEscalate, or "" for the default (expire); Within is send-late's
// bound.
type LatePolicy struct {
	Policy string
	Within time.Duration
}

// MarshalJSON writes p as the API shows it: {"policy": "send-late",
// "within": "2h"}.
func (p LatePolicy) MarshalJSON() ([]byte, error) {
	policy := p.Policy
	if policy == "" {
		policy = LateExpire
	}
	return json.Marshal(LateInput{Policy: policy, Within: FormatSpan(p.Within)})
}

// UnmarshalJSON reads what MarshalJSON wrote (a client reading a
// reminder back): expire is the zero LatePolicy.
func (p *LatePolicy) UnmarshalJSON(data []byte) error {
	var in LateInput
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	within, err := parseSpan(in.Within)
	if err != nil {
		return fmt.Errorf("late.within: %w", err)
	}
	*p = LatePolicy{Policy: in.Policy, Within: within}
	if in.Policy == LateExpire {
		p.Policy = ""
	}
	return nil
}

// parseSpan reads what FormatSpan writes; "" is 0.
func parseSpan(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// Fallback is a validated FallbackInput.
type Fallback struct {
	Channel      string
	Provider     string
	RecipientRef string
	TemplateRef  string
	// Address is as Delivery.Address: on the fallback's delivery item
	// alone, never shown here.
	Address string
	// Window is its send window; the zero Window is none.
	Window localtime.Window
	// Within is how long it may take once taken.
	Within time.Duration
}

// MarshalJSON writes f as the API shows it: a delivery's fields, no
// address, and within as a duration ("1h").
func (f Fallback) MarshalJSON() ([]byte, error) {
	return json.Marshal(FallbackInput{Channel: f.Channel, Provider: f.Provider, RecipientRef: f.RecipientRef, TemplateRef: f.TemplateRef,
		Within: FormatSpan(f.Within), Window: windowInput(f.Window)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (f *Fallback) UnmarshalJSON(data []byte) error {
	var in FallbackInput
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	within, err := parseSpan(in.Within)
	if err != nil {
		return fmt.Errorf("fallback.within: %w", err)
	}
	*f = Fallback{Channel: in.Channel, Provider: in.Provider, RecipientRef: in.RecipientRef, TemplateRef: in.TemplateRef, Within: within}
	if in.Window != nil {
		if f.Window, err = localtime.ParseWindow(in.Window.From, in.Window.To, in.Window.TimeZone, in.Window.Days); err != nil {
			return fmt.Errorf("fallback.window: %w", err)
		}
	}
	return nil
}

// windowInput is w as the API writes it; nil for none.
func windowInput(w localtime.Window) *WindowInput {
	if w.IsZero() {
		return nil
	}
	var in WindowInput
	b, _ := json.Marshal(w) // localtime's form is the API's
	_ = json.Unmarshal(b, &in)
	return &in
}

// Key is the delivery key of f in reminder id.
func (f Fallback) Key(id string) message.DeliveryKey {
	return message.DeliveryKey{ReminderID: id, Channel: f.Channel, Provider: f.Provider}
}

// FormatSpan writes a duration as the API takes it, without zero units:
// "2h", "1h30m", "90s"; "" for 0.
func FormatSpan(d time.Duration) string {
	if d == 0 {
		return ""
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Delivery is one validated delivery of a Reminder.
type Delivery struct {
	Channel      string `json:"channel"`
	Provider     string `json:"provider"`
	RecipientRef string `json:"recipientRef"`
	TemplateRef  string `json:"templateRef"`
	// Address is the recipient's address, for a provider that sends to it
	// (SES). It is written to the delivery item only, never to the
	// reminder item, and never shown here: a reminder read back has none
	// (the Document shows it, masked, on its delivery).
	Address string `json:"-"`
	// Fallback is taken, once, if this delivery fails; nil for none.
	Fallback *Fallback `json:"fallback,omitempty"`
	// Window is its send window, outside which it is never sent; the zero
	// Window is none.
	Window localtime.Window `json:"window,omitzero"`
}

// Key returns the delivery key of d in r.
func (r Reminder) Key(d Delivery) message.DeliveryKey {
	return message.DeliveryKey{ReminderID: r.ID, Channel: d.Channel, Provider: d.Provider}
}

// ValidationError is a reminder that cannot be accepted. It names the
// field, what is wrong and how to fix it.
type ValidationError struct {
	ID      string // the reminder id, if it was readable
	Field   string // JSON path of the field, such as "deliveries[1].channel"
	Problem string
	Fix     string
}

func (e *ValidationError) Error() string {
	who := "reminder"
	if e.ID != "" {
		who = fmt.Sprintf("reminder %q", e.ID)
	}
	s := fmt.Sprintf("%s: %s %s", who, e.Field, e.Problem)
	if e.Field == "" {
		s = fmt.Sprintf("%s: %s", who, e.Problem)
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// DefaultChannels are the channels a Validator knows unless told others.
var DefaultChannels = message.Channels

// Validator turns Inputs into Reminders.
type Validator struct {
	// Channels are the known channels. Default DefaultChannels.
	Channels []string
	// Lateness is the default expiresAt − dueAt. Default 24h.
	Lateness time.Duration
	// MaxAhead is how far ahead of now dueAt and expiresAt may be. Default
	// DefaultMaxAhead. Every item of a reminder is kept until a day after
	// its expiresAt, so this also bounds how long the table keeps it.
	MaxAhead time.Duration
	// Now tells the time; a reminder already expired is refused.
	Now func() time.Time
	// Providers are the providers the stage runs; a delivery naming another
	// is refused. Default DefaultProviders.
	Providers []string
	// Doors are the providers' checks of a delivery (its address, its
	// template's name), by provider, made from the stage's view
	// (registry.Doors). Default: made from an empty environment.
	Doors map[string]provider.Door
	// Windows are the stage's send windows by channel, in each reminder's
	// zone, for a delivery that names none. Default none.
	Windows map[string]DefaultWindow
}

// DefaultProviders are the providers a Validator accepts unless told
// which the stage runs: every registered one.
var DefaultProviders = registry.Names()

// DefaultMaxAhead is how far ahead a reminder may be due or expire unless
// the store is told otherwise: five years, beyond any renewal or
// appointment calendar and far inside every limit of the time arithmetic.
const DefaultMaxAhead = 5 * 365 * 24 * time.Hour

func (v Validator) withDefaults() Validator {
	if len(v.Channels) == 0 {
		v.Channels = DefaultChannels
	}
	if v.Lateness == 0 {
		v.Lateness = 24 * time.Hour
	}
	if v.MaxAhead == 0 {
		v.MaxAhead = DefaultMaxAhead
	}
	if v.Now == nil {
		v.Now = clock.Real{}.Now
	}
	if len(v.Providers) == 0 {
		v.Providers = DefaultProviders
	}
	if v.Doors == nil {
		// An empty environment holds nothing a door could refuse.
		v.Doors, _ = registry.Doors(v.Providers, provider.Env{})
	}
	return v
}

// ParseJSON decodes one reminder from JSON and validates it. Unknown
// fields are refused, so that a misspelt "expiresAt" is not silently
// replaced by the default.
func (v Validator) ParseJSON(data []byte) (Reminder, error) { return v.ParseJSONAs("", data) }

// ParseJSONAs is ParseJSON for a reminder whose id is given apart from its
// JSON (in a URL's path): the JSON may leave "id" out, or repeat it; a
// different id is refused.
func (v Validator) ParseJSONAs(id string, data []byte) (Reminder, error) {
	if len(data) > MaxInputBytes {
		return Reminder{}, &ValidationError{Problem: fmt.Sprintf("is %d bytes; the limit is %d", len(data), MaxInputBytes), Fix: "keep metadata short and references brief"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in Input
	if err := dec.Decode(&in); err != nil {
		return Reminder{}, jsonError(err)
	}
	if dec.More() {
		return Reminder{}, &ValidationError{Problem: "has more than one JSON value", Fix: "give one reminder object per line"}
	}
	if id != "" {
		if in.ID != "" && in.ID != id {
			return Reminder{}, &ValidationError{ID: id, Field: "id", Problem: fmt.Sprintf("%q differs from the id in the path", text.Clip(in.ID, 43)), Fix: "leave id out of the body, or make it the path's"}
		}
		in.ID = id
	}
	return v.Validate(in)
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return &ValidationError{Field: typeErr.Field, Problem: fmt.Sprintf("is a JSON %s", typeErr.Value), Fix: "want " + goTypeName(typeErr.Type.String())}
	case errors.As(err, &syntaxErr):
		return &ValidationError{Problem: fmt.Sprintf("is not valid JSON at byte %d: %v", syntaxErr.Offset, syntaxErr), Fix: "write one JSON object per reminder"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &ValidationError{Field: field, Problem: "is not a reminder field", Fix: "known fields are id, accountRef, dueAt, expiresAt, " +
			"timeZone, dueLocal, expiresLocal, recur, " +
			"deliveries (channel, provider, recipientRef, templateRef, address, window, fallback), metadata and late"}
	}
	return &ValidationError{Problem: "is not valid JSON: " + err.Error(), Fix: "write one JSON object per reminder"}
}

func goTypeName(t string) string {
	switch {
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "an object of strings"
	}
	return "an object"
}

// Validate checks in and applies defaults.
func (v Validator) Validate(in Input) (Reminder, error) {
	v = v.withDefaults()
	bad := func(field, problem, fix string) error {
		return &ValidationError{ID: in.ID, Field: field, Problem: problem, Fix: fix}
	}
	if err := (message.DeliveryKey{ReminderID: in.ID, Channel: "x", Provider: "x"}).Validate(); err != nil {
		return Reminder{}, bad("id", describe(in.ID, err), "use 1–128 letters, digits, '.', '_' or '-', other than . and ..")
	}
	r := Reminder{ID: in.ID, AccountRef: in.AccountRef}
	if err := checkRef(in.AccountRef, 128); err != "" {
		return Reminder{}, bad("accountRef", err, "give the account's reference (not its name), up to 128 characters")
	}
	if p := personalData(in.AccountRef); p != "" {
		return Reminder{}, bad("accountRef", p, "give the account's reference (its id in your system), not an address or number")
	}
	dueAt, expiresAt, local, err := resolveLocal(in.ID, localIn{in.DueAt, in.ExpiresAt, in.DueLocal, in.ExpiresLocal, in.TimeZone})
	if err != nil {
		return Reminder{}, err
	}
	r.Local = local
	if r.DueAt, r.ExpiresAt, err = v.times(in.ID, dueAt, expiresAt, v.Lateness, "the default lateness", "a shorter lateness (--lateness)"); err != nil {
		return Reminder{}, localField(err, in.DueAt, in.ExpiresAt, in.ExpiresLocal)
	}
	if len(in.Deliveries) == 0 || len(in.Deliveries) > MaxDeliveries {
		return Reminder{}, bad("deliveries", fmt.Sprintf("has %d entries", len(in.Deliveries)), fmt.Sprintf("give 1 to %d deliveries", MaxDeliveries))
	}
	if n := fallbacks(in.Deliveries); len(in.Deliveries)+n > MaxDeliveries {
		return Reminder{}, bad("deliveries", fmt.Sprintf("has %d deliveries and %d fallbacks", len(in.Deliveries), n),
			fmt.Sprintf("give at most %d deliveries and fallbacks together", MaxDeliveries))
	}
	late, p := checkLate(in.Late)
	if p != nil {
		return Reminder{}, bad(p.field, p.problem, p.fix)
	}
	r.Late = late
	if in.Recur != "" {
		if p := v.checkRecur(in, &r); p != nil {
			return Reminder{}, bad(p.field, p.problem, p.fix)
		}
	}
	seen := map[string]bool{}
	for _, d := range in.Deliveries {
		seen[d.Channel+"#"+d.Provider] = true // a fallback differs from every delivery, listed before it or after
	}
	repeated := map[string]bool{}
	for i, d := range in.Deliveries {
		f := fmt.Sprintf("deliveries[%d].", i)
		vd, p := v.checkDelivery(f, d, repeated, r.TimeZone)
		if p != nil {
			return Reminder{}, bad(p.field, p.problem, p.fix)
		}
		if p := v.checkOpens(f, vd.Window, r); p != nil {
			return Reminder{}, bad(p.field, p.problem, p.fix)
		}
		if fb := d.Fallback; fb != nil {
			if vd.Fallback, p = v.checkFallback(f+"fallback.", *fb, seen, repeated, r.TimeZone); p != nil {
				return Reminder{}, bad(p.field, p.problem, p.fix)
			}
		}
		r.Deliveries = append(r.Deliveries, vd)
	}
	if len(in.Metadata) > MaxMetadataKeys {
		return Reminder{}, bad("metadata", fmt.Sprintf("has %d keys", len(in.Metadata)), fmt.Sprintf("keep at most %d", MaxMetadataKeys))
	}
	for _, k := range slices.Sorted(maps.Keys(in.Metadata)) {
		if err := (message.DeliveryKey{ReminderID: k, Channel: "x", Provider: "x"}).Validate(); err != nil || len(k) > MaxMetadataKey {
			return Reminder{}, bad("metadata", fmt.Sprintf("key %q is not 1–%d letters, digits, '.', '_' or '-'", text.Clip(k, 43), MaxMetadataKey), "rename the key")
		}
		if p := checkRef(in.Metadata[k], MaxMetadataValue); p != "" && in.Metadata[k] != "" {
			return Reminder{}, bad("metadata."+k, p, fmt.Sprintf("keep values printable and under %d bytes", MaxMetadataValue))
		}
	}
	if len(in.Metadata) > 0 {
		r.Metadata = maps.Clone(in.Metadata)
	}
	return r, nil
}

// checkDelivery checks one delivery (or a fallback, as a delivery) at
// field prefix f; repeated holds the channel and provider pairs of the
// deliveries checked before it, and gets d's.
func (v Validator) checkDelivery(f string, d DeliveryInput, repeated map[string]bool, zone string) (Delivery, *fieldProblem) {
	bad := func(field, problem, fix string) *fieldProblem { return &fieldProblem{field, problem, fix} }
	if !slices.Contains(v.Channels, d.Channel) {
		return Delivery{}, bad(f+"channel", fmt.Sprintf("%q is not a known channel", text.Clip(d.Channel, 43)), "use one of "+strings.Join(v.Channels, ", "))
	}
	if err := (message.DeliveryKey{ReminderID: "x", Channel: d.Channel, Provider: d.Provider}).Validate(); err != nil {
		return Delivery{}, bad(f+"provider", describe(d.Provider, err), "use 1–32 lower-case letters, digits, '_' or '-'")
	}
	if !slices.Contains(v.Providers, d.Provider) {
		return Delivery{}, bad(f+"provider", fmt.Sprintf("%q is not a provider this stage runs", d.Provider), "use one of "+strings.Join(v.Providers, ", ")+" (the stage's providers setting)")
	}
	if repeated[d.Channel+"#"+d.Provider] {
		return Delivery{}, bad(f+"provider", fmt.Sprintf("repeats channel %q with provider %q", d.Channel, d.Provider), "list each channel and provider pair once")
	}
	repeated[d.Channel+"#"+d.Provider] = true
	if p := checkRef(d.RecipientRef, MaxRefLen); p != "" {
		return Delivery{}, bad(f+"recipientRef", p, "give a reference the provider resolves (not the address itself), up to 256 characters")
	}
	if p := personalData(d.RecipientRef); p != "" {
		fix := "give a reference your receiver resolves (a contact id), not the address itself"
		if drv, _ := registry.Lookup(d.Provider); drv.Intake.Address != provider.NoAddress {
			fix = "give the address in the address field, and a reference (a contact id) here"
		}
		return Delivery{}, bad(f+"recipientRef", p, fix)
	}
	if p := checkRef(d.TemplateRef, 128); p != "" {
		return Delivery{}, bad(f+"templateRef", p, "give the template's reference, up to 128 characters")
	}
	if err := v.checkAddress(f, d); err != nil {
		return Delivery{}, err
	}
	w, p := v.checkWindow(f, d.Channel, d.Window, zone)
	if p != nil {
		return Delivery{}, p
	}
	return Delivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Address: d.Address, Window: w}, nil
}

// checkFallback checks fallback fb at field prefix f: as a delivery, with a
// channel and provider pair that no delivery (seen holds theirs) and no
// other fallback has, and its within.
func (v Validator) checkFallback(f string, fb FallbackInput, seen, repeated map[string]bool, zone string) (*Fallback, *fieldProblem) {
	if seen[fb.Channel+"#"+fb.Provider] {
		return nil, &fieldProblem{f + "provider", fmt.Sprintf("repeats channel %q with provider %q, which another delivery or fallback of the reminder has",
			text.Clip(fb.Channel, 43), text.Clip(fb.Provider, 43)),
			"give the fallback a channel and provider pair that no delivery and no other fallback of this reminder uses"}
	}
	seen[fb.Channel+"#"+fb.Provider] = true
	d, p := v.checkDelivery(f, DeliveryInput{Channel: fb.Channel, Provider: fb.Provider, RecipientRef: fb.RecipientRef, TemplateRef: fb.TemplateRef,
		Address: fb.Address, Window: fb.Window}, repeated, zone)
	if p != nil {
		return nil, p
	}
	within, p := checkSpan(f+"within", fb.Within, DefaultFallbackWithin)
	if p != nil {
		return nil, p
	}
	return &Fallback{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Address: d.Address,
		Window: d.Window, Within: within}, nil
}

// fallbacks counts the fallbacks ds name.
func fallbacks(ds []DeliveryInput) int {
	n := 0
	for _, d := range ds {
		if d.Fallback != nil {
			n++
		}
	}
	return n
}

// checkLate checks a reminder's late policy: nil or expire is the default
// (the zero LatePolicy); within is send-late's, required there and
// refused for the others.
func checkLate(in *LateInput) (LatePolicy, *fieldProblem) {
	if in == nil {
		return LatePolicy{}, nil
	}
	switch in.Policy {
	case LateExpire, LateEscalate:
		if in.Within != "" {
			return LatePolicy{}, &fieldProblem{"late.within", fmt.Sprintf("is given for policy %q, which has no bound", in.Policy),
				"leave within out, or use policy send-late"}
		}
		if in.Policy == LateExpire {
			return LatePolicy{}, nil
		}
		return LatePolicy{Policy: in.Policy}, nil
	case LateSendLate:
		if in.Within == "" {
			return LatePolicy{}, &fieldProblem{"late.within", "is missing for policy send-late",
				fmt.Sprintf("give how long after expiresAt a delivery may still be sent, like \"2h\" (%s to %s)", FormatSpan(MinSpan), aheadText(MaxSpan))}
		}
		within, p := checkSpan("late.within", in.Within, 0)
		if p != nil {
			return LatePolicy{}, p
		}
		return LatePolicy{Policy: LateSendLate, Within: within}, nil
	}
	problem := "is missing"
	if in.Policy != "" {
		problem = fmt.Sprintf("%q is not a late policy", text.Clip(in.Policy, 43))
	}
	return LatePolicy{}, &fieldProblem{"late.policy", problem, "use expire (the default), send-late or escalate"}
}

// checkSpan parses a within: a Go duration, MinSpan to MaxSpan, to the
// second; "" is def.
func checkSpan(field, s string, def time.Duration) (time.Duration, *fieldProblem) {
	if s == "" {
		return def, nil
	}
	fix := fmt.Sprintf("give a duration like \"90m\" or \"2h\", %s to %s", FormatSpan(MinSpan), aheadText(MaxSpan))
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &fieldProblem{field, fmt.Sprintf("%q is not a duration", text.Clip(s, 43)), fix}
	}
	if d < MinSpan || d > MaxSpan {
		return 0, &fieldProblem{field, fmt.Sprintf("%s is outside %s to %s", FormatSpan(d), FormatSpan(MinSpan), aheadText(MaxSpan)), fix}
	}
	return d.Truncate(time.Second), nil
}

// times parses and checks a reminder's dueAt and expiresAt; a missing
// expiresAt is dueAt + window, which is named windowName ("the default
// lateness") and shortened as shorter says ("a shorter lateness (--lateness)").
func (v Validator) times(id, dueAt, expiresAt string, window time.Duration, windowName, shorter string) (due, exp time.Time, err error) {
	bad := func(field, problem, fix string) error {
		return &ValidationError{ID: id, Field: field, Problem: problem, Fix: fix}
	}
	r := Reminder{}
	in := Input{DueAt: dueAt, ExpiresAt: expiresAt}
	if r.DueAt, err = parseTime(in.DueAt); err != nil {
		return time.Time{}, time.Time{}, bad("dueAt", describeTime(in.DueAt, err),
			"write an RFC 3339 time with a zone, like 2026-12-01T09:00:00Z, or a local time and its zone (dueLocal, timeZone)")
	}
	if in.ExpiresAt == "" {
		r.ExpiresAt = r.DueAt.Add(window)
	} else if r.ExpiresAt, err = parseTime(in.ExpiresAt); err != nil {
		return time.Time{}, time.Time{}, bad("expiresAt", describeTime(in.ExpiresAt, err), "write an RFC 3339 time with a zone, like 2026-12-02T09:00:00Z, or leave it out for dueAt + "+window.String())
	}
	for _, t := range []struct {
		field string
		at    time.Time
	}{{"dueAt", r.DueAt}, {"expiresAt", r.ExpiresAt}} {
		if t.at.Before(ledger.Earliest) {
			return time.Time{}, time.Time{}, bad(t.field, fmt.Sprintf("%s is before %s; no reminder is due that early", ledger.Format(t.at), ledger.Format(ledger.Earliest)),
				"check the time: a zero or year-1 time is an unset one; write an RFC 3339 time like 2026-12-01T09:00:00Z")
		}
	}
	if !r.ExpiresAt.After(r.DueAt) {
		return time.Time{}, time.Time{}, bad("expiresAt", fmt.Sprintf("%s is not after dueAt %s", ledger.Format(r.ExpiresAt), ledger.Format(r.DueAt)), "set expiresAt later than dueAt, or leave it out")
	}
	now := v.Now()
	if !r.ExpiresAt.After(now) {
		return time.Time{}, time.Time{}, bad("expiresAt", fmt.Sprintf("%s has passed (it is %s), so it could never be sent", ledger.Format(r.ExpiresAt), ledger.Format(now)), "set a later expiresAt, or drop the reminder")
	}
	limit := now.Add(v.MaxAhead)
	if r.DueAt.After(limit) {
		return time.Time{}, time.Time{}, bad("dueAt", fmt.Sprintf("%s is more than %s ahead (after %s)", ledger.Format(r.DueAt), aheadText(v.MaxAhead), ledger.Format(limit)), "schedule it closer to its time, or raise the limit (schedule.Config.MaxAhead, NUDGE_MAX_AHEAD)")
	}
	if r.ExpiresAt.After(limit) {
		fix := "set an earlier expiresAt, or raise the limit (schedule.Config.MaxAhead, NUDGE_MAX_AHEAD)"
		if in.ExpiresAt == "" {
			fix = fmt.Sprintf("it is dueAt + %s %v: give an expiresAt within the limit, or %s", windowName, window, shorter)
		}
		return time.Time{}, time.Time{}, bad("expiresAt", fmt.Sprintf("%s is more than %s ahead (after %s)", ledger.Format(r.ExpiresAt), aheadText(v.MaxAhead), ledger.Format(limit)), fix)
	}
	return r.DueAt, r.ExpiresAt, nil
}

// localField names, in a times error, the local field the caller gave
// where the absolute one it names was computed from it.
func localField(err error, dueAt, expiresAt, expiresLocal string) error {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	switch {
	case ve.Field == "dueAt" && dueAt == "":
		ve.Field = "dueLocal"
	case ve.Field == "expiresAt" && expiresAt == "" && expiresLocal != "":
		ve.Field = "expiresLocal"
	}
	return err
}

// fieldProblem is a validation failure before the reminder id is attached.
type fieldProblem struct{ field, problem, fix string }

// checkAddress checks a delivery's address and template against what its
// provider can use: its driver's address kind, then its door. Problems
// never quote the address: they reach logs.
func (v Validator) checkAddress(f string, d DeliveryInput) *fieldProblem {
	if drv, _ := registry.Lookup(d.Provider); drv.Intake.Address == provider.NoAddress && d.Address != "" {
		return &fieldProblem{f + "address", fmt.Sprintf("is given, but provider %q carries references only", d.Provider), "leave address out and give recipientRef, which the receiver resolves"}
	}
	door := v.Doors[d.Provider]
	if door == nil {
		return nil
	}
	p := door.Check(provider.Delivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Address: d.Address})
	if p == nil {
		return nil
	}
	return &fieldProblem{f + p.Field, p.Problem, p.Fix}
}

// aheadText says a span as a person would: "5 years", "90 days", "36h0m0s".
func aheadText(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d%(365*day) == 0:
		return fmt.Sprintf("%d years", d/(365*day))
	case d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}

// parseTime parses RFC 3339 and keeps millisecond precision, which is what
// the ledger stores.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

func describeTime(s string, err error) string {
	if s == "" {
		return "is missing"
	}
	return fmt.Sprintf("%q is not an RFC 3339 time", text.Clip(s, 43))
}

func describe(s string, err error) string {
	if s == "" {
		return "is missing"
	}
	var de *message.DecodeError
	if errors.As(err, &de) {
		return de.Reason
	}
	return fmt.Sprintf("%q is not allowed", text.Clip(s, 43))
}

// emailLike finds an e-mail address anywhere in a value; phoneLike a
// telephone number in its international form (+ and 7 to 15 digits, with
// the usual separators).
var (
	emailLike = regexp.MustCompile(`[^\s@/:;,<>()\[\]"']+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	phoneLike = regexp.MustCompile(`\+[\s(]*\d([\s().-]*\d){6,14}`)
)

// personalData says how a reference holds an address or a telephone
// number, or "". References spread where addresses must not: the reminder
// item, the account index, queue messages, SNS and webhook bodies, logs and
// conflict errors. A plain number (a customer number) is a reference.
func personalData(s string) string {
	lower := strings.ToLower(s)
	for _, scheme := range []string{"mailto:", "tel:", "sms:", "callto:"} {
		if strings.Contains(lower, scheme) {
			return "holds a " + strings.TrimSuffix(scheme, ":") + ": URI, which is personal data"
		}
	}
	switch {
	case emailLike.MatchString(s):
		return "holds an e-mail address, which is personal data"
	case phoneLike.MatchString(s):
		return "holds a telephone number (+ and digits), which is personal data"
	}
	return ""
}

// formatChar reports whether r is an invisible format character (Unicode
// category Cf: bidirectional overrides and isolates, zero-width spaces, the
// byte-order mark), which lets a value display as other text than it is (a
// subject line spoofed in e-mail sent from the stage's domain). The
// zero-width joiner is allowed: emoji sequences need it.
func formatChar(r rune) bool { return unicode.Is(unicode.Cf, r) && r != '\u200d' }

// checkRef returns what is wrong with a reference, or "".
func checkRef(s string, max int) string {
	switch {
	case s == "":
		return "is missing"
	case len(s) > max:
		return fmt.Sprintf("is %d bytes long; the limit is %d", len(s), max)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) }) >= 0:
		return "contains a control character"
	case strings.IndexFunc(s, formatChar) >= 0:
		r := []rune(s)[len([]rune(s[:strings.IndexFunc(s, formatChar)]))]
		return fmt.Sprintf("contains the invisible format character U+%04X, which can make text display as other text", r)
	}
	return ""
}
