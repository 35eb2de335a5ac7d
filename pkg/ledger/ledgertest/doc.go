// Package ledgertest holds an in-memory delivery ledger for fast tests and
// the conformance suite that every ledger must pass: Run is executed
// against Memory here and against DynamoDB Local in package ledger, so a
// test written against Memory means what it would mean against DynamoDB.
package ledgertest
