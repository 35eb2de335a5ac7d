// Package provider is the portable side of Nudge's providers: the Provider
// interface a consumer sends a delivery through, the Request it sends, the
// Receipt and the errors a provider answers with, and the Driver a
// provider declares itself with (its contract, settings, intake checks,
// construction and local stand-in). The drivers are packages of their own
// (webhook, ses, sns), listed by package registry.
//
// A Provider gets the delivery key as its idempotency key: a retry after an
// ambiguous failure sends the same key, so a provider that honours it sends
// once.
//
// This package depends on no AWS package, so that a driver that calls no
// AWS service (the webhook, and with it a receiver's Verifier) does not
// either.
package provider
