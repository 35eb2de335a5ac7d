// Package sink is a local stand-in for a delivery provider: an HTTP server
// that speaks the webhook protocol of package provider, verifies signatures,
// deduplicates by Idempotency-Key as a good provider does, records what it
// accepted, and injects faults on request (latency, 429 with Retry-After,
// 500, 400, a hang past the client's timeout, and accept-then-drop, where it
// accepts the send and then breaks the connection before answering).
//
// Tests and local runs check "sent once" against the sink's own records.
package sink
