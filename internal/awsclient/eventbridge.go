package awsclient

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
)

// EventBridge returns an EventBridge client (its endpoint, like every
// client's, from AWS_ENDPOINT_URL_EVENTBRIDGE or the configuration: the
// local bus's in the local system).
func EventBridge(cfg aws.Config) *eventbridge.Client { return eventbridge.NewFromConfig(cfg) }
