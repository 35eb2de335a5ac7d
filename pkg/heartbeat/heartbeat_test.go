package heartbeat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/pkg/clock"
)

type fakeSQS struct {
	mu    sync.Mutex
	calls []int32
	fail  bool
	beat  chan struct{}
}

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	f.calls = append(f.calls, in.VisibilityTimeout)
	fail := f.fail
	f.mu.Unlock()
	if aws.ToString(in.ReceiptHandle) != "rh" || aws.ToString(in.QueueUrl) != "q" {
		panic("wrong message")
	}
	defer func() { f.beat <- struct{}{} }()
	if fail {
		return nil, errors.New("ReceiptHandleIsInvalid")
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (f *fakeSQS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func setup(t *testing.T) (*Heartbeat, *fakeSQS, *clock.Fake) {
	t.Helper()
	f := &fakeSQS{beat: make(chan struct{}, 10)}
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	h, err := New(Config{Visibility: f, Extension: 90 * time.Second, Threshold: 20 * time.Second, Interval: 30 * time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h, f, clk
}

func advance(t *testing.T, clk *clock.Fake, d time.Duration) {
	t.Helper()
	if !clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("heartbeat is not waiting on the clock")
	}
	clk.Advance(d)
}

func TestQuickRecordCostsNoCalls(t *testing.T) {
	t.Parallel()
	h, f, clk := setup(t)
	_, stop := h.Start(context.Background(), "q", "rh")
	advance(t, clk, 19*time.Second)
	stop()
	if f.count() != 0 {
		t.Fatalf("%d calls for a record that finished before the threshold", f.count())
	}
}

func TestLongRecordIsExtendedUntilStopped(t *testing.T) {
	t.Parallel()
	h, f, clk := setup(t)
	ctx, stop := h.Start(context.Background(), "q", "rh")
	advance(t, clk, 20*time.Second)
	<-f.beat
	advance(t, clk, 29*time.Second)
	if f.count() != 1 {
		t.Fatalf("beat before the interval: %d calls", f.count())
	}
	advance(t, clk, time.Second)
	<-f.beat
	stop()
	if f.count() != 2 || f.calls[0] != 90 || f.calls[1] != 90 {
		t.Fatalf("calls = %v, want two extensions to 90s", f.calls)
	}
	if ctx.Err() == nil {
		t.Fatal("record context still live after stop")
	}
	if context.Cause(ctx) != context.Canceled {
		t.Fatalf("cause after a clean stop = %v", context.Cause(ctx))
	}
}

func TestFailedExtensionCancelsTheRecord(t *testing.T) {
	t.Parallel()
	h, f, clk := setup(t)
	f.fail = true
	ctx, stop := h.Start(context.Background(), "q", "rh")
	defer stop()
	advance(t, clk, 20*time.Second)
	<-f.beat
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", context.Cause(ctx))
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	f := &fakeSQS{}
	for _, cfg := range []Config{
		{},
		{Visibility: f, Extension: 30 * time.Second, Interval: 30 * time.Second},
		{Visibility: f, Extension: 13 * time.Hour},
		{Visibility: f, Threshold: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted nonsense", cfg)
		}
	}
}
