package redrive_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/redrive"
)

// fakeMoveTasks plays SQS's message move task API: a task that moves toMove
// messages over a few polls, or fails, or cannot start.
type fakeMoveTasks struct {
	mu       sync.Mutex
	started  *sqs.StartMessageMoveTaskInput
	statuses []types.ListMessageMoveTasksResultEntry // returned in turn, the last one repeated
	polls    int
	startErr error
}

func (f *fakeMoveTasks) StartMessageMoveTask(_ context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil {
		return nil, f.startErr
	}
	f.started = in
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: aws.String("task-1")}, nil
}

func (f *fakeMoveTasks) ListMessageMoveTasks(_ context.Context, in *sqs.ListMessageMoveTasksInput, _ ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if aws.ToString(in.SourceArn) != aws.ToString(f.started.SourceArn) {
		return nil, errors.New("wrong source ARN")
	}
	st := f.statuses[min(f.polls, len(f.statuses)-1)]
	f.polls++
	return &sqs.ListMessageMoveTasksOutput{Results: []types.ListMessageMoveTasksResultEntry{st}}, nil
}

func entry(status string, moved, toMove int64, handle bool) types.ListMessageMoveTasksResultEntry {
	e := types.ListMessageMoveTasksResultEntry{Status: aws.String(status), ApproximateNumberOfMessagesMoved: moved, ApproximateNumberOfMessagesToMove: aws.Int64(toMove)}
	if handle {
		e.TaskHandle = aws.String("task-1")
	}
	if status == "FAILED" {
		e.FailureReason = aws.String("AWS.SimpleQueueService.NonExistentQueue")
	}
	return e
}

const (
	dlqARN  = "arn:aws:sqs:eu-west-1:123456789012:nudge-prod-dlq"
	workARN = "arn:aws:sqs:eu-west-1:123456789012:nudge-prod-work"
)

// TestMoveAllRunsTheConsolesMoveTaskToTheWorkQueue: the task is started
// from the DLQ to the named work queue at the given rate, its progress is
// reported, and it ends when SQS says it completed.
func TestMoveAllRunsTheConsolesMoveTaskToTheWorkQueue(t *testing.T) {
	t.Parallel()
	api := &fakeMoveTasks{statuses: []types.ListMessageMoveTasksResultEntry{
		entry("RUNNING", 0, 120, true), entry("RUNNING", 70, 120, true), entry("COMPLETED", 120, 120, false)}}
	var seen []redrive.TaskStatus
	st, err := redrive.MoveAll(context.Background(), redrive.MoveTask{API: api, DLQARN: dlqARN, TargetARN: workARN, Rate: 50, Poll: time.Millisecond},
		func(s redrive.TaskStatus) { seen = append(seen, s) })
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(api.started.SourceArn) != dlqARN || aws.ToString(api.started.DestinationArn) != workARN || aws.ToInt32(api.started.MaxNumberOfMessagesPerSecond) != 50 {
		t.Fatalf("started %+v", api.started)
	}
	if st.Status != "COMPLETED" || st.Moved != 120 || st.Handle != "task-1" || len(seen) != 3 || seen[1].Moved != 70 {
		t.Fatalf("final %+v, progress %+v", st, seen)
	}
}

func TestMoveAllReportsAFailedTaskAndAStartRefused(t *testing.T) {
	t.Parallel()
	api := &fakeMoveTasks{statuses: []types.ListMessageMoveTasksResultEntry{entry("RUNNING", 3, 10, true), entry("FAILED", 3, 10, true)}}
	st, err := redrive.MoveAll(context.Background(), redrive.MoveTask{API: api, DLQARN: dlqARN, TargetARN: workARN, Poll: time.Millisecond}, nil)
	if err == nil || st.Status != "FAILED" || !strings.Contains(err.Error(), "ended FAILED after 3 of 10 messages: AWS.SimpleQueueService.NonExistentQueue") {
		t.Fatalf("%+v %v", st, err)
	}
	api = &fakeMoveTasks{startErr: errors.New("UnsupportedOperation: there is already a task running")}
	if _, err := redrive.MoveAll(context.Background(), redrive.MoveTask{API: api, DLQARN: dlqARN, TargetARN: workARN}, nil); err == nil ||
		!strings.Contains(err.Error(), "list-message-move-tasks --source-arn "+dlqARN) {
		t.Fatalf("a refused start: %v", err)
	}
	if _, err := redrive.MoveAll(context.Background(), redrive.MoveTask{API: api, DLQARN: dlqARN}, nil); err == nil {
		t.Fatal("a task without a destination was started")
	}
}
