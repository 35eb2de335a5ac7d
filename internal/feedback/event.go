package feedback

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/internal/text"
)

// Source is the EventBridge source of SES's events.
const Source = "aws.ses"

// TagConfigurationSet is the tag SES gives every event of an e-mail sent
// in a configuration set: the set's name.
const TagConfigurationSet = "ses:configuration-set"

// kinds are the sending events recorded, by EventBridge detail-type, with
// SES's eventType and the ledger's kind. Opened, Clicked and Subscribed
// are not: they say nothing of whether the e-mail arrived.
var kinds = map[string]struct {
	eventType string
	kind      ledger.FeedbackKind
}{
	"Email Sent":               {"Send", ledger.FeedbackSentByProvider},
	"Email Delivered":          {"Delivery", ledger.FeedbackDelivered},
	"Email Bounced":            {"Bounce", ledger.FeedbackBounced},
	"Email Complaint Received": {"Complaint", ledger.FeedbackComplained},
	"Email Rejected":           {"Reject", ledger.FeedbackRejected},
	"Email Delivery Delayed":   {"DeliveryDelay", ledger.FeedbackDelayed},
	"Email Rendering Failed":   {"Rendering Failure", ledger.FeedbackRenderingFailed},
}

// Event is an SES sending event as Nudge reads it: the delivery it is
// about and the feedback to record. It holds no address: of SES's record
// it keeps types, subtypes, status codes and ids alone.
type Event struct {
	// DetailType is EventBridge's detail-type ("Email Bounced").
	DetailType string
	// MessageID is SES's id of the e-mail.
	MessageID string
	// ConfigurationSet is the configuration set it was sent in (its
	// ses:configuration-set tag).
	ConfigurationSet string
	// Key is the delivery it is about: from the X-Nudge-Delivery-Key
	// header, or the nudge_reminder tag where the headers were truncated.
	Key message.DeliveryKey
	// Feedback is what the ledger records.
	Feedback ledger.Feedback
	// Accepted is when SES accepted the e-mail (mail.timestamp): the
	// feedback mark's time (ledger.RecordFeedbackMark).
	Accepted time.Time
	// Probe is set for an event of a consumer's probe (the ses.TagProbe
	// tag, which only ses.Sender.Probe sets): it names no delivery.
	Probe bool
}

// ErrNotOurs is the reason an event is not one this function records: not
// from SES, not a sending event it records (an open, a click), not of this
// stage's configuration set, or of an e-mail Nudge did not send. Match it
// with errors.Is; the event is acknowledged and counted, never retried.
var ErrNotOurs = errors.New("not an SES sending event of this stage")

// ErrMalformed is the reason an event could not be read: not JSON, or an
// SES event without what every one of its type has. No retry helps.
var ErrMalformed = errors.New("malformed SES event")

// Error is an event refused by Parse or OfStage: Reason is ErrNotOurs or
// ErrMalformed, Why says what, and MessageID is SES's id of the e-mail
// where it was read. None holds an address.
type Error struct {
	Reason    error
	Why       string
	MessageID string
}

func (e *Error) Error() string {
	if e.MessageID == "" {
		return fmt.Sprintf("feedback: %v: %s", e.Reason, e.Why)
	}
	return fmt.Sprintf("feedback: message %s: %v: %s", e.MessageID, e.Reason, e.Why)
}

// Is matches the reason.
func (e *Error) Is(target error) bool { return target == e.Reason }

func notOurs(msg, format string, args ...any) error {
	return &Error{Reason: ErrNotOurs, Why: fmt.Sprintf(format, args...), MessageID: msg}
}

func malformed(msg, format string, args ...any) error {
	return &Error{Reason: ErrMalformed, Why: fmt.Sprintf(format, args...), MessageID: msg}
}

// envelope is an EventBridge event.
type envelope struct {
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Detail     json.RawMessage `json:"detail"`
}

