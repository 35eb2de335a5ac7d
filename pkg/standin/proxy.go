package standin

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// Proxy forwards requests to a stand-in and counts them by API operation
// (the X-Amz-Target of the JSON protocol both DynamoDB and SQS speak), so a
// local run can count the AWS requests each caller makes.
type Proxy struct {
	// Endpoint is the proxy's base URL: give it to the caller as its
	// AWS_ENDPOINT_URL_*.
	Endpoint string
	srv      *http.Server
	mu       sync.Mutex
	counts   map[string]int64
}

// NewProxy starts a counting proxy to target on a free loopback port.
func NewProxy(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Endpoint: "http://" + ln.Addr().String(), counts: map[string]int64{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = Transport()
	// A caller killed mid-request (the chaos run does it) is no news.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target")
		if _, after, ok := strings.Cut(op, "."); ok {
			op = after
		}
		if op == "" {
			op = "other"
		}
		p.mu.Lock()
		p.counts[op]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Transport is an HTTP transport for talking to the stand-ins. fauxqs (a
// Node server) closes a keep-alive connection after 5 s idle; a request
// sent on one just as it closes can fail after the server took it, and a
// receive lost that way hides its messages for the visibility timeout. So
// idle connections are dropped after 4 s, before the server drops them.
func Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	KeepIdleShort(t)
	return t
}

// KeepIdleShort sets t to drop idle connections before fauxqs does; see
// Transport. It fits the AWS SDK's BuildableClient.WithTransportOptions.
func KeepIdleShort(t *http.Transport) {
	t.IdleConnTimeout = 4 * time.Second
	t.MaxIdleConnsPerHost = 32
}

// Counts returns the requests so far by operation.
func (p *Proxy) Counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Total returns the requests so far.
func (p *Proxy) Total() int64 {
	var n int64
	for _, v := range p.Counts() {
		n += v
	}
	return n
}

// Operations returns the operations seen, sorted.
func (p *Proxy) Operations() []string {
	c := p.Counts()
	ops := make([]string, 0, len(c))
	for k := range c {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	return ops
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }
