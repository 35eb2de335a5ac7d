// Package ledgertest is the conformance suite every delivery ledger must
// pass: Run is executed against ledger.Memory and against DynamoDB Local in
// package ledger, so a test written against the in-memory ledger means what
// it would mean against DynamoDB.
package ledgertest
