// Package webhook is the webhook provider: each delivery an HTTPS POST of
// its identifiers and references, signed with HMAC-SHA256 over a timestamp,
// the idempotency key and the body (Sender), and the receiver's side of the
// same contract (Verifier). A receiver written in Go imports it for the
// Verifier, and reads the body as a provider.Request; docs/webhook.md
// describes the protocol for any language. This package is part of Nudge's
// public Go API; see the README's “Go packages”.
//
// It depends on no AWS package: a receiver that imports the Verifier
// imports the standard library and Nudge's failure, clock and provider
// packages alone.
package webhook
