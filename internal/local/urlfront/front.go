package urlfront

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/local/standin"
)

// Invoker invokes the function synchronously with payload and returns its
// output. A function error may come back either as an error or as the
// output ({"errorMessage": …, "errorType": …}). ctx carries the request's
// id (standin.WithRequestID), the invocation's id in Lambda.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// A function under the runtime interface emulator is an Invoker.
var _ Invoker = (*standin.Lambda)(nil)

const (
	// MaxPayload is Lambda's synchronous invocation payload limit (6 MB),
	// which the event, with its body, must fit in.
	MaxPayload = 6 << 20
	// DefaultTimeout is the function's timeout when Config leaves it 0.
	DefaultTimeout = 10 * time.Second
	// DefaultRegion and DefaultAccountID are the function URL's region
	// (which requests must be signed for) and the owner's account, by
	// default the local clients' region and an example account.
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "123456789012"
	// invokeMargin is how long past the function's timeout an invocation
	// may take before the front gives up on it: the emulator ends a
	// function at its timeout and answers for it first.
	invokeMargin = time.Second
	// shutdownWait bounds how long Close waits for requests in flight.
	shutdownWait = 5 * time.Second
)

// Config configures a Front.
type Config struct {
	// Invokers are the function's instances, each sent one request at a
	// time; their number is the function's concurrency. At least one.
	Invokers []Invoker
	// Log receives one access line per request. Default io.Discard.
	Log io.Writer
	// Timeout is the function's timeout: how long a request waits for a
	// free instance before it is answered 429, and (plus a margin) how long
	// an invocation may take. Default DefaultTimeout.
	Timeout time.Duration
	// Region is the function URL's region, which requests must be signed
	// for. Default DefaultRegion.
	Region string
	// AccountID is the function owner's account, in the event's
	// requestContext and the caller's identity. Default DefaultAccountID.
	AccountID string
}

// Front is a running function URL.
type Front struct {
	cfg    Config
	url    string
	urlID  string
	srv    *http.Server
	idle   chan int // indexes of the Invokers not serving a request
	base   context.Context
	cancel context.CancelFunc
	logMu  sync.Mutex
	once   sync.Once
}

var accountID = regexp.MustCompile(`^[0-9]{12}$`)

