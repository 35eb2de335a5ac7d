// Package streammap is a stand-in for Lambda's event source mapping of a
// DynamoDB stream, for running Nudge on one machine: it reads a table's
// stream from DynamoDB Local (DescribeStream, GetShardIterator, GetRecords)
// and invokes a function, the outcomes function in the emulator or in
// process (InProcess), with batches shaped as Lambda's events.DynamoDBEvent,
// reading its answer as Lambda reads events.DynamoDBEventResponse. Against
// AWS none of this runs: the mapping is Lambda's.
//
// What it follows of Lambda's mapping, by the Lambda developer guide:
//
//   - The event (with-ddb.html, "Example event"): per record eventID,
//     eventName (INSERT, MODIFY, REMOVE), eventVersion, eventSource
//     "aws:dynamodb", awsRegion, eventSourceARN (the stream's ARN), and
//     dynamodb with ApproximateCreationDateTime (epoch seconds), Keys,
//     NewImage, OldImage, SequenceNumber, SizeBytes and StreamViewType; the
//     attributes in DynamoDB JSON ({"S": "x"}, {"M": {…}}, …; Image).
//   - Parameters (services-ddb-params.html): BatchSize 1–10,000, default
//     100 (the CDK's DynamoEventSource caps it at 1,000); StartingPosition
//     TRIM_HORIZON or LATEST; MaximumRetryAttempts -1 (the default: until
//     the records expire) or 0–10,000; ParallelizationFactor 1, the default,
//     the only one here: per shard, one batch at a time, in order.
//   - Partial batch responses (services-ddb-batchfailurereporting.html; the
//     mapping reads them as if FunctionResponseTypes had
//     ReportBatchItemFailures): a batch that succeeds moves the shard's
//     checkpoint past its last record; an empty or null response, or an
//     empty or null batchItemFailures, is a success; with several
//     itemIdentifiers the lowest sequence number is the checkpoint and
//     every record from it is retried (the records before it are not sent
//     again); an empty, null or misspelt itemIdentifier fails the whole
//     batch, and so, here, does one that is not a sequence number of the
//     batch. A function error, an invocation that fails and a response that
//     is not JSON fail the whole batch (Acknowledged).
//   - Errors (services-dynamodb-errors.html): a failed batch is retried
//     until it succeeds or its retries run out; then its records are
//     discarded, handed to Config.OnFailure as Lambda hands them to an
//     on-failure destination (Discarded: the batch's shard and sequence
//     numbers, and its event, as an S3 destination keeps it), and the shard
//     moves on. Retries pause (Config.RetryDelay, doubling up to 5 s).
//   - Shards (DynamoDB developer guide, Streams.html, "Reading and
//     processing a stream"): a parent shard is read to its end before its
//     children; shards that appear while the mapping runs are read from
//     their start, as a split's children are.
//
// What it does not do: filter criteria, tumbling windows, a batching window
// (a batch is what the reads return at once, as with Lambda's default 0),
// BisectBatchOnFunctionError, MaximumRecordAgeInSeconds (DynamoDB Local
// keeps records; Run ending is the local "until the records expire"),
// ParallelizationFactor above 1, metrics. Shards are read concurrently, but
// the function is invoked one batch at a time across all of them, since
// one emulator instance cannot take two invocations at once; after an
// invocation that failed without an answer, a Recycler Invoker is recycled
// first. The function's timeout is the Invoker's (the emulator enforces
// it). Checkpoints are kept in memory: a new Mapping starts again at its
// StartingPosition, where Lambda's mapping resumes from its checkpoints.
//
// Drain is how a caller knows that the function has seen everything written
// before a point: it returns once every shard has read past that point and
// the function has acknowledged (or the mapping discarded) every record.
package streammap
