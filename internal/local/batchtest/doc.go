// Package batchtest helps test SQS handlers: it loads real-shaped events from
// files and fakes the SQS visibility API.
package batchtest
