package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
)

// Store is what a delivery ledger offers; *ledger.Ledger (DynamoDB) and
// *ledger.Memory implement it.
type Store interface {
	Create(ctx context.Context, d ledger.Delivery) error
	Get(ctx context.Context, key message.DeliveryKey) (ledger.Delivery, error)
	GetMany(ctx context.Context, keys []message.DeliveryKey) (map[message.DeliveryKey]ledger.Delivery, error)
	Claim(ctx context.Context, c ledger.Claim) (ledger.Delivery, error)
	Complete(ctx context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error)
	Retry(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	DeadLetter(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	Expire(ctx context.Context, d ledger.Delivery) (ledger.Delivery, error)
	Release(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (ledger.Delivery, error)
	Cancel(ctx context.Context, key message.DeliveryKey, note string) (ledger.Delivery, error)
	Requeue(ctx context.Context, d ledger.Delivery, note string) (ledger.Delivery, error)
	StoredShards(ctx context.Context) (int, error)
	Cursor(ctx context.Context, shard int) (ledger.Cursor, error)
	MoveCursor(ctx context.Context, shard int, old, pos string, trail []ledger.Mark) (bool, error)
	DueAfter(ctx context.Context, shard int, pos string, upTo time.Time, limit int) ([]ledger.IndexEntry, error)
	DueBy(ctx context.Context, shard int, by time.Time, page func([]ledger.IndexEntry) bool) (bool, error)
	CreateReminder(ctx context.Context, r ledger.ReminderItem) (ledger.ReminderItem, bool, error)
	RecordStage(ctx context.Context, f ledger.StageFacts) error
	ReadStage(ctx context.Context) (ledger.StageFacts, bool, error)
	ReadReminder(ctx context.Context, id string) (ledger.Stored, error)
	HandedOff(ctx context.Context, d ledger.Delivery) (ledger.HandOff, error)
	MoveReminder(ctx context.Context, p ledger.MovePlan) error
	GiveBack(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (ledger.Delivery, error)
	ListAccount(ctx context.Context, account string, limit int, next string) (ledger.AccountPage, error)
	RecordFeedback(ctx context.Context, key message.DeliveryKey, f ledger.Feedback) (ledger.Delivery, error)
	TakeFallback(ctx context.Context, primary ledger.Delivery, reason string) (ledger.Delivery, error)
	Expiry(expiresAt time.Time) time.Time
	AwaitRecord(ctx context.Context, d ledger.Delivery, w ledger.Await) (ledger.Delivery, error)
	SettleSent(ctx context.Context, d ledger.Delivery, receipt, note string) (ledger.Delivery, error)
	RecordFeedbackMark(ctx context.Context, provider string, at time.Time) error
	FeedbackMark(ctx context.Context, provider string) (time.Time, error)
	RecordReveal(ctx context.Context, key message.DeliveryKey, r ledger.Reveal) (ledger.Delivery, error)
	AwaitWindow(ctx context.Context, d ledger.Delivery, opens time.Time) (ledger.Delivery, error)
	CreateSeries(ctx context.Context, s ledger.Series) (ledger.Series, bool, error)
	AdvanceSeries(ctx context.Context, id string, from ledger.Start, next int, extendAt time.Time) error
	RestartSeries(ctx context.Context, id string, from ledger.Start, due, expires time.Time, local ledger.Local, extendAt time.Time) error
	SettleRestart(ctx context.Context, id string, starts int) error
	NoteEarly(ctx context.Context, id, oid string) error
	CreateOccurrence(ctx context.Context, r ledger.ReminderItem, at ledger.Start) (ledger.ReminderItem, bool, error)
	CancelSeries(ctx context.Context, id string) (ledger.Series, error)
	DueSeries(ctx context.Context, shard int, by time.Time, limit int) ([]string, error)
	ListAccountCreatedBy(ctx context.Context, account, creator string, limit int, next string) (ledger.AccountPage, error)
	ReadRecent(ctx context.Context, q ledger.RecentQuery) (ledger.RecentPage, error)
}

var (
	_ Store = (*ledger.Ledger)(nil)
	_ Store = (*ledger.Memory)(nil)
)

// Options are the settings a test asks of its ledger.
type Options struct {
	HistoryLimit int
	Shards       int
	ClockSkew    time.Duration
}

// Factory makes an empty ledger for one test, on the fake clock, with the
// options.
type Factory func(t *testing.T, clk *clock.Fake, o Options) Store

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Run is the conformance suite: the state machine, its refusals and the
// history bound, each as a parallel subtest on a fresh ledger.
func Run(t *testing.T, newStore Factory) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, bundle)
	}{
		{"ClaimReturnsEverythingTheConsumerNeeds", testClaimReturnsEverythingTheConsumerNeeds},
		{"SecondClaimIsRefusedWhileLeasedAndAllowedAfter", testSecondClaimIsRefusedWhileLeasedAndAllowedAfter},
		{"CompleteThenDuplicateIsRecognisedFromAllOld", testCompleteThenDuplicateIsRecognisedFromAllOld},
		{"RetryThenClaimAgain", testRetryThenClaimAgain},
		{"NotDueAndExpiredAreRefusedWithTheItem", testNotDueAndExpiredAreRefusedWithTheItem},
		{"DeadLetterAndRedriveClaim", testDeadLetterAndRedriveClaim},
		{"DeadLetterRefusesADeliveryInFlightElsewhere", testDeadLetterRefusesADeliveryInFlightElsewhere},
		{"UnknownDeliveryIsNotFound", testUnknownDeliveryIsNotFound},
		{"CreateIsConditional", testCreateIsConditional},
		{"ReleaseReturnsToTheCalendar", testReleaseReturnsToTheCalendar},
		{"HistoryIsBounded", testHistoryIsBounded},
		{"ConcurrentClaimsHaveOneWinner", testConcurrentClaimsHaveOneWinner},
		{"DueAndExpiryBoundaries", testDueAndExpiryBoundaries},
		{"ExpireWaitsForAForeignLease", testExpireWaitsForAForeignLease},
		{"ExpireNeverTakesTheHoldersLease", testExpireNeverTakesTheHoldersLease},
		{"ExpireNeedsTheStoredExpiryPassed", testExpireNeedsTheStoredExpiryPassed},
		{"AnEndAfterAnUnendedAttemptSaysItMayHaveBeenSent", testAnEndAfterAnUnendedAttemptSaysItMayHaveBeenSent},
		{"CancelEndsAnUnsentDeliveryOnly", testCancelEndsAnUnsentDeliveryOnly},
		{"RequeueNeedsTheDeliveryAsRead", testRequeueNeedsTheDeliveryAsRead},
		{"RepairsCountUntilAClaim", testRepairsCountUntilAClaim},
		{"NoDeliveryExpiresBeforeItsReminder", testNoDeliveryExpiresBeforeItsReminder},
		{"ReceiptIsClipped", testReceiptIsClipped},
		{"IndexHoldsLiveDeliveriesAtTheirPublishTime", testIndexHoldsLiveDeliveriesAtTheirPublishTime},
		{"DueIndexReadsInOrderWithinBounds", testDueIndexReadsInOrderWithinBounds},
		{"CursorMovesOnlyFromWhereItWas", testCursorMovesOnlyFromWhereItWas},
		{"ReminderItemIsWrittenOnce", testReminderItemIsWrittenOnce},
		{"GetManyAndStoredShards", testGetManyAndStoredShards},
		{"StageFactsAreRecordedAndReplaced", testStageFactsAreRecordedAndReplaced},
		{"AnAttemptThatNeverEndedIsKnownToTheNextClaim", testAnAttemptThatNeverEndedIsKnownToTheNextClaim},
		{"AReviveTakesOnlyTheDeadLetteringItRecords", testAReviveTakesOnlyTheDeadLetteringItRecords},
		{"IndexFollowsEveryTransition", testIndexFollowsEveryTransition},
		{"HandedOffFollowsTheCursor", testHandedOffFollowsTheCursor},
		{"AWriterHandOffIsMarkedInTheIndex", testAWriterHandOffIsMarkedInTheIndex},
		{"RescheduleMovesOnlyWhatHasNotStartedSending", testRescheduleMovesOnlyWhatHasNotStartedSending},
		{"AccountListsItsRemindersLatestDueFirst", testAccountListsItsRemindersLatestDueFirst},
		{"CancelEndsADeadDeliveryToo", testCancelEndsADeadDeliveryToo},
		{"AMoveHoldsOnlyIfTheKeptDeliveriesAreAsRead", testAMoveHoldsOnlyIfTheKeptDeliveriesAreAsRead},
		{"ReviveFromTheLedger", testReviveFromTheLedger},
		{"AReminderKeepsItsCreatorAndListsByIt", testAReminderKeepsItsCreatorAndListsByIt},
		{"FeedbackIsRecordedOnceByItsID", testFeedbackIsRecordedOnceByItsID},
		{"AFailingFeedbackIsNeverReplacedByAnInformationalOne", testAFailingFeedbackIsNeverReplacedByAnInformationalOne},
		{"TheOrderOfArrivalDoesNotDecide", testTheOrderOfArrivalDoesNotDecide},
		{"AnOlderFeedbackArrivingLateIsRecordedButDoesNotStand", testAnOlderFeedbackArrivingLateIsRecordedButDoesNotStand},
		{"FeedbackForAnUnknownDeliveryIsNotFound", testFeedbackForAnUnknownDeliveryIsNotFound},
		{"FeedbackLeavesAnUnsentDeliveryAsItIs", testFeedbackLeavesAnUnsentDeliveryAsItIs},
		{"FeedbackKeepsTheItemBounded", testFeedbackKeepsTheItemBounded},
		{"ConcurrentFeedbackIsAllRecorded", testConcurrentFeedbackIsAllRecorded},
		{"AHeldFallbackIsInNoIndexAndNeverClaimed", testAHeldFallbackIsInNoIndexAndNeverClaimed},
		{"TakeFallbackTakesItOnce", testTakeFallbackTakesItOnce},
		{"ConcurrentTakesHaveOneWinner", testConcurrentTakesHaveOneWinner},
		{"ATakeAfterCancelIsRefused", testATakeAfterCancelIsRefused},
		{"ATakeNeedsThePrimaryAsSeen", testATakeNeedsThePrimaryAsSeen},
		{"ATakenFallbackKeepsItsOwnExpiry", testATakenFallbackKeepsItsOwnExpiry},
		{"ALatePolicyIsKeptAndRescheduled", testALatePolicyIsKeptAndRescheduled},
		{"AWaitForTheRecordKeepsTheAmbiguousAttempt", testAWaitForTheRecordKeepsTheAmbiguousAttempt},
		{"TheRecordSettlesAClaimedOrADeadAmbiguousDelivery", testTheRecordSettlesAClaimedOrADeadAmbiguousDelivery},
		{"TheRecordSettlesAnExpiryOrCancelAfterAnAmbiguousAttempt", testTheRecordSettlesAnExpiryOrCancelAfterAnAmbiguousAttempt},
		{"AWriteUnderTheLeaseKeepsFeedbackRecordedSinceTheClaim", testAWriteUnderTheLeaseKeepsFeedbackRecordedSinceTheClaim},
		{"TheFeedbackMarkOnlyMovesForward", testTheFeedbackMarkOnlyMovesForward},
		{"ASendReportOfTheRecordedMessageIsRedundant", testASendReportOfTheRecordedMessageIsRedundant},
		{"ARevealIsRecordedAndChangesNothingElse", testARevealIsRecordedAndChangesNothingElse},
		{"ARevealNeedsAReasonAndAKnownDelivery", testARevealNeedsAReasonAndAKnownDelivery},
		{"RevealsKeepTheHistoryBounded", testRevealsKeepTheHistoryBounded},
		{"ReadRecentReadsWhatChangedSinceInBoundedPages", testReadRecentReadsWhatChangedSinceInBoundedPages},
		{"AWaitForTheWindowSpendsNoAttempt", testAWaitForTheWindowSpendsNoAttempt},
		{"ASeriesIsWrittenOnceAdvancedOnceAndCancelled", testASeriesIsWrittenOnceAdvancedOnceAndCancelled},
		{"AnIDIsAReminderOrASeriesNeverBoth", testAnIDIsAReminderOrASeriesNeverBoth},
		{"AReminderAndASeriesCreatedAtOnceOneWins", testAReminderAndASeriesCreatedAtOnceOneWins},
		{"ASeriesRestartsAtMostMaxRestartsTimes", testASeriesRestartsAtMostMaxRestartsTimes},
		{"AnOccurrenceIsCreatedOnlyWhileItsSeriesIsThere", testAnOccurrenceIsCreatedOnlyWhileItsSeriesIsThere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			tc.test(t, bundle{l: newStore(t, clk, Options{HistoryLimit: 6, Shards: 2}), clk: clk})
		})
	}
	t.Run("AWriterClockBehindPublishesAhead", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(t0)
		testAWriterClockBehindPublishesAhead(t, bundle{l: newStore(t, clk, Options{Shards: 2, ClockSkew: time.Minute}), clk: clk})
	})
}

