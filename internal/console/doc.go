// Package console is Nudge's support console: a web view of one stage
// served by `nudge console` on loopback, with the operator's own AWS
// credentials, for answering "why was renewal-4821 missed?" without a
// terminal.
//
// Its pages (overview, find, reminder, dead letters, actions) are rendered
// by the server with html/template from templates embedded in the binary;
// every page has a JSON twin (?format=json), the document the CLI prints
// with --json. The pages call the packages the CLI calls (internal/status,
// pkg/schedule, internal/redrive), never the table directly.
//
// Security: the server answers only requests for the hosts it was bound
// to (DNS rebinding), with the session's token (in the URL printed at
// start, then a cookie), and a POST only with the page's CSRF token and an
// Origin of its own; every answer carries a strict Content-Security-Policy.
// It is read-only unless started with actions allowed; an address is
// shown unmasked only after a reason is given, which the delivery's
// history records.
package console
