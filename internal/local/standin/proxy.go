package standin

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
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
	read     float64 // DynamoDB read units consumed
	write    float64 // DynamoDB write units consumed
}

// dynamoOps are the DynamoDB operations that consume capacity: true for
// writes.
var dynamoOps = map[string]bool{
	"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
	"GetItem": false, "Query": false, "Scan": false, "BatchGetItem": false, "TransactGetItems": false,
}

// askCapacity adds ReturnConsumedCapacity=TOTAL to a DynamoDB request that
// does not ask for it, so the proxy can count capacity units. DynamoDB
// Local checks no signature; this is for the stand-in only.
func askCapacity(r *http.Request) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	var in map[string]json.RawMessage
	if err == nil && json.Unmarshal(body, &in) == nil {
		if _, set := in["ReturnConsumedCapacity"]; !set {
			in["ReturnConsumedCapacity"] = json.RawMessage(`"TOTAL"`)
			if b, err := json.Marshal(in); err == nil {
				body = b
			}
		}
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

// addUnits adds the capacity a DynamoDB response reports. A write refused
// by its condition is charged 1 write unit by DynamoDB (for items up to
// 1 KB), which DynamoDB Local does not report: it is counted here.
func (p *Proxy) addUnits(resp *http.Response, write bool) {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return
	}
	var out struct {
		Type             string          `json:"__type"`
		ConsumedCapacity json.RawMessage `json:"ConsumedCapacity"`
	}
	if json.Unmarshal(body, &out) != nil {
		return
	}
	var units float64
	var one struct{ CapacityUnits float64 }
	var many []struct{ CapacityUnits float64 }
	switch {
	case json.Unmarshal(out.ConsumedCapacity, &one) == nil:
		units = one.CapacityUnits
	case json.Unmarshal(out.ConsumedCapacity, &many) == nil:
		for _, c := range many {
			units += c.CapacityUnits
		}
	}
	if write && resp.StatusCode == http.StatusBadRequest && strings.Contains(out.Type, "ConditionalCheckFailed") {
		units = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if write {
		p.write += units
	} else {
		p.read += units
	}
}

// Units returns the DynamoDB capacity units the requests through the proxy
// consumed: read units, and write units including the due index's and the
// refused conditional writes'.
func (p *Proxy) Units() (read, write float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.read, p.write
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
		if _, ok := dynamoOps[op]; ok && strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_") {
			askCapacity(r)
		}
		rp.ServeHTTP(w, r)
	})}
	rp.ModifyResponse = func(resp *http.Response) error {
		op := resp.Request.Header.Get("X-Amz-Target")
		_, op, _ = strings.Cut(op, ".")
		if write, ok := dynamoOps[op]; ok {
			p.addUnits(resp, write)
		}
		return nil
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Transport is an HTTP transport for talking to the stand-ins. A Node
// server closes an idle keep-alive connection on its own timer (fauxqs
// 2.4.1 says 72 s in its Keep-Alive header; earlier versions closed after
// 5 s), and the SDK's default transport keeps idle connections 90 s: a
// request sent on one just as the server closes it can fail after the
// server took it, and a receive lost that way hides its messages for the
// visibility timeout. So idle connections are dropped after 4 s, before
// any server drops them.
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
