package policy

import (
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// toolInput is what the policy reads of a core tool's input; what else the
// input holds is the tool's business.
type toolInput struct {
	Command json.RawMessage `json:"command"`
	Path    json.RawMessage `json:"path"`
}

// decodeToolInput reads in, a JSON object, as json.Unmarshal into a
// toolInput would. Most inputs are a flat object with plain keys, which it
// reads itself: a decoder costs more than the rest of a simple check, and
// most of what it allocates. It reports false for input that is not a
// JSON object.
func decodeToolInput(in []byte) (toolInput, bool) {
	if len(in) == 0 || in[0] != '{' || !json.Valid(in) {
		return toolInput{}, false
	}
	if v, ok := scanToolInput(in); ok {
		return v, true
	}
	var v toolInput
	if err := json.Unmarshal(in, &v); err != nil {
		return toolInput{}, false
	}
	return v, true
}

// scanToolInput finds the command and path members of in, valid JSON that
// starts with '{', matching keys as encoding/json does (case-insensitively,
// the last of duplicates winning). It gives up (false) on a key with an
// escape or a byte beyond ASCII, where encoding/json's matching is wider.
func scanToolInput(in []byte) (v toolInput, ok bool) {
	i := skipSpace(in, 1)
	if i < len(in) && in[i] == '}' {
		return v, true
	}
	for i < len(in) && in[i] == '"' {
		end := stringEnd(in, i)
		key := in[i+1 : end-1]
		for _, b := range key {
			if b == '\\' || b >= utf8.RuneSelf {
				return toolInput{}, false
			}
		}
		i = skipSpace(in, end)
		if i == len(in) || in[i] != ':' {
			return toolInput{}, false
		}
		start := skipSpace(in, i+1)
		if start == len(in) {
			return toolInput{}, false
		}
		i = valueEnd(in, start)
		switch {
		case strings.EqualFold(string(key), "command"):
			v.Command = in[start:i]
		case strings.EqualFold(string(key), "path"):
			v.Path = in[start:i]
		}
		i = skipSpace(in, i)
		if i == len(in) {
			return toolInput{}, false
		}
		switch in[i] {
		case '}':
			return v, true
		case ',':
			i = skipSpace(in, i+1)
		default:
			return toolInput{}, false
		}
	}
	return toolInput{}, false
}

// hex4 reads four hexadecimal digits.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[i])) {
		i++
	}
	return i
}

// plainJSONString returns the value of raw, a valid JSON value, when it is
// a string in ASCII with no escaped surrogate, with no decoder to set up:
// escapes are common in commands (\" \n, and \u0026 for & from encoders
// that escape HTML) and simple to undo.
func plainJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	escaped := false
	for i := 0; i < len(body); i++ {
		switch b := body[i]; {
		case b < 0x20 || b >= utf8.RuneSelf:
			return "", false
		case b == '\\':
			// In valid JSON a backslash is followed by what it escapes,
			// \u by four hexadecimal digits.
			if i++; body[i] == 'u' {
				if r := hex4(body[i+1 : i+5]); utf16.IsSurrogate(r) {
					return "", false
				}
				i += 4
			}
			escaped = true
		}
	}
	if !escaped {
		return string(body), true
	}
	var s strings.Builder
	s.Grow(len(body))
	for i := 0; i < len(body); i++ {
		b := body[i]
		if b != '\\' {
			s.WriteByte(b)
			continue
		}
		i++
		switch body[i] {
		case 'b':
			s.WriteByte('\b')
		case 'f':
			s.WriteByte('\f')
		case 'n':
			s.WriteByte('\n')
		case 'r':
			s.WriteByte('\r')
		case 't':
			s.WriteByte('\t')
		case 'u':
			s.WriteRune(hex4(body[i+1 : i+5]))
			i += 4
		default: // " \ /
			s.WriteByte(body[i])
		}
	}
	return s.String(), true
}