type bundle struct {
	l   Store
	clk *clock.Fake
}

func (b bundle) create(t *testing.T, id string) ledger.Delivery {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", RecipientRef: "acct-1/contact-2", TemplateRef: "renewal-v3",
		DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusQueued}
	if err := b.l.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (b bundle) claim(token string, d ledger.Delivery) (ledger.Delivery, error) {
	now := b.clk.Now()
	return b.l.Claim(context.Background(), ledger.Claim{Key: d.Key(), Token: token, LeaseUntil: now.Add(time.Minute), DueBy: now.Add(time.Second)})
}

func (b bundle) revive(token string, d ledger.Delivery) (ledger.Delivery, error) {
	now := b.clk.Now()
	return b.l.Claim(context.Background(), ledger.Claim{Key: d.Key(), Token: token, LeaseUntil: now.Add(time.Minute), DueBy: now.Add(time.Second), Revive: true})
}

// createExpiring creates a queued delivery due at t0 that expires at
// expiresAt.
func (b bundle) createExpiring(t *testing.T, id string, expiresAt time.Time) ledger.Delivery {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: t0, ExpiresAt: expiresAt, Status: ledger.StatusQueued}
	if err := b.l.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func refusal(t *testing.T, err error, want error) *ledger.RefusedError {
	t.Helper()
	var re *ledger.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, want) {
		t.Fatalf("error = %v, want a refusal for %v", err, want)
	}
	return re
}

func testClaimReturnsEverythingTheConsumerNeeds(t *testing.T, b bundle) {
	d := b.create(t, "rem-1")
	got, err := b.claim("tok-a", d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.StatusSending || got.ClaimToken != "tok-a" || got.Attempts != 1 ||
		got.RecipientRef != "acct-1/contact-2" || got.TemplateRef != "renewal-v3" || !got.DueAt.Equal(t0) || !got.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claimed delivery = %+v", got)
	}
	if n := len(got.History); n != 2 || got.History[1].Status != ledger.StatusSending {
		t.Fatalf("history = %+v, want created then sending", got.History)
	}
}

