package sesevents

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/nudgehq/nudge/pkg/clock"
)

// Source is the source of SES's events.
const Source = "aws.ses"

// The mailbox simulator's addresses.
const (
	Success         = "success@simulator.amazonses.com"
	Bounce          = "bounce@simulator.amazonses.com"
	OutOfOffice     = "ooto@simulator.amazonses.com"
	Complaint       = "complaint@simulator.amazonses.com"
	SuppressionList = "suppressionlist@simulator.amazonses.com"
)

// Detail-types of the events it puts.
const (
	DetailSent      = "Email Sent"
	DetailDelivered = "Email Delivered"
	DetailBounced   = "Email Bounced"
	DetailComplaint = "Email Complaint Received"
)

// PutAPI is the part of the EventBridge client the front uses.
type PutAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Config configures a Front.
type Config struct {
	// Target is the SES stand-in's URL. Required.
	Target string
	// Events puts the events on the local bus (an EventBridge client
	// pointed at it). Required.
	Events PutAPI
	// Delay is how long after the stand-in accepted an e-mail its events
	// are put. Default 100 ms.
	Delay time.Duration
	// AccountID is the sending account in the records. Default
	// 000000000000.
	AccountID string
	// Clock stamps the records and waits out Delay. Default clock.Real.
	Clock clock.Clock
	// Logger receives a line per event it could not put. Default: discard.
	Logger *slog.Logger
}

// Front is the SES stand-in with SES's event publishing: the consumers'
// SES endpoint.
type Front struct {
	cfg     Config
	srv     *http.Server
	url     string
	pending sync.WaitGroup
	mu      sync.Mutex
	stats   Stats
	closed  bool
}

// Stats is what a Front has done.
type Stats struct {
	// Accepted counts the e-mails the stand-in accepted in a
	// configuration set; Events the events put, by detail-type; Failed
	// the events the bus would not take (after putTries tries).
	Accepted int
	Events   map[string]int
	Failed   int
}

// Start starts a front on a free loopback port.
func Start(cfg Config) (*Front, error) {
	target, err := url.Parse(cfg.Target)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("sesevents: target %q is not the SES stand-in's URL", cfg.Target)
	}
	if cfg.Events == nil {
		return nil, errors.New("sesevents: no EventBridge client to put the events with")
	}
	if cfg.Delay <= 0 {
		cfg.Delay = 100 * time.Millisecond
	}
	if cfg.AccountID == "" {
		cfg.AccountID = "000000000000"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Front{cfg: cfg, stats: Stats{Events: map[string]int{}}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = f.observe
	// A new connection per call: a kept-alive one the SES stand-in has
	// closed fails a POST the transport will not retry, and the proxy
	// would answer 502, a fault SES does not give (a chaos test met one).
	proxy.Transport = &http.Transport{DisableKeepAlives: true, Proxy: nil}
	// A client that gives up (the demo's hangs) cancels its request: the
	// proxy's line for it would break the progress lines.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.url = "http://" + ln.Addr().String()
	// The request's body is kept for observe, which sees the answer.
	keep := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// A client that gives up (a timeout) does not cancel the call to
		// the stand-in: SES that accepted a message publishes its events
		// whether or not its caller heard the answer. (The bare writer
		// hides its CloseNotify, by which the proxy would cancel it too.)
		proxy.ServeHTTP(struct{ http.ResponseWriter }{w}, r.WithContext(context.WithValue(context.WithoutCancel(r.Context()), bodyKey{}, body)))
	})
	f.srv = &http.Server{Handler: keep, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// URL is the front's base URL: give it to SES clients as their endpoint.
func (f *Front) URL() string { return f.url }

// Stats returns what the front has done so far.
func (f *Front) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Events = map[string]int{}
	for k, v := range f.stats.Events {
		s.Events[k] = v
	}
	return s
}

// Drain waits until the events of every e-mail accepted so far are put.
func (f *Front) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { f.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sesevents: events still to put: %w", ctx.Err())
	}
}

// Close stops the front, after putting the events still pending.
func (f *Front) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	_ = f.srv.Close()
	f.pending.Wait()
}

// bodyKey is the context key of the request's body.
type bodyKey struct{}

// sendEmail is the part of an SES v2 SendEmail request the records show.
type sendEmail struct {
	FromEmailAddress string
	Destination      struct{ ToAddresses []string }
	Content          struct {
		Template *struct {
			TemplateName string
			Headers      []struct{ Name, Value string }
		}
		Simple *struct {
			Headers []struct{ Name, Value string }
		}
	}
	EmailTags            []struct{ Name, Value string }
	ConfigurationSetName string
}

// observe sees every answer of the stand-in: a SendEmail it accepted, in a
// configuration set, has its events put.
func (f *Front) observe(resp *http.Response) error {
	req := resp.Request
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/v2/email/outbound-emails") || resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return err
	}
	var out struct{ MessageId string }
	var in sendEmail
	raw, _ := req.Context().Value(bodyKey{}).([]byte)
	if json.Unmarshal(body, &out) != nil || out.MessageId == "" {
		return nil
	}
	if json.Unmarshal(raw, &in) != nil || in.ConfigurationSetName == "" {
		return nil // no configuration set: SES publishes nothing
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.stats.Accepted++
	f.pending.Add(1)
	f.mu.Unlock()
	now := f.cfg.Clock.Now().UTC()
	go func() {
		defer f.pending.Done()
		<-f.cfg.Clock.After(f.cfg.Delay)
		f.publish(in, out.MessageId, now)
	}()
	return nil
}

