// Package provider is the portable side of Nudge's providers: the Provider
// interface a delivery is sent through, the Request it sends, and the
// Receipt and StatusError a provider answers with. Func makes a Provider
// of a function, ParseRetryAfter reads a server's Retry-After header, and
// the Request's JSON is the webhook's body. A Go program uses it to call a provider (the
// webhook's Sender) or stand one in, and a webhook receiver to read the
// body. This package is part of Nudge's public Go API; see the README's
// “Go packages”.
//
// The Driver type declares a provider to Nudge: its contract, settings,
// intake checks, construction and local stand-in. The drivers are
// packages of their own (the webhook, public; SES and SNS, Nudge's own),
// listed by Nudge's registry.
//
// A Provider gets the delivery key as its idempotency key: a retry after an
// ambiguous failure sends the same key, so a provider that honours it sends
// once.
//
// This package depends on no AWS package, so that a driver that calls no
// AWS service (the webhook, and with it a receiver's Verifier) does not
// either.
package provider
