// Package webhook is the webhook provider: each delivery an HTTPS POST of
// its identifiers and references, signed with HMAC-SHA256 over a timestamp,
// the idempotency key and the body (Sender), and the receiver's side of the
// same contract (Verifier), for a receiver written in Go. docs/webhook.md
// describes the protocol for any language.
//
// It depends on no AWS package: a receiver that imports the Verifier
// imports the standard library and Nudge's failure, clock and provider
// packages alone.
package webhook
