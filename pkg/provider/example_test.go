package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// A Provider sends one delivery; provider.Func makes one of a function.
// This one posts the request (references only: the JSON form leaves the
// address and the template data out) to an SMS gateway, with the
// delivery key as its idempotency key, and answers a refusal as a
// *provider.StatusError carrying the gateway's Retry-After, which the
// consumer's classifiers read (failure.HTTPStatus, one link of
// awsfailure.Default): a 429 is retried after the delay the gateway asked
// for.
func ExampleFunc() {
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		},
		func(w http.ResponseWriter) { fmt.Fprint(w, `{"id":"sms-5521"}`) },
	}
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answers[0](w)
		answers = answers[1:]
	}))
	defer gateway.Close()

	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) // clock.Real{} in production
	var sms provider.Provider = provider.Func(func(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
		body, err := json.Marshal(req)
		if err != nil {
			return provider.Receipt{}, err
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, gateway.URL, bytes.NewReader(body))
		if err != nil {
			return provider.Receipt{}, err
		}
		hr.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(hr)
		if err != nil {
			return provider.Receipt{}, err
		}
		defer res.Body.Close()
		if res.StatusCode/100 != 2 {
			return provider.Receipt{}, &provider.StatusError{Code: res.StatusCode, After: provider.ParseRetryAfter(res.Header.Get("Retry-After"), clk.Now())}
		}
		var ack struct{ ID string }
		if err := json.NewDecoder(res.Body).Decode(&ack); err != nil {
			return provider.Receipt{}, err
		}
		return provider.Receipt{ID: ack.ID}, nil
	})

	req := provider.Request{DeliveryKey: "rem-184:sms:gateway", ReminderID: "rem-184", Channel: "sms", RecipientRef: "contact-2", TemplateRef: "renewal"}
	for range 2 {
		receipt, err := sms.Send(context.Background(), req, req.DeliveryKey)
		if err != nil {
			o := failure.Chain{failure.HTTPStatus}.Classify(err)
			fmt.Printf("%v: %s (%s), again in %v\n", err, o.Kind, o.Class, o.RetryAfter)
			continue
		}
		fmt.Println("sent:", receipt.ID)
	}
	// Output:
	// provider answered 429 (retry after 2m0s): retry (throttled), again in 2m0s
	// sent: sms-5521
}

// ParseRetryAfter reads both forms of the header, delay-seconds and an
// HTTP date (counted from now, on the caller's clock), capped at
// MaxRetryAfter; what it cannot read, or a date already past, is 0.
func ExampleParseRetryAfter() {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Tue, 01 Dec 2026 09:05:00 GMT", "Tue, 01 Dec 2026 08:00:00 GMT", "31536000", "soon", ""} {
		fmt.Printf("%-31q %v\n", v, provider.ParseRetryAfter(v, now))
	}
	// Output:
	// "120"                           2m0s
	// "Tue, 01 Dec 2026 09:05:00 GMT" 5m0s
	// "Tue, 01 Dec 2026 08:00:00 GMT" 0s
	// "31536000"                      168h0m0s
	// "soon"                          0s
	// ""                              0s
}
