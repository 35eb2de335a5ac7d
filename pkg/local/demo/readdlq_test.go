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

	"github.com/nudgehq/nudge/pkg/deadletter"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/local"
	"github.com/nudgehq/nudge/pkg/local/standin/standintest"
)

// losingReceives loses the answer to the first ReceiveMessage after each
// GetQueueAttributes: the server takes the receive and hides its messages,
// the client sees a reset connection and the SDK sends the receive again.
// fauxqs did this under load (seed 2 of the 1,000-kill chaos run).
type losingReceives struct {
	next http.RoundTripper
	mu   sync.Mutex
	arm  bool
	lost int
}

func (l *losingReceives) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	l.mu.Lock()
	if strings.HasSuffix(op, ".GetQueueAttributes") {
		l.arm = true
	}
	lose := l.arm && strings.HasSuffix(op, ".ReceiveMessage")
	if lose {
		l.arm = false
		l.lost++
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

// TestTheDLQReadSurvivesLostReceives: every read loses one receive's
// messages (hidden for the hold), yet the reads together find every DLQ
// message, copies and poison included, and report no problem. With one
// read judged alone (the fullest), every read came back ten short.
func TestTheDLQReadSurvivesLostReceives(t *testing.T) {
	t.Parallel()
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
		key := fmt.Sprintf("rem-%02d:email:ses", i)
		l := deadletter.Letter{Class: failure.ClassAmbiguous, Reason: "may have been sent", Attempts: 1, Receives: 1, SourceMessageID: fmt.Sprintf("src-%02d", i), DeliveryKey: key}
		send(`{"v":1}`, l)
		if i%5 == 0 { // a second copy: dead-lettered again after a kill
			l.SourceMessageID += "-again"
			send(`{"v":1}`, l)
		}
	}
	for i := range 5 {
		send(fmt.Sprintf("poison %d", i), deadletter.Letter{Class: failure.ClassDecode, Reason: "message: not JSON", SourceMessageID: fmt.Sprintf("poison-%d", i)})
	}

	lossy := &losingReceives{next: http.DefaultTransport}
	s := &system{
		sqs: sqs.NewFromConfig(standintest.AWSConfig(t), func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: lossy} }),
		res: local.Provisioned{WorkURL: q.WorkURL, DLQURL: q.DLQURL},
	}
	got, err := s.readDLQ(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lossy.lost < 2 {
		t.Fatalf("lost %d receives; the test means every read to lose one", lossy.lost)
	}
	if len(got) != want || len(s.problems) > 0 {
		t.Fatalf("read %d of %d DLQ messages (%d receives lost); problems: %v", len(got), want, lossy.lost, s.problems)
	}
	keys, sources := map[string]int{}, map[string]bool{}
	for _, d := range got {
		keys[d.key.String()]++
		sources[d.source] = true
	}
	if len(keys) != 26 || keys["rem-05:email:ses"] != 2 || keys["rem-06:email:ses"] != 1 {
		t.Errorf("copies by delivery: %v", keys)
	}
	for i := range 5 {
		if !sources[fmt.Sprintf("poison-%d", i)] {
			t.Errorf("poison-%d's source is missing", i)
		}
	}
}
