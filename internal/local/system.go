package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/internal/provider/ses"
	snsprovider "github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/local/bus"
	"github.com/nudgehq/nudge/internal/local/sesevents"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/urlfront"
	"github.com/nudgehq/nudge/pkg/intake"
)

// WebhookSecret signs the requests of the local provider: the consumer
// gets it as NUDGE_WEBHOOK_SECRET, and the sink checks it.
const WebhookSecret = "nudge-local-sink-secret"

// Config configures a System.
type Config struct {
	// Stage names and shapes the resources. Required.
	Stage deployment.Stage
	// Dir is the stand-ins' folder. Default standin.DefaultDir().
	Dir string
	// DynamoDBEndpoint, SQSEndpoint (fauxqs, which serves SNS too) and
	// SESEndpoint are stand-ins already running (nudge local exec's). Any
	// empty: Start starts all three, and Close stops them.
	DynamoDBEndpoint, SQSEndpoint, SESEndpoint string
	// Plan is the provider's faults. Nil: it accepts every request.
	Plan sink.Plan
	// Log receives what Start installs and starts. Default io.Discard.
	Log io.Writer
	// TemplatesDir is the e-mail templates' folder. Default TemplatesDir().
	TemplatesDir string
}

// System is the local system, running. Close stops what Start started.
type System struct {
	Stage                                      deployment.Stage
	Dir                                        string
	DynamoDBEndpoint, SQSEndpoint, SESEndpoint string
	// Resources are the stage's table and queues.
	Resources Provisioned
	// DB and SQS are clients on the stand-ins.
	DB  *dynamodb.Client
	SQS *sqs.Client
	// Sink is the provider, at WebhookURL.
	Sink       *sink.Sink
	WebhookURL string
	// SES and SNS are clients on the SES stand-in and fauxqs's SNS;
	// Templates the e-mail templates created in the SES stand-in, when the
	// stage runs ses.
	SES       *sesv2.Client
	SNS       *sns.Client
	Templates []ses.Template
	// Bus stands in for EventBridge: the stage's bus (and the default
	// one), with the rule that delivers the outcome events to the
	// outcomes queue (Resources.OutcomesURL) and, when the stage runs ses,
	// the one on the default bus that delivers SES's sending events to the
	// feedback queue (Resources.FeedbackURL).
	Bus *bus.Bus
	// SESEvents stands in for SES's event publishing: a front for the SES
	// stand-in, the functions' SES endpoint, that puts SES's events of
	// every e-mail it accepted on the bus's default bus.
	SESEvents *sesevents.Front

	stop []func()
}

// Start installs what is missing, starts the stand-ins unless cfg names
// running ones, provisions the stage's resources (and records the stage's
// shard count in the table, as the enqueue's first run does in AWS, so that
// the intake can place deliveries at once), and starts the provider.
func Start(ctx context.Context, cfg Config) (s *System, err error) {
	s = &System{Stage: cfg.Stage, Dir: cfg.Dir, DynamoDBEndpoint: cfg.DynamoDBEndpoint, SQSEndpoint: cfg.SQSEndpoint, SESEndpoint: cfg.SESEndpoint}
	defer func() {
		if err != nil {
			s.Close()
			s = nil
		}
	}()
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	if s.Dir == "" {
		if s.Dir, err = standin.DefaultDir(); err != nil {
			return s, err
		}
	}
	if s.DynamoDBEndpoint == "" || s.SQSEndpoint == "" || s.SESEndpoint == "" {
		stack, err := standin.Up(ctx, s.Dir, log)
		if err != nil {
			return s, err
		}
		s.stop = append(s.stop, stack.Stop)
		s.DynamoDBEndpoint, s.SQSEndpoint, s.SESEndpoint = stack.DynamoDB.Endpoint, stack.SQS.Endpoint, stack.SES.Endpoint
	} else if err := standin.Install(ctx, s.Dir, log); err != nil { // the emulator
		return s, err
	}
	if s.DB, s.SQS, err = Clients(ctx, s.DynamoDBEndpoint, s.SQSEndpoint, nil); err != nil {
		return s, err
	}
	if s.Resources, err = Provision(ctx, s.Stage, s.DB, s.SQS); err != nil {
		return s, err
	}
	if err = RecordShards(ctx, s.Stage, s.DB); err != nil {
		return s, err
	}
	if s.SES, s.SNS, err = ProviderClients(ctx, s.SESEndpoint, s.SQSEndpoint, nil); err != nil {
		return s, err
	}
	if s.Stage.Runs(ses.Name) {
		dir := cfg.TemplatesDir
		if dir == "" {
			if dir, err = TemplatesDir(); err != nil {
				return s, err
			}
		}
		if s.Templates, err = ProvisionEmail(ctx, s.Stage, s.SES, dir); err != nil {
			return s, err
		}
		if err = ses.CatalogOf(s.Templates).CheckSize(); err != nil { // as the stack refuses it
			return s, err
		}
	}
	if s.Stage.Runs(snsprovider.Name) {
		if s.Resources.Topic, err = ProvisionTopic(ctx, s.Stage, s.SNS, s.SQS); err != nil {
			return s, err
		}
	}
	// The operators' topic, as -c operatorsTopicArn names one in AWS: the
	// outcomes function tells it of escalations.
	if s.Resources.Operators, err = ProvisionOperatorsTopic(ctx, s.Stage, s.SNS, s.SQS); err != nil {
		return s, err
	}
	s.Stage.OperatorsTopicArn = s.Resources.Operators.ARN
	if s.Bus, err = s.startBus(log); err != nil {
		return s, err
	}
	if s.SESEvents, err = s.startSESEvents(ctx); err != nil {
		return s, err
	}
	s.Sink = &sink.Sink{Secret: []byte(WebhookSecret), Plan: cfg.Plan}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return s, err
	}
	srv := &http.Server{Handler: s.Sink, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.stop = append(s.stop, func() { _ = srv.Close() })
	s.WebhookURL = "http://" + ln.Addr().String() + "/deliveries"
	return s, nil
}

