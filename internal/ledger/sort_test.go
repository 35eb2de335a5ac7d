package ledger

import (
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/message"
)

// TestTheSortKeyReadsBackWithAndWithoutTheMark: a due index sort key reads
// back as written, marked or not, a provider called "i" included (it must
// not be taken for the mark).
func TestTheSortKeyReadsBackWithAndWithoutTheMark(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for _, k := range []message.DeliveryKey{{ReminderID: "rem-1", Channel: "email", Provider: "ses"},
		{ReminderID: "rem-i", Channel: "sms", Provider: "i"}, {ReminderID: "i", Channel: "i", Provider: "i"}} {
		for _, marked := range []bool{false, true} {
			sort := indexSort(at, k, marked)
			pub, got, handedOff, err := splitSort(sort)
			if err != nil || got != k || handedOff != marked || pub != Format(at) {
				t.Errorf("%q reads as %q %v %v, %v; want %v, marked %v", sort, pub, got, handedOff, err, k, marked)
			}
		}
	}
	if _, _, _, err := splitSort(Format(at) + "#rem#sms#ses#x"); err == nil {
		t.Error("a fifth part other than the mark was accepted")
	}
}
