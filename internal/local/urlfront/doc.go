// Package urlfront stands for a Lambda function URL on one machine: an HTTP
// server on a free loopback port that turns each request into the event a
// function URL sends (payload format 2.0, events.LambdaFunctionURLRequest,
// with routeKey and stage "$default"), invokes the function with it, and
// turns the function's answer into the HTTP response, as a function URL in
// BUFFERED mode does:
//
//   - an output with a statusCode is an events.LambdaFunctionURLResponse: its
//     status, headers, cookies (one Set-Cookie each) and body (decoded when
//     isBase64Encoded);
//   - any other JSON output is answered 200, application/json, the output as
//     the body;
//   - a function error ({"errorMessage": …, "errorType": …}), an output that
//     is not JSON (the emulator's "Task timed out after …"), a malformed
//     response or a failed invocation is answered 502
//     {"Message":"Internal Server Error"}, and logged with the reason.
//
// Like a function URL with auth type AWS_IAM, it refuses a request without a
// SigV4 Authorization header ("AWS4-HMAC-SHA256 Credential=AKID/date/
// region/lambda/aws4_request, SignedHeaders=…, Signature=…") with 403
// {"Message":"Forbidden"}, and the function never sees it; a request signed
// for another region or service is refused too. It does NOT verify the
// signature: there is no IAM on the machine, so any key signs. The caller's
// access key goes into requestContext.authorizer.iam, with the configured
// account and the user ARN arn:aws:iam::<account>:user/local. Presigned URLs
// (the credential in the query string) are not accepted.
//
// An event larger than Lambda's synchronous payload limit (6 MB) is
// answered 413 {"Message":"Request Entity Too Large"} without invoking.
//
// The Invokers are the function's instances; each gets one request at a
// time (the Lambda runtime interface emulator cannot take two invocations
// at once), so their number is the function's concurrency. A request waits
// for a free instance up to the function's timeout, then is answered 429
// {"Message":"Rate Exceeded."}, as a function URL answers when the
// function's concurrency is exhausted. Lambda refuses at once, but scales
// to its reserved concurrency first; a local run has a few instances, so a
// burst waits for them instead. The invocation's deadline is the timeout
// plus a margin, and it runs to its end even if the client goes away, as in
// Lambda. Every request writes one access log line: method, path, status,
// duration, the invoker that served it, the request id (which is also the
// invocation's id in the emulator's log).
//
// Against AWS none of this runs: the function URL is Lambda's own.
package urlfront
