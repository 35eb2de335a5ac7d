package streammap

// RetryDelay is retryDelay, for the tests.
var RetryDelay = retryDelay
