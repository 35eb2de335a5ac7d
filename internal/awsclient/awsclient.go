package awsclient

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Load reads the standard AWS configuration for region and credentials.
func Load(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsclient: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("awsclient: no AWS region; set AWS_REGION (Lambda sets it for you)")
	}
	return cfg, nil
}

// DynamoDB returns a DynamoDB client. Pointed at a local endpoint, it skips
// the response CRC32 check, which DynamoDB Local does not fill in on errors.
func DynamoDB(cfg aws.Config) *dynamodb.Client {
	local := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != ""
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if local {
			o.DisableValidateResponseChecksum = true
		}
	})
}

// SQS returns an SQS client.
func SQS(cfg aws.Config) *sqs.Client { return sqs.NewFromConfig(cfg) }
