// Package intake is the HTTP intake API: version 1 of the JSON API through
// which applications schedule, read, reschedule, list and cancel reminders
// (docs/api.md; docs/openapi.yaml is its contract, held true by a test).
// An application in Go calls it with a Client, which signs each request
// with SigV4 as the intake's function URL requires, and reads the answers
// as this package's types and package schedule's. This package is part of
// Nudge's public Go API; see the README's “Go packages”.
//
// The server side is a net/http Handler over pkg/schedule — the same
// validation, ledger operations and errors as the CLI — answering errors
// as RFC 9457 problem details; FunctionURL serves it from a Lambda
// function URL (payload format 2.0).
package intake
