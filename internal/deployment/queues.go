package deployment

import "strconv"

// WorkQueueAttributes are the work queue's SQS attributes, given the DLQ's
// ARN; the local stand-ins are created with them.
func (s Stage) WorkQueueAttributes(dlqARN string) map[string]string {
	return map[string]string{
		"VisibilityTimeout":      strconv.Itoa(int(s.Visibility().Seconds())),
		"MessageRetentionPeriod": strconv.Itoa(int(WorkRetention.Seconds())),
		"RedrivePolicy":          `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":` + strconv.Itoa(s.MaxReceiveCount) + `}`,
	}
}

// DLQAttributes are the DLQ's SQS attributes, given the work queue's ARN
// (console redrive needs the RedriveAllowPolicy).
func (s Stage) DLQAttributes(workARN string) map[string]string {
	return map[string]string{
		"MessageRetentionPeriod": strconv.Itoa(int(DLQRetention.Seconds())),
		"RedriveAllowPolicy":     `{"redrivePermission":"byQueue","sourceQueueArns":["` + workARN + `"]}`,
	}
}
