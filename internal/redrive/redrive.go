package redrive

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// queueAPI is what the redrive needs of SQS.
type queueAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ queueAPI = (*sqs.Client)(nil)

// ledgerAPI is what the redrive needs of the ledger.
type ledgerAPI interface {
	GetMany(ctx context.Context, keys []message.DeliveryKey) (map[message.DeliveryKey]ledger.Delivery, error)
	Redrive(ctx context.Context, d ledger.Delivery, note string) (ledger.Delivery, error)
}

var _ ledgerAPI = (*ledger.Ledger)(nil)

// ErrNotReleased is Release's error (and List's, when the read itself
// succeeded): some read messages could not be made visible again, usually
// because their hold had already ended. They reappear when it ends.
var ErrNotReleased = errors.New("redrive: release read messages")

// Config configures a Redriver.
type Config struct {
	// Queue is the SQS client. Required.
	Queue queueAPI
	// DLQURL is the dead-letter queue. Required.
	DLQURL string
	// TargetURL is where a redrive sends messages: the default work queue.
	// Required.
	TargetURL string
	// Routes send each delivery's message to its provider's work queue
	// (its own, or the default). Default: every message to TargetURL.
	Routes envelope.Routes
	// Ledger joins each message to its delivery and records redrives.
	// Without it, letters show no ledger state, every delivery message is
	// redrivable, and nothing is marked (the consumer then claims the dead
	// delivery directly).
	Ledger ledgerAPI
	// By names who redrives, for the ledger and the message. Default
	// "unknown".
	By string
	// Rate is the most messages moved per second. Default 10.
	Rate float64
	// ReviewHold is how long a read message stays hidden while it is being
	// listed: released right after, so this only bounds a crash. Default 30s.
	ReviewHold time.Duration
	// SelectHold is how long chosen messages stay hidden while the operator
	// reviews them before confirming. Default 5m.
	SelectHold time.Duration
	// Clock tells the time and paces the moves. Default clock.Real.
	Clock clock.Clock
}

// Redriver reviews and redrives one DLQ.
type Redriver struct {
	cfg Config
}

