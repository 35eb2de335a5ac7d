package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/provider"
)

// captured is one request as the receiver got it.
type captured struct {
	header http.Header
	body   []byte
}

// capture sends req through a Webhook on clk and returns what arrived.
func capture(t *testing.T, clk clock.Clock) captured {
	t.Helper()
	got := make(chan captured, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- captured{r.Header.Clone(), b}
		w.Write([]byte(`{"id":"r-1"}`))
	}))
	defer srv.Close()
	w, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Send(context.Background(), req, req.DeliveryKey); err != nil {
		t.Fatal(err)
	}
	return <-got
}

// TestVerifierRefusesReplaysAndForgeries: the signature covers the
// timestamp, the idempotency key and the body; a request is accepted within
// the tolerance of its timestamp, either way, and refused outside it, with
// its key or body changed, signed with another secret, or signed only with
// the retired v1 scheme.
func TestVerifierRefusesReplaysAndForgeries(t *testing.T) {
	t.Parallel()
	sent := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	c := capture(t, clock.NewFake(sent))
	if got := c.header.Get(webhook.HeaderSignature); got != webhook.Sign(secret, strconv.FormatInt(sent.Unix(), 10), req.DeliveryKey, c.body) || got[:3] != "v2=" {
		t.Fatalf("the webhook sent %s = %q", webhook.HeaderSignature, got)
	}
	at := func(d time.Duration) webhook.Verifier {
		return webhook.Verifier{Secrets: [][]byte{secret}, Clock: clock.NewFake(sent.Add(d))}
	}
	with := func(name, value string) http.Header {
		h := c.header.Clone()
		h.Set(name, value)
		return h
	}
	for _, tc := range []struct {
		name   string
		v      webhook.Verifier
		header http.Header
		body   []byte
		want   error
	}{
		{"as sent", at(0), c.header, c.body, nil},
		{"5 min later", at(5 * time.Minute), c.header, c.body, nil},
		{"5 min early (a receiver's clock behind)", at(-5 * time.Minute), c.header, c.body, nil},
		{"replayed 5 min 1 s later", at(5*time.Minute + time.Second), c.header, c.body, webhook.ErrStale},
		{"replayed a day later", at(24 * time.Hour), c.header, c.body, webhook.ErrStale},
		{"from the future", at(-10 * time.Minute), c.header, c.body, webhook.ErrStale},
		{"replayed under another key", at(0), with(webhook.HeaderIdempotencyKey, "rem-2:email:webhook"), c.body, webhook.ErrBadSignature},
		{"timestamp moved forward", at(0), with(webhook.HeaderTimestamp, strconv.FormatInt(sent.Unix()+60, 10)), c.body, webhook.ErrBadSignature},
		{"body changed", at(0), c.header, []byte(strings.Replace(string(c.body), `"rem-1"`, `"rem-2"`, 1)), webhook.ErrBadSignature},
		{"another secret", webhook.Verifier{Secrets: [][]byte{[]byte("another-secret-0123456789")}, Clock: clock.NewFake(sent)}, c.header, c.body, webhook.ErrBadSignature},
		{"v2 beside a newer scheme", at(0), with(webhook.HeaderSignature, c.header.Get(webhook.HeaderSignature)+", v3=abcd"), c.body, nil},
		{"v2 after another v2 entry", at(0), with(webhook.HeaderSignature, "v2=00ff,"+c.header.Get(webhook.HeaderSignature)), c.body, nil},
		{"v2 before another v2 entry", at(0), with(webhook.HeaderSignature, c.header.Get(webhook.HeaderSignature)+",v2=00ff"), c.body, nil},
		{"v1 only", at(0), with(webhook.HeaderSignature, "v1=0123abcd"), c.body, webhook.ErrNoSignature},
		{"no key", at(0), with(webhook.HeaderIdempotencyKey, ""), c.body, webhook.ErrNoSignature},
		{"no timestamp", at(0), with(webhook.HeaderTimestamp, ""), c.body, webhook.ErrNoSignature},
		{"timestamp not a number", at(0), with(webhook.HeaderTimestamp, "yesterday"), c.body, webhook.ErrNoSignature},
	} {
		err := tc.v.Verify(tc.header, tc.body)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := (webhook.Verifier{Secrets: [][]byte{secret}, Tolerance: -time.Minute}).Verify(c.header, c.body); err == nil || !strings.Contains(err.Error(), "Tolerance") {
		t.Errorf("a negative tolerance: %v, want it refused by name", err)
	}
	// During a rotation the receiver accepts the previous secret too.
	rotating := webhook.Verifier{Secrets: [][]byte{[]byte("the-new-secret-0123456789"), secret}, Clock: clock.NewFake(sent)}
	if err := rotating.Verify(c.header, c.body); err != nil {
		t.Errorf("the previous secret during a rotation: %v", err)
	}
}

// ExampleVerifier is a receiver: verify the request, then deduplicate by
// its idempotency key, then act. Nudge sends the same delivery twice here
// (a retry after a lost answer); the receiver sends it once.
func ExampleVerifier() {
	secret := []byte("the-shared-secret-from-secrets-manager")
	verifier := webhook.Verifier{Secrets: [][]byte{secret}}
	seen := map[string]string{} // idempotency key → receipt; in production a table whose items outlive Nudge's retries
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := verifier.Verify(r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized) // a 4xx: Nudge dead-letters it for review
			return
		}
		key := r.Header.Get(webhook.HeaderIdempotencyKey)
		receipt, ok := seen[key]
		if !ok {
			receipt = fmt.Sprintf("msg-%d", len(seen)+1) // send the reminder here, once
			seen[key] = receipt
		}
		fmt.Fprintf(w, `{"id":%q}`, receipt)
	}))
	defer receiver.Close()

	hook, _ := webhook.New(webhook.Config{URL: receiver.URL, Secret: secret})
	delivery := provider.Request{DeliveryKey: "rem-184:email:webhook", ReminderID: "rem-184", Channel: "email"}
	for range 2 {
		r, err := hook.Send(context.Background(), delivery, delivery.DeliveryKey)
		fmt.Println(r.ID, err)
	}
	forged, _ := webhook.New(webhook.Config{URL: receiver.URL, Secret: []byte("not-the-shared-secret")})
	_, err := forged.Send(context.Background(), delivery, delivery.DeliveryKey)
	fmt.Println(err)
	// Output:
	// msg-1 <nil>
	// msg-1 <nil>
	// provider answered 401
}
