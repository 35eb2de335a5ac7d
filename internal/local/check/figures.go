package check

import (
	"slices"
	"sort"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
)

// ProviderCounts are one provider's figures.
type ProviderCounts struct {
	// Deliveries the plan gave the provider; Sent the ledger records sent.
	Deliveries, Sent int
	// Recorded counts the deliveries the provider's stand-in holds (the
	// sink's acceptances, the SES store's e-mails, the SNS subscriber's
	// messages), each once; Copies the extra copies of one delivery it
	// holds: duplicates, which SNS's standard topic does not remove.
	Recorded, Copies int
	// Reviewed counts deliveries dead-lettered as ambiguous: the provider
	// may have sent them and does not deduplicate, so an operator decides.
	// Of those, Delivered the ones the stand-in shows did go out.
	Reviewed, Delivered int
	// Settled counts, at a provider that records (SES), the ambiguous
	// sends its record settled: recorded sent without a send ("sent, by
	// SES's record"), by the consumer after a wait or by the feedback
	// function after a review; SentAgain those sent again once the record
	// showed they had not gone out (a sent after a wait for the record).
	Settled, SentAgain int
	// Probes counts the probes the provider's record holds: sent when an
	// ambiguous attempt's window passed with no later message reported.
	Probes int
	// Requests counts the provider requests the consumers made.
	Requests int64
}

// Bucket is one bar of the latency histogram.
type Bucket struct {
	UpTo  time.Duration // 0 for the last, open bucket
	Count int
}

// bucketBounds are the latency histogram's upper bounds; 0 is open.
var bucketBounds = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second,
	30 * time.Second, 0}

// quantile returns the q-quantile of sorted ls, 0 for none.
func quantile(ls []time.Duration, q float64) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	return ls[min(len(ls)-1, int(q*float64(len(ls))))]
}

// latency sets the latency figures from ls (sorted here); none for none.
func (v *Verdict) latency(ls []time.Duration) {
	if len(ls) == 0 {
		return
	}
	slices.Sort(ls)
	v.LatencyP50, v.LatencyP99, v.LatencyMax = quantile(ls, 0.5), quantile(ls, 0.99), quantile(ls, 1)
	v.Histogram = make([]Bucket, len(bucketBounds))
	for i, b := range bucketBounds {
		v.Histogram[i].UpTo = b
	}
	for _, l := range ls {
		i := sort.Search(len(bucketBounds)-1, func(i int) bool { return l <= bucketBounds[i] })
		v.Histogram[i].Count++
	}
}

// settledOrSentAgain reports whether d, of provider prov, was sent by its
// provider's record (a sent entry noting it), and whether it was sent
// again after a wait for that record (a sent entry, not so noted, after a
// retrying entry of class ambiguous that waits for the record).
func settledOrSentAgain(prov string, d ledger.Delivery) (byRecord, again bool) {
	waited := false
	for _, e := range d.Transitions() {
		switch {
		case waits(e):
			waited = true
		case settled(prov, e):
			byRecord = true
		case e.Status == ledger.StatusSent && waited:
			again = true
		}
	}
	return byRecord, again
}
