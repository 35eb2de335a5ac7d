package failure

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/nudgehq/nudge/internal/message"
)

// Outcome is a classified failure.
type Outcome struct {
	Kind  Kind
	Class Class
	// RetryAfter is the server's or the code's earliest retry, if it said one.
	RetryAfter time.Duration
}

// Classifier answers for the errors it recognises; ok is false otherwise.
type Classifier interface {
	Classify(err error) (o Outcome, ok bool)
}

// ClassifierFunc adapts a function to Classifier.
type ClassifierFunc func(err error) (Outcome, bool)

// Classify calls f.
func (f ClassifierFunc) Classify(err error) (Outcome, bool) { return f(err) }

// Chain asks each classifier in turn; the first definite answer wins. An
// error that none recognises is a retry of class "unknown": the attempt
// budget bounds it.
type Chain []Classifier

// Classify returns the outcome for err.
func (c Chain) Classify(err error) Outcome {
	for _, cl := range c {
		if o, ok := cl.Classify(err); ok {
			return o
		}
	}
	return Outcome{Kind: KindRetry, Class: ClassUnknown}
}

// Decided recognises errors made by Retryable, Permanent and Ambiguous.
var Decided = ClassifierFunc(func(err error) (Outcome, bool) {
	var fe *Error
	if !errors.As(err, &fe) {
		return Outcome{}, false
	}
	class := fe.Class
	if class == "" {
		class = ClassUnknown
	}
	return Outcome{Kind: fe.Kind, Class: class, RetryAfter: fe.After}, true
})

// Decode recognises message contract violations: permanent.
var Decode = ClassifierFunc(func(err error) (Outcome, bool) {
	var de *message.DecodeError
	if errors.As(err, &de) {
		return Outcome{Kind: KindPermanent, Class: ClassDecode}, true
	}
	return Outcome{}, false
})

// StatusCoder is implemented by errors that carry an HTTP status from a
// provider.
type StatusCoder interface{ StatusCode() int }

// RetryAfterer is implemented by errors that carry a server's Retry-After.
type RetryAfterer interface{ RetryAfter() time.Duration }

// HTTPStatus recognises provider errors carrying an HTTP status: 429 and
// 408 are retried (honouring Retry-After), 5xx are retried, any other 4xx is
// permanent. AWS SDK errors are left to the AWS classifier.
var HTTPStatus = ClassifierFunc(func(err error) (Outcome, bool) {
	var sc StatusCoder
	if !errors.As(err, &sc) {
		return Outcome{}, false
	}
	var after time.Duration
	var ra RetryAfterer
	if errors.As(err, &ra) {
		after = ra.RetryAfter()
	}
	code := sc.StatusCode()
	switch {
	case code == 429:
		return Outcome{Kind: KindRetry, Class: ClassThrottled, RetryAfter: after}, true
	case code == 408:
		return Outcome{Kind: KindRetry, Class: ClassTimeout, RetryAfter: after}, true
	case code >= 500:
		return Outcome{Kind: KindRetry, Class: ClassServer, RetryAfter: after}, true
	case code >= 400:
		return Outcome{Kind: KindPermanent, Class: ClassRejected}, true
	}
	return Outcome{}, false
})

// Context recognises deadlines and cancellation. The work may have reached
// its destination before the context ended, so the outcome is ambiguous.
var Context = ClassifierFunc(func(err error) (Outcome, bool) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Outcome{Kind: KindAmbiguous, Class: ClassTimeout}, true
	case errors.Is(err, context.Canceled):
		return Outcome{Kind: KindAmbiguous, Class: ClassTimeout}, true
	}
	return Outcome{}, false
})

// Network recognises network errors not otherwise classified. Without
// knowing whether the request was written, the outcome is ambiguous.
var Network = ClassifierFunc(func(err error) (Outcome, bool) {
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return Outcome{Kind: KindAmbiguous, Class: ClassTimeout}, true
		}
		return Outcome{Kind: KindAmbiguous, Class: ClassNetwork}, true
	}
	return Outcome{}, false
})