// New checks cfg and returns a Redriver.
func New(cfg Config) (*Redriver, error) {
	if cfg.Queue == nil || cfg.DLQURL == "" || cfg.TargetURL == "" {
		return nil, errors.New("redrive: Queue, DLQURL and TargetURL are required")
	}
	if cfg.DLQURL == cfg.TargetURL {
		return nil, fmt.Errorf("redrive: the target %s is the DLQ itself; give the work queue", cfg.TargetURL)
	}
	if cfg.Routes.Default == "" {
		cfg.Routes = envelope.Routes{Default: cfg.TargetURL}
	}
	if cfg.By == "" {
		cfg.By = "unknown"
	}
	if cfg.Rate == 0 {
		cfg.Rate = 10
	}
	if cfg.Rate < 0 || cfg.Rate > 1000 {
		return nil, fmt.Errorf("redrive: rate %v messages/s; use 0.1 to 1000", cfg.Rate)
	}
	if cfg.ReviewHold == 0 {
		cfg.ReviewHold = 30 * time.Second
	}
	if cfg.SelectHold == 0 {
		cfg.SelectHold = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Redriver{cfg: cfg}, nil
}

// Letter is one delivery's message in the DLQ, reviewed. The DLQ can hold
// a delivery more than once (the consumer dead-lettered it, then failed to
// record that in the ledger and did it again on the retry): its copies are
// one Letter, the most recent copy's reason and attempts shown, and a
// redrive moves the delivery once and removes every copy.
type Letter struct {
	MessageID string `json:"messageId"`
	// Copies is how many DLQ messages hold this delivery (1 but for the
	// rare repeat above); MessageID is the most recent one's.
	Copies int `json:"copies"`
	// DeliveryKey is the delivery the message is for; empty when the body
	// is not a delivery (it failed to decode).
	DeliveryKey string `json:"deliveryKey,omitempty"`
	// ErrorClass and Reason are why it was dead-lettered; "maxReceiveCount"
	// when the queue's redrive policy moved it, not the consumer.
	ErrorClass failure.Class `json:"errorClass"`
	Reason     string        `json:"reason"`
	// Attempts is the consumer's attempt count when it gave up.
	Attempts int `json:"attempts"`
	// Redrives counts earlier redrives of this message.
	Redrives int `json:"redrives"`
	// DeadLetteredAt is when it entered the DLQ (its first copy);
	// AgeSeconds how long ago.
	DeadLetteredAt time.Time `json:"deadLetteredAt"`
	AgeSeconds     int64     `json:"ageSeconds"`
	// Ledger is the delivery's status in the ledger, when known.
	Ledger ledger.Status `json:"ledgerStatus,omitempty"`
	// Destination is the queue a redrive would send it to: its provider's
	// work queue.
	Destination string `json:"destination"`
	// target is that queue's URL.
	target string
	// Redrivable says whether a redrive can help, and Why not.
	Redrivable bool   `json:"redrivable"`
	Why        string `json:"why,omitempty"`
	// SourceMessageIDs are the work queue messages the consumer
	// dead-lettered (their nudge-source-message-id), one per copy that has
	// one: a message the queue's redrive policy moved has none. Messages
	// pairs each copy with its own.
	SourceMessageIDs []string `json:"-"`

	receipt  string
	source   string // this message's SourceMessageID
	body     string
	attrs    map[string]types.MessageAttributeValue
	group    string
	delivery *ledger.Delivery
	// others are the delivery's other copies in the DLQ.
	others []copyOf
}

// copyOf is another DLQ message for a letter's delivery.
type copyOf struct{ messageID, receipt, source string }

// receipts returns the receipt handles of every copy.
func (l Letter) receipts() []string {
	out := []string{l.receipt}
	for _, c := range l.others {
		out = append(out, c.receipt)
	}
	return out
}

// Copy is one DLQ message of a letter.
type Copy struct {
	// MessageID is its id in the DLQ.
	MessageID string
	// SourceMessageID is the work queue message the consumer dead-lettered;
	// empty when the queue's redrive policy moved it.
	SourceMessageID string
}

// Messages returns every DLQ message of the letter, the earliest first.
func (l Letter) Messages() []Copy {
	out := make([]Copy, 0, 1+len(l.others))
	for _, c := range l.others {
		out = append(out, Copy{MessageID: c.messageID, SourceMessageID: c.source})
	}
	return append(out, Copy{MessageID: l.MessageID, SourceMessageID: l.source})
}

// Age returns how long ago it was dead-lettered.
func (l Letter) Age() time.Duration { return time.Duration(l.AgeSeconds) * time.Second }

// List reads up to limit DLQ messages, joins them to the ledger, and makes
// them visible again at once. They are hidden from other readers only
// while this runs.
func (r *Redriver) List(ctx context.Context, limit int) ([]Letter, error) {
	if limit < 1 {
		return nil, fmt.Errorf("redrive: list limit %d; use 1 or more", limit)
	}
	letters, err := r.read(ctx, limit, r.cfg.ReviewHold)
	if rerr := r.Release(context.WithoutCancel(ctx), letters); err == nil {
		err = rerr
	}
	return letters, err
}

// Filter bounds a redrive.
type Filter struct {
	// Max is the most messages to move. Required, 1 or more.
	Max int
	// Class keeps only messages dead-lettered with this error class.
	Class failure.Class
	// Reason keeps only messages dead-lettered with exactly this reason
	// (a group of the review, as the console offers it). Default: any.
	Reason string
	// OlderThan keeps only messages dead-lettered at least this long ago.
	OlderThan time.Duration
	// IncludeSettled also moves messages whose delivery was already sent,
	// cancelled or expired, so that the consumer retires them as
	// duplicates and the DLQ empties.
	IncludeSettled bool
	// Scan is the most messages read to find Max that match. Default
	// 10 × Max, at least 100, at most 10,000.
	Scan int
}

// Selection is the messages chosen for a redrive, held (hidden) until Move
// or Release.
type Selection struct {
	// Chosen will be moved.
	Chosen []Letter
	// Passed were read and not chosen (released already), with Why.
	Passed []Letter
	// Scanned counts the messages read.
	Scanned int
	// Until is when the hold of the chosen messages ends (SelectHold after
	// the read began): after it they are visible in the DLQ again, and a
	// Move may find some of them read by another.
	Until time.Time
}

// Select reads the DLQ and chooses up to f.Max messages a redrive can help,
// holding them for SelectHold; the others are released at once.
func (r *Redriver) Select(ctx context.Context, f Filter) (*Selection, error) {
	if f.Max < 1 {
		return nil, fmt.Errorf("redrive: --max %d; a redrive moves a bounded batch: give 1 or more", f.Max)
	}
	if f.Scan == 0 {
		f.Scan = min(max(10*f.Max, 100), 10000)
	}
	until := r.cfg.Clock.Now().Add(r.cfg.SelectHold)
	letters, err := r.read(ctx, f.Scan, r.cfg.SelectHold)
	sel := &Selection{Scanned: len(letters), Until: until}
	for _, l := range letters {
		switch {
		case len(sel.Chosen) >= f.Max:
			l.Why = "beyond --max"
		case f.Class != "" && l.ErrorClass != f.Class:
			l.Why = "error class " + string(l.ErrorClass) + ", not " + string(f.Class)
		case f.Reason != "" && l.Reason != f.Reason:
			l.Why = "another reason: " + l.Reason
		case l.Age() < f.OlderThan:
			l.Why = fmt.Sprintf("dead-lettered %v ago, not older than %v", l.Age(), f.OlderThan)
		case !l.Redrivable && !(f.IncludeSettled && l.Settled()):
			// l.Why says why
		default:
			sel.Chosen = append(sel.Chosen, l)
			continue
		}
		sel.Passed = append(sel.Passed, l)
	}
	if rerr := r.Release(context.WithoutCancel(ctx), sel.Passed); err == nil {
		err = rerr
	}
	if err != nil {
		_ = r.Release(context.WithoutCancel(ctx), sel.Chosen)
		return nil, err
	}
	return sel, nil
}

// Settled reports whether the letter's delivery already ended another way
// (sent, cancelled, expired, or its fallback taken): a redrive cannot help
// it, and moves it only with Filter.IncludeSettled, for the consumer to
// retire.
func (l Letter) Settled() bool {
	return l.Ledger == ledger.StatusSent || l.Ledger == ledger.StatusCancelled || l.Ledger == ledger.StatusExpired ||
		l.delivery != nil && !l.delivery.FallbackTaken.IsZero()
}

// read receives up to n messages, hidden for hold, and reviews them.
func (r *Redriver) read(ctx context.Context, n int, hold time.Duration) ([]Letter, error) {
	var letters []Letter
	seen := map[string]int{}
	empty := 0
	for len(letters) < n && empty < 2 {
		out, err := r.cfg.Queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(r.cfg.DLQURL), MaxNumberOfMessages: int32(min(10, n-len(letters))),
			VisibilityTimeout: int32(hold / time.Second), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			return letters, fmt.Errorf("redrive: read the DLQ %s: %w", r.cfg.DLQURL, err)
		}
		fresh := 0
		for _, m := range out.Messages {
			if i, ok := seen[aws.ToString(m.MessageId)]; ok {
				// Its hold ended while we read: keep the newest receipt.
				letters[i].receipt = aws.ToString(m.ReceiptHandle)
				continue
			}
			seen[aws.ToString(m.MessageId)] = len(letters)
			letters = append(letters, r.letter(m))
			fresh++
		}
		if fresh == 0 {
			empty++
			continue
		}
		empty = 0
	}
	sort.SliceStable(letters, func(i, j int) bool {
		a, b := letters[i], letters[j]
		if !a.DeadLetteredAt.Equal(b.DeadLetteredAt) {
			return a.DeadLetteredAt.Before(b.DeadLetteredAt)
		}
		return a.DeliveryKey+a.body < b.DeliveryKey+b.body
	})
	letters = byDelivery(letters)
	if err := r.join(ctx, letters); err != nil {
		return letters, err
	}
	return letters, nil
}

