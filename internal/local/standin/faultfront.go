package standin

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Fault is an answer a FaultFront gives in place of the stand-in's: an AWS
// error in the request's protocol, a hang, or a drop after the stand-in
// handled the request.
type Fault struct {
	// Status and Code make an error answer (429 and
	// "TooManyRequestsException"); Message is its message.
	Status  int
	Code    string
	Message string
	// Hang holds the request until the client gives up; nothing reaches
	// the stand-in.
	Hang bool
	// Drop passes the request to the stand-in, which acts on it, then
	// closes the connection without an answer: the client cannot know
	// whether it was accepted.
	Drop bool
}

// FaultFront is an HTTP front for an AWS stand-in that answers some
// requests with the faults a real service gives and the stand-in cannot
// (throttling, a paused account, a rejected message), and passes the rest
// through. Decide sees each request's body and picks.
type FaultFront struct {
	// Endpoint is the front's base URL.
	Endpoint string
	// OnAnswer, if set, sees every request the stand-in answered (passed
	// through, or dropped after it acted) with the stand-in's status. Set
	// it before the first request.
	OnAnswer func(body []byte, status int)
	srv      *http.Server
	requests atomic.Int64
}

// Requests returns how many requests the front received.
func (f *FaultFront) Requests() int64 { return f.requests.Load() }

// NewFaultFront starts a front for target on a free loopback port. decide
// returns the fault for a request, or nil to pass it through.
func NewFaultFront(target string, decide func(r *http.Request, body []byte) *Fault) (*FaultFront, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = Transport()
	// A caller killed mid-request (the chaos run does it) is no news; a
	// stand-in that does not answer is.
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if !errors.Is(err, context.Canceled) {
			log.Printf("standin: the front for %s could not reach it: %v", target, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &FaultFront{Endpoint: "http://" + ln.Addr().String()}
	f.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.requests.Add(1)
		r.Body = io.NopCloser(bytes.NewReader(body))
		fault := decide(r, body)
		switch {
		case fault == nil:
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			proxy.ServeHTTP(sw, r)
			if f.OnAnswer != nil {
				f.OnAnswer(body, sw.status)
			}
		case fault.Hang:
			<-r.Context().Done()
		case fault.Drop:
			rec := &discard{header: http.Header{}, status: http.StatusOK}
			proxy.ServeHTTP(rec, r)
			if f.OnAnswer != nil {
				f.OnAnswer(body, rec.status)
			}
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
				}
			}
		default:
			writeAWSError(w, r, fault)
		}
	})}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// Close stops the front.
func (f *FaultFront) Close() error { return f.srv.Close() }

// discard is a ResponseWriter that keeps the status alone.
type discard struct {
	header http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.status = code }

// statusWriter remembers the status it passes on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// writeAWSError answers in the request's protocol: the query protocol's
// XML for a form-encoded request (SNS), else REST-JSON's header and body
// (SES v2).
func writeAWSError(w http.ResponseWriter, r *http.Request, f *Fault) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		var b bytes.Buffer
		b.WriteString(`<ErrorResponse><Error><Type>Sender</Type><Code>`)
		_ = xml.EscapeText(&b, []byte(f.Code))
		b.WriteString(`</Code><Message>`)
		_ = xml.EscapeText(&b, []byte(f.Message))
		b.WriteString(`</Message></Error><RequestId>fault-front</RequestId></ErrorResponse>`)
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(f.Status)
		_, _ = w.Write(b.Bytes())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", f.Code)
	w.WriteHeader(f.Status)
	_, _ = fmt.Fprintf(w, `{"message":%q}`, f.Message)
}
