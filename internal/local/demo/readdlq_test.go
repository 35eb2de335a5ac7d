package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/failure"
)

// losingReceives loses the answers to chosen ReceiveMessage requests: the
// server takes the receive and hides its messages, the client sees a reset
// connection and the SDK sends the receive again. Reads are counted by
// their GetQueueAttributes (the checker asks the queue's depth first).
// fauxqs did this under load (seed 2 of the 1,000-kill chaos run). With
// failRelease it also fails every release, as when a read outlasts its hold.
type losingReceives struct {
	next http.RoundTripper
	// lose says whether to lose the nth receive (from 1) of a read.
	lose        func(read, nth int) bool
	failRelease bool

	mu              sync.Mutex
	read, nth, lost int
}

func (l *losingReceives) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	l.mu.Lock()
	lose := false
	switch {
	case strings.HasSuffix(op, ".GetQueueAttributes"):
		l.read, l.nth = l.read+1, 0
	case strings.HasSuffix(op, ".ReceiveMessage"):
		l.nth++
		if lose = l.lose(l.read, l.nth); lose {
			l.lost++
		}
	case strings.HasSuffix(op, ".ChangeMessageVisibilityBatch") && l.failRelease:
		l.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	l.mu.Unlock()
	resp, err := l.next.RoundTrip(r)
	if err != nil || !lose {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestTheDLQReadSurvivesLostReceives: reads that lose receives (one at
// the start of every read, or one late in the first), or that cannot
// release what they read, still find every DLQ message together, copies
// and poison with their sources, and report no problem. Judged by its
// fullest read alone, as before, every read came back ten short.
func TestTheDLQReadSurvivesLostReceives(t *testing.T) {
	t.Parallel()
	for name, l := range map[string]*losingReceives{
		"the first receive of every read":  {lose: func(_, nth int) bool { return nth == 1 }},
		"a late receive of the first read": {lose: func(read, nth int) bool { return read == 1 && nth == 3 }},
		"no release":                       {lose: func(_, nth int) bool { return false }, failRelease: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l.next = standin.Transport()
			readsTheWholeDLQ(t, l)
		})
	}
}

func readsTheWholeDLQ(t *testing.T, lossy *losingReceives) {
	client := standintest.SQS(t)
	q := standintest.QueuePair(t, client, 30*time.Second, 10)
	ctx := context.Background()
	want := 0
	send := func(body string, l deadletter.Letter) {
		t.Helper()
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.DLQURL), MessageBody: aws.String(body), MessageAttributes: l.Attributes()}); err != nil {
			t.Fatal(err)
		}
		want++
	}
	for i := range 25 {
		l := deadletter.Letter{Class: failure.ClassAmbiguous, Reason: "may have been sent", Attempts: 1, Receives: 1,
			SourceMessageID: fmt.Sprintf("src-%02d", i), DeliveryKey: fmt.Sprintf("rem-%02d:email:ses", i)}
		send(`{"v":1}`, l)
		if i%5 == 0 { // a second copy: dead-lettered again after a kill
			l.SourceMessageID += "-again"
			send(`{"v":1}`, l)
		}
	}
	for i := range 5 {
		send(fmt.Sprintf("poison %d", i), deadletter.Letter{Class: failure.ClassDecode, Reason: "message: not JSON", SourceMessageID: fmt.Sprintf("poison-%d", i)})
	}

	lossyClient := sqs.NewFromConfig(standintest.AWSConfig(t), func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: lossy} })
	var problems problems
	const hold = 5 * time.Second
	start := time.Now()
	got, err := readDLQ(ctx, lossyClient, local.Provisioned{WorkURL: q.WorkURL, DLQURL: q.DLQURL}, hold, problems.add)
	if err != nil {
		t.Fatal(err)
	}
	if lossy.lost == 0 && !lossy.failRelease {
		t.Fatal("no receive was lost; the test means to lose some")
	}
	if len(got) != want || len(problems.all()) > 0 {
		t.Fatalf("read %d of %d DLQ messages (%d receives lost); problems: %v", len(got), want, lossy.lost, problems.all())
	}
	if lossy.lost > 0 && time.Since(start) < hold {
		t.Errorf("the reads took %v: a second read must wait for the hold (%v) of the messages the first hid", time.Since(start), hold)
	}
	keys, sources := map[string]int{}, map[string]string{}
	for _, d := range got {
		k := d.Key.String()
		if d.Key.ReminderID == "" {
			k = "" // poison
		}
		keys[k]++
		sources[d.Source] = k
	}
	if len(keys) != 26 || keys["rem-05:email:ses"] != 2 || keys["rem-06:email:ses"] != 1 || keys[""] != 5 {
		t.Errorf("copies by delivery: %v", keys)
	}
	for i := range 25 {
		k := fmt.Sprintf("rem-%02d:email:ses", i)
		if sources[fmt.Sprintf("src-%02d", i)] != k || i%5 == 0 && sources[fmt.Sprintf("src-%02d-again", i)] != k {
			t.Errorf("%s: the sources of its copies are wrong: %v", k, sources)
		}
	}
	for i := range 5 {
		if _, ok := sources[fmt.Sprintf("poison-%d", i)]; !ok {
			t.Errorf("poison-%d's source is missing", i)
		}
	}
}
