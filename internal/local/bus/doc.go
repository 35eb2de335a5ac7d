// Package bus is a stand-in for Amazon EventBridge's PutEvents on one
// machine: an HTTP server on a free loopback port that speaks the AWS JSON
// 1.1 protocol as aws-sdk-go-v2's service/eventbridge client does, so that
// code calling PutEvents runs unchanged against it (the client's
// BaseEndpoint, or AWS_ENDPOINT_URL_EVENTBRIDGE, set to URL()). No package
// on the registries stands in for EventBridge offline, hence this one; it
// does only what Nudge needs of it, and against AWS none of it is used:
// there the bus, its rules and their targets are EventBridge's own.
//
// What of PutEvents it does:
//
//   - X-Amz-Target AWSEvents.PutEvents, Content-Type
//     application/x-amz-json-1.1. Any other operation is answered 400
//     UnknownOperationException. A request must carry a SigV4 Authorization
//     header for service events and the bus's region (400
//     MissingAuthenticationTokenException, IncompleteSignatureException or
//     InvalidSignatureException otherwise); the signature is not verified.
//   - 1 to 10 entries (otherwise 400 ValidationException) whose total size,
//     counted as EventBridge counts it (EntrySize: the UTF-8 bytes of
//     Source, DetailType, Detail and each Resource, 14 for a Time), is at
//     most Config.MaxRequestBytes, by default 256 KiB (otherwise 400
//     ValidationException "Total size of the entries in the request is over
//     the limit."). AWS raised the limit to 1 MB in January 2026; the
//     stand-in keeps 256 KiB, so what passes here passes there.
//   - Each entry is checked on its own, and one that fails gets an ErrorCode
//     and ErrorMessage in its result, counts in FailedEntryCount, and goes
//     nowhere, while the others go through: InvalidArgument for a missing
//     Source, DetailType or Detail, a DetailType over 128 characters or a
//     Time that is not a timestamp; MalformedDetail for a Detail that is not
//     a JSON object; ResourceNotFoundException for an EventBusName (a name
//     or an ARN) that is not one of Config.Buses or "default". That last
//     one is stricter than EventBridge, which accepts an entry for a bus
//     that does not exist and drops it (aws/aws-cli#9186): locally a
//     misnamed bus shows at once. An accepted entry gets a random UUID as
//     its event id.
//   - Rules (Config.Rules) route an accepted event to an SQS queue when its
//     source is in the rule's Source list and its detail-type in its
//     DetailType list, an empty list matching any. The message body is the
//     event as EventBridge delivers it to an SQS target:
//     {"version":"0","id":…,"detail-type":…,"source":…,"account":…,
//     "time":…,"region":…,"resources":[…],"detail":{…}}, the detail
//     compacted, the time the entry's Time or else the bus's clock, written
//     RFC 3339 in whole seconds, UTC.
//   - Delivery happens before PutEvents answers: when the call returns, its
//     events are in their queues. EventBridge delivers asynchronously; this
//     keeps the stand-in simple and tests deterministic. A target that
//     fails is tried Config.TargetAttempts times (3), a short pause apart,
//     and then the event is lost to it and counted in
//     Stats.TargetFailures, where EventBridge retries for up to 24 hours
//     and then drops the event or sends it to the rule's dead-letter queue.
//   - Faults for chaos runs (Config.Faults, SetFaults): a fraction or every
//     Nth of the entries that would be accepted fail with InternalFailure
//     (or ThrottlingException), the per-entry errors EventBridge documents
//     as retryable, and a fraction or every Nth of the requests are answered
//     500 InternalException, which the SDK retries. Stats counts both.
//
// What it does not do: content filtering beyond source and detail-type
// (no prefix, anything-but, numeric or detail patterns), input
// transformers, other target types, FIFO queues, dead-letter queues of
// rules, archive and replay, global endpoints (EndpointId), partner events,
// the refusal of a request in which no entry has Source, DetailType and
// Detail (each such entry fails alone here), the 24 hours of retries, and
// any other EventBridge operation (PutRule, PutTargets, … are Config here).
package bus
