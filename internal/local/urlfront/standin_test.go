package urlfront_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/urlfront"
)

// TestARealFunctionUnderTheEmulator: testdata/echo's bootstrap, two
// instances under the runtime interface emulator, behind the front: the
// event reaches the function as aws-lambda-go decodes it, its response comes
// back, a function error is 502, and concurrent requests are spread over
// the instances without ever overlapping on one (which would crash it).
func TestARealFunctionUnderTheEmulator(t *testing.T) {
	dir, err := standin.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(standin.RIEBinary(dir)); err != nil {
		if os.Getenv("NUDGE_REQUIRE_STANDINS") != "" || os.Getenv("CI") != "" {
			t.Fatalf("the Lambda emulator is not installed in %s (make test installs it)", dir)
		}
		t.Skip("the Lambda emulator is not installed (make test installs it)")
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "./testdata/echo")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/echo: %v\n%s", err, out)
	}
	var invokers []urlfront.Invoker
	for range 2 {
		fn, err := standin.StartLambda(context.Background(), dir, bin, standin.Options{Log: &syncBuffer{}, Env: standin.LambdaEnv("echo", 5*time.Second, 128)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fn.Stop)
		invokers = append(invokers, fn)
	}
	front, log := start(t, urlfront.Config{Invokers: invokers, Timeout: 5 * time.Second})

	var got struct {
		Pid        int
		Invocation string
		Event      events.LambdaFunctionURLRequest
	}
	resp, body := do(t, request(t, http.MethodPost, front.URL()+"/hello?x=1", []byte(`{"a":1}`), http.Header{"Content-Type": {"application/json"}}, true))
	if resp.StatusCode != 200 || resp.Header.Get("Set-Cookie") != "seen=1" {
		t.Fatalf("answer %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	ev := got.Event
	if ev.RawPath != "/hello" || ev.QueryStringParameters["x"] != "1" || ev.Body != `{"a":1}` || ev.RequestContext.HTTP.Method != "POST" ||
		ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM.AccessKey != "AKIALOCALTEST" {
		t.Errorf("the function got %+v", ev)
	}

	if id := ev.RequestContext.RequestID; got.Invocation != id || resp.Header.Get("X-Amzn-Requestid") != id {
		t.Errorf("the invocation's id %q, the answer's %q; want the event's requestId %q", got.Invocation, resp.Header.Get("X-Amzn-Requestid"), id)
	}

	resp, body = do(t, request(t, http.MethodGet, front.URL()+"/fail", nil, nil, true))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(log.String(), "function error: errorString: echo: asked to fail") {
		t.Errorf("a function error: %d %s\n%s", resp.StatusCode, body, log)
	}

	reqs := make([]*http.Request, 6)
	for i := range reqs {
		reqs[i] = request(t, http.MethodGet, front.URL()+"/sleep", nil, nil, true)
	}
	var mu sync.Mutex
	pids := map[int]int{}
	var wg sync.WaitGroup
	for _, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var got struct{ Pid int }
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
				t.Errorf("concurrent /sleep: %d %v", resp.StatusCode, err)
				return
			}
			mu.Lock()
			pids[got.Pid]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(pids) != 2 {
		t.Errorf("6 concurrent requests ran in %d runtimes (%v); want both instances used\n%s", len(pids), pids, log)
	}
}
