// Package envelope builds what Nudge sends to SQS around a message body, and
// says which work queue it goes to (Routes: a provider's own, else the
// default). What it builds: the
// delay (whole seconds, rounded down: a message is visible up to a second before
// it is due, and the consumer holds it until then; at most MaxDelaySeconds), the FIFO message group and deduplication id,
// and the message attributes a copy keeps. Every producer builds its message
// here: the enqueue's hand-off and repair, the consumer's deferral, pacing and
// dead letter, and the redrive.
//
// A producer keeps its own decisions (whether to send, what body, how long a
// delay, which attributes) and names its deduplication rule (ForHandOff,
// ForDeadLetter, ForRedrive); Build applies the queue's rules: a standard
// queue takes the delay and no group, a FIFO queue the group and the
// deduplication id and no per-message delay. The Envelope it returns becomes
// a SendMessage input (Send) or a SendMessageBatch entry (Entry).
//
// The body itself is internal/message's contract. That package stays free of the
// AWS SDK, and the envelope needs the SDK's types and the ledger's time
// format (the ledger imports internal/message), so the envelope lives here.
package envelope
