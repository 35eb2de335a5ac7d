package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

// providerStack is each provider's part of the stack, by the provider's
// name: the one line a new provider adds here, beside its driver's in the
// registry (internal/provider/registry); its part is in provider_<name>.go.
var providerStack = map[string]func() *providerParts{
	webhook.Name: webhookParts,
	ses.Name:     sesParts,
	sns.Name:     snsParts,
}

// providerParts is what one provider adds to the stack, at each step of
// NewNudgeStack; every step is optional. The functions of one value share
// what the earlier steps made.
type providerParts struct {
	// params defines the provider's deploy-time parameters, before the
	// table and the queues.
	params func(n *NudgeStack, id string)
	// resources defines what the functions' environment names (a topic,
	// the templates), before the functions, and returns the provider's
	// resources as its driver's Env reads them.
	resources func(n *NudgeStack, s deployment.Stage, props *NudgeStackProps) map[string]string
	// grants gives the consumer what it needs of the provider, once the
	// functions exist.
	grants func(n *NudgeStack, s deployment.Stage)
	// operated defines what comes after the operator's policy (and may add
	// to it).
	operated func(n *NudgeStack, s deployment.Stage)
	// alarms adds the provider's alarms.
	alarms func(n *NudgeStack, s deployment.Stage, add alarmFunc)
	// reports is set for a provider whose reports on a message after it
	// took it are recorded on the delivery (SES's events): the outcomes
	// mapping then also passes the deliveries that hold a report.
	reports bool
}

// alarmFunc adds an alarm when the metric is above threshold in datapoints
// of the last periods minutes (all of them if datapoints is 0).
type alarmFunc func(id, description string, m awscloudwatch.IMetric, threshold float64, periods, datapoints float64, missing awscloudwatch.TreatMissingData)
