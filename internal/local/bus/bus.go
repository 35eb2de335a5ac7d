package bus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/pkg/clock"
)

// QueueSender sends one message to an SQS queue: how the bus delivers an
// event to a rule's target.
type QueueSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// The SQS client is a QueueSender.
var _ QueueSender = (*sqs.Client)(nil)

const (
	// DefaultBus is the event bus an entry without EventBusName goes to,
	// which always exists.
	DefaultBus = "default"
	// DefaultAccountID and DefaultRegion are the bus's account and region,
	// in every event and bus ARN: the account the local stand-ins use and
	// the local clients' region.
	DefaultAccountID = "000000000000"
	DefaultRegion    = "us-east-1"
	// MaxEntries is how many entries one PutEvents request may hold.
	MaxEntries = 10
	// DefaultMaxRequestBytes is the default limit on a request's entries
	// (256 KiB), counted as EventBridge counts them (EntrySize).
	DefaultMaxRequestBytes = 256 << 10
	// DefaultTargetAttempts and DefaultTargetRetryWait are how often an
	// event is sent to a target that fails, and the pause between tries.
	DefaultTargetAttempts  = 3
	DefaultTargetRetryWait = 50 * time.Millisecond
	// maxBody bounds the request body read: far above any request within
	// the size limit (each byte of an entry is at most 6 bytes of JSON).
	maxBody = 16 << 20
	// sendTimeout bounds one SendMessage to a target.
	sendTimeout = 10 * time.Second
	// shutdownWait bounds how long Close waits for requests in flight.
	shutdownWait = 5 * time.Second
)

// Config configures a Bus.
type Config struct {
	// Buses are the custom event buses, by name, besides DefaultBus, which
	// always exists. An entry naming another bus fails.
	Buses []string
	// Rules route matching events to SQS queues. Default none: events are
	// accepted and go nowhere, as on a bus without rules.
	Rules []Rule
	// SQS sends events to the rules' queues. Required when there are rules.
	SQS QueueSender
	// AccountID is the bus owner's account, in each event and bus ARN.
	// Default DefaultAccountID.
	AccountID string
	// Region is the bus's region, in each event and bus ARN; requests must
	// be signed for it. Default DefaultRegion.
	Region string
	// Clock gives an event without a Time its time. Default clock.Real.
	Clock clock.Clock
	// MaxRequestBytes is the limit on the total size of a request's entries
	// (EntrySize); a request over it is refused. Default
	// DefaultMaxRequestBytes (EventBridge's limit until January 2026, when
	// AWS raised it to 1 MB: what fits here fits there).
	MaxRequestBytes int
	// TargetAttempts is how many times an event is sent to a target before
	// the bus gives up on it and counts it in Stats.TargetFailures.
	// Default DefaultTargetAttempts.
	TargetAttempts int
	// TargetRetryWait is the pause between two tries of a target. Default
	// DefaultTargetRetryWait.
	TargetRetryWait time.Duration
	// Faults are the failures the bus injects, for chaos runs. Default
	// none. SetFaults changes them while the bus runs.
	Faults Faults
	// Rand draws the faults' chances, a number in [0, 1). Default
	// math/rand/v2's Float64. Called under a lock.
	Rand func() float64
	// Log receives one line per request and one per event a target
	// refused for good. Default io.Discard.
	Log io.Writer
}

// Rule is an EventBridge rule with one SQS target. Its event pattern is
// the part of EventBridge's that Nudge uses: the event's source is one of
// Source, and its detail-type one of DetailType; an empty list matches
// every event ({"source": [...], "detail-type": [...]}, exact matches).
type Rule struct {
	// Name names the rule in Stats; unique in the stand-in.
	Name string
	// EventBus is the bus whose events the rule sees. Default DefaultBus.
	EventBus string
	// Source and DetailType are the pattern's lists. Empty: any.
	Source, DetailType []string
	// QueueURL is the target, a standard SQS queue.
	QueueURL string
}

// matches reports whether the rule's pattern matches an event.
func (r Rule) matches(source, detailType string) bool {
	return oneOf(r.Source, source) && oneOf(r.DetailType, detailType)
}

