package awscall

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Run runs one AWS API call for a provider, once: the SDK's own retries
// are turned off by the caller (RetryMaxAttempts 1), because a provider
// call that is not idempotent must not be repeated behind the ledger's back,
// and the consumer's backoff, attempt budget and ledger already own
// retries. It reports whether the request was written before it failed.
func Run(ctx context.Context, timeout time.Duration, call func(context.Context) error) (wrote bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout) // wall clock: a limit on a real request
	defer cancel()
	var w atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				w.Store(true)
			}
		},
	})
	err = call(ctx)
	return w.Load(), err
}

// Answer is what an AWS service answered: its error code, HTTP status (0
// if no answer came back) and message.
type Answer struct {
	Code    string
	Status  int
	Message string
}

// AnswerOf returns the answer err carries, and false if the service gave
// none (the call failed before an answer came back).
func AnswerOf(err error) (Answer, bool) {
	var a Answer
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		a.Status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		a.Code, a.Message = api.ErrorCode(), api.ErrorMessage()
	}
	return a, a.Status != 0 || a.Code != ""
}

// emailLike matches what may be an e-mail address in a provider's error
// message, so that it can be removed before the message is stored: an '@'
// (or its percent-encoding) with text on both sides.
var emailLike = regexp.MustCompile(`(?i)[^\s<>"'(),;:\[\]]+(@|%40)[^\s<>"'(),;:\[\]]+`)

// Scrub removes the recipient's address, and anything else that looks like
// an address, from a provider's message, and bounds it: errors reach the
// ledger, the DLQ and the logs, where addresses must never be.
func Scrub(msg, address string) string {
	if address != "" {
		msg = regexp.MustCompile("(?i)"+regexp.QuoteMeta(address)).ReplaceAllLiteralString(msg, "<address>")
	}
	msg = emailLike.ReplaceAllString(msg, "<address>")
	if local, _, ok := strings.Cut(address, "@"); ok && len(local) >= 3 {
		// The local part alone (an answer may quote it apart), where it
		// stands as a word of its own: "ana" in "ana was refused", not in
		// "management".
		word := regexp.MustCompile(`(?i)(^|[^A-Za-z0-9._%+-])` + regexp.QuoteMeta(local) + `($|[^A-Za-z0-9._%+-])`)
		for range 8 { // matches that share a boundary ("ana ana") need another pass
			next := word.ReplaceAllString(msg, "${1}<address>${2}")
			if next == msg {
				break
			}
			msg = next
		}
	}
	return text.Clip(strings.TrimSpace(msg), 200)
}

// AnswerError is an AWS provider's error answer, with the recipient's
// address removed from its message.
type AnswerError struct {
	// Provider is the provider's name.
	Provider string
	// Code is the service's error code, such as "MessageRejected".
	Code string
	// Status is the HTTP status, 0 if unknown.
	Status int
	// Message is the service's message, scrubbed of addresses and bounded.
	Message string
}

func (e *AnswerError) Error() string {
	s := e.Provider + ": " + e.Code
	if e.Status != 0 {
		s += fmt.Sprintf(" (%d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// answeredOK reports whether the service answered with a 2xx status: the
// request was handled, even if the answer could not be read.
func answeredOK(a Answer) bool { return a.Status >= 200 && a.Status < 300 }

// ErrorOf builds the AnswerError of err, whose answer a is, with its
// message scrubbed of address. An answer of 2xx that could not be read
// comes back as the failure at once: the service handled the request, so
// it is ambiguous.
func ErrorOf(name string, err error, a Answer, address string) (*AnswerError, error) {
	e := &AnswerError{Provider: name, Code: a.Code, Status: a.Status, Message: Scrub(a.Message, address)}
	if e.Code == "" {
		e.Code = "UnknownError"
	}
	if answeredOK(a) {
		e.Message = Scrub(err.Error(), address)
		return e, failure.Ambiguous(failure.WithClass(e, failure.ClassNetwork))
	}
	return e, nil
}

// CredentialCodes are the answers to a request refused for its credentials
// or its clock, before anything was done (SES v2's REST-JSON codes and
// SNS's query-protocol ones): retried, since credentials rotate and clocks
// recover.
var CredentialCodes = map[string]bool{
	"InvalidSignatureException": true, "IncompleteSignatureException": true, "MissingAuthenticationTokenException": true,
	"UnrecognizedClientException": true, "ExpiredTokenException": true, "InvalidClientTokenId": true,
	"SignatureDoesNotMatch": true, "RequestTimeTooSkewed": true, "ExpiredToken": true, "IncompleteSignature": true,
}

// ByStatus classifies an answer no code of the provider's recognised, by
// its HTTP status: 403 and 404 are the stage's (a permission, a resource
// missing), 429 and 503 were refused before anything was done, another
// 5xx may have acted, another 4xx is the request's.
func ByStatus(e *AnswerError) error {
	switch a := e.Status; {
	case a == 403, a == 404:
		return failure.WithClass(failure.Permanent(e), failure.ClassConfig)
	case a == 429:
		return failure.WithClass(e, failure.ClassThrottled)
	case a == 503:
		return failure.WithClass(e, failure.ClassServer)
	case a >= 500:
		return failure.Ambiguous(failure.WithClass(e, failure.ClassServer))
	case a >= 400:
		return failure.WithClass(failure.Permanent(e), failure.ClassRejected)
	}
	return failure.WithClass(e, failure.ClassAWS)
}

// TransportFailure classifies a call that got no answer: ambiguous once the
// request was written, a plain retry before.
func TransportFailure(name string, err error, wrote bool, address string) error {
	e := fmt.Errorf("%s: %s", name, Scrub(err.Error(), address))
	class := failure.ClassNetwork
	if errors.Is(err, context.DeadlineExceeded) {
		class = failure.ClassTimeout
	}
	if wrote {
		return failure.Ambiguous(failure.WithClass(e, class))
	}
	return failure.WithClass(e, class)
}
