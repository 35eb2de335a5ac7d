// Package feedback records SES's sending events on the deliveries they are
// about, so that an e-mail that bounced or drew a complaint does not read
// "sent" for good.
//
// Every e-mail Nudge sends goes through the stage's configuration set,
// nudge-<stage> (ses.ConfigurationSet), which publishes SES's sending
// events to the account's default EventBridge bus; a rule of the stack
// sends them to a queue, and the feedback function (functions/feedback,
// Function here) reads the queue. Each event is an EventBridge event,
// source "aws.ses", one detail-type per event ("Email Sent", "Email
// Delivered", "Email Bounced", "Email Complaint Received", "Email
// Rejected", "Email Delivery Delayed", "Email Rendering Failed"; "Email
// Opened", "Email Clicked" and "Email Subscribed" are not recorded), whose
// detail is SES's event record: eventType, the mail object (timestamp,
// messageId, destination, headersTruncated, headers, tags, with
// "ses:configuration-set"), and the event's own object (bounce, complaint,
// delivery, send, reject, deliveryDelay, failure). Sources: the
// EventBridge events reference for SES,
// https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-ses.html,
// and SES's "Contents of event data that Amazon SES publishes",
// https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html
// (the top-level object, the mail object, the bounce, complaint, delivery,
// send, reject, rendering failure and deliveryDelay objects), with the
// examples at .../event-publishing-retrieving-sns-examples.html, on which
// testdata/ is modelled.
//
// Parse turns one into an Event: the delivery it is about (the
// X-Nudge-Delivery-Key header the SES driver sets, or, where SES truncated
// the headers, the nudge_reminder tag, decoded by ses.TagValueDecode, on
// the e-mail channel through SES) and the ledger.Feedback to record: its
// kind, whether a bounce is permanent, a detail, SES's time of the event,
// and an id for deduplication (a bounce's or complaint's feedbackId, else
// messageId:eventType:timestamp). OfStage checks the configuration set.
//
// An address never leaves this package, nor reaches a log line or an
// error: SES's record holds the recipient in destination, the recipients'
// lists, diagnostic codes, SMTP responses and a rendering failure's
// message, and none of those is decoded. The detail keeps types, subtypes
// and status codes alone ("Permanent/General 5.1.1", "Transient/MailboxFull
// 4.2.2", "250 2.6.0", "abuse"), each checked against the shape it has;
// a value of another shape is dropped, not clipped.
//
// What becomes of a record: recorded (FeedbackRecorded, by Kind); a repeat
// (ledger.ErrFeedbackSeen, FeedbackRepeated), a delivery the ledger does
// not hold (ledger.ErrNotFound: purged, deleted by its TTL; FeedbackUnmatched,
// logged with SES's message id alone), not this stage's (ErrNotOurs,
// FeedbackIgnored) and unreadable (ErrMalformed, FeedbackUndecodable,
// logged) are acknowledged, since no retry changes them; a ledger failure
// (throttling, 5xx) is a batch item failure, retried by the queue
// (FeedbackRetried, by ErrorClass). docs/ledger.md ("Provider feedback")
// has what the ledger does with it.
//
// Under SES's record policy an event also settles sent a delivery ended as
// ambiguous (dead-lettered, or expired or cancelled after an attempt that
// may have been sent: FeedbackSettled), and a batch with no record left on
// the queue marks the latest e-mail SES reported (RecordFeedbackMark, at
// most one write per MarkEvery per container; a failure FeedbackMarkFailed).
package feedback
