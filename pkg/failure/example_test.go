package failure_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/failure/awsfailure"
)

// providerError is an error a provider returns: an HTTP status, and the
// server's Retry-After.
type providerError struct {
	status int
	after  time.Duration
}

func (e providerError) Error() string             { return fmt.Sprintf("provider answered %d", e.status) }
func (e providerError) StatusCode() int           { return e.status }
func (e providerError) RetryAfter() time.Duration { return e.after }

// ExampleChain: each classifier answers for the errors it recognises, the
// first that does decides; what none recognises is retried as unknown.
// Adding one in front changes the decision for its errors only.
func ExampleChain() {
	for _, err := range []error{
		providerError{status: 503},
		providerError{status: 429, after: 30 * time.Second},
		providerError{status: 422},
		fmt.Errorf("send: %w", context.DeadlineExceeded),
		failure.Permanent(errors.New("no such template")),
		errors.New("something new"),
	} {
		o := awsfailure.Default.Classify(err)
		fmt.Printf("%-40s %-9s %-9s %v\n", err, o.Kind, o.Class, o.RetryAfter)
	}

	// A provider whose 409 means "already delivered": treat it as decided.
	conflict := failure.ClassifierFunc(func(err error) (failure.Outcome, bool) {
		var pe providerError
		if errors.As(err, &pe) && pe.status == 409 {
			return failure.Outcome{Kind: failure.KindPermanent, Class: "duplicate-at-provider"}, true
		}
		return failure.Outcome{}, false
	})
	chain := append(failure.Chain{conflict}, awsfailure.Default...)
	fmt.Println(chain.Classify(providerError{status: 409}).Class, chain.Classify(providerError{status: 500}).Class)
	// Output:
	// provider answered 503                    retry     server    0s
	// provider answered 429                    retry     throttled 30s
	// provider answered 422                    permanent rejected  0s
	// send: context deadline exceeded          ambiguous timeout   0s
	// no such template                         permanent rejected  0s
	// something new                            retry     unknown   0s
	// duplicate-at-provider server
}

// Code that knows what a failure means says so with Retryable, Permanent
// or Ambiguous; the outcome survives wrapping, and a caller reads it with
// errors.As (or through a Chain, whose Decided classifier comes first).
func ExampleError() {
	errs := []error{
		failure.Retryable(errors.New("provider is paused"), 10*time.Minute),
		fmt.Errorf("send rem-184: %w", failure.Permanent(errors.New("no such template"))),
		failure.Ambiguous(errors.New("connection reset after the request was written")),
		failure.WithClass(failure.Permanent(errors.New("address on the suppression list")), failure.ClassSuppressed),
	}
	for _, err := range errs {
		var f *failure.Error
		if errors.As(err, &f) {
			fmt.Printf("%-9s %-10s %-5v %v\n", f.Kind, f.Class, f.After, err)
		}
	}
	// Output:
	// retry     unknown    10m0s provider is paused
	// permanent rejected   0s    send rem-184: no such template
	// ambiguous unknown    0s    connection reset after the request was written
	// permanent suppressed 0s    address on the suppression list
}
