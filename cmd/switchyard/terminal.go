package main

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"
)

// terminalSafe writes what the commands print with the characters that
// would act on a terminal rather than show written out: control characters
// but line feed and tab (an escape sequence could clear the screen, set the
// window's title or hide the text after it), C1 controls, the marks that
// reorder text for display, and bytes that are not UTF-8. Everything the
// CLI prints passes through it, its own words and what it shows of others:
// the text of a message from Slack or GitHub, an agent's reply, an error a
// server gave. JSON stays JSON: encoding/json escapes C0 controls itself,
// and a C1 control or reordering mark is written as the \uXXXX escape JSON
// reads back as the same character.
type terminalSafe struct{ w io.Writer }

func (t terminalSafe) Write(p []byte) (int, error) {
	if !needsEscape(p) {
		return t.w.Write(p)
	}
	var b bytes.Buffer
	b.Grow(len(p) + 16)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			// Not UTF-8, or a character cut by the end of the write
			// (what prints here writes whole lines, JSON values and
			// table cells, never part of a character).
			fmt.Fprintf(&b, `\x%02x`, p[i])
		case r == '\r' && i+1 < len(p) && p[i+1] == '\n':
			// A line ending written the Windows way ends the line.
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(p[i : i+size])
		}
		i += size
	}
	if _, err := t.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// needsEscape reports whether p has anything terminalSafe writes out.
func needsEscape(p []byte) bool {
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if (r == utf8.RuneError && size <= 1) || unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// unsafeRune reports the characters beyond ASCII a terminal acts on or
// that make text show other than it reads: C1 controls (U+009B starts an
// escape sequence like ESC [) and the bidirectional embeddings, overrides
// and isolates.
func unsafeRune(r rune) bool {
	return (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