// byDelivery folds the copies of one delivery into one letter, in the place
// of the most recent copy, whose reason and attempts it keeps, dated by the
// first; letters are in the order they were dead-lettered (letters is
// sorted so). A body that is not a delivery stays a letter of its own.
func byDelivery(letters []Letter) []Letter {
	last := map[string]int{}
	for i, l := range letters {
		if l.DeliveryKey != "" {
			last[l.DeliveryKey] = i
		}
	}
	type earlier struct {
		copies  []copyOf
		sources []string
		first   Letter
	}
	folded := map[string]*earlier{}
	out := letters[:0:0]
	for i, l := range letters {
		if l.DeliveryKey == "" || last[l.DeliveryKey] == i {
			out = append(out, l)
			continue
		}
		e := folded[l.DeliveryKey]
		if e == nil {
			e = &earlier{first: l}
			folded[l.DeliveryKey] = e
		}
		e.copies = append(e.copies, copyOf{messageID: l.MessageID, receipt: l.receipt, source: l.source})
		e.sources = append(e.sources, l.SourceMessageIDs...)
	}
	for i := range out {
		l := &out[i]
		l.Copies = 1
		if e := folded[l.DeliveryKey]; e != nil && l.DeliveryKey != "" {
			l.others, l.Copies = e.copies, 1+len(e.copies)
			l.SourceMessageIDs = append(e.sources, l.SourceMessageIDs...)
			l.DeadLetteredAt, l.AgeSeconds = e.first.DeadLetteredAt, e.first.AgeSeconds
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].DeadLetteredAt.Before(out[j].DeadLetteredAt) })
	return out
}

