// Package sns is the SNS provider: one message per delivery, identifiers
// and references only, published to a topic whose subscribers deliver it
// (Sender); on a FIFO topic, deduplicated by the delivery key for 5
// minutes.
package sns
