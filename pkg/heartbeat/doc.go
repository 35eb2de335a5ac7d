// Package heartbeat keeps a long-running SQS record invisible while it is
// being worked on, so that no other consumer receives it meanwhile. It is
// for any SQS handler whose work can outlast the queue's visibility
// timeout: as middleware of a batch.Processor (Heartbeat.Middleware) or
// around one message (Heartbeat.Start). This package is part of Nudge's public Go
// API; see the README's “Go packages”.
//
// A record still in flight after Threshold gets its visibility extended to
// Extension, and again every Interval, until the work stops. Records that
// finish quickly cost no calls. If an extension fails (the receipt handle
// expired, the message was deleted, SQS is down), the record's context is
// cancelled with ErrLost as its cause, so the worker stops rather than race a
// second delivery of the same message.
//
// Under Heartbeat.Middleware, the handler passes Watched(ctx) to the work
// the loss must stop.
package heartbeat
