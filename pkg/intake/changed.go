package intake

import (
	"errors"
	"time"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// DeliveryResult is what a cancel or reschedule did to one delivery.
type DeliveryResult struct {
	Key      string `json:"key"`
	Channel  string `json:"channel"`
	Provider string `json:"provider"`
	// Outcome is cancelled, moved or unchanged when the call did what was
	// asked (or it was already so); finished for a delivery that ended
	// (cancelled, expired) and stays so; sent, in-flight or (for a
	// reschedule) dead when it was refused; unended for a delivery that is
	// cancelled (or ended) while an attempt's outcome is unknown: that
	// attempt may have been sent.
	Outcome string          `json:"outcome"`
	Status  schedule.Status `json:"status"`
	// At is, for a refused delivery, when it was sent or last changed,
	// and for one in flight, when its attempt's lease ends.
	At string `json:"at,omitempty"`
}

// Changed is the answer to a cancel or reschedule that every delivery
// took.
type Changed struct {
	ID string `json:"id"`
	// DueAt and ExpiresAt are a reschedule's new times.
	DueAt     string `json:"dueAt,omitempty"`
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Local is the reminder's zone and local times after a reschedule.
	schedule.Local
	Deliveries []DeliveryResult `json:"deliveries"`
}

func refusedOutcome(err error) string {
	switch {
	case errors.Is(err, schedule.ErrAlreadySent):
		return "sent"
	case errors.Is(err, schedule.ErrLeased):
		return "in-flight"
	case errors.Is(err, schedule.ErrDeadLettered):
		return "dead"
	}
	return "finished"
}

// retryAfter is the seconds from now until the latest lease among results
// ends.
func retryAfter(results []DeliveryResult, now time.Time) int {
	secs := 0
	for _, d := range results {
		if d.Outcome != "in-flight" {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, d.At); err == nil {
			secs = max(secs, int(at.Sub(now).Seconds())+1)
		}
	}
	if secs <= 0 {
		return 0
	}
	return min(secs, 900)
}
