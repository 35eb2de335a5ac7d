package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Header names of the webhook protocol.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderTimestamp      = "Nudge-Timestamp"
	HeaderSignature      = "Nudge-Signature"
)

// Config configures a Sender.
type Config struct {
	// URL receives the POSTs. It must be https, except on a loopback host.
	// Required.
	URL string
	// Secret signs each request. Required, at least 16 bytes.
	Secret []byte
	// Timeout bounds one request. Default 10s.
	Timeout time.Duration
	// MaxResponseBytes caps how much of a response is read. Default 64 KiB.
	MaxResponseBytes int64
	// Client sends the requests. Default: a client with the timeout that
	// keeps up to 64 idle connections to the provider. Whatever the client,
	// redirects are never followed (see Send).
	Client *http.Client
	// Clock tells the time for signatures and Retry-After dates. Default
	// clock.Real.
	Clock clock.Clock
}

// Sender sends deliveries as signed JSON POSTs. The receiver must verify
// the signature and the timestamp's age, and deduplicate by the
// Idempotency-Key header (Verifier; the scheme is SignatureScheme's).
//
// Its errors never carry the URL beyond its scheme and host: a URL may hold
// a token in its path or query, and errors reach the ledger, the DLQ and the
// logs.
type Sender struct {
	cfg Config
	// redacted is the URL as errors show it.
	redacted string
}

// New validates cfg and applies its defaults.
func New(cfg Config) (*Sender, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return nil, errors.New("webhook: the URL is not an absolute URL; set NUDGE_WEBHOOK_URL to https://host/path")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return nil, fmt.Errorf("webhook: URL %s must use https (plain http is allowed only to a loopback host)", Redact(u))
	}
	if len(cfg.Secret) < 16 {
		return nil, errors.New("webhook: signing secret is missing or shorter than 16 bytes; set the provider secret")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = 64 << 10
	}
	if cfg.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64 // a batch sends in parallel to one host
		cfg.Client = &http.Client{Timeout: cfg.Timeout, Transport: t}
	}
	// A copy, so that the caller's client keeps its own policy.
	c := *cfg.Client
	c.CheckRedirect = refuseRedirect
	cfg.Client = &c
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Sender{cfg: cfg, redacted: Redact(u)}, nil
}

// Redact returns u as errors and logs may show it: its scheme and host, and
// "/…" if it has more. A webhook URL's path or query may hold a token.
func Redact(u *url.URL) string {
	s := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		s += "/…"
	}
	return s
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuseRedirect makes the client return a 3xx answer as it is. Following
// it would turn the signed POST into a GET (301, 302, 303) whose 2xx would
// be recorded as a send the provider never received, or re-send the signed
// body and its headers to wherever Location points (307, 308).
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// RedirectError is a provider's 3xx answer: the configured URL is not the
// endpoint. It is permanent, of class config: the operator fixes the URL and
// redrives. It names the target's host only, never its path or query,
// which may hold a token.
type RedirectError struct {
	// Code is the HTTP status.
	Code int
	// Host is the Location header's host, or "" if it had none.
	Host string
}

func (e *RedirectError) Error() string {
	to := "without a Location"
	if e.Host != "" {
		to = "to host " + e.Host
	}
	return fmt.Sprintf("provider answered %d, a redirect %s; redirects are not followed: set NUDGE_WEBHOOK_URL to the endpoint itself, then redrive", e.Code, to)
}

// redirectHost returns the host a Location header points to, relative to
// the request's URL; "" if there is none or it cannot be read.
func redirectHost(base *url.URL, location string) string {
	if location == "" {
		return ""
	}
	u, err := base.Parse(location)
	if err != nil {
		return "(unreadable)"
	}
	return u.Host
}

// Send POSTs req. A failure before the request was fully written is a
// plain retry; after it, the provider may have accepted, so it is
// ambiguous. A non-2xx answer is a *StatusError, except a redirect (3xx),
// which is a permanent *RedirectError of class config and is not followed.
func (w *Sender) Send(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return provider.Receipt{}, failure.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout) // wall clock: a limit on a real request
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return provider.Receipt{}, failure.Permanent(err)
	}
	ts := strconv.FormatInt(w.cfg.Clock.Now().Unix(), 10)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(HeaderIdempotencyKey, key)
	hreq.Header.Set(HeaderTimestamp, ts)
	hreq.Header.Set(HeaderSignature, Sign(w.cfg.Secret, ts, key, body))
	resp, err := w.cfg.Client.Do(hreq)
	if err != nil {
		err = fmt.Errorf("webhook: %w", w.redact(err))
		if wrote.Load() {
			return provider.Receipt{}, failure.Ambiguous(failure.WithClass(err, classOfTransport(err)))
		}
		return provider.Receipt{}, failure.WithClass(err, classOfTransport(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, w.cfg.MaxResponseBytes))
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		redirect := &RedirectError{Code: resp.StatusCode, Host: redirectHost(hreq.URL, resp.Header.Get("Location"))}
		return provider.Receipt{}, failure.WithClass(failure.Permanent(redirect), failure.ClassConfig)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return provider.Receipt{}, &provider.StatusError{Code: resp.StatusCode, After: provider.ParseRetryAfter(resp.Header.Get("Retry-After"), w.cfg.Clock.Now())}
	}
	if err != nil {
		// Accepted, but the answer was cut: the send happened.
		return provider.Receipt{}, nil
	}
	var ack struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &ack) // a receipt id is optional
	return provider.Receipt{ID: ack.ID}, nil
}

// redact replaces the URL a transport error carries (*url.Error prints it
// whole) with the redacted one.
func (w *Sender) redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: w.redacted, Err: ue.Err}
	}
	return err
}

func classOfTransport(err error) failure.Class {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return failure.ClassTimeout
	}
	return failure.ClassNetwork
}
