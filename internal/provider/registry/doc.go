// Package registry lists the provider drivers Nudge knows (webhook, SES,
// SNS): the one place a provider is added. The consumer builds the
// providers a stage runs from it, the intake checks deliveries with it,
// the stage gives each function its providers' variables from it, and the
// stack provisions what each needs.
package registry
