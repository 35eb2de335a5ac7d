package awsclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/awsclient"
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
	if v, err := awsclient.ReadSecret(context.Background(), api, "nudge/webhook", "WebhookSigningRef", "WebhookSigningKmsArn"); err != nil || v != "s3cret" {
		t.Fatalf("ReadSecret = %q, %v", v, err)
	}
	if _, err := awsclient.ReadSecret(context.Background(), api, "missing", "WebhookSigningRef", "WebhookSigningKmsArn"); err == nil || !strings.Contains(err.Error(), "role may read it") {
		t.Fatalf("missing secret: %v", err)
	}
	if _, err := awsclient.ReadSecret(context.Background(), api, "empty", "WebhookSigningRef", "WebhookSigningKmsArn"); err == nil || !strings.Contains(err.Error(), "plain text") {
		t.Fatalf("empty secret: %v", err)
	}
}

type refusing struct{ code, message string }

func (r refusing) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return nil, &smithy.OperationError{ServiceID: "Secrets Manager", OperationName: "GetSecretValue", Err: &smithy.GenericAPIError{Code: r.code, Message: r.message}}
}

// TestSecretErrorsNameTheSecretAndTheFix: a consumer that cannot read its
// secret fails to start with one line naming the secret and the missing
// permission or setting.
func TestSecretErrorsNameTheSecretAndTheFix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want []string
	}{
		{"AccessDeniedException", []string{`"nudge/webhook-signing"`, "secretsmanager:GetSecretValue", "kms:Decrypt", "WebhookSigningKmsArn"}},
		{"DecryptionFailure", []string{`"nudge/webhook-signing"`, "kms:Decrypt on its KMS key", "WebhookSigningKmsArn"}},
		{"ResourceNotFoundException", []string{`"nudge/webhook-signing"`, "create it", "WebhookSigningRef"}},
	} {
		_, err := awsclient.ReadSecret(context.Background(), refusing{tc.code, "denied by policy"}, "nudge/webhook-signing", "WebhookSigningRef", "WebhookSigningKmsArn")
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v; want one line with %q", tc.code, err, w)
			}
		}
	}
}
