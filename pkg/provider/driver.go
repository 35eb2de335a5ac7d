package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/failure"
)

// Driver declares one provider in one place: its name, its contract, its
// settings from the stage to each function's environment, what the intake
// checks of its deliveries, how a function builds it, and how the local
// system stands it in. The registry (internal/provider/registry) lists
// the drivers; the consumer, the intake, the stage and the stack iterate
// it, so adding a provider is a package declaring its Driver and one line
// in the registry (and, if the stack provisions something for it, its
// part of the stack).
type Driver struct {
	// Name is what a delivery's provider field gives: 1–32 lower-case
	// letters, digits, '_' or '-'.
	Name string
	// Title is how messages and summaries name it ("SES").
	Title string
	// Contract is what the provider promises and how its answers are
	// classified (docs/providers.md has the same rows).
	Contract Contract
	// Settings are the stage's settings of this provider, each a CDK context
	// key (-c key=value). Deployment.Settings holds their values.
	Settings []Setting
	// CheckStage refuses a stage whose settings of this provider do not
	// hold, with the fix. Optional.
	CheckStage func(d Deployment) error
	// Env returns each function's variables for this provider, from the
	// stage's settings and the resources the stack (or the local system)
	// made for it. Optional.
	Env func(d Deployment) map[Function]map[string]string
	// CheckEnv checks this provider's variables in function fn's
	// environment, as the function does when it starts (the stage runs it
	// on the environment Env gives). Optional.
	CheckEnv func(fn Function, getenv func(string) string) error
	// Example are resources of the shape Env reads, with which the stage
	// checks its functions' environments before the stack has made the
	// real ones.
	Example map[string]string
	// Intake is what the intake (every door: the API, the CLI, a program)
	// checks of a delivery to this provider.
	Intake IntakeRules
	// RecordWait reads the stage's wait for the provider's report from the
	// consumer's environment (the variables its Env gave), its contract's
	// Reports where the stage set none. Optional: without it, the
	// contract's.
	RecordWait func(getenv func(string) string) (RecordWait, error)
	// Build makes the provider in the consumer. Required.
	Build func(ctx context.Context, env Env) (Provider, error)
	// StandIn is how the local system stands the provider in.
	StandIn StandIn
}

// Contract is what a provider promises, as the consumer and the operator
// rely on it.
type Contract struct {
	// Deduplicates says what the provider (or its receivers) deduplicate
	// by, and for how long; "" if nothing is deduplicated.
	Deduplicates string
	// Ambiguous is the default policy for a send that may have gone out
	// (NUDGE_<NAME>_AMBIGUOUS overrides it): retry where the provider
	// deduplicates by the delivery key; where it does not, record if it
	// reports what it accepted (Reports), else review.
	Ambiguous AmbiguousPolicy
	// Reports is the provider's report of every message it accepted, which
	// Nudge records on the delivery (SES's Send event, through the feedback
	// function); nil if it reports none. Only a provider that reports may
	// take AmbiguousRecord.
	Reports *Reports
	// Rate is the stage's default sends per second to the provider, shared
	// by the consumer's instances (NUDGE_<NAME>_RATE overrides it); 0 is no
	// limit.
	Rate float64
	// Classification is the provider's answers and what each becomes: the
	// table docs/providers.md shows, tested against the stand-in.
	Classification []Row
	// Price is what the provider itself charges per send; zero for a
	// receiver of the user's own.
	Price Price
}

// Reports is how a provider reports the messages it accepted, and how long
// the consumer waits for the report of an ambiguous send.
type Reports struct {
	// Record names the report, for notes and reasons ("SES's record").
	Record string
	// Window is how long after an ambiguous attempt started its report may
	// take to arrive while the report path works: past it, with a later
	// message's report arrived, the attempt is taken as not accepted and
	// sent again. The stage may set another (Driver.RecordWait).
	Window time.Duration
	// MaxWait is how long the consumer waits for the report at most: past
	// it the delivery is dead-lettered for review. The stage may set
	// another (Driver.RecordWait).
	MaxWait time.Duration
}

// RecordWait is what a consumer waits for a provider's report under
// AmbiguousRecord.
type RecordWait struct {
	// Record names the report (Reports.Record; WaitFor fills it in).
	Record string
	// Window and MaxWait are as in Reports.
	Window, MaxWait time.Duration
}

// Price is a provider's list price: USD per Per units of Unit.
type Price struct {
	USD  float64
	Per  int
	Unit string // "e-mails", "publishes"
}

// PerMillion is the price of units units per send, per million sends.
func (p Price) PerMillion(units float64) float64 {
	if p.Per == 0 {
		return 0
	}
	return units * p.USD * 1e6 / float64(p.Per)
}

// Row is one line of a provider's classification table.
type Row struct {
	// Answer is what the provider answered ("429", "MessageRejected
	// (suppressed)", "no answer after the request was written").
	Answer string
	// Kind and Class are what it becomes.
	Kind  failure.Kind
	Class failure.Class
}

