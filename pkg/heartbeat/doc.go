// Package heartbeat keeps a long-running SQS record invisible while it is
// being worked on.
//
// A record still in flight after Threshold gets its visibility extended to
// Extension, and again every Interval, until the work stops. Records that
// finish quickly cost no calls. If an extension fails (the receipt handle
// expired, the message was deleted, SQS is down), the record's context is
// cancelled with ErrLost as its cause, so the worker stops rather than race a
// second delivery of the same message.
//
// Heartbeat.Middleware runs it around every record of a batch.Processor;
// the handler passes Watched(ctx) to the work the loss must stop.
package heartbeat
