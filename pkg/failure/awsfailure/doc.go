// Package awsfailure classifies the errors of AWS SDK for Go v2 calls
// (throttling, 5xx, other API errors, connection failures) into package
// failure's outcomes. It has Classifier, to put in a failure.Chain of
// your own; Default, the chain Nudge's consumer uses; and IsThrottleCode,
// the one list of AWS throttling codes, for code that answers throttling
// itself. This package is part of Nudge's public Go API; see the README's
// “Go packages”.
//
// It is apart from package failure so that code which calls no AWS
// service (the webhook provider, a receiver's Verifier) does not depend
// on the SDK.
package awsfailure
