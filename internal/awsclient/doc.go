// Package awsclient builds the AWS SDK clients Nudge uses, once per process,
// from the standard AWS environment (region, credentials, and the
// AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS endpoints that point the
// same binaries at local stand-ins), and counts the API requests they make.
package awsclient
