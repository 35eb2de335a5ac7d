package intake

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

type ctxKey int

const (
	callerKey ctxKey = iota
	requestIDKey
	callerARNKey
)

// Caller is the caller's identity as the function URL authenticated it
// (its IAM role or user, as principal records it: an assumed role without
// its session name, an e-mail-like name masked), or "unknown" outside a
// function URL. It is what the request's log line names, and what the
// reminders the caller creates record as their creator.
func Caller(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey).(string); ok && c != "" {
		return c
	}
	return "unknown"
}

// callerARN is the caller's role or user ARN unmasked (an assumed role's
// without its session name), for matching the full-access principals
// only: it is never logged or stored. Outside a function URL, Caller.
func callerARN(ctx context.Context) string {
	if c, ok := ctx.Value(callerARNKey).(string); ok && c != "" {
		return c
	}
	return Caller(ctx)
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// WithCaller returns ctx carrying the caller's identity and the request's
// id, as FunctionURL sets them.
func WithCaller(ctx context.Context, caller, requestID string) context.Context {
	return context.WithValue(context.WithValue(ctx, callerKey, caller), requestIDKey, requestID)
}

// FunctionURL adapts h to a Lambda function URL (payload format 2.0): each
// event becomes an http.Request whose context carries the invocation's
// deadline, the caller's IAM identity and the request's id, and h's answer
// becomes the response. A request the event cannot express is answered
// 400; nothing here fails the invocation, which the caller would see as a
// bare 502.
func FunctionURL(h http.Handler, log *slog.Logger) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		caller, arn := "", ""
		if a := ev.RequestContext.Authorizer; a != nil && a.IAM != nil {
			arn = withoutSession(a.IAM.UserARN)
			caller = principal(a.IAM.UserARN, a.IAM.UserID)
			if caller == "" {
				caller = a.IAM.AccountID
			}
		}
		ctx = context.WithValue(WithCaller(ctx, caller, ev.RequestContext.RequestID), callerARNKey, arn)
		req, err := toRequest(ctx, ev)
		if err != nil {
			log.Warn("intake: unreadable event", "error", err.Error(), "requestId", ev.RequestContext.RequestID)
			return problemResponse(&Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Title: "Bad Request", Detail: err.Error(),
				Instance: ev.RequestContext.RequestID, Fix: "send a well-formed request"}), nil
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := toResponse(rec)
		if req.Method == http.MethodHead {
			res.Body = ""
		}
		return res, nil
	}
}

// toRequest builds the http.Request a function URL event describes.
func toRequest(ctx context.Context, ev events.LambdaFunctionURLRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("the body is not base64 as the event says: %v", err)
		}
		body = b
	}
	target := ev.RawPath
	if target == "" {
		target = "/"
	}
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, fmt.Errorf("the path %q is not a URL path: %v", clip(target), err)
	}
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		return nil, fmt.Errorf("the event has no HTTP method")
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	req.Host = ev.RequestContext.DomainName
	req.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	req.ContentLength = int64(len(body))
	return req, nil
}

func toResponse(rec *httptest.ResponseRecorder) events.LambdaFunctionURLResponse {
	res := events.LambdaFunctionURLResponse{StatusCode: rec.Code, Headers: map[string]string{}, Body: rec.Body.String()}
	for k, vs := range rec.Header() {
		if strings.EqualFold(k, "Set-Cookie") {
			res.Cookies = append(res.Cookies, vs...)
			continue
		}
		res.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	return res
}

func problemResponse(p *Problem) events.LambdaFunctionURLResponse {
	rec := httptest.NewRecorder()
	writeJSONAs(rec, p.Status, "application/problem+json", p)
	return toResponse(rec)
}

// withoutSession is arn without an assumed role's session name.
func withoutSession(arn string) string {
	if rest, ok := strings.CutPrefix(arn, "arn:"); ok {
		if i := strings.Index(rest, ":assumed-role/"); i >= 0 {
			role := rest[i+len(":assumed-role/"):]
			if j := strings.IndexByte(role, '/'); j >= 0 {
				return "arn:" + rest[:i] + ":assumed-role/" + role[:j]
			}
		}
	}
	return arn
}
