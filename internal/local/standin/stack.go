package standin

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Stack is DynamoDB Local, fauxqs (SQS and SNS) and aws-ses-v2-local
// running together.
type Stack struct {
	Dir      string
	DynamoDB *Service
	SQS      *Service
	SES      *Service
}

// Up installs what is missing and starts DynamoDB Local and fauxqs.
func Up(ctx context.Context, dir string, log io.Writer) (*Stack, error) {
	if err := Install(ctx, dir, log); err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir}
	type result struct {
		svc *Service
		err error
	}
	ddb, sqs, ses := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	go func() { svc, err := StartDynamoDB(ctx, dir, Options{}); ddb <- result{svc, err} }()
	go func() { svc, err := StartSQS(ctx, dir, Options{}); sqs <- result{svc, err} }()
	go func() { svc, err := StartSES(ctx, dir, Options{}); ses <- result{svc, err} }()
	d, q, e := <-ddb, <-sqs, <-ses
	s.DynamoDB, s.SQS, s.SES = d.svc, q.svc, e.svc
	if err := errors.Join(d.err, q.err, e.err); err != nil {
		s.Stop()
		return nil, err
	}
	fmt.Fprintf(log, "standin: DynamoDB Local on %s (pid %d), fauxqs on %s (pid %d), aws-ses-v2-local on %s (pid %d)\n",
		s.DynamoDB.Endpoint, s.DynamoDB.Pid(), s.SQS.Endpoint, s.SQS.Pid(), s.SES.Endpoint, s.SES.Pid())
	return s, nil
}

// Env returns the environment that points the AWS SDK (and Nudge's tests)
// at the stand-ins, with static test credentials.
func (s *Stack) Env() []string {
	return append(EndpointEnv(Endpoints{DynamoDB: s.DynamoDB.Endpoint, SQS: s.SQS.Endpoint, SES: s.SES.Endpoint}), "NUDGE_RIE="+RIEBinary(s.Dir), "NUDGE_LOCAL_DIR="+s.Dir)
}

// Endpoints are where AWS calls go: the stand-ins, or fronts (counting
// proxies, fault fronts) before them. An empty SNS goes where SQS does
// (fauxqs serves both).
type Endpoints struct{ DynamoDB, SQS, SNS, SES, EventBridge string }

// EndpointEnv is the environment that points an AWS SDK at ep with static
// test credentials, and away from any profile, shared config or instance
// metadata.
func EndpointEnv(ep Endpoints) []string {
	if ep.SNS == "" {
		ep.SNS = ep.SQS
	}
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + ep.DynamoDB,
		"AWS_ENDPOINT_URL_SQS=" + ep.SQS,
		"AWS_ENDPOINT_URL_SNS=" + ep.SNS,
		"AWS_ENDPOINT_URL_SESV2=" + ep.SES,
		"AWS_ENDPOINT_URL_EVENTBRIDGE=" + ep.EventBridge,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=us-east-1",
		"AWS_PROFILE=",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Stop stops both services.
func (s *Stack) Stop() {
	if s == nil {
		return
	}
	s.DynamoDB.Stop()
	s.SQS.Stop()
	s.SES.Stop()
}
