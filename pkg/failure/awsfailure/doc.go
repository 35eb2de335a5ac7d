// Package awsfailure classifies the errors of AWS SDK calls (throttling,
// 5xx, other API errors, connection failures) into package failure's
// outcomes, and holds the one list of AWS throttling codes
// (IsThrottleCode). It is apart from package failure so that code which
// calls no AWS service (the webhook provider, a receiver's Verifier) does
// not depend on the SDK.
package awsfailure