// AmbiguousPolicy is what the consumer does with a send that may have
// reached the provider: no answer came after the request was written, the
// provider failed while handling it, or an earlier attempt lost its lease
// mid-send.
type AmbiguousPolicy string

// The policies.
const (
	// AmbiguousRetry sends again with the same idempotency key: right for
	// a provider that deduplicates by it (the webhook's receivers, an SNS
	// FIFO topic within 5 minutes, subscribers keyed by deliveryKey); a
	// possible duplicate elsewhere, counted in the consumer's Ambiguous
	// metric.
	AmbiguousRetry AmbiguousPolicy = "retry"
	// AmbiguousReview dead-letters the delivery as class "ambiguous": an
	// operator checks the provider's record and redrives or not. Right for
	// a provider that does not deduplicate (SES): nothing is sent twice,
	// and nothing is lost either, since the DLQ alarm calls someone.
	AmbiguousReview AmbiguousPolicy = "review"
	// AmbiguousRecord waits for the provider's own record of what it
	// accepted (Contract.Reports): a delivery the provider reports is
	// recorded sent; one it does not report within the window, while it
	// reports later messages, is sent again; one still unsettled after the
	// longest wait is dead-lettered for review. Only for a provider that
	// reports (SES's Send event): nothing is sent twice unless the record
	// says it was not taken.
	AmbiguousRecord AmbiguousPolicy = "record"
)

// ParseAmbiguousPolicy reads a policy by name.
func ParseAmbiguousPolicy(s string) (AmbiguousPolicy, error) {
	switch p := AmbiguousPolicy(s); p {
	case AmbiguousRetry, AmbiguousReview, AmbiguousRecord:
		return p, nil
	}
	return "", fmt.Errorf("ambiguous policy %q is not retry, review or record", s)
}

// CheckAmbiguousPolicy refuses a policy driver d cannot take: record for
// a provider that reports nothing, with the fix.
func CheckAmbiguousPolicy(d Driver, p AmbiguousPolicy) error {
	if p == AmbiguousRecord && d.Contract.Reports == nil {
		return fmt.Errorf("ambiguous policy record needs a provider that reports what it accepted, and %s reports nothing: "+
			"use review (an operator checks) or retry (sent again)", d.Name)
	}
	return nil
}

// WaitFor returns what the consumer waits for d's report, from the
// consumer's environment: d.RecordWait's, else its contract's; zero for a
// provider that reports nothing.
func WaitFor(d Driver, getenv func(string) string) (RecordWait, error) {
	if d.Contract.Reports == nil {
		return RecordWait{}, nil
	}
	w := RecordWait{Window: d.Contract.Reports.Window, MaxWait: d.Contract.Reports.MaxWait}
	if d.RecordWait != nil {
		var err error
		if w, err = d.RecordWait(getenv); err != nil {
			return RecordWait{}, err
		}
	}
	w.Record = d.Contract.Reports.Record
	return w, nil
}

// Setting is one of a provider's stage settings.
type Setting struct {
	// Key is its CDK context key (-c key=value), and its key in
	// Deployment.Settings.
	Key string
	// Doc says what it is, for the stage's documentation.
	Doc string
}

// Function names one of Nudge's functions, for the variables a driver
// gives each.
type Function string

// The functions.
const (
	Consumer Function = "consumer"
	Enqueue  Function = "enqueue"
	Intake   Function = "intake"
)

// Deployment is what a driver is told of the stage it runs in.
type Deployment struct {
	// Stage is the stage's name ("dev").
	Stage string
	// Settings are the stage's values of the driver's Settings, by key;
	// a key not set is absent.
	Settings map[string]string
	// Resources are what the stack (or the local system) made for the
	// provider, by the names the driver's Env reads (an endpoint's URL, a
	// secret's ARN, a topic's ARN).
	Resources map[string]string
}

// Env is what a function builds a provider with.
type Env struct {
	// Getenv reads the function's environment (the variables the driver's
	// Env gave it).
	Getenv func(string) string
	// Timeout bounds one send.
	Timeout time.Duration
	// ReadSecret reads a secret from Secrets Manager, for a driver that
	// keeps one there.
	ReadSecret func(ctx context.Context, s Secret) (string, error)
	// AWS is the function's AWS configuration (an aws.Config of
	// github.com/aws/aws-sdk-go-v2/aws), for a driver that calls an AWS
	// service. It is typed any so that this package, and a driver that
	// calls none, do not depend on the SDK.
	AWS any
}

// Secret names a secret a driver reads, and the deployment's settings
// that name it and its key, for the fix when it cannot be read.
type Secret struct {
	// ID is the secret's name, partial ARN or full ARN.
	ID string
	// Setting and KeySetting are the deployment's settings (the stack's
	// parameters) that name the secret and its customer managed key.
	Setting, KeySetting string
}