func oneOf(list []string, v string) bool {
	if len(list) == 0 {
		return true
	}
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// Bus is a running stand-in for an EventBridge event bus's PutEvents. It
// is an http.Handler and is safe for concurrent requests.
type Bus struct {
	cfg    Config
	buses  map[string]bool
	url    string
	srv    *http.Server
	base   context.Context // deliveries run on it; Close cancels it
	cancel context.CancelFunc
	once   sync.Once

	faultMu sync.Mutex
	faults  Faults
	entryN  int // entries the every-Nth entry fault has counted
	reqN    int // requests the every-Nth request fault has counted

	statsMu sync.Mutex
	stats   Stats

	logMu sync.Mutex
}

var (
	accountID = regexp.MustCompile(`^[0-9]{12}$`)
	region    = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	busName   = regexp.MustCompile(`^[/.\-_A-Za-z0-9]{1,256}$`)
)

// New checks cfg and applies its defaults, and returns a Bus that serves
// as an http.Handler; Start also listens.
func New(cfg Config) (*Bus, error) {
	if cfg.AccountID == "" {
		cfg.AccountID = DefaultAccountID
	}
	if !accountID.MatchString(cfg.AccountID) {
		return nil, fmt.Errorf("bus: Config.AccountID %q is not 12 digits; give an account id such as %s", cfg.AccountID, DefaultAccountID)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if !region.MatchString(cfg.Region) {
		return nil, fmt.Errorf("bus: Config.Region %q is not a region; give one such as %s", cfg.Region, DefaultRegion)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.MaxRequestBytes < 0 {
		return nil, fmt.Errorf("bus: Config.MaxRequestBytes %d is negative; give a limit in bytes, or 0 for %d", cfg.MaxRequestBytes, DefaultMaxRequestBytes)
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.TargetAttempts < 0 {
		return nil, fmt.Errorf("bus: Config.TargetAttempts %d is negative; give at least 1, or 0 for %d", cfg.TargetAttempts, DefaultTargetAttempts)
	}
	if cfg.TargetAttempts == 0 {
		cfg.TargetAttempts = DefaultTargetAttempts
	}
	if cfg.TargetRetryWait < 0 {
		return nil, fmt.Errorf("bus: Config.TargetRetryWait %v is negative; give a pause, or 0 for %v", cfg.TargetRetryWait, DefaultTargetRetryWait)
	}
	if cfg.TargetRetryWait == 0 {
		cfg.TargetRetryWait = DefaultTargetRetryWait
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if err := cfg.Faults.check(); err != nil {
		return nil, err
	}
	buses := map[string]bool{DefaultBus: true}
	for i, name := range cfg.Buses {
		if !busName.MatchString(name) {
			return nil, fmt.Errorf("bus: Config.Buses[%d] %q is not an event bus name (1 to 256 of A-Z a-z 0-9 . - _ /)", i, name)
		}
		if buses[name] {
			return nil, fmt.Errorf("bus: Config.Buses names %q twice (%q always exists); list each custom bus once", name, DefaultBus)
		}
		buses[name] = true
	}
	rules := map[string]bool{}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if r.EventBus == "" {
			r.EventBus = DefaultBus
		}
		if r.Name == "" {
			return nil, fmt.Errorf("bus: Config.Rules[%d] has no Name; name it (Stats counts deliveries by rule)", i)
		}
		if !buses[r.EventBus] {
			return nil, fmt.Errorf("bus: rule %q is on bus %q, which is not in Config.Buses; add the bus, or leave EventBus empty for %q",
				r.Name, r.EventBus, DefaultBus)
		}
		if rules[r.Name] {
			return nil, fmt.Errorf("bus: two rules named %q; give each a name of its own (Stats counts by rule name)", r.Name)
		}
		rules[r.Name] = true
		if !strings.HasPrefix(r.QueueURL, "http://") && !strings.HasPrefix(r.QueueURL, "https://") {
			return nil, fmt.Errorf("bus: rule %q: QueueURL %q is not a queue URL; give the target queue's URL (CreateQueue's QueueUrl)", r.Name, r.QueueURL)
		}
		if strings.HasSuffix(r.QueueURL, ".fifo") {
			return nil, fmt.Errorf("bus: rule %q: queue %s is FIFO, which the stand-in does not deliver to (EventBridge needs a message group id); "+
				"target a standard queue", r.Name, r.QueueURL)
		}
		if cfg.SQS == nil {
			return nil, fmt.Errorf("bus: rule %q has a target, but Config.SQS is nil; give an SQS client", r.Name)
		}
	}
	b := &Bus{cfg: cfg, buses: buses, faults: cfg.Faults, stats: newStats()}
	b.base, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Start checks cfg, applies its defaults and serves on a free loopback port
// until Close.
func Start(cfg Config) (*Bus, error) {
	b, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bus: listen on a loopback port: %w", err)
	}
	b.url = "http://" + ln.Addr().String()
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// URL is the bus's endpoint (http://127.0.0.1:port), for the EventBridge
// client's BaseEndpoint or AWS_ENDPOINT_URL_EVENTBRIDGE. Empty for a Bus
// made by New.
func (b *Bus) URL() string { return b.url }

// ARN is the ARN of the named event bus, as EventBridge writes it.
func (b *Bus) ARN(name string) string {
	return "arn:aws:events:" + b.cfg.Region + ":" + b.cfg.AccountID + ":event-bus/" + name
}

// Close stops accepting requests, cancels deliveries in flight and waits,
// up to 5 s, for the requests in flight to be answered.
func (b *Bus) Close() {
	b.once.Do(func() {
		b.cancel()
		if b.srv == nil {
			return
		}
		// wall clock: how long the machine waits for a local server to stop
		ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
		defer cancel()
		_ = b.srv.Shutdown(ctx)
		_ = b.srv.Close()
	})
}

// SetFaults replaces the faults the bus injects, from the next request on;
// the every-Nth counts start again.
func (b *Bus) SetFaults(f Faults) error {
	if err := f.check(); err != nil {
		return err
	}
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	b.faults, b.entryN, b.reqN = f, 0, 0
	return nil
}

func (b *Bus) logf(format string, args ...any) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	_, _ = fmt.Fprintf(b.cfg.Log, "bus: "+format+"\n", args...)
}

// errClosed is a delivery's error when the bus closes under it.
var errClosed = errors.New("the bus is closing")