func testSecondClaimIsRefusedWhileLeasedAndAllowedAfter(t *testing.T, b bundle) {
	d := b.create(t, "rem-2")
	if _, err := b.claim("tok-a", d); err != nil {
		t.Fatal(err)
	}
	_, err := b.claim("tok-b", d)
	re := refusal(t, err, ledger.ErrLeased)
	if re.Current.ClaimToken != "tok-a" {
		t.Fatalf("refusal carries %+v, want the current holder", re.Current)
	}
	b.clk.Advance(61 * time.Second) // lease lapsed: the first consumer died
	got, err := b.claim("tok-b", d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 2 || got.ClaimToken != "tok-b" {
		t.Fatalf("re-claim = %+v", got)
	}
	// The first holder can no longer complete.
	stale := got
	stale.ClaimToken = "tok-a"
	_, err = b.l.Complete(context.Background(), stale, "r-1")
	refusal(t, err, ledger.ErrLeaseLost)
}

func testCompleteThenDuplicateIsRecognisedFromAllOld(t *testing.T, b bundle) {
	d := b.create(t, "rem-3")
	c, err := b.claim("tok-a", d)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := b.l.Complete(context.Background(), c, "provider-receipt-9")
	if err != nil {
		t.Fatal(err)
	}
	if sent.Status != ledger.StatusSent || sent.Receipt != "provider-receipt-9" || sent.ClaimToken != "" || !sent.SentAt.Equal(t0) {
		t.Fatalf("sent = %+v", sent)
	}
	_, err = b.claim("tok-b", d)
	re := refusal(t, err, ledger.ErrAlreadySent)
	if re.Current.Receipt != "provider-receipt-9" {
		t.Fatalf("duplicate refusal carries %+v", re.Current)
	}
	// Completing twice with the same claim is also a recognised duplicate.
	_, err = b.l.Complete(context.Background(), c, "provider-receipt-9")
	refusal(t, err, ledger.ErrAlreadySent)
}

func testRetryThenClaimAgain(t *testing.T, b bundle) {
	d := b.create(t, "rem-4")
	c, _ := b.claim("tok-a", d)
	r, err := b.l.Retry(context.Background(), c, ledger.Failure{Class: "server", Message: "provider answered 503", NextAttemptAt: t0.Add(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != ledger.StatusRetrying || r.LastErrorClass != "server" || r.ClaimToken != "" || !r.NextAttemptAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("retrying = %+v", r)
	}
	if _, err := b.claim("tok-b", d); err != nil {
		t.Fatalf("claim after retry: %v", err)
	}
}

func testNotDueAndExpiredAreRefusedWithTheItem(t *testing.T, b bundle) {
	ctx := context.Background()
	future := ledger.Delivery{ReminderID: "rem-5", Channel: "sms", Provider: "webhook", DueAt: t0.Add(10 * time.Minute), ExpiresAt: t0.Add(time.Hour), Status: ledger.StatusQueued}
	if err := b.l.Create(ctx, future); err != nil {
		t.Fatal(err)
	}
	_, err := b.claim("tok", future)
	re := refusal(t, err, ledger.ErrNotDue)
	if !re.Current.DueAt.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("not-due refusal carries dueAt %v", re.Current.DueAt)
	}
	b.clk.Advance(2 * time.Hour)
	_, err = b.claim("tok", future)
	re = refusal(t, err, ledger.ErrExpired)
	exp, err := b.l.Expire(ctx, re.Current)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Status != ledger.StatusExpired {
		t.Fatalf("expired = %+v", exp)
	}
	_, err = b.claim("tok", future)
	refusal(t, err, ledger.ErrFinished)
}

func testDeadLetterAndRedriveClaim(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-6")
	c, _ := b.claim("tok-a", d)
	dead, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400: unknown recipient"})
	if err != nil {
		t.Fatal(err)
	}
	if dead.Status != ledger.StatusDead || dead.LastError == "" {
		t.Fatalf("dead = %+v", dead)
	}
	// Dead-lettering again is refused as finished.
	_, err = b.l.DeadLetter(ctx, d, ledger.Failure{Class: "decode", Message: "x"})
	refusal(t, err, ledger.ErrFinished)
	// A plain copy of its message (a late duplicate) may not claim it...
	_, err = b.claim("tok-dup", d)
	refusal(t, err, ledger.ErrFinished)
	// ...a message redriven from the DLQ may, and the attempt budget
	// restarts: the attempt before the redrive no longer counts.
	revived, err := b.revive("tok-r", d)
	if err != nil {
		t.Fatalf("redrive claim: %v", err)
	}
	if revived.Status != ledger.StatusSending || revived.Attempts != 2 || revived.BudgetFrom != 1 || revived.BudgetUsed() != 1 {
		t.Fatalf("revived = status %s, attempts %d, budget from %d; want sending, 2, 1", revived.Status, revived.Attempts, revived.BudgetFrom)
	}
	// A retry of the redriven message claims the live delivery as usual:
	// the budget does not restart again.
	if _, err := b.l.Retry(ctx, revived, ledger.Failure{Class: "server", Message: "503", NextAttemptAt: b.clk.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	again, err := b.revive("tok-r2", d)
	if err != nil {
		t.Fatalf("claim by the redriven message's retry: %v", err)
	}
	if again.Attempts != 3 || again.BudgetFrom != 1 || again.BudgetUsed() != 2 {
		t.Fatalf("retried = attempts %d, budget from %d; want 3, 1", again.Attempts, again.BudgetFrom)
	}
	// A revive of a delivery that was sent meanwhile is a duplicate.
	if _, err := b.l.Complete(ctx, again, "r-1"); err != nil {
		t.Fatal(err)
	}
	_, err = b.revive("tok-r3", d)
	refusal(t, err, ledger.ErrAlreadySent)
}

func testDeadLetterRefusesADeliveryInFlightElsewhere(t *testing.T, b bundle) {
	d := b.create(t, "rem-7")
	if _, err := b.claim("tok-a", d); err != nil {
		t.Fatal(err)
	}
	_, err := b.l.DeadLetter(context.Background(), d, ledger.Failure{Class: "decode", Message: "x"})
	refusal(t, err, ledger.ErrLeased)
}

func testUnknownDeliveryIsNotFound(t *testing.T, b bundle) {
	_, err := b.l.Claim(context.Background(), ledger.Claim{Key: message.DeliveryKey{ReminderID: "nope", Channel: "email", Provider: "webhook"}, Token: "t", LeaseUntil: t0, DueBy: t0})
	refusal(t, err, ledger.ErrNotFound)
}

func testCreateIsConditional(t *testing.T, b bundle) {
	d := b.create(t, "rem-8")
	refusal(t, b.l.Create(context.Background(), d), ledger.ErrExists)
}

func testReleaseReturnsToTheCalendar(t *testing.T, b bundle) {
	d := b.create(t, "rem-9")
	_, err := b.l.Release(context.Background(), d.Key(), d.DueAt.Add(time.Hour), "a message with another dueAt")
	refusal(t, err, ledger.ErrNotReleasable)
	got, err := b.l.Release(context.Background(), d.Key(), d.DueAt, "due in 2h")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.StatusPending || got.History[len(got.History)-1].Note != "due in 2h" {
		t.Fatalf("released = %+v", got)
	}
	c, _ := b.claim("tok", d)
	if _, err := b.l.Complete(context.Background(), c, "r"); err != nil {
		t.Fatal(err)
	}
	_, err = b.l.Release(context.Background(), d.Key(), d.DueAt, "x")
	refusal(t, err, ledger.ErrAlreadySent)
}

func testCancelEndsAnUnsentDeliveryOnly(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-c1")
	got, err := b.l.Cancel(ctx, d.Key(), "by operator")
	if err != nil || got.Status != ledger.StatusCancelled {
		t.Fatalf("cancel = %+v, %v", got, err)
	}
	refusal(t, func() error { _, err := b.l.Cancel(ctx, d.Key(), "again"); return err }(), ledger.ErrFinished)
	_, err = b.claim("tok", d)
	refusal(t, err, ledger.ErrFinished)

	inFlight := b.create(t, "rem-c2")
	if _, err := b.claim("tok", inFlight); err != nil {
		t.Fatal(err)
	}
	re := refusal(t, func() error { _, err := b.l.Cancel(ctx, inFlight.Key(), "x"); return err }(), ledger.ErrLeased)
	if re.Current.LeaseUntil.IsZero() {
		t.Fatalf("refusal lacks the lease: %+v", re.Current)
	}

	sent := b.create(t, "rem-c3")
	c, _ := b.claim("tok", sent)
	if _, err := b.l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	refusal(t, func() error { _, err := b.l.Cancel(ctx, sent.Key(), "x"); return err }(), ledger.ErrAlreadySent)
	refusal(t, func() error {
		_, err := b.l.Cancel(ctx, ledger.Delivery{ReminderID: "nope", Channel: "email", Provider: "webhook"}.Key(), "x")
		return err
	}(), ledger.ErrNotFound)
}

func testRequeueNeedsTheDeliveryAsRead(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-q1")
	read, err := b.l.Get(ctx, d.Key())
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	got, err := b.l.Requeue(ctx, read, "repair")
	if err != nil || got.Status != ledger.StatusQueued || !got.UpdatedAt.Equal(b.clk.Now()) {
		t.Fatalf("requeue = %+v, %v", got, err)
	}
	// A second run that read the same version loses.
	re := refusal(t, func() error { _, err := b.l.Requeue(ctx, read, "repair"); return err }(), ledger.ErrChanged)
	if re.Current.Status != ledger.StatusQueued {
		t.Fatalf("refusal current = %+v", re.Current)
	}
	c, _ := b.claim("tok", d)
	if _, err := b.l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	refusal(t, func() error { _, err := b.l.Requeue(ctx, got, "repair"); return err }(), ledger.ErrAlreadySent)
}

// testRepairsCountUntilAClaim: each requeue counts a repair; a claim (the
// hand-off worked) starts the count again, so the enqueue's back-off
// between repairs restarts too.
func testRepairsCountUntilAClaim(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-rep1")
	requeue := func(want int) ledger.Delivery {
		t.Helper()
		read, err := b.l.Get(ctx, d.Key())
		if err != nil {
			t.Fatal(err)
		}
		b.clk.Advance(time.Second)
		got, err := b.l.Requeue(ctx, read, "repair")
		if err != nil || got.Repairs != want {
			t.Fatalf("requeue %d: repairs %d, %v", want, got.Repairs, err)
		}
		if stored, _ := b.l.Get(ctx, d.Key()); stored.Repairs != want {
			t.Fatalf("requeue %d: stored repairs %d", want, stored.Repairs)
		}
		return got
	}
	requeue(1)
	requeue(2)
	c, err := b.claim("tok", d)
	if err != nil || c.Repairs != 0 {
		t.Fatalf("claim after two repairs: repairs %d, %v", c.Repairs, err)
	}
	if stored, _ := b.l.Get(ctx, d.Key()); stored.Repairs != 0 {
		t.Fatalf("stored after the claim: repairs %d", stored.Repairs)
	}
	b.clk.Advance(20 * time.Minute) // the lease lapses; the repair hands it back
	requeue(1)
}

func testHistoryIsBounded(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-10")
	var last ledger.Delivery
	for i := 0; i < 6; i++ {
		c, err := b.claim(fmt.Sprint("tok-", i), d)
		if err != nil {
			t.Fatal(err)
		}
		if last, err = b.l.Retry(ctx, c, ledger.Failure{Class: "server", Message: "503", NextAttemptAt: t0}); err != nil {
			t.Fatal(err)
		}
		if len(last.History) > 7 { // the limit, plus the claim's own append
			t.Fatalf("history grew to %d entries", len(last.History))
		}
	}
	if got := last.History[len(last.History)-1]; got.Status != ledger.StatusRetrying {
		t.Fatalf("last entry = %+v", got)
	}
	if last.History[0].Status == ledger.StatusQueued {
		t.Fatal("oldest entries were not dropped")
	}
}

func testConcurrentClaimsHaveOneWinner(t *testing.T, b bundle) {
	d := b.create(t, "rem-11")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, leased := 0, 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.claim(fmt.Sprint("tok-", i), d)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, ledger.ErrLeased):
				leased++
			default:
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || leased != 7 {
		t.Fatalf("%d wins, %d refused as leased; want 1 and 7", wins, leased)
	}
}

func testDueAndExpiryBoundaries(t *testing.T, b bundle) {
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: "rem-edge", Channel: "email", Provider: "webhook", DueAt: t0.Add(time.Minute), ExpiresAt: t0.Add(2 * time.Minute), Status: ledger.StatusQueued}
	if err := b.l.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	claim := func(dueBy time.Time) error {
		_, err := b.l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: "t", LeaseUntil: b.clk.Now().Add(time.Second), DueBy: dueBy})
		return err
	}
	refusal(t, claim(d.DueAt.Add(-time.Millisecond)), ledger.ErrNotDue)
	b.clk.Advance(2 * time.Minute) // now == expiresAt: expired
	refusal(t, claim(d.DueAt), ledger.ErrExpired)
	b.clk.Advance(-time.Millisecond) // one millisecond before expiry, dueBy == dueAt: claimable
	if err := claim(d.DueAt); err != nil {
		t.Fatalf("claim at the boundaries: %v", err)
	}
}

func testExpireWaitsForAForeignLease(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.createExpiring(t, "rem-lease", t0.Add(30*time.Second))
	c, err := b.claim("mine", d)
	if err != nil {
		t.Fatal(err)
	}
	other := c
	other.ClaimToken = "theirs"
	b.clk.Advance(40 * time.Second) // expired, and the lease still runs
	_, err = b.l.Expire(ctx, other)
	refusal(t, err, ledger.ErrLeased)
	_, err = b.l.Retry(ctx, other, ledger.Failure{Class: "server", Message: "x", NextAttemptAt: t0})
	refusal(t, err, ledger.ErrLeaseLost)
	b.clk.Advance(21 * time.Second) // the lease lapsed
	if got, err := b.l.Expire(ctx, other); err != nil || got.Status != ledger.StatusExpired {
		t.Fatalf("expire after the lease: %+v, %v", got, err)
	}
}

