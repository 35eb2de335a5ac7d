// Package deployment is the one place that says how Nudge's resources are
// set up: the stage settings (memory, timeouts, batch settings, attempt
// budget, shards, retention), the queue settings derived from them, the
// invariants between them, and the environment each function gets. The CDK
// stack (infra/) and the local stand-ins (`nudge local`) both build from it,
// so what runs locally is what is deployed.
package deployment