// FeedbackDetailTypes are the detail-types of SES's events that the rule
// to the feedback queue matches: the sending events the feedback function
// records (see internal/feedback's doc), not opens, clicks or
// subscriptions.
var FeedbackDetailTypes = []string{"Email Sent", "Email Delivered", "Email Bounced", "Email Complaint Received", "Email Rejected",
	"Email Delivery Delayed", "Email Rendering Failed"}

// startBus starts the stand-in for EventBridge, with the stage's bus and
// the rule that delivers the outcome events to the outcomes queue, as the
// stack's example rule does (-c outcomeQueue=true), and, when the stage
// runs ses, the rule on the default bus that delivers SES's sending events
// to the feedback queue, as the stack's does.
func (s *System) startBus(log io.Writer) (*bus.Bus, error) {
	var buses []string
	if name := s.Stage.EventBusName(); name != bus.DefaultBus {
		buses = append(buses, name)
	}
	rules := []bus.Rule{{Name: OutcomesQueueName(s.Stage), EventBus: s.Stage.EventBusName(), Source: []string{outcome.Source}, QueueURL: s.Resources.OutcomesURL}}
	if s.Resources.FeedbackURL != "" {
		rules = append(rules, bus.Rule{Name: FeedbackQueueName(s.Stage), EventBus: bus.DefaultBus, Source: []string{feedback.Source},
			DetailType: FeedbackDetailTypes, QueueURL: s.Resources.FeedbackURL})
	}
	b, err := bus.Start(bus.Config{Buses: buses, SQS: s.SQS, Log: io.Discard, Rules: rules})
	if err != nil {
		return nil, fmt.Errorf("local: start the EventBridge stand-in: %w", err)
	}
	s.stop = append(s.stop, b.Close)
	fmt.Fprintf(log, "local: EventBridge stand-in on %s (bus %s, outcome events to %s", b.URL(), s.Stage.EventBusName(), OutcomesQueueName(s.Stage))
	if s.Resources.FeedbackURL != "" {
		fmt.Fprintf(log, ", SES's events to %s", FeedbackQueueName(s.Stage))
	}
	fmt.Fprintln(log, ")")
	return b, nil
}

// startSESEvents starts the stand-in for SES's event publishing before the
// SES stand-in, putting the events on the local bus.
func (s *System) startSESEvents(ctx context.Context) (*sesevents.Front, error) {
	cfg, err := localConfig(ctx, nil)
	if err != nil {
		return nil, err
	}
	eb := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(s.Bus.URL()) })
	f, err := sesevents.Start(sesevents.Config{Target: s.SESEndpoint, Events: eb})
	if err != nil {
		return nil, err
	}
	s.stop = append(s.stop, f.Close)
	return f, nil
}

