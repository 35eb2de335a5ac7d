// Package message is the queue contract between the enqueue and consumer
// functions: a small, versioned, identifier-only JSON body.
//
//	{"v":1,"reminderId":"rem-184","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}
//
// A message never carries names, addresses or rendered content: the consumer
// reads those from the delivery ledger. Decode never panics; every way a body
// can be wrong is a *DecodeError naming the field and the fix, which the
// consumer treats as a permanent failure.
package message