// record is SES's event record: only what Nudge reads. The addresses SES
// puts in it (destination, recipients, diagnostic codes, SMTP responses)
// are never decoded.
type record struct {
	EventType string `json:"eventType"`
	Mail      struct {
		Timestamp        string `json:"timestamp"`
		MessageID        string `json:"messageId"`
		HeadersTruncated bool   `json:"headersTruncated"`
		Headers          []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"headers"`
		Tags map[string][]string `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string `json:"bounceType"`
		BounceSubType     string `json:"bounceSubType"`
		FeedbackID        string `json:"feedbackId"`
		Timestamp         string `json:"timestamp"`
		BouncedRecipients []struct {
			Status string `json:"status"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint *struct {
		FeedbackID            string `json:"feedbackId"`
		Timestamp             string `json:"timestamp"`
		ComplaintFeedbackType string `json:"complaintFeedbackType"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp    string `json:"timestamp"`
		SMTPResponse string `json:"smtpResponse"`
	} `json:"delivery"`
	Send   *struct{} `json:"send"`
	Reject *struct {
		Reason string `json:"reason"`
	} `json:"reject"`
	DeliveryDelay *struct {
		Timestamp string `json:"timestamp"`
		DelayType string `json:"delayType"`
	} `json:"deliveryDelay"`
	Failure *struct {
		TemplateName string `json:"templateName"`
	} `json:"failure"`
}

// Parse reads an EventBridge event carrying an SES sending event. It
// returns an *Error whose reason is ErrNotOurs for an event it does not
// record (another source, an open or a click, an e-mail without Nudge's
// delivery key) and ErrMalformed for one it cannot read. The
// configuration set is checked apart (OfStage).
func Parse(body []byte) (Event, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Event{}, malformed("", "the body is not an EventBridge event in JSON (%s)", jsonProblem(err))
	}
	if env.Source != Source {
		return Event{}, notOurs("", "source %s, not %s", shown(env.Source), Source)
	}
	k, ok := kinds[env.DetailType]
	if !ok {
		return Event{}, notOurs("", "detail-type %s is not a sending event Nudge records", shown(env.DetailType))
	}
	var r record
	if err := json.Unmarshal(env.Detail, &r); err != nil || len(env.Detail) == 0 {
		return Event{}, malformed("", "%s: detail is not SES's event record (%s)", env.DetailType, jsonProblem(err))
	}
	msg := r.Mail.MessageID
	if !token.MatchString(msg) {
		return Event{}, malformed("", "%s: mail.messageId is missing or not an SES message id", env.DetailType)
	}
	if r.EventType != k.eventType {
		return Event{}, malformed(msg, "%s: eventType %s, want %q", env.DetailType, shown(r.EventType), k.eventType)
	}
	e := Event{DetailType: env.DetailType, MessageID: msg, Feedback: ledger.Feedback{Kind: k.kind, MessageID: msg}}
	if sets := r.Mail.Tags[TagConfigurationSet]; len(sets) == 1 {
		e.ConfigurationSet = sets[0]
	}
	key, err := keyOf(r)
	if err != nil {
		return Event{}, err
	}
	e.Key = key
	e.Probe = len(r.Mail.Tags[ses.TagProbe]) == 1 && r.Mail.Tags[ses.TagProbe][0] == "1"
	if e.Feedback, err = feedbackOf(r, e.Feedback); err != nil {
		return Event{}, err
	}
	if err := e.Feedback.Validate(); err != nil {
		return Event{}, malformed(msg, "%s: %v", env.DetailType, err)
	}
	accepted, err := time.Parse(time.RFC3339Nano, r.Mail.Timestamp)
	if err != nil {
		return Event{}, malformed(msg, "%s: mail.timestamp is not an ISO 8601 time", env.DetailType)
	}
	e.Accepted = accepted.UTC()
	return e, nil
}

// OfStage checks that e was sent in stage's configuration set
// (ses.ConfigurationSet): an *Error with reason ErrNotOurs otherwise.
func (e Event) OfStage(stage string) error {
	if want := ses.ConfigurationSet(stage); e.ConfigurationSet != want {
		return notOurs(e.MessageID, "configuration set %s, not this stage's %q", shown(e.ConfigurationSet), want)
	}
	return nil
}

// keyOf finds the delivery r is about: the X-Nudge-Delivery-Key header,
// unless SES truncated the headers; else the nudge_reminder tag, on the
// e-mail channel through SES. An e-mail with neither is not Nudge's.
func keyOf(r record) (message.DeliveryKey, error) {
	msg := r.Mail.MessageID
	if !r.Mail.HeadersTruncated {
		for _, h := range r.Mail.Headers {
			if !strings.EqualFold(h.Name, ses.HeaderDeliveryKey) {
				continue
			}
			k, err := message.ParseDeliveryKey(h.Value)
			if err != nil || k.Channel != "email" || k.Provider != ses.Name {
				return message.DeliveryKey{}, malformed(msg, "header %s is not reminderId:email:%s", ses.HeaderDeliveryKey, ses.Name)
			}
			return k, nil
		}
	}
	tags := r.Mail.Tags[ses.TagReminder]
	if len(tags) == 0 {
		return message.DeliveryKey{}, notOurs(msg, "no %s header and no %s tag: not an e-mail Nudge sent", ses.HeaderDeliveryKey, ses.TagReminder)
	}
	id, err := ses.TagValueDecode(tags[0])
	if err == nil {
		err = message.ValidReminderID(id)
	}
	if len(tags) != 1 || err != nil {
		return message.DeliveryKey{}, malformed(msg, "tag %s is not one reminder id encoded by ses.TagValue", ses.TagReminder)
	}
	return message.DeliveryKey{ReminderID: id, Channel: "email", Provider: ses.Name}, nil
}

