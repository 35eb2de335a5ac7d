// Package metrics records Nudge's counters and timings and writes them as
// CloudWatch Embedded Metric Format: one JSON line per invocation on
// standard output, which Lambda ships to CloudWatch Logs and CloudWatch
// turns into metrics, with no API calls from the function.
package metrics
