// Package outcome turns the ledger's changes into outcome events for the
// application: every end of a delivery (sent, dead-lettered, expired,
// cancelled, needing review) becomes one event on Amazon EventBridge,
// source "nudge", a detail-type per outcome, and a detail that names the
// reminder, its account, the delivery and its attempt, never an address, a
// template's data or a metadata value.
//
// The events are derived from the ledger table's DynamoDB Stream (new and
// old images) by the outcomes function, not published by the consumer
// after its ledger write: the stream holds every committed change for 24
// hours whatever happens to the writer, so a consumer killed between its
// write and a publish cannot lose an event, and the consumer's path keeps
// its two requests per delivery. A record the function cannot put on the
// bus is reported as a batch item failure, and the stream mapping retries
// from it. So an event is published at least once; each carries an eventId
// derived from the change itself (the same record gives the same id), by
// which a consumer of the events drops repeats. docs/events.md has the
// events, their schemas and the ordering per delivery.
package outcome
