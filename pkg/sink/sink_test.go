package sink

import (
	"testing"
	"time"
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
