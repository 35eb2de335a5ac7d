// Package ratelimit paces sends to a provider that caps its sending rate
// (SES's maximum send rate, a receiver's quota): a token bucket with an
// injected clock. A consumer instance takes its share of the stage's rate
// (the rate divided by the event source mapping's maximum concurrency), so
// that the instances together never exceed it.
package ratelimit
