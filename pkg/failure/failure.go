package failure

import (
	"errors"
	"fmt"
	"time"
)

// Kind is what to do about a failure.
type Kind int

// The outcomes a failure can have.
const (
	// KindRetry means try again later.
	KindRetry Kind = iota + 1
	// KindPermanent means do not try again: dead-letter with the reason.
	KindPermanent
	// KindAmbiguous means the side effect may have happened: try again with
	// the same idempotency key.
	KindAmbiguous
)

func (k Kind) String() string {
	switch k {
	case KindRetry:
		return "retry"
	case KindPermanent:
		return "permanent"
	case KindAmbiguous:
		return "ambiguous"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Class names the cause of a failure in logs, metrics, ledger entries and
// DLQ attributes. Classes are short, stable and free of recipient data.
type Class string

// The classes.
const (
	ClassThrottled Class = "throttled" // 429, SDK throttling
	ClassServer    Class = "server"    // 5xx
	ClassTimeout   Class = "timeout"   // a deadline passed
	ClassNetwork   Class = "network"   // the connection failed
	ClassRejected  Class = "rejected"  // the provider refused the request (4xx)
	ClassDecode    Class = "decode"    // the message body breaks the contract
	ClassNotFound  Class = "not-found" // the message names no known delivery
	ClassAWS       Class = "aws"       // an AWS API error that is not throttling or 5xx
	ClassConfig    Class = "config"    // the consumer cannot handle this provider or channel
	ClassExhausted Class = "exhausted" // the attempt budget ran out
	ClassPanic     Class = "panic"     // the handler panicked
	ClassUnknown   Class = "unknown"   // nothing recognised the error

	// ClassSuppressed: the provider will not send to this address (it
	// bounced or complained before). Permanent.
	ClassSuppressed Class = "suppressed"
	// ClassPaused: the provider has paused or suspended the account's
	// sending. Retried after a long backoff, and alarmed on.
	ClassPaused Class = "paused"
	// ClassAmbiguous: the provider may have accepted the send and does not
	// deduplicate; under the "review" policy it is dead-lettered for an
	// operator to decide.
	ClassAmbiguous Class = "ambiguous"
)

// Error is a failure with its outcome decided.
type Error struct {
	// Kind says what to do.
	Kind Kind
	// Class names the cause.
	Class Class
	// After is the earliest time to retry, as a delay; 0 leaves it to the
	// retry policy.
	After time.Duration
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Kind.String() + " (" + string(e.Class) + ")"
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable marks err as transient: retry no sooner than after (0: let the
// policy decide). The class is taken from err if it already has one.
func Retryable(err error, after time.Duration) error {
	return &Error{Kind: KindRetry, Class: classOf(err, ClassUnknown), After: after, Err: err}
}

// Permanent marks err as one that retrying cannot fix.
func Permanent(err error) error {
	return &Error{Kind: KindPermanent, Class: classOf(err, ClassRejected), Err: err}
}

// Ambiguous marks err as one after which the side effect may have happened.
func Ambiguous(err error) error {
	return &Error{Kind: KindAmbiguous, Class: classOf(err, ClassUnknown), Err: err}
}

// WithClass returns err with its class set to class, keeping its kind; an
// unclassified err becomes a retry.
func WithClass(err error, class Class) error {
	var fe *Error
	if errors.As(err, &fe) {
		c := *fe
		c.Class = class
		return &c
	}
	return &Error{Kind: KindRetry, Class: class, Err: err}
}

func classOf(err error, def Class) Class {
	var fe *Error
	if errors.As(err, &fe) && fe.Class != "" {
		return fe.Class
	}
	return def
}
