package awsclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/nudgehq/nudge/pkg/awsclient"
)

type secrets map[string]string

func (s secrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v, ok := s[aws.ToString(in.SecretId)]
	if !ok {
		return nil, errors.New("ResourceNotFoundException")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

func TestReadSecret(t *testing.T) {
	t.Parallel()
	api := secrets{"nudge/webhook": "s3cret", "empty": ""}
	if v, err := awsclient.ReadSecret(context.Background(), api, "nudge/webhook"); err != nil || v != "s3cret" {
		t.Fatalf("ReadSecret = %q, %v", v, err)
	}
	if _, err := awsclient.ReadSecret(context.Background(), api, "missing"); err == nil || !strings.Contains(err.Error(), "role may read it") {
		t.Fatalf("missing secret: %v", err)
	}
	if _, err := awsclient.ReadSecret(context.Background(), api, "empty"); err == nil || !strings.Contains(err.Error(), "plain text") {
		t.Fatalf("empty secret: %v", err)
	}
}
