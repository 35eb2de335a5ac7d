// Package intake is the HTTP intake API: version 1 of the JSON API through
// which applications schedule, read, reschedule, list and cancel reminders
// (docs/api.md; docs/openapi.yaml is its contract, held true by a test).
// It is a net/http Handler over pkg/schedule — the same validation, ledger
// operations and errors as the CLI — answering errors as RFC 9457 problem
// details; FunctionURL serves it from a Lambda function URL (payload
// format 2.0), and Client calls it with SigV4-signed requests.
package intake
