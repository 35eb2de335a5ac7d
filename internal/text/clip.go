package text

import "unicode/utf8"

// Ellipsis ends a clipped text.
const Ellipsis = "…"

// Clip bounds s to n bytes: s itself if it fits, else its start, cut at a
// character boundary, and an ellipsis, n bytes in all (the ellipsis alone
// if n is shorter than it).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n-len(Ellipsis), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Ellipsis
}
