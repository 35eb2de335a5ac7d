package awsclient

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// SecretAPI is the part of the Secrets Manager client ReadSecret uses.
type SecretAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretAPI = (*secretsmanager.Client)(nil)

// SecretsManager returns a Secrets Manager client.
func SecretsManager(cfg aws.Config) *secretsmanager.Client { return secretsmanager.NewFromConfig(cfg) }

// ReadSecret reads a string secret by name or ARN, once, at start-up.
func ReadSecret(ctx context.Context, api SecretAPI, id string) (string, error) {
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return "", fmt.Errorf("read secret %q: %w; check that it exists in this region and that the function's role may read it", id, err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("secret %q has no string value; store the signing secret as plain text", id)
	}
	return *out.SecretString, nil
}
