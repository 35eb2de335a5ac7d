// Package retry computes when a failed delivery is tried again: capped
// exponential backoff with full jitter, honouring a server's Retry-After.
//
// The arithmetic is pure (Backoff.Ceiling) and the jitter a separate step
// with an injected random source, so both are tested without luck.
package retry
