package bus

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// timeFormat is how EventBridge writes an event's time: RFC 3339, whole
// seconds, UTC.
const timeFormat = "2006-01-02T15:04:05Z"

// envelope is an event as EventBridge delivers it to a target, its fields
// in EventBridge's order (aws-lambda-go's events.EventBridgeEvent reads it).
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// event is an accepted entry: its bus and its envelope.
type event struct {
	bus      string
	envelope envelope
}

// body is the envelope's JSON, as the SQS message's body. HTML characters
// are kept as they are, as EventBridge keeps them.
func (e envelope) body() (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// deliver sends an event to the target of every rule on its bus that
// matches it, each in turn; a target that still fails after
// TargetAttempts tries is counted and logged, and the event is lost to it.
func (b *Bus) deliver(ev event) {
	var body string
	for _, r := range b.cfg.Rules {
		if r.EventBus != ev.bus || !r.matches(ev.envelope.Source, ev.envelope.DetailType) {
			continue
		}
		if body == "" {
			var err error
			if body, err = ev.envelope.body(); err != nil { // cannot happen: the detail was checked
				b.count(func(s *Stats) { s.TargetFailures[r.Name]++ })
				b.logf("rule %s: event %s not encoded: %v", r.Name, ev.envelope.ID, err)
				return
			}
		}
		if err := b.send(r.QueueURL, body); err != nil {
			b.count(func(s *Stats) { s.TargetFailures[r.Name]++ })
			b.logf("rule %s: event %s not delivered to %s after %d tries: %v (EventBridge would retry for 24 h, then drop it or send it to the rule's DLQ)",
				r.Name, ev.envelope.ID, r.QueueURL, b.cfg.TargetAttempts, err)
			continue
		}
		b.count(func(s *Stats) { s.Delivered[r.Name]++ })
	}
}

// send tries a target up to TargetAttempts times.
func (b *Bus) send(queueURL, body string) error {
	var err error
	for attempt := 1; attempt <= b.cfg.TargetAttempts; attempt++ {
		if attempt > 1 {
			// wall clock: a pause for the target to recover, in real time
			pause := time.NewTimer(b.cfg.TargetRetryWait)
			select {
			case <-pause.C:
			case <-b.base.Done():
				pause.Stop()
				return fmt.Errorf("%w (last error: %v)", errClosed, err)
			}
		}
		// wall clock: a bound on one request to the queue
		ctx, cancel := context.WithTimeout(b.base, sendTimeout)
		_, err = b.cfg.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)})
		cancel()
		if err == nil {
			return nil
		}
		if b.base.Err() != nil {
			return fmt.Errorf("%w (last error: %v)", errClosed, err)
		}
	}
	return err
}

// newUUID returns a random UUID (version 4), as EventBridge's event ids.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
