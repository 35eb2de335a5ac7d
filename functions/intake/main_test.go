package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDynamoDB answers every call as an empty table would, or with a shard
// count in the registry, and records each call's operation and partition.
type fakeDynamoDB struct {
	shards string // the registry's count; "" for none

	mu    sync.Mutex
	calls []string // "Operation PK"
}

func (f *fakeDynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	var in struct {
		Key, Item map[string]map[string]string
	}
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &in)
	pk := in.Key["PK"]["S"] + in.Item["PK"]["S"]
	f.mu.Lock()
	f.calls = append(f.calls, op+" "+pk)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	switch {
	case op == "GetItem" && pk == "NUDGE" && f.shards != "":
		fmt.Fprintf(w, `{"Item":{"PK":{"S":"NUDGE"},"SK":{"S":"SHARDS"},"shards":{"N":%q}}}`, f.shards)
	case op == "Query":
		_, _ = io.WriteString(w, `{"Items":[],"Count":0}`)
	default:
		_, _ = io.WriteString(w, `{}`)
	}
}

// start builds the intake as Lambda runs it, against the fake DynamoDB and
// an SES that counts its calls, with the environment the stack gives a
// stage running ses.
func start(t *testing.T, db *fakeDynamoDB) (http.Handler, *atomic.Int32) {
	t.Helper()
	ddb := httptest.NewServer(db)
	t.Cleanup(ddb.Close)
	var sesCalls atomic.Int32
	ses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sesCalls.Add(1)
		w.Header().Set("X-Amzn-ErrorType", "NotFoundException")
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(ses.Close)
	for k, v := range map[string]string{
		"NUDGE_TABLE": "nudge-dev-ledger", "NUDGE_PROVIDERS": "webhook,ses", "NUDGE_SES_TEMPLATE_PREFIX": "nudge-dev-",
		"NUDGE_SES_TEMPLATES": `{"renewal-notice":["plan"]}`,
		"AWS_REGION":          "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_ENDPOINT_URL_DYNAMODB": ddb.URL, "AWS_ENDPOINT_URL_SESV2": ses.URL,
	} {
		t.Setenv(k, v)
	}
	h, err := build(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return h, &sesCalls
}

func put(t *testing.T, h http.Handler, id string) *httptest.ResponseRecorder {
	t.Helper()
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339) // wall clock: the function's clock is the real one
	body := `{"accountRef":"acct-1","dueAt":"` + due + `","metadata":{"plan":"gold"},"deliveries":[` +
		`{"channel":"email","provider":"ses","recipientRef":"c-1","templateRef":"renewal-notice","address":"ana@example.com"}]}`
	req := httptest.NewRequest(http.MethodPut, "/v1/reminders/"+id, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestTheIntakeReadsTheShardCountAndWritesOnlyReminders: the function's
// ledger takes the shard count from the registry the enqueue writes, and
// writes nothing but reminders' partitions (its role refuses the rest): on
// a fresh stage a create is a 503 naming the wait, not a write to the
// registry; once a count is recorded, creates go through. A template the
// stack lists costs no SES call.
func TestTheIntakeReadsTheShardCountAndWritesOnlyReminders(t *testing.T) {
	db := &fakeDynamoDB{}
	h, sesCalls := start(t, db)
	rec := put(t, h, "rem-1")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "60" || !strings.Contains(rec.Body.String(), "shard count") {
		t.Errorf("a create on a fresh stage: %d %s (Retry-After %q); want 503 naming the shard count", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	db.shards = "4"
	if rec := put(t, h, "rem-2"); rec.Code != http.StatusCreated {
		t.Errorf("a create once the enqueue recorded the count: %d %s", rec.Code, rec.Body)
	}
	read := false
	for _, c := range db.calls {
		op, pk, _ := strings.Cut(c, " ")
		switch op {
		case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
			if !strings.HasPrefix(pk, "REM#") {
				t.Errorf("the intake called %s on partition %q; it writes reminders' partitions only", op, pk)
			}
		case "GetItem":
			read = read || pk == "NUDGE"
		}
	}
	if !read {
		t.Errorf("the intake never read the shard registry: %v", db.calls)
	}
	if n := sesCalls.Load(); n != 0 {
		t.Errorf("%d SES calls for a template the stack lists; want none", n)
	}
}

// TestTheStagesSendWindowsApplyAtTheIntake: with the stage's default send
// windows in its environment, a delivery that names no window gets its
// channel's, in the reminder's zone; a channel the setting does not name
// gets none.
func TestTheStagesSendWindowsApplyAtTheIntake(t *testing.T) {
	t.Setenv("NUDGE_SEND_WINDOWS", "email=08:00-21:00; sms=09:00-17:00 mon-fri")
	db := &fakeDynamoDB{shards: "4"}
	h, _ := start(t, db)
	// Every day's window opens within the default 24 h lateness, whatever
	// the day.
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339) // wall clock: the function's clock is the real one
	body := `{"accountRef":"acct-1","dueAt":"` + due + `","timeZone":"Asia/Kathmandu","metadata":{"plan":"gold"},"deliveries":[` +
		`{"channel":"email","provider":"ses","recipientRef":"c-1","templateRef":"renewal-notice","address":"ana@example.com"},` +
		`{"channel":"push","provider":"webhook","recipientRef":"c-1","templateRef":"t"}]}`
	req := httptest.NewRequest(http.MethodPut, "/v1/reminders/rem-win", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var got struct {
		Reminder struct {
			Deliveries []struct {
				Window *struct{ From, To, TimeZone string }
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusCreated || len(got.Reminder.Deliveries) != 2 {
		t.Fatalf("create: %d %s (%v)", rec.Code, rec.Body, err)
	}
	if w := got.Reminder.Deliveries[0].Window; w == nil || *w != (struct{ From, To, TimeZone string }{"08:00", "21:00", "Asia/Kathmandu"}) {
		t.Errorf("the e-mail's window: %+v; want the stage's, 08:00-21:00 in Asia/Kathmandu", w)
	}
	if w := got.Reminder.Deliveries[1].Window; w != nil {
		t.Errorf("the push's window: %+v; want none (the stage names none for push)", w)
	}
}