// publish puts the events of an e-mail accepted at accepted with message
// id, in SES's order.
func (f *Front) publish(in sendEmail, id string, accepted time.Time) {
	mail := f.mail(in, id, accepted)
	to := ""
	if len(in.Destination.ToAddresses) > 0 {
		to = strings.ToLower(in.Destination.ToAddresses[0])
	}
	at := f.cfg.Clock.Now().UTC()
	stamp := at.Format("2006-01-02T15:04:05.000Z")
	type event struct {
		detailType string
		record     map[string]any
	}
	evs := []event{{DetailSent, map[string]any{"eventType": "Send", "mail": mail, "send": map[string]any{}}}}
	delivery := map[string]any{"timestamp": stamp, "processingTimeMillis": at.Sub(accepted).Milliseconds(), "recipients": in.Destination.ToAddresses,
		"smtpResponse": "250 2.6.0 Message received", "reportingMTA": "a8-70.smtp-out.amazonses.com"}
	bounce := func(sub, status, diag string) map[string]any {
		recipients := []map[string]any{}
		for _, a := range in.Destination.ToAddresses {
			recipients = append(recipients, map[string]any{"emailAddress": a, "action": "failed", "status": status, "diagnosticCode": diag})
		}
		return map[string]any{"eventType": "Bounce", "mail": mail, "bounce": map[string]any{"bounceType": "Permanent", "bounceSubType": sub,
			"bouncedRecipients": recipients, "timestamp": stamp, "feedbackId": feedbackID(), "reportingMTA": "dns; amazonses.com"}}
	}
	switch to {
	case Bounce:
		evs = append(evs, event{DetailBounced, bounce("General", "5.1.1", "smtp; 550 5.1.1 user unknown")})
	case SuppressionList:
		evs = append(evs, event{DetailBounced, bounce("OnAccountSuppressionList", "5.1.1", "Amazon SES has suppressed sending to this address because it is on the suppression list.")})
	case Complaint:
		recipients := []map[string]any{}
		for _, a := range in.Destination.ToAddresses {
			recipients = append(recipients, map[string]any{"emailAddress": a})
		}
		evs = append(evs, event{DetailDelivered, map[string]any{"eventType": "Delivery", "mail": mail, "delivery": delivery}},
			event{DetailComplaint, map[string]any{"eventType": "Complaint", "mail": mail, "complaint": map[string]any{"complainedRecipients": recipients,
				"timestamp": stamp, "feedbackId": feedbackID(), "userAgent": "Amazon SES Mailbox Simulator", "complaintFeedbackType": "abuse", "arrivalDate": stamp}}})
	default: // success@, ooto@ (its auto-reply is no event), any other address
		evs = append(evs, event{DetailDelivered, map[string]any{"eventType": "Delivery", "mail": mail, "delivery": delivery}})
	}
	for _, e := range evs {
		detail, _ := json.Marshal(e.record)
		entry := ebtypes.PutEventsRequestEntry{Source: aws.String(Source), DetailType: aws.String(e.detailType), Detail: aws.String(string(detail)),
			EventBusName: aws.String("default"), Time: aws.Time(at)}
		if err := f.put(entry); err != nil {
			f.cfg.Logger.Warn("an SES event was not put", "detailType", e.detailType, "messageId", id, "error", err.Error())
			f.mu.Lock()
			f.stats.Failed++
			f.mu.Unlock()
			continue
		}
		f.mu.Lock()
		f.stats.Events[e.detailType]++
		f.mu.Unlock()
	}
}

// putTries is how many times an event is put before the front gives it
// up: enough that the chaos run's injected bus faults (a few percent of
// entries and requests) never cost an event; SES's own delivery is best
// effort, but the local runs check every event arrived.
const putTries = 20

// put puts one entry, trying up to putTries times.
func (f *Front) put(entry ebtypes.PutEventsRequestEntry) error {
	var err error
	for range putTries {
		var out *eventbridge.PutEventsOutput
		out, err = f.cfg.Events.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{entry}})
		if err == nil && out.FailedEntryCount == 0 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%s: %s", aws.ToString(out.Entries[0].ErrorCode), aws.ToString(out.Entries[0].ErrorMessage))
		}
	}
	return err
}

// mail is the record's mail object: the message as SES saw it, its headers
// and its tags (SES's own and the message's).
func (f *Front) mail(in sendEmail, id string, at time.Time) map[string]any {
	headers := []map[string]string{}
	var hs []struct{ Name, Value string }
	if in.Content.Template != nil {
		hs = in.Content.Template.Headers
	} else if in.Content.Simple != nil {
		hs = in.Content.Simple.Headers
	}
	for _, h := range hs {
		headers = append(headers, map[string]string{"name": h.Name, "value": h.Value})
	}
	domain := in.FromEmailAddress[strings.LastIndex(in.FromEmailAddress, "@")+1:]
	tags := map[string][]string{"ses:configuration-set": {in.ConfigurationSetName}, "ses:operation": {"SendEmail"},
		"ses:from-domain": {domain}, "ses:source-ip": {"127.0.0.1"}}
	for _, t := range in.EmailTags {
		tags[t.Name] = append(tags[t.Name], t.Value)
	}
	m := map[string]any{"timestamp": at.Format("2006-01-02T15:04:05.000Z"), "source": in.FromEmailAddress, "sendingAccountId": f.cfg.AccountID,
		"messageId": id, "destination": in.Destination.ToAddresses, "headersTruncated": false, "headers": headers, "tags": tags}
	if in.Content.Template != nil {
		m["commonHeaders"] = map[string]any{"from": []string{in.FromEmailAddress}, "to": in.Destination.ToAddresses, "messageId": id}
	}
	return m
}

// feedbackID is a bounce's or complaint's feedbackId, random as SES's are.
func feedbackID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "-000000"
}
