package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// What would act on a terminal is written out; everything else, and JSON
// as JSON, comes through as it was.
func TestTerminalSafeWritesOutWhatWouldActOnATerminal(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain text", "wi_1 in local:default → triage (mention @triage)\n", "wi_1 in local:default → triage (mention @triage)\n"},
		{"tabs and line feeds", "ID\tTHREAD\nwi_1\tlocal:t\n", "ID\tTHREAD\nwi_1\tlocal:t\n"},
		{"colour", "bad \x1b[31mRED\x1b[0m", `bad \x1b[31mRED\x1b[0m`},
		{"clear screen", "oops \x1b[2J\x1b[H", `oops \x1b[2J\x1b[H`},
		{"window title", "\x1b]0;pwned\x07 text", `\x1b]0;pwned\x07 text`},
		{"bell, backspace, NUL, DEL", "a\x07b\x08c\x00d\x7f", `a\x07b\x08c\x00d\x7f`},
		{"carriage return alone", "ok\rFAILED", `ok\x0dFAILED`},
		{"Windows line ending", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"C1 escape sequence", "a\u009b31mb", `a\u009b31mb`},
		{"right-to-left override", "file\u202Etxt.exe", `file\u202etxt.exe`},
		{"isolate", "a\u2066b\u2069", `a\u2066b\u2069`},
		{"not UTF-8", "a\xffb\x9b31m", `a\xffb\x9b31m`},
		{"accents and emoji", "café ✅ 🧩 — ok", "café ✅ 🧩 — ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			n, err := terminalSafe{&b}.Write([]byte(tc.in))
			require.NoError(t, err)
			require.Equal(t, len(tc.in), n, "the caller learns all of it was written")
			require.Equal(t, tc.want, b.String())
		})
	}
}

// JSON the commands print stays valid and reads back the same text.
func TestTerminalSafeKeepsJSONWhatItSays(t *testing.T) {
	for _, text := range []string{"plain", "\x1b[2J\x1b]0;t\x07", "a\u009bb", "x\u202Ey", "line\r\nnext", "✅"} {
		var b bytes.Buffer
		require.NoError(t, json.NewEncoder(terminalSafe{&b}).Encode(map[string]string{"text": text}))
		require.False(t, needsEscape(b.Bytes()), "%q", b.String())
		var got map[string]string
		require.NoError(t, json.Unmarshal(b.Bytes(), &got), b.String())
		require.Equal(t, text, got["text"])
	}
}

// Whatever is written, in pieces of any size, nothing that would act on a
// terminal comes out, and text with nothing to write out comes out as it
// went in.
func FuzzTerminalSafe(f *testing.F) {
	for _, seed := range []string{"plain\n", "\x1b[2J", "a\u009bb", "x\u202ey", "\xff\xfe", "one\r\ntwo", "café ✅"} {
		f.Add(seed, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, piece uint8) {
		var b bytes.Buffer
		w := terminalSafe{&b}
		step := int(piece%16) + 1
		for rest := []byte(in); len(rest) > 0; {
			n := min(step, len(rest))
			_, err := w.Write(rest[:n])
			require.NoError(t, err)
			rest = rest[n:]
		}
		require.False(t, needsEscape(b.Bytes()), "%q in pieces of %d gave %q", in, step, b.String())
		if !needsEscape([]byte(in)) {
			var whole bytes.Buffer
			_, err := terminalSafe{&whole}.Write([]byte(in))
			require.NoError(t, err)
			require.Equal(t, in, whole.String())
		}
	})
}