// testExpireNeverTakesTheHoldersLease: a delivery read from the table
// while a consumer sends it carries that consumer's claim token; an
// Expire given it (the overdue scan's read, a late copy's refused claim)
// must not end the send in flight, whose Complete then records it sent.
func testExpireNeverTakesTheHoldersLease(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.createExpiring(t, "rem-expire-held", t0.Add(30*time.Second))
	c, err := b.claim("holder", d)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(40 * time.Second) // past expiresAt, the lease still runs
	read, err := b.l.Get(ctx, d.Key())
	if err != nil || read.ClaimToken != "holder" {
		t.Fatalf("read = %+v, %v", read, err)
	}
	_, err = b.l.Expire(ctx, read)
	refusal(t, err, ledger.ErrLeased)
	sent, err := b.l.Complete(ctx, c, "provider-receipt")
	if err != nil || sent.Status != ledger.StatusSent {
		t.Fatalf("the holder's complete after the refused expire: %+v, %v", sent, err)
	}
}

// testExpireNeedsTheStoredExpiryPassed: an Expire given a delivery whose
// expiresAt, as stored, is still ahead (a reschedule landed after the
// read) is refused; nothing is recorded expired that can still be sent.
func testExpireNeedsTheStoredExpiryPassed(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.createExpiring(t, "rem-expire-ahead", t0.Add(time.Hour))
	read, err := b.l.Get(ctx, d.Key())
	if err != nil {
		t.Fatal(err)
	}
	read.ExpiresAt = t0.Add(-time.Minute) // as a read before the reschedule saw it
	_, err = b.l.Expire(ctx, read)
	re := refusal(t, err, ledger.ErrNotExpired)
	if re.Current.Status != ledger.StatusQueued {
		t.Errorf("the refused expire left %q, want queued", re.Current.Status)
	}
	b.clk.Advance(time.Hour) // now == expiresAt: expired
	if got, err := b.l.Expire(ctx, read); err != nil || got.Status != ledger.StatusExpired || got.EndedUnended() != 0 {
		t.Fatalf("expire at expiresAt: %+v, %v", got, err)
	}
}

// testAnEndAfterAnUnendedAttemptSaysItMayHaveBeenSent: a delivery
// cancelled or expired while its last attempt never recorded an end (a
// lapsed lease, a repair that handed it back, an ambiguous dead-lettering)
// ends with that attempt named, class ambiguous, in its history and
// lastErrorClass; one whose attempts all ended ends plainly.
func testAnEndAfterAnUnendedAttemptSaysItMayHaveBeenSent(t *testing.T, b bundle) {
	ctx := context.Background()
	says := func(what string, d ledger.Delivery, err error, status ledger.Status, attempt int) {
		t.Helper()
		if err != nil || d.Status != status {
			t.Fatalf("%s: %+v, %v", what, d, err)
		}
		if got := d.EndedUnended(); got != attempt {
			t.Errorf("%s: EndedUnended = %d, want %d (history %+v)", what, got, attempt, d.History)
		}
		if wantClass := attempt > 0; (d.LastErrorClass == "ambiguous") != wantClass {
			t.Errorf("%s: lastErrorClass %q", what, d.LastErrorClass)
		}
		if last := d.History[len(d.History)-1]; attempt > 0 && !strings.Contains(last.Note, "may have been sent") {
			t.Errorf("%s: the history's last entry %+v does not say so", what, last)
		}
	}
	// A lapsed lease, cancelled.
	lapsed := b.create(t, "rem-unended-1")
	if _, err := b.claim("tok", lapsed); err != nil {
		t.Fatal(err)
	}
	ended := b.create(t, "rem-unended-2")
	c, err := b.claim("tok", ended)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Retry(ctx, c, ledger.Failure{Class: "server", Message: "500", NextAttemptAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	repaired := b.create(t, "rem-unended-3")
	if _, err := b.claim("tok", repaired); err != nil {
		t.Fatal(err)
	}
	expiring := b.createExpiring(t, "rem-unended-4", t0.Add(90*time.Second))
	if _, err := b.claim("tok", expiring); err != nil {
		t.Fatal(err)
	}
	plain := b.create(t, "rem-unended-5")
	b.clk.Advance(2 * time.Minute) // every lease lapsed
	got, err := b.l.Cancel(ctx, lapsed.Key(), "by owner")
	says("a lapsed lease, cancelled", got, err, ledger.StatusCancelled, 1)
	got, err = b.l.Cancel(ctx, ended.Key(), "by owner")
	says("an ended attempt, cancelled", got, err, ledger.StatusCancelled, 0)
	read, err := b.l.Get(ctx, repaired.Key())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Requeue(ctx, read, "repair 1: lease lapsed"); err != nil {
		t.Fatal(err)
	}
	got, err = b.l.Cancel(ctx, repaired.Key(), "by owner")
	says("handed back by the repair, cancelled", got, err, ledger.StatusCancelled, 1)
	read, err = b.l.Get(ctx, expiring.Key())
	if err != nil {
		t.Fatal(err)
	}
	got, err = b.l.Expire(ctx, read)
	says("a lapsed lease, expired", got, err, ledger.StatusExpired, 1)
	got, err = b.l.Cancel(ctx, plain.Key(), "by owner")
	says("never claimed, cancelled", got, err, ledger.StatusCancelled, 0)
	// Dead-lettered as ambiguous (the claim after the lapsed lease), then
	// cancelled.
	amb := b.create(t, "rem-unended-6")
	c, err = b.claim("tok", amb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "ambiguous", Message: "may have been sent"}); err != nil {
		t.Fatal(err)
	}
	got, err = b.l.Cancel(ctx, amb.Key(), "by owner")
	says("dead as ambiguous, cancelled", got, err, ledger.StatusCancelled, 1)
}

// testNoDeliveryExpiresBeforeItsReminder: a delivery item is kept 90 days
// (the default retention) after its reminder's expiresAt, from its
// creation, whichever transition ends it and whether the writer knew
// expiresAt (a cancel by key does not). Otherwise an old import run again
// after the item expired, with expiresAt still ahead, would create the
// delivery anew and send it a second time.
func testNoDeliveryExpiresBeforeItsReminder(t *testing.T, b bundle) {
	ctx := context.Background()
	far := t0.Add(400 * 24 * time.Hour)
	want := func(what string, got ledger.Delivery, expiresAt time.Time) {
		t.Helper()
		stored, err := b.l.Get(ctx, got.Key())
		if err != nil {
			t.Fatal(err)
		}
		at := expiresAt.Add(ledger.DefaultRetention)
		if !stored.TTL.Equal(at) || !got.TTL.Equal(stored.TTL) {
			t.Errorf("%s: TTL %v (returned %v), want %v", what, stored.TTL, got.TTL, at)
		}
	}
	// Live: set at creation.
	live, err := b.l.Get(ctx, b.createExpiring(t, "rem-ttl-0", far).Key())
	if err != nil {
		t.Fatal(err)
	}
	want("live", live, far)
	// Sent, expiring in a day, and in 400 days.
	soon := b.create(t, "rem-ttl-1")
	c, _ := b.claim("tok", soon)
	sent, err := b.l.Complete(ctx, c, "r")
	if err != nil {
		t.Fatal(err)
	}
	want("sent, expiring in a day", sent, soon.ExpiresAt)
	c, _ = b.claim("tok", b.createExpiring(t, "rem-ttl-2", far))
	sent, err = b.l.Complete(ctx, c, "r")
	if err != nil {
		t.Fatal(err)
	}
	want("sent, expiring in 400 days", sent, far)
	// Dead-lettered after a claim, and by key as the consumer does for a
	// provider it lacks.
	c, _ = b.claim("tok", b.createExpiring(t, "rem-ttl-3", far))
	dead, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "400"})
	if err != nil {
		t.Fatal(err)
	}
	want("dead-lettered", dead, far)
	byKey := b.createExpiring(t, "rem-ttl-4", far)
	dead, err = b.l.DeadLetter(ctx, ledger.Delivery{ReminderID: byKey.ReminderID, Channel: byKey.Channel, Provider: byKey.Provider}, ledger.Failure{Class: "config", Message: "no provider"})
	if err != nil {
		t.Fatal(err)
	}
	want("dead-lettered by key", dead, far)
	// Cancelled by key.
	cancelled, err := b.l.Cancel(ctx, b.createExpiring(t, "rem-ttl-5", far).Key(), "by operator")
	if err != nil {
		t.Fatal(err)
	}
	want("cancelled by key", cancelled, far)
	// Expired an hour after its expiresAt: still counted from expiresAt.
	late := b.createExpiring(t, "rem-ttl-6", t0.Add(time.Hour))
	b.clk.Advance(2 * time.Hour)
	exp, err := b.l.Expire(ctx, late)
	if err != nil {
		t.Fatal(err)
	}
	want("expired", exp, late.ExpiresAt)
}

// testReceiptIsClipped: a provider's receipt is an identifier; one of 64 KiB
// is kept to MaxReceipt bytes, so the item stays under 1 KB.
func testReceiptIsClipped(t *testing.T, b bundle) {
	c, _ := b.claim("tok", b.create(t, "rem-receipt"))
	sent, err := b.l.Complete(context.Background(), c, strings.Repeat("é", 32<<10))
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Receipt) > ledger.MaxReceipt || !utf8.ValidString(sent.Receipt) || !strings.HasPrefix(sent.Receipt, "éé") || !strings.HasSuffix(sent.Receipt, "…") {
		t.Fatalf("receipt of %d bytes stored as %d bytes (valid UTF-8: %v)", 64<<10, len(sent.Receipt), utf8.ValidString(sent.Receipt))
	}
}

