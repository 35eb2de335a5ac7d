// Package awscall is what the providers that call an AWS service share: a
// call made once (Run), its answer read (AnswerOf) and classified
// (ErrorOf, ByStatus, TransportFailure), and the recipient's address
// scrubbed from the message before it reaches the ledger, the DLQ or a log
// (Scrub).
package awscall
