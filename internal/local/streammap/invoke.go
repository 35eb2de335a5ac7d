package streammap

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/aws/aws-lambda-go/events"
	"github.com/nudgehq/nudge/internal/local/esm"
)

// Invoker invokes a function synchronously with payload and returns its
// response payload: the SQS mapping's (esm.Invoker), so that one emulator
// instance (*standin.Lambda) serves either. A function error may come back
// either as the payload ({"errorMessage": …, "errorType": …}) or as an
// error; both fail the batch.
type Invoker = esm.Invoker

// Recycler is an Invoker whose instance the mapping recycles after an
// invocation that failed without a function's answer (esm.Recycler).
type Recycler = esm.Recycler

// InvokerFunc adapts a function to Invoker.
type InvokerFunc = esm.InvokerFunc

// Handler is a Go Lambda handler of DynamoDB stream events that reports
// batch item failures, the signature the outcomes function's handler has.
type Handler func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// InProcess runs h in this process as the Lambda Go runtime would: the
// payload is decoded into events.DynamoDBEvent by aws-lambda-go's own
// unmarshalling (its DynamoDBAttributeValue), the response is encoded to
// JSON, and an error h returns becomes a function error payload
// ({"errorMessage": err.Error(), "errorType": its Go type's name}), as the
// runtime reports one. For tests, and for running a function without the
// emulator.
func InProcess(h Handler) Invoker {
	return InvokerFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return functionError(fmt.Errorf("streammap: the payload is not a DynamoDB stream event: %w", err))
		}
		resp, err := h(ctx, ev)
		if err != nil {
			return functionError(err)
		}
		return json.Marshal(resp)
	})
}

// functionError is the payload the Lambda Go runtime answers with when the
// handler returns err.
func functionError(err error) ([]byte, error) {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return json.Marshal(struct {
		Message string `json:"errorMessage"`
		Type    string `json:"errorType"`
	}{err.Error(), t.Name()})
}
