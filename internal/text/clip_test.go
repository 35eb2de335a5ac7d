package text_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nudgehq/nudge/internal/text"
)

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a bit longer than ten", 10, "a bit l…"},
		{"héhéhéhé", 5, "h…"}, // never half a character
		{"ééé", 4, "…"},       // 1 byte of room: no whole é fits
		{"anything", 2, "…"},  // shorter than the ellipsis
		{"", 0, ""},
	} {
		got := text.Clip(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if len(tc.in) > tc.n && tc.n >= len(text.Ellipsis) && len(got) > tc.n {
			t.Errorf("Clip(%q, %d) is %d bytes", tc.in, tc.n, len(got))
		}
	}
	if got := text.Clip(strings.Repeat("x", 10_000_000), 256); len(got) != 256 {
		t.Errorf("a 10 MB text clipped to 256 bytes is %d bytes", len(got))
	}
}