// SESSendEndpoint is where the functions send e-mail: the SES stand-in
// behind the stand-in for its event publishing.
func (s *System) SESSendEndpoint() string {
	if s.SESEvents == nil {
		return s.SESEndpoint
	}
	return s.SESEvents.URL()
}

// Close stops what Start started, in reverse order.
func (s *System) Close() {
	for i := len(s.stop) - 1; i >= 0; i-- {
		s.stop[i]()
	}
	s.stop = nil
}

// localConfig is the AWS configuration of every local client: static
// local credentials, no shared configuration, short-lived idle connections;
// counter, if set, counts its requests. The one way local code configures
// AWS clients.
func localConfig(ctx context.Context, counter *standin.Counter) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")),
		config.WithSharedConfigFiles(nil), config.WithSharedCredentialsFiles(nil),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(standin.KeepIdleShort)),
		// The SDK warns when it cannot drain a response body that the
		// transport already closed (it happens with fauxqs's long polls);
		// harmless, and it would break progress lines.
		config.WithLogger(logging.Nop{}))
	if err != nil {
		return aws.Config{}, err
	}
	if counter != nil {
		counter.Attach(&cfg)
	}
	return cfg, nil
}

// Clients returns DynamoDB and SQS clients for the given endpoints
// (localConfig's configuration; counter, if set, counts their requests).
func Clients(ctx context.Context, ddbURL, sqsURL string, counter *standin.Counter) (*dynamodb.Client, *sqs.Client, error) {
	cfg, err := localConfig(ctx, counter)
	if err != nil {
		return nil, nil, err
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint, o.DisableValidateResponseChecksum = aws.String(ddbURL), true
	})
	q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(sqsURL) })
	return db, q, nil
}

// ProviderClients returns SES (API v2) and SNS clients for the given
// endpoints (localConfig's configuration).
func ProviderClients(ctx context.Context, sesURL, snsURL string, counter *standin.Counter) (*sesv2.Client, *sns.Client, error) {
	cfg, err := localConfig(ctx, counter)
	if err != nil {
		return nil, nil, err
	}
	return sesv2.NewFromConfig(cfg, func(o *sesv2.Options) { o.BaseEndpoint = aws.String(sesURL) }),
		sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(snsURL) }), nil
}

// Endpoints are where a function's AWS calls go: the stand-ins, or
// counting proxies and fault fronts before them. An empty SNS goes where
// SQS does (fauxqs serves both); an empty SES to the SES stand-in.
type Endpoints = standin.Endpoints

// Endpoints returns the stand-ins' endpoints.
func (s *System) Endpoints() Endpoints {
	ep := Endpoints{DynamoDB: s.DynamoDBEndpoint, SQS: s.SQSEndpoint, SES: s.SESSendEndpoint()}
	if s.Bus != nil {
		ep.EventBridge = s.Bus.URL()
	}
	return ep
}

// Env returns function fn's environment (consumer, enqueue, intake,
// outcomes or feedback): the one the stack gives it, with this system's
// resources and provider, its AWS calls sent to ep, the emulator's Lambda variables for a function of timeout
// (0: the stage's), and overrides (KEY=VALUE) replacing what they name.
// Each variable appears once: the emulator keeps the first of duplicates.
func (s *System) Env(fn string, ep Endpoints, timeout time.Duration, overrides ...string) ([]string, error) {
	res := s.Resources.Resources(s.Stage, provider.Local{URL: s.WebhookURL, Secret: WebhookSecret, Templates: ses.CatalogOf(s.Templates).String()})
	var env map[string]string
	var memory int
	switch fn {
	case "consumer":
		env, memory = s.Stage.ConsumerEnv(res), s.Stage.ConsumerMemoryMB
		timeout = cmp.Or(timeout, s.Stage.ConsumerTimeout)
	case "enqueue":
		env, memory = s.Stage.EnqueueEnv(res), s.Stage.EnqueueMemoryMB
		timeout = cmp.Or(timeout, s.Stage.EnqueueTimeout)
	case "intake":
		env, memory = s.Stage.IntakeEnv(res), s.Stage.IntakeMemoryMB
		timeout = cmp.Or(timeout, s.Stage.IntakeTimeout)
	case "outcomes":
		env, memory = s.Stage.OutcomesEnv(res), s.Stage.OutcomesMemoryMB
		timeout = cmp.Or(timeout, s.Stage.OutcomesTimeout)
	case "feedback":
		env, memory = s.Stage.FeedbackEnv(res), s.Stage.FeedbackMemoryMB
		timeout = cmp.Or(timeout, s.Stage.FeedbackTimeout)
	default:
		return nil, fmt.Errorf("local: no function %q; use consumer, enqueue, intake, outcomes or feedback", fn)
	}
	ep.SES = cmp.Or(ep.SES, s.SESSendEndpoint())
	if s.Bus != nil {
		ep.EventBridge = cmp.Or(ep.EventBridge, s.Bus.URL())
	}
	list := append(standin.EndpointEnv(ep), deployment.EnvList(env)...)
	list = append(list, standin.LambdaEnv("nudge-"+s.Stage.Name+"-"+fn, timeout, memory)...)
	for _, o := range overrides {
		k, _, ok := strings.Cut(o, "=")
		if !ok {
			return nil, errors.New("local: override " + o + " is not KEY=VALUE")
		}
		replaced := false
		for i, kv := range list {
			if strings.HasPrefix(kv, k+"=") {
				list[i], replaced = o, true
			}
		}
		if !replaced {
			list = append(list, o)
		}
	}
	return list, nil
}

