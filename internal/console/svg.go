package console

import (
	"fmt"

	"github.com/nudgehq/nudge/internal/status"
)

// The lateness histogram, drawn by the server as inline SVG (allowed by
// the Content-Security-Policy, which forbids inline script and style):
// one bar a bucket, each with a <title>, beside a table of the same
// figures for those who do not see it.

// histogram is the geometry of the lateness chart, in SVG user units.
type histogram struct {
	Width, Height int
	// Base is the y of the bars' baseline.
	Base int
	Bars []bar
}

// bar is one bucket's bar, its label below it and its count above.
type bar struct {
	X, Y, W, H int
	// LabelX is the centre of the bar, where its label and count go.
	LabelX, LabelY, CountY int
	Label, Count           string
	// Title is what a pointer over the bar (and a screen reader) says.
	Title string
}

// The chart's dimensions.
const (
	chartWidth  = 520
	chartHeight = 200
	chartTop    = 18 // room for the tallest bar's count
	chartBottom = 24 // room for the labels
	barGap      = 8
)

// drawHistogram lays out l's buckets as bars, the tallest chartHeight −
// chartTop − chartBottom high; a bucket with a count above zero is at
// least 2 high so that it shows.
func drawHistogram(l status.Lateness) histogram {
	h := histogram{Width: chartWidth, Height: chartHeight, Base: chartHeight - chartBottom}
	n := len(l.Buckets)
	if n == 0 {
		return h
	}
	most := 0
	for _, b := range l.Buckets {
		most = max(most, b.Count)
	}
	w := (chartWidth - barGap*(n+1)) / n
	room := h.Base - chartTop
	for i, b := range l.Buckets {
		height := 0
		if most > 0 && b.Count > 0 {
			height = max(2, b.Count*room/most)
		}
		x := barGap + i*(w+barGap)
		noun := "deliveries"
		if b.Count == 1 {
			noun = "delivery"
		}
		h.Bars = append(h.Bars, bar{
			X: x, Y: h.Base - height, W: w, H: height,
			LabelX: x + w/2, LabelY: h.Base + 16, CountY: h.Base - height - 4,
			Label: b.Label, Count: fmt.Sprint(b.Count),
			Title: fmt.Sprintf("%s late: %d %s sent", b.Label, b.Count, noun),
		})
	}
	return h
}