// Start checks cfg, applies its defaults and serves on a free loopback
// port until Close.
func Start(cfg Config) (*Front, error) {
	if len(cfg.Invokers) == 0 {
		return nil, errors.New("urlfront: Config.Invokers is empty; give at least one (one per function instance, their number is the concurrency)")
	}
	for i, inv := range cfg.Invokers {
		if inv == nil {
			return nil, fmt.Errorf("urlfront: Config.Invokers[%d] is nil; give a started function (a *standin.Lambda)", i)
		}
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("urlfront: Config.Timeout %v is negative; give the function's timeout, or 0 for %v", cfg.Timeout, DefaultTimeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.AccountID == "" {
		cfg.AccountID = DefaultAccountID
	}
	if !accountID.MatchString(cfg.AccountID) {
		return nil, fmt.Errorf("urlfront: Config.AccountID %q is not 12 digits; give an account id such as %s", cfg.AccountID, DefaultAccountID)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("urlfront: listen on a loopback port: %w", err)
	}
	f := &Front{cfg: cfg, url: "http://" + ln.Addr().String(), urlID: newURLID(), idle: make(chan int, len(cfg.Invokers))}
	for i := range cfg.Invokers {
		f.idle <- i
	}
	f.base, f.cancel = context.WithCancel(context.Background())
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// URL is the function URL's base, without a trailing slash
// (http://127.0.0.1:port); append the request's path to it.
func (f *Front) URL() string { return f.url }

// Close stops accepting requests, ends the invocations in flight (their
// requests are answered 502) and waits, up to 5 s, for their answers.
func (f *Front) Close() {
	f.once.Do(func() {
		f.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
		defer cancel()
		_ = f.srv.Shutdown(ctx)
		_ = f.srv.Close()
	})
}

// ServeHTTP serves one request as a function URL does.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := newRequestID()
	line := accessLine{method: r.Method, path: rawPath(r), instance: -1, id: id}
	defer func() { f.log(line, time.Since(start)) }()
	w.Header().Set("X-Amzn-Requestid", id)

	key, err := credential(r.Header.Get("Authorization"), f.cfg.Region)
	if err != nil {
		line.status = message(w, http.StatusForbidden, "Forbidden")
		line.note = err.Error() + " (locally only the presence of a SigV4 header is checked, never the signature)"
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayload+1))
	if err != nil {
		line.status = message(w, http.StatusBadRequest, "Bad Request")
		line.note = "reading the body: " + err.Error()
		return
	}
	if len(body) > MaxPayload {
		line.status = message(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		line.note = fmt.Sprintf("body over %d bytes, Lambda's synchronous payload limit", MaxPayload)
		return
	}
	payload, err := json.Marshal(wrap(f.event(r, body, key, id, start)))
	if err != nil {
		line.status = message(w, http.StatusInternalServerError, "Internal Server Error")
		line.note = "encoding the event: " + err.Error()
		return
	}
	if len(payload) > MaxPayload {
		line.status = message(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		line.note = fmt.Sprintf("event of %d bytes is over %d, Lambda's synchronous payload limit", len(payload), MaxPayload)
		return
	}

	wait := time.NewTimer(f.cfg.Timeout)
	defer wait.Stop()
	var i int
	select {
	case i = <-f.idle:
	case <-wait.C:
		line.status = message(w, http.StatusTooManyRequests, "Rate Exceeded.")
		line.note = fmt.Sprintf("all %d instances busy for %v (the function's concurrency); start more instances", len(f.cfg.Invokers), f.cfg.Timeout)
		return
	case <-r.Context().Done():
		line.status, line.note = 499, "the client went away while waiting for a free instance"
		return
	case <-f.base.Done():
		line.status = message(w, http.StatusServiceUnavailable, "Service Unavailable")
		line.note = "closing"
		return
	}
	line.instance = i
	// The invocation runs to its end even if the client goes away, as in
	// Lambda; only Close ends it early.
	ictx, cancel := context.WithTimeout(standin.WithRequestID(f.base, id), f.cfg.Timeout+invokeMargin)
	out, err := f.cfg.Invokers[i].Invoke(ictx, payload)
	cancel()
	f.idle <- i
	line.status, line.note = answer(w, out, err)
}

// wrap adds to the event what events.LambdaFunctionURLRequest has no field
// for and a function URL sends: routeKey and stage, placeholders "$default".
func wrap(ev events.LambdaFunctionURLRequest) any {
	type requestContext struct {
		events.LambdaFunctionURLRequestContext
		RouteKey string `json:"routeKey"`
		Stage    string `json:"stage"`
	}
	type event struct {
		events.LambdaFunctionURLRequest
		RouteKey       string         `json:"routeKey"`
		RequestContext requestContext `json:"requestContext"` // hides the embedded one
	}
	return event{LambdaFunctionURLRequest: ev, RouteKey: "$default",
		RequestContext: requestContext{LambdaFunctionURLRequestContext: ev.RequestContext, RouteKey: "$default", Stage: "$default"}}
}

// event builds the payload format 2.0 event of a request.
func (f *Front) event(r *http.Request, body []byte, accessKey, id string, at time.Time) events.LambdaFunctionURLRequest {
	sourceIP, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		sourceIP = r.RemoteAddr
	}
	headers := map[string]string{}
	var cookies []string
	for name, values := range r.Header {
		name = strings.ToLower(name)
		if name == "cookie" { // cookies go in their own field
			for _, v := range values {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[name] = strings.Join(values, ",")
	}
	headers["host"] = r.Host
	if xff := headers["x-forwarded-for"]; xff != "" {
		headers["x-forwarded-for"] = xff + "," + sourceIP
	} else {
		headers["x-forwarded-for"] = sourceIP
	}
	headers["x-forwarded-proto"] = "http"
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(la.String()); err == nil {
			headers["x-forwarded-port"] = port
		}
	}
	if headers["x-amzn-trace-id"] == "" {
		headers["x-amzn-trace-id"] = fmt.Sprintf("Root=1-%08x-%s", at.Unix(), randomHex(12))
	}
	var query map[string]string
	if r.URL.RawQuery != "" {
		values, _ := url.ParseQuery(r.URL.RawQuery) // what parses, as Lambda keeps what it can
		query = make(map[string]string, len(values))
		for k, vs := range values {
			query[k] = strings.Join(vs, ",")
		}
	}
	ev := events.LambdaFunctionURLRequest{
		Version:               "2.0",
		RawPath:               rawPath(r),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    f.cfg.AccountID,
			RequestID:    id,
			APIID:        f.urlID,
			DomainName:   r.Host,
			DomainPrefix: f.urlID,
			Time:         at.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    at.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: sourceIP, UserAgent: r.UserAgent(),
			},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{
				IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
					AccessKey: accessKey,
					AccountID: f.cfg.AccountID,
					CallerID:  callerID(accessKey),
					UserARN:   "arn:aws:iam::" + f.cfg.AccountID + ":user/local",
					UserID:    callerID(accessKey),
				},
			},
		},
	}
	if len(body) > 0 {
		if textLike(r.Header.Get("Content-Type")) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

// rawPath is the request's path as sent, still escaped.
func rawPath(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		p, _, _ := strings.Cut(r.RequestURI, "?")
		return p
	}
	return r.URL.EscapedPath()
}

// textLike reports whether a body of this content type is passed as text;
// anything else (no content type included) is base64-encoded.
func textLike(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", mt == "application/xml", mt == "application/x-www-form-urlencoded",
		strings.HasPrefix(mt, "application/") && (strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")):
		return true
	}
	return false
}

// credential returns the access key of a SigV4 Authorization header, or
// why a function URL with AWS_IAM would refuse the request. The signature
// itself is not checked.
func credential(h, region string) (string, error) {
	if h == "" {
		return "", errors.New("no Authorization header: a function URL with auth type AWS_IAM refuses unsigned requests; sign with SigV4 for service lambda, region " + region)
	}
	alg, params, _ := strings.Cut(h, " ")
	if alg != "AWS4-HMAC-SHA256" {
		return "", fmt.Errorf("authorization scheme %q is not AWS4-HMAC-SHA256; sign with SigV4 for service lambda, region %s", alg, region)
	}
	fields := map[string]string{}
	for _, p := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] == "" || scope[4] != "aws4_request" {
		return "", fmt.Errorf("credential %q is not ACCESSKEY/date/region/service/aws4_request", fields["Credential"])
	}
	if fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return "", errors.New("the Authorization header has no SignedHeaders or no Signature")
	}
	if scope[3] != "lambda" {
		return "", fmt.Errorf("signed for service %q; a function URL takes service lambda", scope[3])
	}
	if scope[2] != region {
		return "", fmt.Errorf("signed for region %q; this function URL is in %s", scope[2], region)
	}
	return scope[0], nil
}

