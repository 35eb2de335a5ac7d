package bus

import "fmt"

// The error codes of a failed entry: EventBridge's, as in PutEventsResultEntry.
const (
	// CodeInternalFailure is EventBridge's transient failure of one entry
	// (retry it), and the entry fault's default.
	CodeInternalFailure = "InternalFailure"
	// CodeThrottling is EventBridge's throttling of one entry (retry it).
	CodeThrottling = "ThrottlingException"
	// CodeInvalidArgument: a required field is missing or a value is out of
	// bounds (do not retry).
	CodeInvalidArgument = "InvalidArgument"
	// CodeMalformedDetail: Detail is not a JSON object (do not retry).
	CodeMalformedDetail = "MalformedDetail"
	// CodeBusNotFound: the entry's event bus does not exist in the stand-in.
	// EventBridge accepts such an entry and drops it; the stand-in fails it,
	// so that a misnamed bus shows locally.
	CodeBusNotFound = "ResourceNotFoundException"
)

// Faults are the failures a Bus injects. Entry faults hit only entries that
// would otherwise be accepted; request faults hit PutEvents requests that
// carry an Authorization header, before the bus reads them. A rate and an
// every-Nth may be combined: either one fails it.
type Faults struct {
	// EntryRate is the chance, in [0, 1], that an entry fails with
	// EntryCode. Default 0.
	EntryRate float64
	// EntryEvery fails every Nth entry (the Nth, 2Nth, …, counted across
	// requests since Start or SetFaults). Default 0: none.
	EntryEvery int
	// EntryCode is the failed entry's ErrorCode: CodeInternalFailure (the
	// default) or CodeThrottling, EventBridge's two retryable ones.
	EntryCode string
	// RequestRate is the chance, in [0, 1], that a request is answered 500
	// InternalException. Default 0.
	RequestRate float64
	// RequestEvery answers every Nth request 500 InternalException (counted
	// since Start or SetFaults). Default 0: none.
	RequestEvery int
}

func (f Faults) check() error {
	if f.EntryRate < 0 || f.EntryRate > 1 {
		return fmt.Errorf("bus: Faults.EntryRate %v is not in [0, 1]; give the chance an entry fails", f.EntryRate)
	}
	if f.RequestRate < 0 || f.RequestRate > 1 {
		return fmt.Errorf("bus: Faults.RequestRate %v is not in [0, 1]; give the chance a request fails", f.RequestRate)
	}
	if f.EntryEvery < 0 || f.RequestEvery < 0 {
		return fmt.Errorf("bus: Faults.EntryEvery %d or RequestEvery %d is negative; give N to fail every Nth, or 0 for none", f.EntryEvery, f.RequestEvery)
	}
	switch f.EntryCode {
	case "", CodeInternalFailure, CodeThrottling:
	default:
		return fmt.Errorf("bus: Faults.EntryCode %q is not a retryable entry error; give %s (the default) or %s", f.EntryCode, CodeInternalFailure, CodeThrottling)
	}
	return nil
}

// requestFault reports whether this request is to fail whole.
func (b *Bus) requestFault() bool {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	f := b.faults
	fail := false
	if f.RequestEvery > 0 {
		b.reqN++
		fail = b.reqN%f.RequestEvery == 0
	}
	if f.RequestRate > 0 && b.cfg.Rand() < f.RequestRate {
		fail = true
	}
	return fail
}

// entryFault returns the error code an entry that would be accepted fails
// with, or "" for none.
func (b *Bus) entryFault() string {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	f := b.faults
	fail := false
	if f.EntryEvery > 0 {
		b.entryN++
		fail = b.entryN%f.EntryEvery == 0
	}
	if f.EntryRate > 0 && b.cfg.Rand() < f.EntryRate {
		fail = true
	}
	if !fail {
		return ""
	}
	if f.EntryCode == "" {
		return CodeInternalFailure
	}
	return f.EntryCode
}
