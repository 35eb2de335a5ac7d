package sink

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

func TestParseScript(t *testing.T) {
	t.Parallel()
	plan, err := ParseScript("rem-1=500,429/30s,ok+20ms; rem-2=hang")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key     string
		attempt int
		want    Fault
	}{
		{"rem-1:email:webhook", 1, Fault{Kind: "500"}},
		{"rem-1:email:webhook", 2, Fault{Kind: "429", RetryAfter: 30 * time.Second}},
		{"rem-1:email:webhook", 3, Fault{Kind: "ok", Delay: 20 * time.Millisecond}},
		{"rem-1:email:webhook", 4, Fault{Kind: "ok"}},
		{"rem-2:sms:webhook", 1, Fault{Kind: "hang"}},
		{"rem-3:sms:webhook", 1, Fault{Kind: "ok"}},
	} {
		if got := plan(tc.key, tc.attempt); got != tc.want {
			t.Errorf("plan(%s, %d) = %+v, want %+v", tc.key, tc.attempt, got, tc.want)
		}
	}
	for _, bad := range []string{"rem-1", "rem-1=teapot", "rem-1=500+soon", "rem-1=429/x"} {
		if _, err := ParseScript(bad); err == nil {
			t.Errorf("ParseScript(%q) accepted it", bad)
		}
	}
}

// TestResentTellsARightfulRetryFromASecondSend: a repeat after a dropped
// answer is suppressed and is not a second send; a repeat after a delivered
// answer is.
func TestResentTellsARightfulRetryFromASecondSend(t *testing.T) {
	t.Parallel()
	plan, _ := ParseScript("rem-a=drop")
	s := &Sink{Plan: plan}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(key string) error {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"reminderId":"x"}`))
		req.Header.Set(webhook.HeaderIdempotencyKey, key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		return err
	}
	if err := post("rem-a:email:webhook"); err == nil {
		t.Fatal("the drop fault answered")
	}
	for _, key := range []string{"rem-a:email:webhook", "rem-b:email:webhook", "rem-b:email:webhook"} {
		if err := post(key); err != nil {
			t.Fatal(err)
		}
	}
	accepted, dupes := s.Totals()
	if accepted != 2 || dupes != 2 {
		t.Fatalf("accepted %d, duplicates %d; want 2 and 2", accepted, dupes)
	}
	if got := s.Resent(); len(got) != 1 || got["rem-b:email:webhook"] != 1 {
		t.Fatalf("resent %v; want only rem-b, once", got)
	}
}

// TestResendsNameWhereTheFirstAnswerWent: the repeat of an answered
// acceptance is attributed to the sender the first answer went to, not to
// the sender of the repeat, and carries the acceptance time.
func TestResendsNameWhereTheFirstAnswerWent(t *testing.T) {
	t.Parallel()
	s := &Sink{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(path string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{"reminderId":"x"}`))
		req.Header.Set(webhook.HeaderIdempotencyKey, "rem-c:email:webhook")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	before := time.Now()
	post("/deliveries/consumer-2")
	post("/deliveries/consumer-1")
	got := s.Resends()
	if len(got) != 1 || got[0].AnsweredTo != "/deliveries/consumer-2" || got[0].Times != 1 {
		t.Fatalf("resends %+v; want one, answered to consumer-2", got)
	}
	if a, ok := s.Accepted("rem-c:email:webhook"); !ok || a.Received.Before(before) || a.At.Before(a.Received) || a.At.After(time.Now()) {
		t.Fatalf("accepted %+v, %v", a, ok)
	}
}
