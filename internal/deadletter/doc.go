// Package deadletter is the format of a message in Nudge's dead-letter
// queue: the attributes the consumer puts on a message it dead-letters, the
// ones a redrive adds, and how they are read back. The consumer writes it,
// the redrive and the review read it; nothing else needs to know the
// attribute names.
//
// A message SQS moved by the work queue's redrive policy (the consumer
// crashed or timed out on it maxReceiveCount times) carries none of them:
// Read reports it as ClassMaxReceiveCount.
package deadletter
