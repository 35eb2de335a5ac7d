package intake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nudgehq/nudge/pkg/schedule"
)

type jsonRaw = json.RawMessage

// decodeBatch decodes a batch body: {"reminders": [ … ]}, 1 to MaxBatch.
func decodeBatch(body []byte) (Batch, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var b Batch
	if err := dec.Decode(&b); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return Batch{}, &schedule.ValidationError{Field: strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`),
				Problem: "is not a batch field", Fix: `send {"reminders": [ … ]}`}
		}
		return Batch{}, &schedule.ValidationError{Problem: "is not a batch: " + err.Error(), Fix: `send {"reminders": [ … ]}, each a reminder as PUT takes it, with its id`}
	}
	if dec.More() {
		return Batch{}, &schedule.ValidationError{Problem: "has more than one JSON value", Fix: `send one object: {"reminders": [ … ]}`}
	}
	if len(b.Reminders) == 0 || len(b.Reminders) > MaxBatch {
		return Batch{}, &schedule.ValidationError{Field: "reminders", Problem: fmt.Sprintf("has %d entries", len(b.Reminders)), Fix: fmt.Sprintf("send 1 to %d reminders a batch", MaxBatch)}
	}
	return b, nil
}
