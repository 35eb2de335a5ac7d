package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/batch"
)

// FuzzDecodeEvent drives the consumer's event decoding path: the raw
// invocation payload through DecodeEvent, then the batch processor with a
// handler that decodes each body as the consumer does. It checks that
// nothing panics, that a refusal is an *EventError, and that for an
// accepted event the partial batch response names every failed record,
// each id once, never an empty or unknown id. The corpus is seeded with
// every file in events/.
func FuzzDecodeEvent(f *testing.F) {
	files, _ := filepath.Glob("../../events/*.json")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{``, `{}`, `null`, `{"Records":[]}`, `{"Records":null}`, `{"Records":[{}]}`,
		`{"Records":[{"messageId":"a","eventSource":"aws:sqs","body":"{}"},{"messageId":"a","eventSource":"aws:sqs","body":"x"}]}`} {
		f.Add([]byte(s))
	}
	handler := batch.HandlerFunc(func(_ context.Context, rec events.SQSMessage) error {
		_, err := message.Decode([]byte(rec.Body))
		return err
	})
	proc, err := batch.New(handler, batch.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := consumer.DecodeEvent(raw)
		if err != nil {
			var ee *consumer.EventError
			if !errors.As(err, &ee) {
				t.Fatalf("DecodeEvent returned %T %v, want *EventError", err, err)
			}
			return
		}
		ids := map[string]bool{}
		failed := map[string]bool{}
		for _, r := range ev.Records {
			if r.MessageId == "" || r.EventSource != "aws:sqs" {
				t.Fatalf("accepted a record Lambda never sends: %+v", r)
			}
			ids[r.MessageId] = true
			if _, err := message.Decode([]byte(r.Body)); err != nil {
				failed[r.MessageId] = true
			}
		}
		resp, _ := proc.Process(context.Background(), ev)
		named := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			switch {
			case f.ItemIdentifier == "" || !ids[f.ItemIdentifier]:
				t.Fatalf("response names %q, not a record of the batch", f.ItemIdentifier)
			case named[f.ItemIdentifier]:
				t.Fatalf("response names %q twice", f.ItemIdentifier)
			}
			named[f.ItemIdentifier] = true
		}
		for id := range failed {
			if !named[id] {
				t.Fatalf("record %q failed but the response does not name it: it would be deleted", id)
			}
		}
	})
}
