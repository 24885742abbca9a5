package agents

import (
	"strings"
	"testing"
)

// FuzzJoinFields: the one-pass join says what strings.Fields and Join
// say, for any text, white space outside ASCII and invalid UTF-8 included.
func FuzzJoinFields(f *testing.F) {
	for _, s := range []string{"", " ", "a", "a b", " a  b ", "a\tb\nc", "a\u00a0b\u2028c\u3000", "\u0085x\u0085",
		"x\xffy \xc2", "Reads a file.  Then\r\nmore", "trailing ", "  ", "a \u200bb", "\xe2\x80\xa8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := joinFields(s), strings.Join(strings.Fields(s), " "); got != want {
			t.Fatalf("joinFields(%q) = %q, want %q", s, got, want)
		}
	})
}
