// Command infra is Nudge's CDK app: one stack per stage (Nudge-dev,
// Nudge-prod) with the ledger table and its due index, the work queue and
// DLQ, the consumer and enqueue functions, the schedule, the alarms and a
// dashboard. Its settings come from pkg/deployment, which the local
// stand-ins are provisioned from too; context overrides them:
//
//	cdk synth -c stage=prod -c alarmEmail=ops@example.com -c consumerMemory=1024
//
// It is its own Go module, so that the CDK libraries never reach the Lambda
// binaries. cdk.json at the repository root runs it.
package main
