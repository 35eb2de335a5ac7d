package schedule

import (
	"maps"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/localtime"
)

// The one place the API's types meet the ledger's: a Reminder becomes a
// reminder item (reminderItem) and its delivery items (deliveryItem); a
// reminder item read back becomes a Reminder (reminderOf); a delivery
// item, a ledger status and a history entry become the API's
// (deliveryDocument, statusOf, eventOf). Each
// field is named here, so that a field renamed in the table changes
// nothing the API answers; TestConversionsRoundTripEveryField and
// TestTheAPIsTypesAndTheLedgersHaveTheSameFields hold the two sides
// together.

// reminderItem is r as the ledger stores it in its reminder item. The
// deliveries' addresses are not on it: deliveryItem puts each on its
// delivery item, the one place an address is kept.
func reminderItem(r Reminder) ledger.ReminderItem {
	it := ledger.ReminderItem{ID: r.ID, AccountRef: r.AccountRef, DueAt: r.DueAt, ExpiresAt: r.ExpiresAt,
		Metadata: maps.Clone(r.Metadata), CreatedBy: r.CreatedBy, Late: lateRule(r.Late), Local: localItem(r.Local),
		Recur: r.Recur, Series: r.Series}
	if r.Deliveries != nil {
		it.Deliveries = make([]ledger.ReminderDelivery, len(r.Deliveries))
	}
	for i, d := range r.Deliveries {
		it.Deliveries[i] = ledger.ReminderDelivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef,
			Window: windowSpec(d.Window)}
		if f := d.Fallback; f != nil {
			it.Deliveries[i].Fallback = &ledger.ReminderFallback{Channel: f.Channel, Provider: f.Provider, RecipientRef: f.RecipientRef,
				TemplateRef: f.TemplateRef, Within: f.Within, Window: windowSpec(f.Window)}
		}
	}
	return it
}

// lateRule is a late policy as the ledger keeps it.
func lateRule(p LatePolicy) ledger.LateRule {
	return ledger.LateRule{Policy: ledger.LatePolicy(p.Policy), Within: p.Within}
}

// reminderOf is the reminder a reminder item holds, as read: its
// deliveries carry no address (the delivery items do).
func reminderOf(it ledger.ReminderItem) Reminder {
	r := Reminder{ID: it.ID, AccountRef: it.AccountRef, DueAt: it.DueAt, ExpiresAt: it.ExpiresAt,
		Metadata: maps.Clone(it.Metadata), CreatedBy: it.CreatedBy, Late: LatePolicy{Policy: string(it.Late.Policy), Within: it.Late.Within},
		Local: localOf(it.Local), Recur: it.Recur, Series: it.Series}
	if it.Deliveries != nil {
		r.Deliveries = make([]Delivery, len(it.Deliveries))
	}
	for i, d := range it.Deliveries {
		r.Deliveries[i] = Delivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef,
			Window: windowOf(d.Window)}
		if f := d.Fallback; f != nil {
			r.Deliveries[i].Fallback = &Fallback{Channel: f.Channel, Provider: f.Provider, RecipientRef: f.RecipientRef, TemplateRef: f.TemplateRef,
				Within: f.Within, Window: windowOf(f.Window)}
		}
	}
	return r
}

// windowSpec is a window as the ledger keeps it (localtime's compact
// form); "" for none.
func windowSpec(w localtime.Window) string {
	if w.IsZero() {
		return ""
	}
	return w.String()
}

// windowOf reads what windowSpec wrote. A spec this build cannot read
// (written by a later one) reads as no window here: the consumer's check
// of the delivery item is what keeps a send inside it.
func windowOf(spec string) localtime.Window {
	if spec == "" {
		return localtime.Window{}
	}
	w, err := localtime.ParseWindowSpec(spec)
	if err != nil {
		return localtime.Window{}
	}
	return w
}

// reminderRead is reminderOf for a reminder item that may be missing
// (nil).
func reminderRead(it *ledger.ReminderItem) *Reminder {
	if it == nil {
		return nil
	}
	r := reminderOf(*it)
	return &r
}

