// Package sesevents stands in for Amazon SES's event publishing, for
// running Nudge on one machine: a front for the SES stand-in
// (aws-ses-v2-local, which accepts e-mail and publishes nothing) that, for
// every e-mail the stand-in accepted in a configuration set, puts on the
// local EventBridge bus (internal/local/bus) the events SES puts on the
// default bus through a configuration set's EventBridge destination:
// "Email Sent" at once, then what the recipient's mailbox does, as SES's
// mailbox simulator (success@, bounce@, ooto@, complaint@ and
// suppressionlist@simulator.amazonses.com) makes it happen in AWS:
//
//   - success@ and ooto@ (and any other address): "Email Delivered";
//   - bounce@: "Email Bounced", Permanent/General;
//   - suppressionlist@: "Email Bounced", Permanent/OnAccountSuppressionList;
//   - complaint@: "Email Delivered", then "Email Complaint Received".
//
// Each event's detail is SES's event record (eventType, mail with the
// message's headers and tags, and the event's own object), source
// "aws.ses". The events of one e-mail are put in SES's order, after
// Config.Delay (SES takes seconds to minutes; the delivery event comes
// after the send event). An e-mail whose answer the demo's fault front
// drops after the stand-in accepted it still gets its events, as in AWS:
// SES sent it. An e-mail outside a configuration set gets none, as in AWS.
//
// What it does not do: opens, clicks, subscriptions, rejects (SES's
// simulator has no address for them), rendering failures, delivery delays,
// transient bounces, and EventBridge's best-effort delivery (the local bus
// delivers every event). Against AWS none of this is used: SES publishes.
package sesevents