// StartFunction runs a function's bootstrap, built for this machine, under
// the Lambda runtime interface emulator, with env, its output to log.
func (s *System) StartFunction(ctx context.Context, bootstrap string, env []string, log io.Writer) (*standin.Lambda, error) {
	return standin.StartLambda(ctx, s.Dir, bootstrap, standin.Options{Log: log, Env: env})
}

// Intake is the HTTP intake function running locally: instances of its
// bootstrap under the emulator, behind a stand-in for its function URL.
type Intake struct {
	front     *urlfront.Front
	instances []*standin.Lambda
}

// StartIntake runs instances copies of the intake's bootstrap (built for
// this machine: build/local/intake/bootstrap) under the emulator, with the
// environment the stack gives it (Env), its AWS calls sent to ep, and a
// function URL in front of them (urlfront: SigV4 header required but not
// verified, payload format 2.0, at most instances requests at once). The
// functions' output and the front's access lines go to log; nil: the
// functions' to files in the stand-in folder's logs, the front's nowhere.
func (s *System) StartIntake(ctx context.Context, bootstrap string, instances int, ep Endpoints, log io.Writer, overrides ...string) (in *Intake, err error) {
	if instances < 1 {
		return nil, fmt.Errorf("local: %d intake instances; start at least 1 (one per request served at once)", instances)
	}
	env, err := s.Env("intake", ep, 0, overrides...)
	if err != nil {
		return nil, err
	}
	in = &Intake{}
	defer func() {
		if err != nil {
			in.Close()
			in = nil
		}
	}()
	invokers := make([]urlfront.Invoker, 0, instances)
	for i := 0; i < instances; i++ {
		fn, err := s.StartFunction(ctx, bootstrap, env, log)
		if err != nil {
			return in, fmt.Errorf("local: start intake instance %d of %d: %w", i+1, instances, err)
		}
		in.instances = append(in.instances, fn)
		invokers = append(invokers, fn)
	}
	in.front, err = urlfront.Start(urlfront.Config{Invokers: invokers, Log: log, Timeout: s.Stage.IntakeTimeout})
	return in, err
}

// URL is the intake's function URL, without a trailing slash.
func (in *Intake) URL() string { return in.front.URL() }

// Instances are the intake's emulator instances, in the front's order.
func (in *Intake) Instances() []*standin.Lambda { return in.instances }

// Close stops the function URL, then every instance (by its process group).
func (in *Intake) Close() {
	if in.front != nil {
		in.front.Close()
	}
	for _, fn := range in.instances {
		fn.Stop()
	}
}

// Client is a client of the intake with the stand-ins' credentials and
// region, signing as a caller in AWS would.
func (in *Intake) Client() *intake.Client {
	return &intake.Client{URL: in.URL(), Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTP: &http.Client{Timeout: 60 * time.Second}}
}

// sinkPath returns the consumer's variables (KEY=VALUE) that point the
// provider the sink stands in for at the sink's URL followed by /path,
// so that the sink tells the consumer instances apart.
func (s *System) sinkPath(path string) []string {
	d, ok := registry.StoodInBy(provider.SinkStandIn)
	if !ok || !s.Stage.Runs(d.Name) || d.Env == nil {
		return nil
	}
	res := d.StandIn.Resources(provider.Local{URL: s.WebhookURL + "/" + path, Secret: WebhookSecret})
	var out []string
	for k, v := range d.Env(s.Stage.Provider(d.Name, res))[provider.Consumer] {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
