package deployment

import (
	"strconv"
	"strings"
)

// WorkQueueAttributes are the work queue's SQS attributes, and each paced
// provider's queue's, given the DLQ's
// ARN; the local stand-ins are created with them.
func (s Stage) WorkQueueAttributes(dlqARN string) map[string]string {
	return map[string]string{
		"VisibilityTimeout":      strconv.Itoa(int(s.Visibility().Seconds())),
		"MessageRetentionPeriod": strconv.Itoa(int(WorkRetention.Seconds())),
		"RedrivePolicy":          `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":` + strconv.Itoa(s.MaxReceiveCount) + `}`,
	}
}

// DLQAttributes are the DLQ's SQS attributes, given every work queue's ARN
// (the default's and each provider's own: console redrive needs the
// RedriveAllowPolicy to name each source queue).
func (s Stage) DLQAttributes(workARNs ...string) map[string]string {
	return map[string]string{
		"MessageRetentionPeriod": strconv.Itoa(int(DLQRetention.Seconds())),
		"RedriveAllowPolicy":     `{"redrivePermission":"byQueue","sourceQueueArns":["` + strings.Join(workARNs, `","`) + `"]}`,
	}
}
