package streammap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// The fixed fields of each record of Lambda's DynamoDB stream event.
const (
	// EventSource is every record's eventSource.
	EventSource = "aws:dynamodb"
	// EventVersion is a record's eventVersion when the stream record has
	// none (DynamoDB Streams and DynamoDB Local both say 1.1).
	EventVersion = "1.1"
)

// record is one record of the event, in the JSON Lambda sends (the field
// names of aws-lambda-go's events.DynamoDBEventRecord).
type record struct {
	EventID        string    `json:"eventID"`
	EventName      string    `json:"eventName"`
	EventVersion   string    `json:"eventVersion"`
	EventSource    string    `json:"eventSource"`
	AWSRegion      string    `json:"awsRegion"`
	DynamoDB       change    `json:"dynamodb"`
	EventSourceARN string    `json:"eventSourceARN"`
	UserIdentity   *identity `json:"userIdentity,omitempty"`
}

// change is a record's dynamodb object.
type change struct {
	// ApproximateCreationDateTime is in whole seconds since the epoch.
	ApproximateCreationDateTime *int64                     `json:"ApproximateCreationDateTime,omitempty"`
	Keys                        map[string]json.RawMessage `json:"Keys,omitempty"`
	NewImage                    map[string]json.RawMessage `json:"NewImage,omitempty"`
	OldImage                    map[string]json.RawMessage `json:"OldImage,omitempty"`
	SequenceNumber              string                     `json:"SequenceNumber"`
	SizeBytes                   int64                      `json:"SizeBytes"`
	StreamViewType              string                     `json:"StreamViewType"`
}

// identity is the userIdentity of a record that Time to Live deleted.
type identity struct {
	Type        string `json:"type"`
	PrincipalID string `json:"principalId"`
}

// Record returns one stream record as a record of Lambda's event, in JSON.
// Its awsRegion is the stream record's (DynamoDB Local says "ddblocal"),
// else the stream ARN's region.
func Record(streamARN string, r types.Record) ([]byte, error) {
	if r.Dynamodb == nil || aws.ToString(r.Dynamodb.SequenceNumber) == "" {
		return nil, fmt.Errorf("streammap: stream record %q has no sequence number", aws.ToString(r.EventID))
	}
	d := r.Dynamodb
	out := record{
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSource:    EventSource,
		AWSRegion:      aws.ToString(r.AwsRegion),
		EventSourceARN: streamARN,
		DynamoDB: change{
			SequenceNumber: aws.ToString(d.SequenceNumber),
			SizeBytes:      aws.ToInt64(d.SizeBytes),
			StreamViewType: string(d.StreamViewType),
		},
	}
	if out.EventVersion == "" {
		out.EventVersion = EventVersion
	}
	if out.AWSRegion == "" {
		out.AWSRegion = arnRegion(streamARN)
	}
	if d.ApproximateCreationDateTime != nil {
		out.DynamoDB.ApproximateCreationDateTime = aws.Int64(d.ApproximateCreationDateTime.Unix())
	}
	if r.UserIdentity != nil {
		out.UserIdentity = &identity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
	}
	var err error
	for _, img := range []struct {
		name string
		from map[string]types.AttributeValue
		to   *map[string]json.RawMessage
	}{{"Keys", d.Keys, &out.DynamoDB.Keys}, {"NewImage", d.NewImage, &out.DynamoDB.NewImage}, {"OldImage", d.OldImage, &out.DynamoDB.OldImage}} {
		if *img.to, err = Image(img.from); err != nil {
			return nil, fmt.Errorf("%w (%s of stream record %s)", err, img.name, out.DynamoDB.SequenceNumber)
		}
	}
	return json.Marshal(out)
}

// Event returns records as Lambda's DynamoDB stream event
// ({"Records": […]}), the payload of one invocation.
func Event(streamARN string, records []types.Record) ([]byte, error) {
	parts := make([][]byte, len(records))
	for i, r := range records {
		b, err := Record(streamARN, r)
		if err != nil {
			return nil, err
		}
		parts[i] = b
	}
	return assemble(parts), nil
}

// assemble joins records already in JSON into an event.
func assemble(records [][]byte) []byte {
	var b bytes.Buffer
	b.Grow(eventOverhead + len(records)*(1+512))
	b.WriteString(`{"Records":[`)
	b.Write(bytes.Join(records, []byte(",")))
	b.WriteString(`]}`)
	return b.Bytes()
}

// eventOverhead is what assemble adds around the records.
const eventOverhead = len(`{"Records":[]}`)

// arnRegion returns the region field of an ARN, or "" if it has none.
func arnRegion(arn string) string {
	if parts := strings.SplitN(arn, ":", 5); len(parts) == 5 {
		return parts[3]
	}
	return ""
}
