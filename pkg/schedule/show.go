package schedule

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/pkg/ledger"
)

// View is everything stored about one reminder.
type View struct {
	// Reminder is the reminder as created; nil if its item is missing
	// (a delivery created without the intake).
	Reminder *Reminder
	// Deliveries are its deliveries as they are now, by key.
	Deliveries []ledger.Delivery
}

// Event is one transition of one delivery, for a reminder's timeline.
type Event struct {
	ledger.Entry
	Delivery string `json:"delivery"`
}

// Timeline returns every delivery's history entries in time order. Each
// delivery keeps its last entries only (the ledger's history limit); the
// complete stream is in the functions' logs.
func (v View) Timeline() []Event {
	var out []Event
	for _, d := range v.Deliveries {
		for _, e := range d.History {
			out = append(out, Event{Entry: e, Delivery: d.Key().String()})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Show reads a reminder and its deliveries with a strongly consistent
// query. It returns an error wrapping ErrNoReminder if nothing is stored
// under id.
func (s *Store) Show(ctx context.Context, id string) (View, error) {
	var v View
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Ledger.Table()),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: ledger.PartitionKey(id)}},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		out, err := s.cfg.API.Query(ctx, in)
		if err != nil {
			return v, fmt.Errorf("schedule: show %q: %w", id, err)
		}
		for _, it := range out.Items {
			sk, _ := it["SK"].(*types.AttributeValueMemberS)
			switch {
			case sk != nil && sk.Value == reminderSK:
				r, err := fromReminderItem(it)
				if err != nil {
					return v, err
				}
				v.Reminder = &r
			case sk != nil && strings.HasPrefix(sk.Value, "DLV#"):
				d, err := ledger.DecodeDelivery(it)
				if err != nil {
					return v, err
				}
				v.Deliveries = append(v.Deliveries, d)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if v.Reminder == nil && len(v.Deliveries) == 0 {
		return v, fmt.Errorf("schedule: show %q: %w; check the id (reminder ids are case-sensitive) and the table", id, ErrNoReminder)
	}
	return v, nil
}
