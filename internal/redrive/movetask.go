package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/pkg/clock"
)

// MoveTaskAPI is the part of SQS that moves a whole DLQ: the console's
// "Start DLQ redrive". fauxqs lacks it; tests use a fake.
type MoveTaskAPI interface {
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, opts ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, opts ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
}

var _ MoveTaskAPI = (*sqs.Client)(nil)

// MoveTask configures MoveAll.
type MoveTask struct {
	// API is the SQS client. Required.
	API MoveTaskAPI
	// DLQARN and TargetARN are the source and destination queues.
	// Required: Nudge's own dead letters carry no record of a source queue,
	// so the destination must be named (the work queue).
	DLQARN, TargetARN string
	// Rate is the most messages moved per second; 0 lets SQS choose (it
	// starts at 500/s).
	Rate int32
	// Poll is how often progress is read. Default 5s.
	Poll time.Duration
	// Clock paces the polls. Default clock.Real.
	Clock clock.Clock
}

// TaskStatus is a move task's progress.
type TaskStatus struct {
	Handle  string `json:"taskHandle"`
	Status  string `json:"status"` // RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED
	Moved   int64  `json:"moved"`
	ToMove  int64  `json:"toMove"`
	Failure string `json:"failureReason,omitempty"`
}

// Done reports whether the task has ended.
func (s TaskStatus) Done() bool {
	return s.Status == "COMPLETED" || s.Status == "CANCELLED" || s.Status == "FAILED"
}

// MoveAll starts a message move task from the DLQ to the target and waits
// for it to end, calling progress with each status read. It returns an
// error if the task could not start, failed or was cancelled. It does not
// mark the ledger: the consumer claims each dead delivery directly.
func MoveAll(ctx context.Context, t MoveTask, progress func(TaskStatus)) (TaskStatus, error) {
	if t.API == nil || t.DLQARN == "" || t.TargetARN == "" {
		return TaskStatus{}, errors.New("redrive: move task: API, DLQARN and TargetARN are required")
	}
	if t.Poll == 0 {
		t.Poll = 5 * time.Second
	}
	if t.Clock == nil {
		t.Clock = clock.Real{}
	}
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(t.DLQARN), DestinationArn: aws.String(t.TargetARN)}
	if t.Rate > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(t.Rate)
	}
	out, err := t.API.StartMessageMoveTask(ctx, in)
	if err != nil {
		return TaskStatus{}, fmt.Errorf("redrive: start the move task from %s to %s: %w (a task may already be running: see `aws sqs list-message-move-tasks --source-arn %s`)", t.DLQARN, t.TargetARN, err, t.DLQARN)
	}
	st := TaskStatus{Handle: aws.ToString(out.TaskHandle), Status: "RUNNING"}
	for {
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("redrive: stopped waiting; the move task %s goes on in SQS (cancel it with `aws sqs cancel-message-move-task --task-handle %s`): %w", st.Handle, st.Handle, ctx.Err())
		case <-t.Clock.After(t.Poll):
		}
		list, err := t.API.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(t.DLQARN), MaxResults: aws.Int32(10)})
		if err != nil {
			return st, fmt.Errorf("redrive: read the move task's progress: %w", err)
		}
		found := false
		for _, r := range list.Results {
			if aws.ToString(r.TaskHandle) != st.Handle && r.TaskHandle != nil {
				continue
			}
			found = true
			st.Status, st.Moved, st.ToMove, st.Failure = aws.ToString(r.Status), r.ApproximateNumberOfMessagesMoved, aws.ToInt64(r.ApproximateNumberOfMessagesToMove), aws.ToString(r.FailureReason)
			break
		}
		if !found && len(list.Results) > 0 {
			// Finished tasks lose their handle; the newest result is ours.
			r := list.Results[0]
			st.Status, st.Moved, st.ToMove, st.Failure = aws.ToString(r.Status), r.ApproximateNumberOfMessagesMoved, aws.ToInt64(r.ApproximateNumberOfMessagesToMove), aws.ToString(r.FailureReason)
		}
		if progress != nil {
			progress(st)
		}
		if st.Done() {
			if st.Status != "COMPLETED" {
				return st, fmt.Errorf("redrive: the move task ended %s after %d of %d messages: %s", st.Status, st.Moved, st.ToMove, st.Failure)
			}
			return st, nil
		}
	}
}