func (r *Redriver) letter(m types.Message) Letter {
	dl := deadletter.Read(m.MessageAttributes)
	l := Letter{MessageID: aws.ToString(m.MessageId), receipt: aws.ToString(m.ReceiptHandle), body: aws.ToString(m.Body),
		attrs: m.MessageAttributes, group: m.Attributes["MessageGroupId"], target: r.cfg.TargetURL,
		ErrorClass: dl.Class, Reason: dl.Reason, Attempts: dl.Attempts, Redrives: dl.Redrives}
	if dl.SourceMessageID != "" {
		l.source = dl.SourceMessageID
		l.SourceMessageIDs = []string{dl.SourceMessageID}
	}
	if ms, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64); err == nil {
		l.DeadLetteredAt = time.UnixMilli(ms).UTC()
		l.AgeSeconds = int64(r.cfg.Clock.Now().Sub(l.DeadLetteredAt) / time.Second)
	}
	if dl.Class == deadletter.ClassMaxReceiveCount {
		if n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"]); err == nil {
			l.Attempts = n - 1 // this read counts too
		}
	}
	key := dl.DeliveryKey
	if key == "" {
		if msg, err := message.Decode([]byte(l.body)); err == nil {
			key = msg.Key().String()
		}
	}
	if k, err := message.ParseDeliveryKey(key); err == nil {
		l.DeliveryKey = k.String()
		l.Redrivable = true
		l.target = r.cfg.Routes.For(k.Provider)
	} else {
		l.Why = "the body is not a delivery (" + string(l.ErrorClass) + "); a redrive would fail the same way: fix the producer, then delete it"
	}
	l.Destination = queueName(l.target)
	return l
}

