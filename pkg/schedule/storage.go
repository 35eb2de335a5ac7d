package schedule

import (
	"maps"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
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
		Metadata: maps.Clone(r.Metadata), CreatedBy: r.CreatedBy}
	if r.Deliveries != nil {
		it.Deliveries = make([]ledger.ReminderDelivery, len(r.Deliveries))
	}
	for i, d := range r.Deliveries {
		it.Deliveries[i] = ledger.ReminderDelivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef}
	}
	return it
}

// reminderOf is the reminder a reminder item holds, as read: its
// deliveries carry no address (the delivery items do).
func reminderOf(it ledger.ReminderItem) Reminder {
	r := Reminder{ID: it.ID, AccountRef: it.AccountRef, DueAt: it.DueAt, ExpiresAt: it.ExpiresAt,
		Metadata: maps.Clone(it.Metadata), CreatedBy: it.CreatedBy}
	if it.Deliveries != nil {
		r.Deliveries = make([]Delivery, len(it.Deliveries))
	}
	for i, d := range it.Deliveries {
		r.Deliveries[i] = Delivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef}
	}
	return r
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
// delivery item: at the reminder's times, with d's address, and with the
// reminder's metadata as template data for a provider that renders
// templates.
func deliveryItem(r Reminder, d Delivery) ledger.Delivery {
	ld := ledger.Delivery{
		ReminderID: r.ID, AccountRef: r.AccountRef, Channel: d.Channel, Provider: d.Provider,
		RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Address: d.Address, DueAt: r.DueAt, ExpiresAt: r.ExpiresAt,
	}
	if drv, _ := registry.Lookup(d.Provider); drv.Intake.RendersTemplates && len(r.Metadata) > 0 {
		ld.TemplateData = r.Metadata // what the template renders
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
	return dd
}

// statusOf is a ledger status as the API tells it: the same name.
func statusOf(s ledger.Status) Status { return Status(s) }

// eventOf is history entry e of the delivery keyed delivery.
func eventOf(e ledger.Entry, delivery string) Event {
	return Event{At: e.At, Status: statusOf(e.Status), Attempt: e.Attempt, Class: e.Class, Note: e.Note, Feedback: e.Feedback, Delivery: delivery}
}
