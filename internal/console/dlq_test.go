package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/console"
	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// The dead letters pages against the stand-ins: fauxqs for the queues,
// DynamoDB Local for the ledger, as internal/redrive's tests.

// dlqFixture is a console over a work queue, its DLQ and a ledger.
type dlqFixture struct {
	*fixture
	ctx    context.Context
	sqs    *sqs.Client
	q      standintest.Queues
	ledger *ledger.Ledger
	now    time.Time
}

// reviewHold is how long a listed message is hidden while it is read: short,
// so that one whose receive answer was lost reappears soon.
const reviewHold = 2 * time.Second

// newDLQFixture starts a console whose redriver holds a selection for
// hold. Its clock is a fake one at the wall clock's now, which a test
// moves on to end a hold early in the console's eyes.
func newDLQFixture(t *testing.T, hold time.Duration, edit func(*console.Config)) *dlqFixture {
	t.Helper()
	t.Parallel()
	db, client := standintest.DynamoDB(t), standintest.SQS(t)
	f := &dlqFixture{fixture: &fixture{}, ctx: context.Background(), sqs: client, q: standintest.QueuePair(t, client, 30*time.Second, 10), now: time.Now().UTC()}
	f.clk = clock.NewFake(f.now)
	var err error
	if f.ledger, err = ledger.New(db, ledger.Config{Table: standintest.Table(t, db)}); err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: f.ledger})
	if err != nil {
		t.Fatal(err)
	}
	cfg := console.Config{Stage: "test", Token: "secret-token", AllowActions: true, Operator: "ana", Reminders: store, Ledger: f.ledger, Clock: f.clk,
		Status: func(context.Context) (status.Report, error) { return status.Report{}, nil },
		Redriver: func(by string) (*redrive.Redriver, error) {
			return redrive.New(redrive.Config{Queue: client, DLQURL: f.q.DLQURL, TargetURL: f.q.WorkURL, Ledger: f.ledger, By: by, Rate: 1000,
				ReviewHold: reviewHold, SelectHold: hold})
		}}
	if edit != nil {
		edit(&cfg)
	}
	f.serve(t, cfg)
	return f
}

// dead makes delivery id dead in the ledger, with its message in the DLQ as
// the consumer leaves it.
func (f *dlqFixture) dead(t *testing.T, id, class, reason string) message.DeliveryKey {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: f.now.Add(-time.Hour), ExpiresAt: f.now.Add(24 * time.Hour)}
	if err := f.ledger.Create(f.ctx, d); err != nil {
		t.Fatal(err)
	}
	c, err := f.ledger.Claim(f.ctx, ledger.Claim{Key: d.Key(), Token: "tok-" + id, LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.DeadLetter(f.ctx, c, ledger.Failure{Class: "rejected", Message: reason}); err != nil {
		t.Fatal(err)
	}
	body, err := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: d.DueAt})
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	if _, err := f.sqs.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(f.q.DLQURL), MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			deadletter.AttrErrorClass: str(class), deadletter.AttrReason: str(reason), deadletter.AttrDeliveryKey: str(d.Key().String()),
			deadletter.AttrAttempts: {DataType: aws.String("Number"), StringValue: aws.String("1")},
		}}); err != nil {
		t.Fatal(err)
	}
	return d.Key()
}

// seed puts a group of five rejected deliveries and one exhausted in the
// DLQ, and returns the five.
func (f *dlqFixture) seed(t *testing.T) []message.DeliveryKey {
	t.Helper()
	var five []message.DeliveryKey
	for i := range 5 {
		five = append(five, f.dead(t, fmt.Sprintf("rem-%d", i), "rejected", "provider answered 400"))
	}
	f.dead(t, "rem-9", "exhausted", "attempts exhausted after 500")
	return five
}