// answer writes the HTTP response for the function's output, as a function
// URL does, and returns its status and, for a failure, why.
func answer(w http.ResponseWriter, out []byte, err error) (int, string) {
	if err != nil {
		return message(w, http.StatusBadGateway, "Internal Server Error"), "invocation failed: " + err.Error()
	}
	if !json.Valid(out) {
		return message(w, http.StatusBadGateway, "Internal Server Error"), fmt.Sprintf("the function's output is not JSON: %.200q", out)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(out, &obj) != nil { // a string, number, array or null
		return plain(w, out), ""
	}
	if kind, ok := functionError(out, obj); ok {
		return message(w, http.StatusBadGateway, "Internal Server Error"), "function error: " + kind
	}
	if _, ok := obj["statusCode"]; !ok {
		return plain(w, out), ""
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return message(w, http.StatusBadGateway, "Internal Server Error"), "malformed response: " + err.Error()
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		return message(w, http.StatusBadGateway, "Internal Server Error"), fmt.Sprintf("malformed response: statusCode %d", resp.StatusCode)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return message(w, http.StatusBadGateway, "Internal Server Error"), "malformed response: isBase64Encoded, but the body is not base64: " + err.Error()
		}
	}
	h := w.Header()
	for k, v := range resp.Headers {
		switch strings.ToLower(k) {
		case "content-length", "transfer-encoding", "connection": // the front's to set
			continue
		}
		h.Set(k, v)
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	if h.Get("Content-Type") == "" && len(body) > 0 {
		h.Set("Content-Type", "application/json") // rather than Go's sniffing
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return resp.StatusCode, ""
}

// functionError reports whether an output is a function error, as the
// runtime reports one (errorMessage, errorType, maybe stackTrace), and
// names it.
func functionError(out []byte, obj map[string]json.RawMessage) (string, bool) {
	_, typ := obj["errorType"]
	_, msg := obj["errorMessage"]
	if !typ && !msg {
		return "", false
	}
	for k := range obj {
		switch k {
		case "errorType", "errorMessage", "stackTrace", "requestId", "cause":
		default:
			return "", false
		}
	}
	var e struct{ ErrorType, ErrorMessage string }
	_ = json.Unmarshal(out, &e)
	return fmt.Sprintf("%s: %.300s", e.ErrorType, e.ErrorMessage), true
}

// plain answers an output without a statusCode: 200, JSON, the output.
func plain(w http.ResponseWriter, out []byte) int {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return http.StatusOK
}

// message answers status with the function URL's own JSON error body.
func message(w http.ResponseWriter, status int, msg string) int {
	b, _ := json.Marshal(map[string]string{"Message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return status
}

// accessLine is what the access log says of one request.
type accessLine struct {
	method, path string
	status       int
	instance     int // the invoker's index; -1: none served it
	id, note     string
}

func (f *Front) log(l accessLine, took time.Duration) {
	inst := "-"
	if l.instance >= 0 {
		inst = strconv.Itoa(l.instance)
	}
	s := fmt.Sprintf("urlfront: %s %s %d %v invoker=%s request=%s", l.method, l.path, l.status, took.Round(10*time.Microsecond), inst, l.id)
	if l.note != "" {
		s += ": " + l.note
	}
	f.logMu.Lock()
	defer f.logMu.Unlock()
	_, _ = io.WriteString(f.cfg.Log, s+"\n")
}

// newRequestID returns a random UUID (version 4), as Lambda's request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newURLID returns a function URL id: 32 lower-case letters and digits.
func newURLID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:32]
}

// callerID is a stable IAM user id for an access key (AIDA…).
func callerID(accessKey string) string {
	sum := sha256.Sum256([]byte(accessKey))
	return "AIDA" + base32.StdEncoding.EncodeToString(sum[:])[:17]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
