package awsclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
)

// SecretAPI is the part of the Secrets Manager client ReadSecret uses.
type SecretAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretAPI = (*secretsmanager.Client)(nil)

// SecretsManager returns a Secrets Manager client.
func SecretsManager(cfg aws.Config) *secretsmanager.Client { return secretsmanager.NewFromConfig(cfg) }

// ReadSecret reads a string secret by name, partial ARN or full ARN, once,
// at start-up. Its error names the secret and, for the usual causes, the
// permission or the setting to fix (setting: the deployment's setting that
// names the secret; keySetting: the one that names its customer managed
// key), in one line: the function logs it as it fails to start.
func ReadSecret(ctx context.Context, api SecretAPI, id, setting, keySetting string) (string, error) {
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	var apiErr smithy.APIError
	switch {
	case err == nil:
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "AccessDeniedException":
		return "", fmt.Errorf("cannot read secret %q: the function's role lacks secretsmanager:GetSecretValue on it, or kms:Decrypt on the KMS key that encrypts it (deploy with the secret's name or ARN as %s, and its customer managed key, if any, as %s): %s", id, setting, keySetting, apiErr.ErrorMessage())
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "DecryptionFailure":
		return "", fmt.Errorf("cannot decrypt secret %q: the function's role lacks kms:Decrypt on its KMS key (deploy with the key's ARN as %s): %s", id, keySetting, apiErr.ErrorMessage())
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "ResourceNotFoundException":
		return "", fmt.Errorf("no secret %q in this account and region: create it (aws secretsmanager create-secret --name … --secret-string …) or fix %s", id, setting)
	default:
		return "", fmt.Errorf("read secret %q: %w; check that it exists in this region and that the function's role may read it", id, err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("secret %q has no string value; store the signing secret as plain text", id)
	}
	return *out.SecretString, nil
}