// AddressKind is what a delivery's address must be for a provider.
type AddressKind int

// The kinds.
const (
	// NoAddress: the provider carries references only; a delivery that
	// gives an address is refused.
	NoAddress AddressKind = iota
	// EmailAddress: the provider sends to an e-mail address the delivery
	// must give.
	EmailAddress
)

// IntakeRules are what the intake checks of a delivery to a provider, and
// what it keeps for it.
type IntakeRules struct {
	// Address is what the delivery's address must be. With NoAddress, a
	// delivery giving one is refused; otherwise Door checks it.
	Address AddressKind
	// RendersTemplates: the provider renders the delivery's template with
	// the reminder's metadata, which is kept on its deliveries as the
	// template's data. Otherwise the receiver resolves templateRef itself.
	RendersTemplates bool
	// Recorded are the intake's variables Door reads that the enqueue
	// records in the table (ledger.StageFacts), so that the CLI's intake
	// checks as the intake function does; the stage gives them to the
	// enqueue too.
	Recorded []string
	// Door makes the provider's checks of a delivery in one process, from
	// the process's view of the stage (env.Getenv: the intake function's
	// environment, or the variables the enqueue recorded for the CLI; an
	// unset variable reads ""). With env.AWS set, a door may ask the
	// provider (which templates exist). Optional: without it, only Address
	// is checked.
	Door func(env Env) (Door, error)
}

// Door checks a delivery to one provider, at intake.
type Door interface {
	// Check returns the first problem of d, or nil. Problems never quote
	// the address: they reach logs.
	Check(d Delivery) *Problem
}

// TemplateDoor is a Door that also knows which templates are deployed.
type TemplateDoor interface {
	Door
	// CheckTemplate returns the problem of a delivery naming template ref
	// for a reminder with metadata: a template not deployed, or data it
	// renders missing. The provider would accept such a send and fail it
	// afterwards, when nobody is told. An error is a failure to find out.
	CheckTemplate(ctx context.Context, ref string, metadata map[string]string) (*Problem, error)
}

// Delivery is what a Door checks of a delivery.
type Delivery struct {
	Channel, Provider, RecipientRef, TemplateRef, Address string
}

// Problem is one field of a delivery the provider cannot use, and the fix.
type Problem struct {
	// Field is the delivery's field ("address", "templateRef",
	// "channel"), or the reminder's metadata ("metadata", "metadata.key").
	Field   string
	Problem string
	Fix     string
}

// StandIn is how the local system stands a provider in, for the demo, the
// chaos run and the tests.
type StandIn struct {
	// Kind is the stand-in that plays the provider.
	Kind StandInKind
	// Resources are the provider's resources (Deployment.Resources) from
	// what the local system made for it on its stand-in.
	Resources func(l Local) map[string]string
	// Settings are the stage settings the local system gives the provider
	// (Deployment.Settings; a sender address the stand-in accepts, say).
	Settings map[string]string
	// Evidence says where the local runs read what the provider accepted,
	// for their summary ("the sink's acceptances").
	Evidence string
	// Faults are the answers the provider's service gives, by the local
	// runs' fault kind ("500", "429", "400", "down"), for a provider whose
	// faults are injected in front of an AWS stand-in; none for the sink,
	// which injects its own.
	Faults map[string]Answer
	// Rate is the local runs' default sending rate per second for the
	// provider (0: its contract's); `nudge local demo --<name>-rate` sets
	// another.
	Rate float64
}

// Answer is an error answer of an AWS service.
type Answer struct {
	Status        int
	Code, Message string
}

// Local is what the local system made on a provider's stand-in.
type Local struct {
	// URL and Secret are the sink's endpoint and signing secret.
	URL, Secret string
	// TopicARN is the topic on fauxqs's SNS.
	TopicARN string
	// Templates is the catalogue of the e-mail templates created in the
	// SES stand-in (as the stack's).
	Templates string
}

// StandInKind names a local stand-in that can play a provider.
type StandInKind string

// The stand-ins.
const (
	// SinkStandIn is internal/local/sink: an HTTP receiver that verifies the
	// webhook signature, deduplicates by Idempotency-Key and injects
	// faults.
	SinkStandIn StandInKind = "sink"
	// EmailStandIn is the SES (API v2) stand-in, aws-ses-v2-local: stored
	// templates rendered, sent mail kept in its store.
	EmailStandIn StandInKind = "email"
	// TopicStandIn is fauxqs's SNS: a topic with a subscriber queue that
	// receives what is published.
	TopicStandIn StandInKind = "topic"
)

// EnvName is the name of a provider's variable of every function that has
// one for each provider: NUDGE_<NAME>_<SUFFIX>, the name upper-cased with
// '-' as '_' (EnvName("ses", "RATE") is NUDGE_SES_RATE).
func EnvName(name, suffix string) string {
	return "NUDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_" + suffix
}
