// Package check is the local runs' checker, as pure functions: no I/O, no
// clock. A run hands it the plan (what each delivery must end as: Plan) and
// the evidence it gathered from records the system under test does not keep
// for its own decisions (the ledger, the DLQ, each provider's own record,
// the functions' logs, the kills: Evidence); Check returns the Verdict: the
// invariants the evidence breaks, each named, and the figures it reads from
// the evidence.
//
// The invariants (docs/reliability.md, "Chaos"): nothing sent twice, nothing
// lost, nothing overdue, and each delivery ended as its faults call for
// (the fault model: Repeats, Expect; and the providers' contracts, one table
// keyed by provider name: a provider retries, records or reviews a send
// that may have gone out). SES records: such a send ends sent, by SES's
// record or sent again once the record shows it did not go out, with one
// copy at SES; or, where the record could not settle it in time, dead as
// ambiguous with none. A kill explains another end only where the
// evidence shows it did. The provider's feedback (feedback.go): each e-mail
// SES sent ends with the feedback its recipient's mailbox calls for (the
// mailbox simulator's bounce, complaint, delivery), and nothing its
// provider never sent has any.
//
// A new invariant is a case of violations and a row of its table test; a new
// scenario is a new plan and its evidence, checked by the same Check.
package check
