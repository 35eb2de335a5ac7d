// Package failure classifies what went wrong with a delivery into one of
// three outcomes, so the consumer knows whether to retry or dead-letter:
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