// indexOf returns shard's due index entries published by t, in order.
func (b bundle) indexOf(t *testing.T, shard int, by time.Time) []ledger.IndexEntry {
	t.Helper()
	var es []ledger.IndexEntry
	complete, err := b.l.DueBy(context.Background(), shard, by, func(page []ledger.IndexEntry) bool {
		es = append(es, page...)
		return true
	})
	if err != nil || !complete {
		t.Fatalf("DueBy: complete %v, %v", complete, err)
	}
	return es
}

// entry finds k among shard 0's and 1's entries.
func (b bundle) entry(t *testing.T, k message.DeliveryKey) (ledger.IndexEntry, bool) {
	t.Helper()
	for shard := range 2 {
		for _, e := range b.indexOf(t, shard, t0.Add(365*24*time.Hour)) {
			if e.Key == k {
				return e, true
			}
		}
	}
	return ledger.IndexEntry{}, false
}

// testIndexHoldsLiveDeliveriesAtTheirPublishTime: a delivery enters the
// due index at max(dueAt − lookahead, now), in its reminder's shard; it
// stays while live, moves when released, and leaves when it ends.
func testIndexHoldsLiveDeliveriesAtTheirPublishTime(t *testing.T, b bundle) {
	ctx := context.Background()
	far := ledger.Delivery{ReminderID: "rem-far", Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: t0.Add(2 * time.Hour), ExpiresAt: t0.Add(3 * time.Hour)}
	soon := ledger.Delivery{ReminderID: "rem-soon", Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: t0.Add(5 * time.Minute), ExpiresAt: t0.Add(time.Hour)}
	for _, d := range []ledger.Delivery{far, soon} {
		if err := b.l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	e, ok := b.entry(t, far.Key())
	if !ok || !e.PublishAt.Equal(far.DueAt.Add(-ledger.MaxLookahead)) || !e.DueAt.Equal(far.DueAt) || !e.ExpiresAt.Equal(far.ExpiresAt) ||
		e.Sort != ledger.IndexSort(e.PublishAt, far.Key()) {
		t.Fatalf("far entry %+v (%v), want published at dueAt − 15m", e, ok)
	}
	if e, ok := b.entry(t, soon.Key()); !ok || !e.PublishAt.Equal(t0) {
		t.Fatalf("soon entry %+v (%v), want published now (dueAt − 15m is past)", e, ok)
	}
	if got, _ := b.l.Get(ctx, far.Key()); got.Index == nil || got.Index.Sort != e.Sort && got.Index.Shard != ledger.ShardOf(far.ReminderID, 2) {
		t.Errorf("the delivery's Index %+v does not match its entry", got.Index)
	}
	// Released at a later time: it moves to its new publish time.
	b.clk.Advance(2 * time.Hour)
	if _, err := b.l.Release(ctx, far.Key(), far.DueAt, "released"); err != nil {
		t.Fatal(err)
	}
	if e, ok := b.entry(t, far.Key()); !ok || !e.PublishAt.Equal(b.clk.Now()) {
		t.Fatalf("released entry %+v (%v), want published now", e, ok)
	}
	// Claimed, it stays; sent, it leaves; cancelled, it leaves.
	c, err := b.claim("tok", far)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.entry(t, far.Key()); !ok {
		t.Fatal("a claimed delivery left the index")
	}
	if _, err := b.l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Cancel(ctx, soon.Key(), "no"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []message.DeliveryKey{far.Key(), soon.Key()} {
		if e, ok := b.entry(t, k); ok {
			t.Errorf("%s is still in the index after it ended: %+v", k, e)
		}
		if got, _ := b.l.Get(ctx, k); got.Index != nil {
			t.Errorf("%s has an index position after it ended", k)
		}
	}
}

// testDueIndexReadsInOrderWithinBounds: DueAfter returns a shard's entries
// after a position and published by a time, in order, at most limit; DueBy
// reads every entry published by a time, in order.
func testDueIndexReadsInOrderWithinBounds(t *testing.T, b bundle) {
	ctx := context.Background()
	var in0 []message.DeliveryKey
	for i := range 12 {
		id := fmt.Sprintf("rem-%02d", i)
		d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
			DueAt: t0.Add(time.Duration(20+i) * time.Minute), ExpiresAt: t0.Add(2 * time.Hour)}
		if err := b.l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		if ledger.ShardOf(id, 2) == 0 {
			in0 = append(in0, d.Key())
		}
	}
	if len(in0) < 4 {
		t.Fatalf("only %d of 12 in shard 0", len(in0))
	}
	// Published (dueAt − 15m) from t0+5m on, one a minute.
	all := b.indexOf(t, 0, t0.Add(time.Hour))
	if len(all) != len(in0) {
		t.Fatalf("DueBy read %d entries of shard 0, want %d", len(all), len(in0))
	}
	for i, e := range all {
		if e.Key != in0[i] || i > 0 && all[i-1].Sort >= e.Sort {
			t.Fatalf("entry %d is %s, want %s in order", i, e.Key, in0[i])
		}
	}
	first, err := b.l.DueAfter(ctx, 0, "", t0.Add(time.Hour), 2)
	if err != nil || len(first) != 2 || first[1].Key != in0[1] {
		t.Fatalf("DueAfter from the start, 2: %+v, %v", first, err)
	}
	next, err := b.l.DueAfter(ctx, 0, first[1].Sort, t0.Add(time.Hour), 100)
	if err != nil || len(next) != len(in0)-2 || next[0].Key != in0[2] {
		t.Fatalf("DueAfter after the second: %+v, %v", next, err)
	}
	// The bound: published at or before upTo, inclusive to the millisecond.
	upTo := all[2].PublishAt
	bounded, err := b.l.DueAfter(ctx, 0, "", upTo, 100)
	if err != nil || len(bounded) != 3 {
		t.Fatalf("DueAfter up to the third's publish time: %d entries, %v; want 3", len(bounded), err)
	}
	if es, _ := b.l.DueAfter(ctx, 0, all[len(all)-1].Sort, t0.Add(time.Hour), 100); len(es) != 0 {
		t.Fatalf("DueAfter past the last: %+v", es)
	}
	// A DueBy that stops early still reports no error.
	if _, err := b.l.DueBy(ctx, 0, t0.Add(time.Hour), func([]ledger.IndexEntry) bool { return false }); err != nil {
		t.Fatal(err)
	}
}

// testCursorMovesOnlyFromWhereItWas: a cursor starts empty and moves only
// from the position the mover read; each shard has its own. A move records
// when, and keeps the newest MaxTrail marks of the trail it is given.
func testCursorMovesOnlyFromWhereItWas(t *testing.T, b bundle) {
	ctx := context.Background()
	move := func(shard int, old, pos string, want bool, trail ...ledger.Mark) {
		t.Helper()
		moved, err := b.l.MoveCursor(ctx, shard, old, pos, trail)
		if err != nil || moved != want {
			t.Fatalf("MoveCursor(%d, %q, %q) = %v, %v; want %v", shard, old, pos, moved, err, want)
		}
	}
	if c, err := b.l.Cursor(ctx, 0); err != nil || c.Pos != "" || !c.MovedAt.IsZero() || c.Trail != nil {
		t.Fatalf("a new cursor is %+v, %v", c, err)
	}
	move(0, "x", "a", false) // it was not at x
	move(0, "", "a", true)
	move(0, "", "b", false) // another run moved it first
	b.clk.Advance(time.Minute)
	var trail []ledger.Mark
	for i := range ledger.MaxTrail + 2 {
		trail = append(trail, ledger.Mark{Pos: fmt.Sprintf("m%d", i), At: t0.Add(time.Duration(i) * time.Second)})
	}
	// A mark keeps a prefix of its position, a bound just below it.
	sort := ledger.IndexSort(t0, message.DeliveryKey{ReminderID: strings.Repeat("r", message.MaxReminderIDLen), Channel: "email", Provider: "webhook"})
	trail[len(trail)-1].Pos = sort
	move(0, "a", "b", true, trail...)
	move(1, "", "z", true)
	for shard, want := range map[int]string{0: "b", 1: "z"} {
		if c, _ := b.l.Cursor(ctx, shard); c.Pos != want || !c.MovedAt.Equal(b.clk.Now()) {
			t.Errorf("cursor %d at %q since %v, want %q since %v", shard, c.Pos, c.MovedAt, want, b.clk.Now())
		}
	}
	c, _ := b.l.Cursor(ctx, 0)
	want := slices.Clone(trail[2:])
	want[len(want)-1].Pos = sort[:ledger.MaxMarkPos]
	if !slices.EqualFunc(c.Trail, want, func(a, b ledger.Mark) bool { return a.Pos == b.Pos && a.At.Equal(b.At) }) {
		t.Errorf("trail %+v, want the newest %d: %+v", c.Trail, ledger.MaxTrail, want)
	}
}

// testReminderItemIsWrittenOnce: a reminder item is written once; a second
// write finds the first and changes nothing; ReadReminder returns it and
// its deliveries in key order.
func testReminderItemIsWrittenOnce(t *testing.T, b bundle) {
	ctx := context.Background()
	r := ledger.ReminderItem{ID: "rem-7", AccountRef: "acct-1", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(25 * time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"},
			{Channel: "email", Provider: "ses", RecipientRef: "r", TemplateRef: "t"}},
		Metadata: map[string]string{"k": "v"}}
	// The e-mail delivery's address goes on its delivery item alone: a
	// ReminderDelivery has no field for one.
	addresses := map[string]string{"email": "ana@example.com"}
	if stored, exists, err := b.l.CreateReminder(ctx, r); err != nil || exists || stored.ID != r.ID {
		t.Fatalf("first write: %+v, %v, %v", stored, exists, err)
	}
	other := r
	other.AccountRef = "acct-2"
	stored, exists, err := b.l.CreateReminder(ctx, other)
	if err != nil || !exists || stored.AccountRef != "acct-1" || !stored.DueAt.Equal(r.DueAt) || len(stored.Deliveries) != 2 || stored.Metadata["k"] != "v" {
		t.Fatalf("second write: %+v, %v, %v; want the first, found", stored, exists, err)
	}
	for _, d := range r.Deliveries {
		if err := b.l.Create(ctx, ledger.Delivery{ReminderID: r.ID, Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef,
			TemplateRef: d.TemplateRef, Address: addresses[d.Channel], TemplateData: r.Metadata, DueAt: r.DueAt, ExpiresAt: r.ExpiresAt}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.l.ReadReminder(ctx, r.ID)
	if err != nil || got.Reminder == nil || got.Reminder.AccountRef != "acct-1" || len(got.Deliveries) != 2 ||
		got.Deliveries[0].Channel != "email" || got.Deliveries[1].Channel != "sms" {
		t.Fatalf("read: %+v, %v", got, err)
	}
	// The address lives on the delivery item, and only there (the
	// reminder item's type has no field for one).
	if e := got.Deliveries[0]; e.Address != "ana@example.com" || e.TemplateData["k"] != "v" {
		t.Errorf("the e-mail delivery holds address %q and template data %v", e.Address, e.TemplateData)
	}
	if none, err := b.l.ReadReminder(ctx, "rem-none"); err != nil || !none.Empty() {
		t.Fatalf("an unknown reminder: %+v, %v", none, err)
	}
}

// testAnAttemptThatNeverEndedIsKnownToTheNextClaim: the claim after an
// attempt that never recorded an end knows it, whether it took the lapsed
// lease itself or the repair handed the delivery back to the queue first;
// the claim after an attempt that ended does not; a redrive settles it.
func testAnAttemptThatNeverEndedIsKnownToTheNextClaim(t *testing.T, b bundle) {
	ctx := context.Background()
	// Taken over directly.
	d := b.create(t, "rem-lapse-1")
	if _, err := b.claim("tok-1", d); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(2 * time.Minute)
	c, err := b.claim("tok-2", d)
	if err != nil || !c.LapsedLeaseTaken() {
		t.Fatalf("the claim over a lapsed lease: %v, lapsed %v", err, c.LapsedLeaseTaken())
	}
	// Handed back by the repair, then claimed.
	d = b.create(t, "rem-lapse-2")
	if _, err := b.claim("tok-1", d); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(20 * time.Minute)
	stale, err := b.l.Get(ctx, d.Key())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Requeue(ctx, stale, "repaired: lease lapsed"); err != nil {
		t.Fatal(err)
	}
	c, err = b.claim("tok-2", d)
	if err != nil || !c.LapsedLeaseTaken() || c.UnendedAttempt != 1 {
		t.Fatalf("the claim after a repair: %v, lapsed %v, unended %d", err, c.LapsedLeaseTaken(), c.UnendedAttempt)
	}
	// That attempt ends (a retry); the next claim follows an ended one.
	if _, err := b.l.Retry(ctx, c, ledger.Failure{Class: "server", Message: "500", NextAttemptAt: b.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	c, err = b.claim("tok-3", d)
	if err != nil || c.LapsedLeaseTaken() {
		t.Fatalf("the claim after an ended attempt: %v, lapsed %v", err, c.LapsedLeaseTaken())
	}
}

// testAReviveTakesOnlyTheDeadLetteringItRecords: a revive that names the
// attempt count of an earlier dead-lettering (a second DLQ copy) is
// refused as finished; one that names the current count takes it.
func testAReviveTakesOnlyTheDeadLetteringItRecords(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-copies")
	c, err := b.claim("tok-1", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "ambiguous", Message: "may have been sent"}); err != nil {
		t.Fatal(err)
	}
	now := b.clk.Now()
	revive := func(tok string, attempts int) (ledger.Delivery, error) {
		return b.l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: tok, LeaseUntil: now.Add(time.Minute), DueBy: now.Add(time.Second), Revive: true, ReviveAttempts: attempts})
	}
	c, err = revive("tok-2", 1) // the first copy: attempt 1's dead letter
	if err != nil || c.Attempts != 2 {
		t.Fatalf("the first copy's revive: %+v, %v", c, err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "ambiguous", Message: "may have been sent"}); err != nil {
		t.Fatal(err)
	}
	if _, err := revive("tok-3", 1); !errors.Is(err, ledger.ErrFinished) {
		t.Fatalf("a second copy of attempt 1's dead letter: %v, want ErrFinished", err)
	}
	if c, err := revive("tok-4", 2); err != nil || c.Attempts != 3 {
		t.Fatalf("attempt 2's dead letter: %+v, %v", c, err)
	}
}

// testStageFactsAreRecordedAndReplaced: nothing is recorded at first; a
// record is read back; a later one replaces its providers and the
// variables it names, and keeps the others.
func testStageFactsAreRecordedAndReplaced(t *testing.T, b bundle) {
	ctx := context.Background()
	if _, ok, err := b.l.ReadStage(ctx); ok || err != nil {
		t.Fatalf("a new table has stage facts (%v)", err)
	}
	const prefix = "NUDGE_SES_TEMPLATE_PREFIX"
	for _, c := range []struct {
		record ledger.StageFacts
		want   map[string]string
	}{
		{ledger.StageFacts{Providers: []string{"webhook", "ses"}, Env: map[string]string{prefix: "nudge-dev-"}}, map[string]string{prefix: "nudge-dev-"}},
		{ledger.StageFacts{Providers: []string{"sns"}}, map[string]string{prefix: "nudge-dev-"}},
		{ledger.StageFacts{Providers: []string{"ses"}, Env: map[string]string{prefix: "nudge-prod-", "NUDGE_X_Y": ""}}, map[string]string{prefix: "nudge-prod-", "NUDGE_X_Y": ""}},
	} {
		if err := b.l.RecordStage(ctx, c.record); err != nil {
			t.Fatal(err)
		}
		got, ok, err := b.l.ReadStage(ctx)
		if err != nil || !ok || strings.Join(got.Providers, ",") != strings.Join(c.record.Providers, ",") || !maps.Equal(got.Env, c.want) {
			t.Fatalf("recorded %+v, read %+v, %v, %v; want the variables %v", c.record, got, ok, err, c.want)
		}
	}
	if err := b.l.RecordStage(ctx, ledger.StageFacts{Providers: []string{"ses"}, Env: map[string]string{"nudge_lower": "x"}}); err == nil {
		t.Error("a variable whose attribute would not read back as it was recorded")
	}
}

// testGetManyAndStoredShards: GetMany returns the deliveries that exist;
// the shard count a writer used is the one stored.
func testGetManyAndStoredShards(t *testing.T, b bundle) {
	ctx := context.Background()
	a, c := b.create(t, "rem-a"), b.create(t, "rem-c")
	missing := message.DeliveryKey{ReminderID: "rem-b", Channel: "email", Provider: "webhook"}
	got, err := b.l.GetMany(ctx, []message.DeliveryKey{a.Key(), missing, c.Key()})
	if err != nil || len(got) != 2 || got[a.Key()].ReminderID != "rem-a" || got[c.Key()].ReminderID != "rem-c" {
		t.Fatalf("GetMany: %v, %v", got, err)
	}
	if _, err := b.l.GetMany(ctx, make([]message.DeliveryKey, 101)); err == nil {
		t.Error("GetMany took 101 keys")
	}
	if n, err := b.l.StoredShards(ctx); err != nil || n != 2 {
		t.Fatalf("stored shards %d, %v; want 2", n, err)
	}
}

// testIndexFollowsEveryTransition: a retry keeps a delivery's entry; a
// dead letter removes it, and a revive claim keeps it out; a release
// brings it back, in its shard, at its new publish time.
func testIndexFollowsEveryTransition(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-idx")
	c, err := b.claim("tok-1", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Retry(ctx, c, ledger.Failure{Class: "server", Message: "503", NextAttemptAt: b.clk.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.entry(t, d.Key()); !ok {
		t.Fatal("a retrying delivery left the index")
	}
	c, err = b.claim("tok-2", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "400"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.entry(t, d.Key()); ok {
		t.Fatal("a dead delivery is in the index")
	}
	r, err := b.revive("tok-3", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.entry(t, d.Key()); ok || r.Index != nil {
		t.Fatalf("a revived delivery is in the index (%+v)", r.Index)
	}
	if _, err := b.l.Retry(ctx, r, ledger.Failure{Class: "server", Message: "503", NextAttemptAt: b.clk.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	if _, err := b.l.Release(ctx, d.Key(), d.DueAt, "released"); err != nil {
		t.Fatal(err)
	}
	e, ok := b.entry(t, d.Key())
	if !ok || !e.PublishAt.Equal(b.clk.Now()) {
		t.Fatalf("released after a revive: %+v (%v), want back in the index, published now", e, ok)
	}
	got, err := b.l.Get(ctx, d.Key())
	if err != nil || got.Index == nil || got.Index.Shard != ledger.ShardOf(d.ReminderID, 2) || got.Index.Sort != e.Sort {
		t.Fatalf("the released delivery reads as %+v, %v", got.Index, err)
	}
}

// testHandedOffFollowsTheCursor: a pending delivery counts as handed off
// once its shard's cursor is at or past its entry; a queued one always
// does; an ended one says nothing.
func testHandedOffFollowsTheCursor(t *testing.T, b bundle) {
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: "rem-h", Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(2 * time.Hour)}
	if err := b.l.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, _ := b.l.Get(ctx, d.Key())
	if h, err := b.l.HandedOff(ctx, got); err != nil || h.Done || !h.PublishAt.Equal(d.DueAt.Add(-ledger.MaxLookahead)) {
		t.Fatalf("before any cursor: %+v, %v", h, err)
	}
	if moved, err := b.l.MoveCursor(ctx, got.Index.Shard, "", got.Index.Sort, nil); err != nil || !moved {
		t.Fatal(moved, err)
	}
	if h, err := b.l.HandedOff(ctx, got); err != nil || !h.Done {
		t.Fatalf("with the cursor on its entry: %+v, %v", h, err)
	}
	q := b.create(t, "rem-q") // queued
	got, _ = b.l.Get(ctx, q.Key())
	if h, _ := b.l.HandedOff(ctx, got); !h.Done {
		t.Fatalf("a queued delivery: %+v", h)
	}
	if _, err := b.l.Cancel(ctx, q.Key(), "no"); err != nil {
		t.Fatal(err)
	}
	got, _ = b.l.Get(ctx, q.Key())
	if h, _ := b.l.HandedOff(ctx, got); h != (ledger.HandOff{}) {
		t.Fatalf("an ended delivery: %+v", h)
	}
}

// testAWriterHandOffIsMarkedInTheIndex: a delivery created (or moved)
// with HandOff has its due index entry marked, at its publish time, so the
// enqueue's cursor knows to pass it; it counts as handed off before any
// cursor; a Release (the writer's publish failed) unmarks it, for the
// cursor to publish; a move without HandOff unmarks it too.
func testAWriterHandOffIsMarkedInTheIndex(t *testing.T, b bundle) {
	ctx := context.Background()
	b.clk.Advance(time.Minute)
	due := b.clk.Now().Add(10 * time.Second) // short notice: within the lookahead
	r := ledger.ReminderItem{ID: "rem-soon", AccountRef: "acct-1", DueAt: due, ExpiresAt: due.Add(time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}
	if _, _, err := b.l.CreateReminder(ctx, r); err != nil {
		t.Fatal(err)
	}
	d := ledger.Delivery{ReminderID: r.ID, Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: due, ExpiresAt: due.Add(time.Hour), HandOff: true}
	if err := b.l.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	marked := func(want bool, when string) ledger.Delivery {
		t.Helper()
		e, ok := b.entry(t, d.Key())
		if !ok || e.HandedOff != want {
			t.Fatalf("%s: the index entry is %+v (present %v); want HandedOff %v", when, e, ok, want)
		}
		got, err := b.l.Get(ctx, d.Key())
		if err != nil || got.Index == nil || got.Index.HandedOff != want || got.Index.Sort != e.Sort || !got.Index.PublishAt.Equal(e.PublishAt) {
			t.Fatalf("%s: the delivery reads as %+v, %v; want its index position %+v", when, got.Index, err, e)
		}
		return got
	}
	got := marked(true, "created with HandOff")
	if e, _ := b.entry(t, d.Key()); !e.PublishAt.Equal(b.clk.Now()) || e.DueAt.IsZero() {
		t.Fatalf("entry %+v: want it published now (%v), with its due time", e, b.clk.Now())
	}
	if h, err := b.l.HandedOff(ctx, got); err != nil || !h.Done {
		t.Fatalf("a delivery its writer handed off, before any cursor: %+v, %v; want Done", h, err)
	}
	if _, err := b.l.GiveBack(ctx, d.Key(), due, "hand-off failed"); err != nil {
		t.Fatal(err)
	}
	got = marked(false, "given back")
	if h, _ := b.l.HandedOff(ctx, got); h.Done {
		t.Fatalf("a released delivery: %+v; want it not handed off until a cursor passes it", h)
	}
	read := func() ledger.MovePlan {
		st, err := b.l.ReadReminder(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return ledger.MovePlan{ID: r.ID, Reminder: st.Reminder, Live: st.Deliveries}
	}
	p := read()
	p.To = ledger.Move{DueAt: due.Add(5 * time.Second), ExpiresAt: due.Add(time.Hour), HandOff: true}
	if err := b.l.MoveReminder(ctx, p); err != nil {
		t.Fatal(err)
	}
	marked(true, "moved with HandOff")
	b.clk.Advance(time.Second)
	p = read()
	p.To = ledger.Move{DueAt: due.Add(20 * time.Minute), ExpiresAt: due.Add(time.Hour)}
	if err := b.l.MoveReminder(ctx, p); err != nil {
		t.Fatal(err)
	}
	marked(false, "moved beyond the lookahead, without HandOff")

	// A give-back never takes a delivery a consumer has claimed (its
	// message reached the queue after all).
	c := ledger.Delivery{ReminderID: "rem-claimed", Channel: "email", Provider: "i", RecipientRef: "r", TemplateRef: "t",
		DueAt: b.clk.Now(), ExpiresAt: b.clk.Now().Add(time.Hour), HandOff: true}
	if err := b.l.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	if e, ok := b.entry(t, c.Key()); !ok || !e.HandedOff || e.Key != c.Key() {
		t.Fatalf("a provider named i, marked: %+v, %v", e, ok)
	}
	if _, err := b.claim("tok", c); err != nil {
		t.Fatal(err)
	}
	refusal(t, b.giveBack(c), ledger.ErrNotReleasable)
	if got, _ := b.l.Get(ctx, c.Key()); got.Status != ledger.StatusSending {
		t.Fatalf("a claimed delivery given back: %s; want it left sending", got.Status)
	}
	// Unmarked, a provider named "i" is not taken for the mark.
	u := ledger.Delivery{ReminderID: "rem-i", Channel: "sms", Provider: "i", RecipientRef: "r", TemplateRef: "t",
		DueAt: b.clk.Now().Add(time.Hour), ExpiresAt: b.clk.Now().Add(2 * time.Hour)}
	if err := b.l.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	if e, ok := b.entry(t, u.Key()); !ok || e.HandedOff || e.Key != u.Key() {
		t.Fatalf("a provider named i, unmarked: %+v, %v", e, ok)
	}
	if got, err := b.l.Get(ctx, u.Key()); err != nil || got.Index == nil || got.Index.HandedOff {
		t.Fatalf("a provider named i reads as %+v, %v", got.Index, err)
	}
}

func (b bundle) giveBack(d ledger.Delivery) error {
	_, err := b.l.GiveBack(context.Background(), d.Key(), d.DueAt, "hand-off failed")
	return err
}

// testAWriterClockBehindPublishesAhead: a writer that allows for its clock
// being off places a delivery no earlier than its now plus that margin, so
// that a clock behind never writes behind the enqueue's cursor.
func testAWriterClockBehindPublishesAhead(t *testing.T, b bundle) {
	d := b.create(t, "rem-skew") // due now
	e, ok := b.entry(t, d.Key())
	if !ok || !e.PublishAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("entry %+v (%v), want published a minute after now", e, ok)
	}
}

// testRescheduleMovesOnlyWhatHasNotStartedSending: MoveReminder moves the
// live deliveries as read to their new times (status pending, the index at
// the new publish time, the TTL from the new expiresAt, the history
// bounded), keeps the ended ones as long, and records the times on the
// reminder item, in one transaction; no claim takes a moved delivery
// before its new dueAt; anything changed since the read writes nothing.
func testRescheduleMovesOnlyWhatHasNotStartedSending(t *testing.T, b bundle) {
	ctx := context.Background()
	r := ledger.ReminderItem{ID: "rem-move", AccountRef: "acct-1", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"},
			{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}, {Channel: "push", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}
	if _, _, err := b.l.CreateReminder(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Deliveries {
		if err := b.l.Create(ctx, ledger.Delivery{ReminderID: r.ID, Channel: d.Channel, Provider: d.Provider, RecipientRef: "r", TemplateRef: "t",
			DueAt: r.DueAt, ExpiresAt: r.ExpiresAt, Status: ledger.StatusQueued}); err != nil {
			t.Fatal(err)
		}
	}
	email := message.DeliveryKey{ReminderID: r.ID, Channel: "email", Provider: "webhook"}
	sms := message.DeliveryKey{ReminderID: r.ID, Channel: "sms", Provider: "webhook"}
	push := message.DeliveryKey{ReminderID: r.ID, Channel: "push", Provider: "webhook"}
	// sms is sent; push retried (an attempt made), then reviewed by a repair
	// of an attempt that never ended.
	c, err := b.l.Claim(ctx, ledger.Claim{Key: sms, Token: "a", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	c, err = b.l.Claim(ctx, ledger.Claim{Key: push, Token: "b", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Requeue(ctx, c, "lost"); err != nil {
		t.Fatal(err)
	}
	for range 8 { // a long history, to be bounded
		if _, err := b.l.Release(ctx, email, r.DueAt, "early"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() ledger.Stored {
		t.Helper()
		s, err := b.l.ReadReminder(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plan := func(s ledger.Stored, to ledger.Move) ledger.MovePlan {
		p := ledger.MovePlan{ID: r.ID, Reminder: s.Reminder, To: to}
		for _, d := range s.Deliveries {
			if d.Status.Terminal() {
				p.Kept = append(p.Kept, d)
			} else {
				p.Live = append(p.Live, d)
			}
		}
		return p
	}
	mv := ledger.Move{DueAt: t0.Add(200 * 24 * time.Hour), ExpiresAt: t0.Add(201 * 24 * time.Hour), Note: "moved by the customer"}
	stale := plan(read(), mv)
	// Changed since the read (the email released once more): nothing moves.
	b.clk.Advance(time.Second)
	if _, err := b.l.Release(ctx, email, r.DueAt, "early"); err != nil {
		t.Fatal(err)
	}
	if err := b.l.MoveReminder(ctx, stale); !errors.Is(err, ledger.ErrChanged) {
		t.Fatalf("a move planned before a change: %v; want ErrChanged", err)
	}
	if s := read(); !s.Reminder.DueAt.Equal(r.DueAt) || !s.Deliveries[0].DueAt.Equal(r.DueAt) || !s.Deliveries[1].DueAt.Equal(r.DueAt) {
		t.Fatalf("a refused move wrote: %+v", s)
	}
	if err := b.l.MoveReminder(ctx, plan(read(), mv)); err != nil {
		t.Fatal(err)
	}
	s := read()
	if !s.Reminder.DueAt.Equal(mv.DueAt) || !s.Reminder.ExpiresAt.Equal(mv.ExpiresAt) {
		t.Errorf("reminder item at %v–%v; want the new times", s.Reminder.DueAt, s.Reminder.ExpiresAt)
	}
	want := mv.ExpiresAt.Add(ledger.DefaultRetention)
	for _, got := range s.Deliveries {
		if !got.TTL.Equal(want) {
			t.Errorf("%s TTL %v; want %v (the new expiresAt + retention), or DynamoDB deletes it before its reminder", got.Key(), got.TTL, want)
		}
		if got.Key() == sms {
			if got.Status != ledger.StatusSent || !got.DueAt.Equal(r.DueAt) {
				t.Errorf("the sent delivery changed: %+v", got)
			}
			continue
		}
		if got.Status != ledger.StatusPending || !got.DueAt.Equal(mv.DueAt) || !got.ExpiresAt.Equal(mv.ExpiresAt) {
			t.Errorf("%s after the move: %s %v–%v", got.Key(), got.Status, got.DueAt, got.ExpiresAt)
		}
		if got.Repairs != 0 {
			t.Errorf("%s after the move: %d repairs counted; a reschedule is a new hand-off", got.Key(), got.Repairs)
		}
		if last := got.History[len(got.History)-1]; last.Status != ledger.StatusPending || last.Note != mv.Note || len(got.History) > 6 {
			t.Errorf("%s history (%d entries, the limit 6) ends %+v", got.Key(), len(got.History), last)
		}
		if _, err := b.l.Claim(ctx, ledger.Claim{Key: got.Key(), Token: "early", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()}); !errors.Is(err, ledger.ErrNotDue) {
			t.Errorf("claim of %s at its old time: %v; want ErrNotDue", got.Key(), err)
		}
		e, ok := b.entry(t, got.Key())
		if !ok || !e.PublishAt.Equal(mv.DueAt.Add(-ledger.MaxLookahead)) || !e.DueAt.Equal(mv.DueAt) {
			t.Errorf("%s index entry %+v (%v); want published at the new dueAt − 15m", got.Key(), e, ok)
		}
	}
	// At the new time: the push delivery's earlier attempt never ended, and
	// its claim still knows (a reschedule is no review).
	b.clk.Advance(mv.DueAt.Sub(b.clk.Now()))
	got, err := b.l.Claim(ctx, ledger.Claim{Key: push, Token: "later", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()})
	if err != nil {
		t.Fatalf("claim at the new dueAt: %v", err)
	}
	if !got.LapsedLeaseTaken() {
		t.Error("after a reschedule, the claim of a delivery whose earlier attempt never ended does not know it")
	}
	if err := b.l.MoveReminder(ctx, ledger.MovePlan{ID: r.ID, To: ledger.Move{DueAt: mv.DueAt, ExpiresAt: mv.DueAt}}); err == nil {
		t.Error("a move whose expiresAt is not after its dueAt was accepted")
	}
	sending := read()
	if err := b.l.MoveReminder(ctx, ledger.MovePlan{ID: r.ID, Live: []ledger.Delivery{sending.Deliveries[1]}, To: mv}); err == nil {
		t.Error("a plan moving a delivery that is sending was accepted")
	}
}

// testAccountListsItsRemindersLatestDueFirst: an account's reminders, and
// no other account's, page by page, latest due first; a rescheduled
// reminder takes its new place; a token not given is refused.
func testAccountListsItsRemindersLatestDueFirst(t *testing.T, b bundle) {
	ctx := context.Background()
	mk := func(id, account string, due time.Duration) {
		r := ledger.ReminderItem{ID: id, AccountRef: account, DueAt: t0.Add(due), ExpiresAt: t0.Add(due + time.Hour),
			Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}},
			Metadata:   map[string]string{"plan": "gold"}}
		if _, _, err := b.l.CreateReminder(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	mk("rem-a1", "acct-a", time.Hour)
	mk("rem-a2", "acct-a", 3*time.Hour)
	mk("rem-a3", "acct-a", 2*time.Hour)
	mk("rem-a4", "acct-a", 2*time.Hour) // the same due time as rem-a3
	mk("rem-b1", "acct-b", 2*time.Hour)
	list := func(account string, limit int) []string {
		t.Helper()
		var ids []string
		next := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("the listing does not end")
			}
			page, err := b.l.ListAccount(ctx, account, limit, next)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Reminders) > limit {
				t.Fatalf("a page of %d; the limit is %d", len(page.Reminders), limit)
			}
			for _, r := range page.Reminders {
				if r.AccountRef != account || r.Metadata != nil || r.CreatedAt.IsZero() || len(r.Deliveries) != 1 {
					t.Errorf("listed %+v", r)
				}
				ids = append(ids, r.ID)
			}
			if next = page.Next; next == "" {
				return ids
			}
		}
	}
	// rem-a3 and rem-a4 share a due time: the index orders them in no
	// stated way, so they are compared in id order.
	tied := func(ids []string, i int) string {
		if len(ids) >= i+2 {
			slices.Sort(ids[i : i+2])
		}
		return strings.Join(ids, " ")
	}
	want := "rem-a2 rem-a3 rem-a4 rem-a1"
	for _, limit := range []int{1, 2, 3, 100} {
		if got := tied(list("acct-a", limit), 1); got != want {
			t.Errorf("acct-a in pages of %d: %s; want %s", limit, got, want)
		}
	}
	if got := strings.Join(list("acct-b", 10), " "); got != "rem-b1" {
		t.Errorf("acct-b: %s", got)
	}
	if got := list("acct-none", 10); len(got) != 0 {
		t.Errorf("an account with no reminders lists %v", got)
	}
	a1, err := b.l.ReadReminder(ctx, "rem-a1")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.l.MoveReminder(ctx, ledger.MovePlan{ID: "rem-a1", Reminder: a1.Reminder, To: ledger.Move{DueAt: t0.Add(5 * time.Hour), ExpiresAt: t0.Add(6 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if got := tied(list("acct-a", 2), 2); got != "rem-a1 rem-a2 rem-a3 rem-a4" {
		t.Errorf("after rem-a1 moved to the latest: %s", got)
	}
	if got, err := b.l.ReadReminder(ctx, "rem-a1"); err != nil || !got.Reminder.DueAt.Equal(t0.Add(5*time.Hour)) || !got.Reminder.ExpiresAt.Equal(t0.Add(6*time.Hour)) {
		t.Errorf("rem-a1 read back: %+v, %v", got.Reminder, err)
	}
	for _, bad := range []string{"x", "!!", "eyJpIjoiIiwiZCI6IiJ9"} {
		if _, err := b.l.ListAccount(ctx, "acct-a", 10, bad); !errors.Is(err, ledger.ErrBadPageToken) {
			t.Errorf("token %q: %v; want ErrBadPageToken", bad, err)
		}
	}
	for _, limit := range []int{0, ledger.MaxAccountPage + 1} {
		if _, err := b.l.ListAccount(ctx, "acct-a", limit, ""); err == nil {
			t.Errorf("a page size of %d was accepted", limit)
		}
	}
}

// testCancelEndsADeadDeliveryToo: a dead delivery is cancelled, so no
// redrive sends it after its owner cancelled the reminder.
func testCancelEndsADeadDeliveryToo(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-dead")
	c, err := b.claim("tok", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "400"}); err != nil {
		t.Fatal(err)
	}
	got, err := b.l.Cancel(ctx, d.Key(), "owner cancelled")
	if err != nil || got.Status != ledger.StatusCancelled {
		t.Fatalf("cancel of a dead delivery: %+v, %v", got, err)
	}
	if _, err := b.revive("console-redrive", d); !errors.Is(err, ledger.ErrFinished) {
		t.Errorf("a console redrive after the cancel: %v; want ErrFinished", err)
	}
}

// testAMoveHoldsOnlyIfTheKeptDeliveriesAreAsRead: a delivery the move keeps
// as it is (here a dead one) is conditioned too: changed since the read
// (cancelled here; a redrive would put it back at its old time), nothing
// is written.
func testAMoveHoldsOnlyIfTheKeptDeliveriesAreAsRead(t *testing.T, b bundle) {
	ctx := context.Background()
	dead := b.create(t, "rem-kept")
	c, err := b.claim("tok", dead)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "400"}); err != nil {
		t.Fatal(err)
	}
	live := ledger.Delivery{ReminderID: "rem-kept", Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(2 * time.Hour)}
	if err := b.l.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	s, err := b.l.ReadReminder(ctx, "rem-kept")
	if err != nil || len(s.Deliveries) != 2 {
		t.Fatal(s, err)
	}
	p := ledger.MovePlan{ID: "rem-kept", Kept: []ledger.Delivery{s.Deliveries[0]}, Live: []ledger.Delivery{s.Deliveries[1]},
		To: ledger.Move{DueAt: t0.Add(48 * time.Hour), ExpiresAt: t0.Add(72 * time.Hour)}}
	if _, err := b.l.Cancel(ctx, dead.Key(), "meanwhile"); err != nil {
		t.Fatal(err)
	}
	if err := b.l.MoveReminder(ctx, p); !errors.Is(err, ledger.ErrChanged) {
		t.Fatalf("a move over a kept delivery changed since the read: %v; want ErrChanged", err)
	}
	if got, _ := b.l.Get(ctx, live.Key()); !got.DueAt.Equal(live.DueAt) {
		t.Errorf("the refused move moved %s to %v", live.Key(), got.DueAt)
	}
}
