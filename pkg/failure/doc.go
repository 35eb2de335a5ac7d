// Package failure gives errors an outcome (retry, retry with the same
// idempotency key, or give up), so that code which retries work (an SQS
// consumer, a sender to an HTTP API) knows what to do. It has typed errors
// for code that knows what a failure means, a small set of failure
// classes, and a Chain of classifiers for the errors that do not say.
// This package is part of Nudge's public Go API; see the README's “Go
// packages”.
//
// The three outcomes, as Nudge's consumer treats a delivery:
//
//   - Retry: transient (throttling, 5xx, 429, timeouts before the request
//     left, AWS hiccups). Retried later with backoff, honouring Retry-After.
//   - Permanent: retrying cannot help (a body that does not decode, a
//     provider's 4xx, an unknown delivery). Dead-lettered now, with the reason.
//   - Ambiguous: the provider may have accepted the request (the connection
//     broke after the request was written, the deadline hit while waiting).
//     Retried with the same idempotency key, so the provider deduplicates.
//
// Code that knows its outcome says so with Retryable, Permanent or Ambiguous.
// Everything else goes through a Chain of small classifiers; the first
// definite answer wins, and an error no classifier recognises is retried.
// Package awsfailure adds the classifier of AWS SDK errors and the chain
// the consumer uses (awsfailure.Default); this package depends on no AWS
// package.
package failure
