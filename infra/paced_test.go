package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
)

// TestEachPacedProviderHasItsQueueAndMapping checks, on the template of a
// stage that paces ses, the relations per work queue: the paced queue has
// the work queue's visibility (6 × the consumer timeout), DLQ and redrive
// policy; the DLQ may be redriven to it; its mapping's batch fits one
// invocation at an instance's share of the rate, with its maximum
// concurrency; the functions that publish may send to it; it has the
// work queue's age alarm; and the producers and the outputs name it.
func TestEachPacedProviderHasItsQueueAndMapping(t *testing.T) {
	prod := sesStage(deployment.Prod())
	prod.AlarmEmail = "oncall@example.com"
	for _, s := range []deployment.Stage{sesStage(deployment.Dev()), prod} {
		t.Run(s.Name, func(t *testing.T) {
			_, tpl := synth(t, s)
			tp := toJSON(t, tpl)
			q, err := s.ProviderQueue("ses")
			if err != nil {
				t.Fatal(err)
			}
			var pacedID string
			for id, r := range tp.resources("AWS::SQS::Queue") {
				if props(r)["QueueName"] == q.Name {
					pacedID = id
				}
			}
			if pacedID == "" {
				t.Fatalf("no queue %s", q.Name)
			}
			work := props(tp.one(t, "AWS::SQS::Queue", "QueueName", s.WorkQueueName()))
			paced := props(tp.resources("AWS::SQS::Queue")[pacedID])
			dlq := props(tp.one(t, "AWS::SQS::Queue", "QueueName", s.DLQName()))
			fn := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-consumer"))
			env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
			timeout := time.Duration(num64(t, fn["Timeout"])) * time.Second
			if vis := num64(t, paced["VisibilityTimeout"]); vis < 6*timeout.Seconds() {
				t.Errorf("%s: visibility %vs < 6 × the consumer timeout %v", q.Name, vis, timeout)
			}
			if fmt.Sprint(paced["RedrivePolicy"]) != fmt.Sprint(work["RedrivePolicy"]) || paced["MessageRetentionPeriod"] != work["MessageRetentionPeriod"] {
				t.Errorf("%s: redrive %v, retention %v; want the work queue's %v, %v", q.Name, paced["RedrivePolicy"], paced["MessageRetentionPeriod"],
					work["RedrivePolicy"], work["MessageRetentionPeriod"])
			}
			if allow := fmt.Sprint(dlq["RedriveAllowPolicy"]); !strings.Contains(allow, ":"+s.WorkQueueName()+" ") && !strings.Contains(allow, ":"+s.WorkQueueName()+"]") ||
				!strings.Contains(allow, ":"+q.Name) {
				t.Errorf("DLQ RedriveAllowPolicy %s does not name both work queues", allow)
			}
			// The mapping: its batch, at one instance's share of the rate,
			// fits the invocation's time before the send time and cut-off.
			var mapping map[string]any
			for _, m := range tp.resources("AWS::Lambda::EventSourceMapping") {
				if strings.Contains(fmt.Sprint(props(m)["EventSourceArn"]), pacedID) {
					mapping = props(m)
				}
			}
			if mapping == nil {
				t.Fatalf("no event source mapping on %s", q.Name)
			}
			providerTimeout, err := time.ParseDuration(fmt.Sprint(env["NUDGE_PROVIDER_TIMEOUT"]))
			if err != nil {
				t.Fatal(err)
			}
			batch, concurrency := num64(t, mapping["BatchSize"]), num64(t, mapping["ScalingConfig"].(map[string]any)["MaximumConcurrency"])
			rate, shares := num64(t, env["NUDGE_SES_RATE"]), num64(t, env["NUDGE_PACED_CONCURRENCY"])
			window := timeout - providerTimeout - consumer.LedgerAllowance - consumer.DefaultCutoffMargin(providerTimeout)
			if concurrency != shares || concurrency < 2 {
				t.Errorf("%s: maximum concurrency %v, the consumer divides the rate by %v", q.Name, concurrency, shares)
			}
			if need := time.Duration(batch * shares / rate * float64(time.Second)); batch < 1 || need > window {
				t.Errorf("%s: a batch of %v at %v/s per instance needs %v; the invocation has %v", q.Name, batch, rate/shares, need, window)
			}
			if fmt.Sprint(mapping["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" || batch != float64(q.BatchSize) {
				t.Errorf("%s: mapping %v", q.Name, mapping)
			}
			// The producers know the queue, and may send to it.
			for _, name := range []string{"consumer", "enqueue"} {
				f := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-"+name))
				if v := fmt.Sprint(f["Environment"].(map[string]any)["Variables"].(map[string]any)["NUDGE_PROVIDER_QUEUES"]); !strings.Contains(v, "ses=") || !strings.Contains(v, pacedID) {
					t.Errorf("the %s's NUDGE_PROVIDER_QUEUES %s does not name %s", name, v, pacedID)
				}
			}
			sends := 0
			for _, p := range tp.resources("AWS::IAM::Policy") {
				for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					st := fmt.Sprint(st)
					if strings.Contains(st, "sqs:SendMessage") && strings.Contains(st, pacedID) {
						sends++
					}
				}
			}
			if sends < 2 {
				t.Errorf("%d function policies may send to %s; want the consumer's and the enqueue's", sends, q.Name)
			}
			alarm := false
			for _, a := range tp.resources("AWS::CloudWatch::Alarm") {
				p := props(a)
				alarm = alarm || p["AlarmName"] == "nudge-"+s.Name+"-oldest-message-age-ses" && strings.Contains(fmt.Sprint(p["Dimensions"]), pacedID)
			}
			if !alarm {
				t.Errorf("no oldest-message-age alarm on %s", q.Name)
			}
			outputs := tp["Outputs"].(map[string]any)
			if _, ok := outputs["ProviderQueues"]; !ok {
				t.Errorf("no ProviderQueues output")
			}
			if _, ok := outputs["WorkQueueUrlSes"]; !ok {
				t.Errorf("no WorkQueueUrlSes output")
			}
		})
	}
}