// feedbackOf fills f from r's event object: the time, the id and the
// detail, from types, subtypes and status codes alone.
func feedbackOf(r record, f ledger.Feedback) (ledger.Feedback, error) {
	msg := r.Mail.MessageID
	at, feedbackID := r.Mail.Timestamp, ""
	missing := func() (ledger.Feedback, error) {
		return ledger.Feedback{}, malformed(msg, "eventType %s without its %s object", r.EventType, objectOf[r.EventType])
	}
	switch f.Kind {
	case ledger.FeedbackSentByProvider:
		if r.Send == nil {
			return missing()
		}
	case ledger.FeedbackDelivered:
		if r.Delivery == nil {
			return missing()
		}
		at, f.Detail = r.Delivery.Timestamp, smtpCode(r.Delivery.SMTPResponse)
	case ledger.FeedbackBounced:
		b := r.Bounce
		if b == nil {
			return missing()
		}
		at, feedbackID = b.Timestamp, b.FeedbackID
		f.Permanent = b.BounceType == "Permanent"
		f.Detail = word(b.BounceType) + "/" + word(b.BounceSubType)
		if len(b.BouncedRecipients) > 0 && statusCode.MatchString(b.BouncedRecipients[0].Status) {
			f.Detail += " " + b.BouncedRecipients[0].Status
		}
	case ledger.FeedbackComplained:
		c := r.Complaint
		if c == nil {
			return missing()
		}
		at, feedbackID, f.Detail = c.Timestamp, c.FeedbackID, word(c.ComplaintFeedbackType)
	case ledger.FeedbackRejected:
		if r.Reject == nil {
			return missing()
		}
		f.Detail = phrase(r.Reject.Reason)
	case ledger.FeedbackDelayed:
		dd := r.DeliveryDelay
		if dd == nil {
			return missing()
		}
		at, f.Detail = dd.Timestamp, word(dd.DelayType)
	case ledger.FeedbackRenderingFailed:
		if r.Failure == nil {
			return missing()
		}
		if name := word(r.Failure.TemplateName); name != "" {
			f.Detail = "template " + name
		}
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return ledger.Feedback{}, malformed(msg, "eventType %s: its timestamp is not an ISO 8601 time", r.EventType)
	}
	f.At = t.UTC()
	f.ID = feedbackID
	if !token.MatchString(f.ID) {
		// No feedbackId: the message, the event and its time name it.
		f.ID = msg + ":" + r.EventType + ":" + ledger.Format(f.At)
	}
	return f, nil
}

// objectOf is the object each eventType carries.
var objectOf = map[string]string{
	"Send": "send", "Delivery": "delivery", "Bounce": "bounce", "Complaint": "complaint", "Reject": "reject",
	"DeliveryDelay": "deliveryDelay", "Rendering Failure": "failure",
}

var (
	// token is an SES id: letters, digits and a few separators, no '@'.
	token = regexp.MustCompile(`^[A-Za-z0-9._:+=/-]{1,256}$`)
	// statusCode is an enhanced SMTP status code (RFC 3463).
	statusCode = regexp.MustCompile(`^[245]\.[0-9]{1,3}\.[0-9]{1,3}$`)
	// smtpReply is an SMTP reply's code and enhanced status code.
	smtpReply = regexp.MustCompile(`^([245][0-9][0-9])(?:[ -]([245]\.[0-9]{1,3}\.[0-9]{1,3}))?\b`)
	// wordChars is a type, a subtype, a template's name.
	wordChars = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	// phraseChars is a short reason of SES's own ("Bad content").
	phraseChars = regexp.MustCompile(`^[A-Za-z0-9 ,.()_-]{1,64}$`)
)

// word returns s if it is one word of SES's vocabulary, else "": a value
// that could hold anything else (an address) is dropped, not clipped.
func word(s string) string {
	if wordChars.MatchString(s) {
		return s
	}
	return ""
}

// phrase returns s if it is a short phrase without an address, else "".
func phrase(s string) string {
	if phraseChars.MatchString(s) {
		return s
	}
	return ""
}

// smtpCode returns an SMTP reply's codes ("250 2.6.0"), never its text,
// which may name the recipient.
func smtpCode(reply string) string {
	m := smtpReply.FindStringSubmatch(reply)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1] + " " + m[2])
}

// shown quotes a value of the event for an error: a name SES or
// EventBridge gives (a source, a detail-type, a configuration set), clipped;
// anything else, which could be an address, is not shown.
func shown(s string) string {
	if s == "" {
		return "(none)"
	}
	if phraseChars.MatchString(s) || token.MatchString(s) {
		return fmt.Sprintf("%q", text.Clip(s, 64))
	}
	return "(a value not shown)"
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return "empty"
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s is a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	}
	return "not decodable"
}