// join reads the letters' deliveries from the ledger and says which a
// redrive can help.
func (r *Redriver) join(ctx context.Context, letters []Letter) error {
	if r.cfg.Ledger == nil {
		return nil
	}
	var keys []message.DeliveryKey
	seen := map[message.DeliveryKey]bool{}
	for _, l := range letters {
		if k, err := message.ParseDeliveryKey(l.DeliveryKey); err == nil && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	found := map[message.DeliveryKey]ledger.Delivery{}
	for start := 0; start < len(keys); start += 100 {
		got, err := r.cfg.Ledger.GetMany(ctx, keys[start:min(start+100, len(keys))])
		if err != nil {
			return fmt.Errorf("redrive: read the ledger: %w", err)
		}
		for k, d := range got {
			found[k] = d
		}
	}
	for i := range letters {
		l := &letters[i]
		k, err := message.ParseDeliveryKey(l.DeliveryKey)
		if err != nil {
			continue
		}
		d, ok := found[k]
		if !ok {
			l.Redrivable, l.Why = false, "no such delivery in the ledger (purged?); a redrive would be dead-lettered as not-found"
			continue
		}
		l.delivery, l.Ledger = &d, d.Status
		switch {
		case d.Status == ledger.StatusSent || d.Status == ledger.StatusCancelled || d.Status == ledger.StatusExpired:
			l.Redrivable, l.Why = false, "the delivery is already "+string(d.Status)+"; nothing to redrive (--include-settled moves it anyway, and the consumer retires it as a duplicate)"
		case !d.FallbackTaken.IsZero():
			// The reminder went on through its fallback: sending this one too
			// would reach the recipient twice, so the ledger refuses it.
			l.Redrivable, l.Why = false, ledger.FallbackTakenNote(d)+"; nothing to redrive (--include-settled moves it anyway, and the consumer retires it unsent)"
		}
		// Dead deliveries are marked when moved. A live one (the queue's
		// redrive policy moved a message the consumer crashed on; a copy
		// left by an interrupted redrive) is moved as it is: the consumer
		// claims it as usual, or recognises a second copy as a duplicate.
	}
	return nil
}

// Release makes the letters visible in the DLQ again at once.
func (r *Redriver) Release(ctx context.Context, letters []Letter) error {
	var receipts []string
	for _, l := range letters {
		receipts = append(receipts, l.receipts()...)
	}
	var errs []error
	for start := 0; start < len(receipts); start += 10 {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for i, h := range receipts[start:min(start+10, len(receipts))] {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
		}
		out, err := r.cfg.Queue.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(r.cfg.DLQURL), Entries: entries})
		if err != nil {
			errs = append(errs, err)
		} else if len(out.Failed) > 0 {
			errs = append(errs, fmt.Errorf("%d messages: %s", len(out.Failed), aws.ToString(out.Failed[0].Message)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (they become visible again after their hold anyway): %w", ErrNotReleased, errors.Join(errs...))
	}
	return nil
}

// Outcome is what Move did with one letter.
type Outcome struct {
	Letter
	// Moved is true once the message is in the work queue and gone from
	// the DLQ.
	Moved bool `json:"moved"`
	// Marked is true if the ledger recorded the redrive (dead → queued).
	Marked bool `json:"marked"`
	// NewMessageID is the message's id in the work queue.
	NewMessageID string `json:"newMessageId,omitempty"`
	// Problem says what went wrong, if anything.
	Problem string `json:"problem,omitempty"`
}

// Result is what Move did.
type Result struct {
	Outcomes []Outcome `json:"outcomes"`
	Moved    int       `json:"moved"`
	Skipped  int       `json:"skipped"`
	Failed   int       `json:"failed"`
}

// Move redrives the selection, one message at a time at the configured
// rate: mark the ledger, send to the work queue, delete from the DLQ. It
// stops when ctx ends, between two messages, releasing what it did not
// reach. progress, if set,
// is called after each message.
func (r *Redriver) Move(ctx context.Context, sel *Selection, progress func(Outcome)) (Result, error) {
	var res Result
	interval := time.Duration(float64(time.Second) / r.cfg.Rate)
	for i, l := range sel.Chosen {
		if i > 0 {
			select {
			case <-r.cfg.Clock.After(interval):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			_ = r.Release(context.WithoutCancel(ctx), sel.Chosen[i:])
			return res, fmt.Errorf("redrive: stopped after %d of %d messages; the rest stay in the DLQ: %w", i, len(sel.Chosen), ctx.Err())
		}
		// A message begun is finished (mark, send, delete), whatever ctx
		// does: one stopped halfway would be marked and not sent.
		o := r.moveOne(context.WithoutCancel(ctx), l)
		switch {
		case o.Moved:
			res.Moved++
		case o.Problem != "":
			res.Failed++
		default:
			res.Skipped++
		}
		res.Outcomes = append(res.Outcomes, o)
		if progress != nil {
			progress(o)
		}
	}
	return res, nil
}

func (r *Redriver) moveOne(ctx context.Context, l Letter) Outcome {
	o := Outcome{Letter: l}
	now := r.cfg.Clock.Now()
	// A delivery whose fallback was taken is moved only with
	// --include-settled, unmarked: the consumer retires it unsent.
	if r.cfg.Ledger != nil && l.delivery != nil && l.delivery.Status == ledger.StatusDead && l.delivery.FallbackTaken.IsZero() {
		note := "redriven by " + r.cfg.By + " at " + ledger.Format(now) + " (nudge dlq redrive)"
		_, err := r.cfg.Ledger.Redrive(ctx, *l.delivery, note)
		var re *ledger.RefusedError
		switch {
		case err == nil:
			o.Marked = true
		case errors.Is(err, ledger.ErrFallbackTaken) && errors.As(err, &re):
			// The fallback stands in for it: sending it too would tell
			// the recipient twice.
			o.Why = ledger.FallbackTakenNote(re.Current) + "; not sent, left in the DLQ"
			_ = r.Release(context.WithoutCancel(ctx), []Letter{l})
			return o
		case errors.Is(err, ledger.ErrAlreadySent) || errors.Is(err, ledger.ErrNotDead):
			// Someone (a console redrive) got there first.
			o.Why = "the delivery changed since it was read: " + err.Error() + "; left in the DLQ"
			_ = r.Release(context.WithoutCancel(ctx), []Letter{l})
			return o
		default:
			o.Problem = "could not mark the ledger, nothing moved: " + err.Error()
			_ = r.Release(context.WithoutCancel(ctx), []Letter{l})
			return o
		}
	}
	env := envelope.Build(envelope.Spec{Kind: envelope.KindOf(l.target), Body: l.body, Attributes: deadletter.Redriven(l.attrs, r.cfg.By),
		Dedup: envelope.ForRedrive(l.group, l.MessageID, l.Redrives+1)})
	out, err := r.cfg.Queue.SendMessage(ctx, env.Send(l.target))
	if err != nil {
		o.Problem = "could not send to " + l.Destination + ": " + err.Error() + "; the message stays in the DLQ"
		if o.Marked {
			o.Problem += " (the ledger has it queued: the calendar's repair publishes it if nobody redrives it again)"
		}
		_ = r.Release(context.WithoutCancel(ctx), []Letter{l})
		return o
	}
	o.NewMessageID = aws.ToString(out.MessageId)
	// Every copy goes: the delivery is back in the work queue once.
	for _, h := range l.receipts() {
		if _, err := r.cfg.Queue.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.cfg.DLQURL), ReceiptHandle: aws.String(h)}); err != nil {
			o.Problem = "sent, but not deleted from the DLQ: " + err.Error() + "; a copy remains there, and if it is redriven again the consumer recognises it as a duplicate"
			return o
		}
	}
	o.Moved = true
	return o
}

// DLQ is the name of the queue the redriver reads.
func (r *Redriver) DLQ() string { return queueName(r.cfg.DLQURL) }

// MoveTime is how long Move takes for n messages at the redriver's rate.
func (r *Redriver) MoveTime(n int) time.Duration {
	return time.Duration(float64(n) / r.cfg.Rate * float64(time.Second))
}

// Target is the name of the default work queue, where a redrive sends the
// messages of providers without a queue of their own (Letter.Destination
// names each message's).
func (r *Redriver) Target() string { return queueName(r.cfg.TargetURL) }

// queueName returns the queue name at the end of a queue URL.
func queueName(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		return url[i+1:]
	}
	return url
}
