package streammap

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Acknowledged reads a function's response to a batch, whose records have
// the sequence numbers seqs in stream order, by Lambda's rules for
// ReportBatchItemFailures on a stream, and returns how many records from
// the start of the batch are done: the shard's checkpoint moves past them.
//
//   - a null or empty response, a null or empty batchItemFailures: all of
//     them (the batch succeeded);
//   - itemIdentifiers that are all sequence numbers of the batch: the
//     records before the lowest of them; the batch is retried from it;
//   - anything else fails the whole batch: none, and the error says why (a
//     function error, a response that is not a JSON object, an
//     itemIdentifier that is missing, empty, null, misspelt or not a
//     sequence number of this batch).
func Acknowledged(seqs []string, response []byte) (int, error) {
	trimmed := strings.TrimSpace(string(response))
	if trimmed == "" || trimmed == "null" {
		return len(seqs), nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(response, &raw); err != nil {
		return 0, fmt.Errorf("the response is not a JSON object: %.80s", trimmed)
	}
	if t, ok := raw["errorType"]; ok {
		var msg string
		_ = json.Unmarshal(raw["errorMessage"], &msg)
		return 0, fmt.Errorf("function error %s: %s", t, msg)
	}
	failures, ok := raw["batchItemFailures"]
	if !ok || string(failures) == "null" {
		return len(seqs), nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(failures, &items); err != nil {
		return 0, fmt.Errorf("batchItemFailures is not a list of objects: %.80s", failures)
	}
	at := make(map[string]int, len(seqs))
	for i, s := range seqs {
		at[s] = i
	}
	lowest := len(seqs)
	for _, item := range items {
		var id *string
		if v, ok := item["itemIdentifier"]; ok {
			if err := json.Unmarshal(v, &id); err != nil {
				return 0, fmt.Errorf("an itemIdentifier is not a string: %.80s", v)
			}
		}
		switch {
		case id == nil:
			return 0, errors.New("a batchItemFailures entry has no itemIdentifier (null or misspelt)")
		case *id == "":
			return 0, errors.New("a batchItemFailures entry has an empty itemIdentifier")
		}
		i, ok := at[*id]
		if !ok {
			return 0, fmt.Errorf("itemIdentifier %q is not the sequence number of a record of this batch", *id)
		}
		lowest = min(lowest, i)
	}
	return lowest, nil
}
