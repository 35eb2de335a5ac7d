// Package circuit is a circuit breaker for one provider, in one consumer
// instance: it recognises a provider that is unwell (it hangs until its
// timeout, refuses connections, answers 5xx) from a run of sends that
// failed in the ways that say so, and stops sends to it for a cool-down,
// so that the consumer spends neither time nor attempts on it.
//
// The states:
//
//	closed ──Failures unwell answers in a row──▶ open ──cool-down over──▶ half-open
//	   ▲                                          ▲                          │ one send, the probe
//	   └───────────── the probe succeeds ─────────┼──── the probe is unwell ─┘ (cool-down doubled,
//	                                              │                             up to MaxCoolDown)
//
// While the circuit is open, Admit refuses and says when the next probe may
// start; the caller puts the work aside until then. When the cool-down is
// over, exactly one caller is admitted as the probe; the others are refused
// until the probe's verdict is in (or ProbeTimeout has passed, when the
// probe counts as lost and another may start). A probe that ends without
// reaching the provider (Neutral: its claim was refused, say) hands the
// probe to the next caller.
//
// What counts (Judge): timeouts, connection failures, 5xx, a paused
// account and every ambiguous send are Unwell; a success is Healthy; a
// permanent refusal of one delivery (a 4xx, a suppressed address), a bad
// configuration and throttling are Neutral. Throttling is the provider
// asking for a slower rate, answered at once: the retry's Retry-After and
// the rate limit deal with it, and opening the circuit would turn it into
// an outage of the cool-down's length.
//
// Verdicts of sends admitted before the circuit last changed state are
// ignored: a send admitted while the circuit was closed that ends after it
// opened says nothing the open circuit does not already know, and cannot
// close it.
//
// The time comes from an injected clock; Change reports each change of
// state to a callback, outside the breaker's lock, for the caller's log
// line and metrics.
package circuit