// depth returns a queue's visible and in-flight messages.
func (f *dlqFixture) depth(t *testing.T, url string) (visible, inFlight string) {
	t.Helper()
	out, err := f.sqs.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

func (f *dlqFixture) status(t *testing.T, k message.DeliveryKey) ledger.Delivery {
	t.Helper()
	d, err := f.ledger.Get(f.ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// workQueue drains the work queue and returns the delivery keys of its
// messages.
func (f *dlqFixture) workQueue(t *testing.T) []string {
	t.Helper()
	var keys []string
	for range 3 {
		out, err := f.sqs.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.q.WorkURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			msg, err := message.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, msg.Key().String())
			if _, err := f.sqs.DeleteMessage(f.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(f.q.WorkURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// listed GETs the dead letters page's JSON twin, again after the review
// hold if a receive's answer was lost (fauxqs closes a kept-alive
// connection now and then: the messages it hid reappear after the hold).
func (f *dlqFixture) listed(t *testing.T, want int) []redrive.Letter {
	t.Helper()
	var doc struct {
		DLQ      string           `json:"dlq"`
		Messages []redrive.Letter `json:"messages"`
	}
	for try := range 2 {
		body := f.page(t, "/dlq?format=json", http.StatusOK)
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%v\n%s", err, body)
		}
		if len(doc.Messages) == want || try == 1 {
			break
		}
		t.Logf("listed %d of %d (a receive's answer lost): again after the hold", len(doc.Messages), want)
		time.Sleep(reviewHold + time.Second)
	}
	if !strings.HasSuffix(f.q.DLQURL, "/"+doc.DLQ) {
		t.Errorf("the JSON twin names the DLQ %q, not %s's", doc.DLQ, f.q.DLQURL)
	}
	return doc.Messages
}

var chosenKey = regexp.MustCompile(`<td class="mono">(rem-[0-9]+:email:webhook)</td><td>rejected</td>`)

// choose selects at most max of the rejected group and returns the
// confirmation page's address and body.
func (f *dlqFixture) choose(t *testing.T, token string, max int) (string, string) {
	t.Helper()
	code, body, to := f.post(t, "/dlq/select", token, url.Values{"class": {"rejected"}, "reason": {"provider answered 400"}, "max": {fmt.Sprint(max)}})
	if code != http.StatusSeeOther || !strings.HasPrefix(to, "/dlq/selections/") {
		t.Fatalf("select: %d to %q\n%s", code, to, body)
	}
	return to, f.page(t, to, http.StatusOK)
}

func TestTheDeadLettersPageGroupsTheDLQAndLeavesItsMessages(t *testing.T) {
	f := newDLQFixture(t, time.Minute, nil)
	f.seed(t)
	if got := f.listed(t, 6); len(got) != 6 {
		t.Fatalf("listed %d, want 6", len(got))
	}
	page := f.page(t, "/dlq", http.StatusOK)
	for _, want := range []string{"<code>rejected</code>: provider answered 400", "<dd>5 (5 messages)</dd>", "yes, for 5",
		"<code>exhausted</code>: attempts exhausted after 500", "<dd>1 (1 messages)</dd>", `name="reason" value="provider answered 400"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Index(page, "<code>rejected</code>") > strings.Index(page, "<code>exhausted</code>") {
		t.Errorf("the largest group is not first")
	}
	if v, inFlight := f.depth(t, f.q.DLQURL); v != "6" || inFlight != "0" {
		t.Fatalf("after the page the DLQ shows %s visible, %s in flight; want 6 and 0: listing left them hidden", v, inFlight)
	}
	if keys := f.workQueue(t); len(keys) != 0 {
		t.Fatalf("listing sent %v to the work queue", keys)
	}
}

func TestARedriveOfTwoFromAGroupOfFiveMovesExactlyThoseTwo(t *testing.T) {
	f := newDLQFixture(t, time.Minute, nil)
	five := f.seed(t)
	token := csrf(t, f.page(t, "/dlq", http.StatusOK))
	at, page := f.choose(t, token, 2)
	var chosen []string
	for _, m := range chosenKey.FindAllStringSubmatch(page, -1) {
		chosen = append(chosen, m[1])
	}
	slices.Sort(chosen)
	if len(chosen) != 2 || !strings.Contains(page, "These 2 will move") {
		t.Fatalf("the confirmation page shows %v; want 2 letters\n%s", chosen, page)
	}
	if v, inFlight := f.depth(t, f.q.DLQURL); v != "4" || inFlight != "2" {
		t.Fatalf("while held the DLQ shows %s visible, %s in flight; want 4 and 2", v, inFlight)
	}
	id := strings.TrimPrefix(at, "/dlq/selections/")
	code, body, _ := f.post(t, "/dlq/redrive", token, url.Values{"selection": {id}})
	if code != http.StatusOK || !strings.Contains(body, "2 moved") {
		t.Fatalf("redrive: %d\n%s", code, body)
	}
	if got := f.workQueue(t); !slices.Equal(got, chosen) {
		t.Fatalf("the work queue got %v; want exactly the 2 shown, %v", got, chosen)
	}
	if v, inFlight := f.depth(t, f.q.DLQURL); v != "4" || inFlight != "0" {
		t.Fatalf("after the redrive the DLQ shows %s visible, %s in flight; want the other 4 and 0", v, inFlight)
	}
	for _, k := range five {
		d := f.status(t, k)
		moved := slices.Contains(chosen, k.String())
		switch {
		case moved && (d.Status != ledger.StatusQueued || !strings.Contains(d.History[len(d.History)-1].Note, "redriven by ana (console)")):
			t.Errorf("%s, redriven: %s, %+v", k, d.Status, d.History[len(d.History)-1])
		case !moved && d.Status != ledger.StatusDead:
			t.Errorf("%s, not chosen: %s", k, d.Status)
		}
	}
	// The selection is used: posting it again moves nothing more.
	if code, body, _ := f.post(t, "/dlq/redrive", token, url.Values{"selection": {id}}); code != http.StatusGone || !strings.Contains(body, "nothing was moved") {
		t.Fatalf("the same selection again: %d\n%s", code, body)
	}
	if got := f.workQueue(t); len(got) != 0 {
		t.Fatalf("the second post sent %v", got)
	}
}

func TestAnExpiredSelectionMovesNothing(t *testing.T) {
	f := newDLQFixture(t, 20*time.Second, func(c *console.Config) { c.Selections = 1 })
	five := f.seed(t)
	token := csrf(t, f.page(t, "/dlq", http.StatusOK))
	at, _ := f.choose(t, token, 2)
	// One selection at a time here: a second is refused while it is held.
	if code, body, _ := f.post(t, "/dlq/select", token, url.Values{"class": {"rejected"}, "max": {"1"}}); code != http.StatusConflict ||
		!strings.Contains(body, "selections are held already") {
		t.Fatalf("a second selection: %d\n%s", code, body)
	}
	// The console's clock, at the wall clock's time the hold began, then
	// past the hold's end.
	f.clk.Advance(time.Since(f.clk.Now()) + 20*time.Second)
	if body := f.page(t, at, http.StatusGone); !strings.Contains(body, "its hold has ended") {
		t.Fatalf("the expired selection's page:\n%s", body)
	}
	code, body, _ := f.post(t, "/dlq/redrive", token, url.Values{"selection": {strings.TrimPrefix(at, "/dlq/selections/")}})
	if code != http.StatusGone || !strings.Contains(body, "nothing was moved") {
		t.Fatalf("redrive of an expired selection: %d\n%s", code, body)
	}
	if got := f.workQueue(t); len(got) != 0 {
		t.Fatalf("an expired selection sent %v", got)
	}
	for _, k := range five {
		if d := f.status(t, k); d.Status != ledger.StatusDead {
			t.Errorf("%s: %s after an expired selection", k, d.Status)
		}
	}
	if code, body, _ := f.post(t, "/dlq/redrive", token, url.Values{"selection": {"not-an-id"}}); code != http.StatusGone {
		t.Fatalf("an unknown selection: %d\n%s", code, body)
	}
}

func TestACancelledSelectionIsPutBackAtOnce(t *testing.T) {
	f := newDLQFixture(t, time.Minute, nil)
	f.seed(t)
	token := csrf(t, f.page(t, "/dlq", http.StatusOK))
	at, _ := f.choose(t, token, 2)
	code, body, to := f.post(t, "/dlq/release", token, url.Values{"selection": {strings.TrimPrefix(at, "/dlq/selections/")}})
	if code != http.StatusSeeOther || to != "/dlq" {
		t.Fatalf("cancel: %d to %q\n%s", code, to, body)
	}
	if v, inFlight := f.depth(t, f.q.DLQURL); v != "6" || inFlight != "0" {
		t.Fatalf("after the cancel the DLQ shows %s visible, %s in flight; want 6 and 0", v, inFlight)
	}
	f.page(t, at, http.StatusGone)
	if got := f.workQueue(t); len(got) != 0 {
		t.Fatalf("a cancelled selection sent %v", got)
	}
}

// TestClosingTheConsolePutsItsSelectionsBack: a console that stops puts
// the selections held for a confirmation back in the DLQ at once, and
// they can no longer be confirmed.
func TestClosingTheConsolePutsItsSelectionsBack(t *testing.T) {
	f := newDLQFixture(t, time.Minute, nil)
	f.seed(t)
	token := csrf(t, f.page(t, "/dlq", http.StatusOK))
	at, _ := f.choose(t, token, 2)
	if _, inFlight := f.depth(t, f.q.DLQURL); inFlight != "2" {
		t.Fatalf("while held the DLQ shows %s in flight, want 2", inFlight)
	}
	f.srv.Close(f.ctx)
	if v, inFlight := f.depth(t, f.q.DLQURL); v != "6" || inFlight != "0" {
		t.Fatalf("after Close the DLQ shows %s visible, %s in flight; want 6 and 0", v, inFlight)
	}
	if code, _, _ := f.post(t, "/dlq/redrive", token, url.Values{"selection": {strings.TrimPrefix(at, "/dlq/selections/")}}); code != http.StatusGone {
		t.Fatalf("a selection confirmed after Close: %d, want 410", code)
	}
	if got := f.workQueue(t); len(got) != 0 {
		t.Fatalf("sent after Close: %v", got)
	}
}
