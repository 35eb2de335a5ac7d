// Package envconfig reads a function's settings from its environment, with
// defaults and errors that name the variable and what it should hold. The
// CDK stack and `nudge local` set the same variables.
package envconfig
