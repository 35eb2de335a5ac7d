package demo

import (
	"fmt"
	"io"
	"time"

	"github.com/nudgehq/nudge/internal/provider/registry"
)

// PriceList is what AWS charges for what a run uses, in US dollars, before
// free tiers.
type PriceList struct {
	// Source says where and when the prices were read.
	Source string
	// DynamoDBWrite and DynamoDBRead are per million on-demand write and
	// read request units.
	DynamoDBWrite, DynamoDBRead float64
	// SQS is per million requests to a standard queue (64 KB each).
	SQS float64
	// LambdaRequest is per million invocations; LambdaGBSecond per
	// GB-second of arm64 duration.
	LambdaRequest, LambdaGBSecond float64
	// LogsGB is per GB ingested by CloudWatch Logs (standard class).
	LogsGB float64
	// EventBridge is per million custom events put (64 KB each): the
	// outcome events.
	EventBridge float64
	// Each provider's own price is its driver's (provider.Contract.Price).
}

// Prices are the AWS list prices for US East (N. Virginia) used for the
// cost figures. They are copied, not fetched: check them against
// aws.amazon.com/pricing before budgeting.
var Prices = PriceList{
	Source:        "AWS list prices, us-east-1, as published in 2025 (DynamoDB on-demand after the November 2024 reduction); not re-checked live",
	DynamoDBWrite: 0.625, DynamoDBRead: 0.125,
	SQS:           0.40,
	LambdaRequest: 0.20, LambdaGBSecond: 0.0000133334,
	LogsGB: 0.50, EventBridge: 1.00,
}

// Usage is what a run consumed, as AWS would bill it.
type Usage struct {
	WriteUnits, ReadUnits float64
	SQSRequests           int64
	Invocations           int
	GBSeconds             float64
	LogBytes              int64
	// Events are the outcome events put on the bus (repeats included).
	Events int
}

// Cost is a run's cost per million sent deliveries, by service, in US
// dollars.
type Cost struct {
	DynamoDB, SQS, Lambda, Logs, EventBridge float64
}

// Total is the sum of the services.
func (c Cost) Total() float64 { return c.DynamoDB + c.SQS + c.Lambda + c.Logs + c.EventBridge }

// PerMillion prices u at p and scales it to a million sent deliveries.
func (u Usage) PerMillion(p PriceList, sent int) Cost {
	if sent == 0 {
		return Cost{}
	}
	scale := 1e6 / float64(sent)
	return Cost{
		DynamoDB: scale * (u.WriteUnits*p.DynamoDBWrite + u.ReadUnits*p.DynamoDBRead) / 1e6,
		SQS:      scale * float64(u.SQSRequests) * p.SQS / 1e6,
		Lambda:   scale * (float64(u.Invocations)*p.LambdaRequest/1e6 + u.GBSeconds*p.LambdaGBSecond),
		Logs:     scale * float64(u.LogBytes) / 1e9 * p.LogsGB,
		// The ledger's stream is free to read for Lambda's mapping.
		EventBridge: scale * float64(u.Events) * p.EventBridge / 1e6,
	}
}

// gbSeconds is billed time at a function's memory size.
func gbSeconds(billed time.Duration, memoryMB int) float64 {
	return billed.Seconds() * float64(memoryMB) / 1024
}

// writeCost renders the cost table.
func (sum *Summary) writeCost(w io.Writer) {
	u, c := sum.Usage, sum.Cost
	fmt.Fprintf(w, "\ncost per million sent deliveries: $%.2f (%s)\n", c.Total(), Prices.Source)
	per := func(v float64) float64 {
		if sum.Sent == 0 {
			return 0
		}
		return v / float64(sum.Sent)
	}
	fmt.Fprintf(w, "  %-10s $%6.2f   %.2f write units and %.2f read units per sent\n", "DynamoDB", c.DynamoDB, per(u.WriteUnits), per(u.ReadUnits))
	fmt.Fprintf(w, "  %-10s $%6.2f   %.2f requests per sent\n", "SQS", c.SQS, per(float64(u.SQSRequests)))
	fmt.Fprintf(w, "  %-10s $%6.2f   %.3f invocations and %.5f GB-s per sent\n", "Lambda", c.Lambda, per(float64(u.Invocations)), per(u.GBSeconds))
	fmt.Fprintf(w, "  %-10s $%6.2f   %.0f bytes of logs per sent\n", "Logs", c.Logs, per(float64(u.LogBytes)))
	fmt.Fprintf(w, "  %-10s $%6.2f   %.3f outcome events per sent\n", "EventBridge", c.EventBridge, per(float64(u.Events)))
	fmt.Fprintln(w, "  (the run ticks the enqueue far more often than once a minute, and invokes the outcomes function for every")
	fmt.Fprintln(w, "  batch of the ledger's stream where the stack's filter passes only ends, so their share here is above AWS's)")
	for _, d := range registry.All() {
		c, price := sum.ByProvider[d.Name], d.Contract.Price
		if c == nil || c.Sent == 0 || price.Per == 0 {
			continue
		}
		units := float64(c.Recorded+c.Copies) / float64(c.Sent)
		per := "1,000"
		if price.Per == 1_000_000 {
			per = "million"
		}
		fmt.Fprintf(w, "  plus %s's own price: $%.2f per million sent through it (%.3f %s at $%.2f per %s each)\n", d.Name, price.PerMillion(units), units, price.Unit, price.USD, per)
	}
}
