// Package standintest gives tests AWS clients pointed at the local
// stand-ins that `make test` starts, and fresh tables and queues per test.
//
// Without the stand-ins (AWS_ENDPOINT_URL_DYNAMODB / _SQS unset) a test is
// skipped, unless CI or NUDGE_REQUIRE_STANDINS is set, where it fails: the
// integration tests must never silently not run there. Tests never reach
// real AWS: without a local endpoint they do not run at all.
package standintest
