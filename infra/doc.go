// Command infra is Nudge's CDK app: one stack per stage (Nudge-dev,
// Nudge-prod) with the ledger table, its indexes and its stream, the work
// queue and DLQ, the consumer, enqueue, intake and outcomes functions, the
// outcome events' bus, the schedule, the alarms and a dashboard. Its settings come from internal/deployment, which the local
// stand-ins are provisioned from too; context overrides them:
//
//	cdk synth -c stage=prod -c alarmEmail=ops@example.com -c consumerMemory=1024
//
// Without -c stage=…, it defines every stage whose settings hold (prod only
// once it has an alarm target) and names on stderr any it leaves out.
//
// It is its own Go module, so that the CDK libraries never reach the Lambda
// binaries. cdk.json at the repository root runs it through infra/app.sh,
// which first builds the functions' linux/arm64 bootstraps from the current
// source (infra/build-functions.sh), so a plain cdk synth or cdk deploy
// needs only Go and the CDK CLI.
package main