// deliveryItem is delivery d of reminder r as its create writes its
// delivery item: at the reminder's times (due when its send window first
// opens, if it has one), with d's address, and with the reminder's
// metadata as template data for a provider that renders templates.
//
// Under the reminder's late policy it carries the policy, and its expiry
// is derived from the reminder's (ledger.LateRule.DeliveryTimes). A
// delivery with a fallback names it (Fallback, FallbackWithin).
func deliveryItem(r Reminder, d Delivery) ledger.Delivery {
	rule := lateRule(r.Late)
	exp, onTime := rule.DeliveryTimes(r.ExpiresAt)
	ld := ledger.Delivery{
		ReminderID: r.ID, AccountRef: r.AccountRef, Channel: d.Channel, Provider: d.Provider,
		RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Address: d.Address, DueAt: r.DueAt, ExpiresAt: exp,
		Late: rule.Policy, OnTimeUntil: onTime, Window: windowSpec(d.Window), TimeZone: r.TimeZone,
	}
	if !d.Window.IsZero() {
		ld.DueAt = d.Window.Next(r.DueAt) // due when its window first opens
	}
	if f := d.Fallback; f != nil {
		ld.Fallback, ld.FallbackWithin = ledger.FallbackRef{Channel: f.Channel, Provider: f.Provider}, f.Within
	}
	if drv, _ := registry.Lookup(d.Provider); drv.Intake.RendersTemplates && len(r.Metadata) > 0 {
		ld.TemplateData = r.Metadata // what the template renders
	}
	return ld
}

// fallbackItem is the held delivery item of delivery d's fallback: at the
// reminder's dueAt and expiresAt (TakeFallback sets its own when it takes
// it), with the fallback's address. Under escalate it carries the policy,
// so that its own expiry, once taken, escalates too (send-late's bound is
// the primary's: a fallback has its own, FallbackWithin). Its TTL, its
// primary's, is the caller's to set (the ledger knows the retention).
func fallbackItem(r Reminder, d Delivery) ledger.Delivery {
	f := d.Fallback
	ld := ledger.Delivery{
		ReminderID: r.ID, AccountRef: r.AccountRef, Channel: f.Channel, Provider: f.Provider, Status: ledger.StatusHeld,
		RecipientRef: f.RecipientRef, TemplateRef: f.TemplateRef, Address: f.Address, DueAt: r.DueAt, ExpiresAt: r.ExpiresAt,
		FallbackOf: ledger.FallbackRef{Channel: d.Channel, Provider: d.Provider}, FallbackWithin: f.Within, Window: windowSpec(f.Window),
		TimeZone: r.TimeZone,
	}
	if rule := lateRule(r.Late); rule.Policy == ledger.LateEscalate {
		ld.Late = rule.Policy
	}
	if drv, _ := registry.Lookup(f.Provider); drv.Intake.RendersTemplates && len(r.Metadata) > 0 {
		ld.TemplateData = r.Metadata
	}
	return ld
}

// deliveryDocument is delivery item d as a Document shows it (but for
// whether it was handed off, which the ledger is asked apart): its address
// masked unless reveal.
func deliveryDocument(d ledger.Delivery, reveal bool) DeliveryDocument {
	dd := DeliveryDocument{Key: d.Key().String(), Channel: d.Channel, Provider: d.Provider, Status: statusOf(d.Status), Attempts: d.Attempts,
		DueAt: FormatOpt(d.DueAt), ExpiresAt: FormatOpt(d.ExpiresAt), LastErrorClass: d.LastErrorClass, LastError: d.LastError,
		NextAttemptAt: FormatOpt(d.NextAttemptAt), SentAt: FormatOpt(d.SentAt), Receipt: d.Receipt, UpdatedAt: FormatOpt(d.UpdatedAt),
		Address: MaskAddress(d.Address)}
	if reveal {
		dd.Address = d.Address
	}
	if f := d.Feedback; f.Kind != "" {
		dd.Feedback = &Feedback{Kind: string(f.Kind), Detail: f.Detail, At: FormatOpt(f.At), Failed: f.Failed()}
	}
	if !d.Fallback.IsZero() {
		dd.Fallback, dd.FallbackTaken = d.Fallback.String(), FormatOpt(d.FallbackTaken)
	}
	if !d.FallbackOf.IsZero() {
		dd.FallbackOf, dd.FallbackWithin = d.FallbackOf.String(), FormatSpan(d.FallbackWithin)
	}
	dd.Late, dd.OnTimeUntil, dd.SentLate = string(d.Late), FormatOpt(d.OnTimeUntil), d.SentLate()
	return dd
}

// statusOf is a ledger status as the API tells it: the same name.
func statusOf(s ledger.Status) Status { return Status(s) }

// eventOf is history entry e of the delivery keyed delivery.
func eventOf(e ledger.Entry, delivery string) Event {
	return Event{At: e.At, Status: statusOf(e.Status), Attempt: e.Attempt, Class: e.Class, Note: e.Note, Feedback: e.Feedback, Reveal: e.Reveal,
		Delivery: delivery}
}
