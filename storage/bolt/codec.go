package bolt

import (
	"bytes"
	stdjson "encoding/json"

	json "github.com/segmentio/encoding/json"
)

// The store's records are JSON, written by encoding/json and read by
// segmentio/encoding, which reads as the standard library does several
// times faster. segmentio does not write as encoding/json does: it knows
// no omitzero, so a zero time, thread or requester would be written where
// encoding/json leaves it out, and a requester with a name but no id
// would keep the name encoding/json drops. Where the two readers part — a
// record segmentio refuses, or one nested deeper than the standard library
// reads, which segmentio's recursive parser would follow until the stack
// overflows and the process dies — the standard library decides: every
// record earlier versions wrote and read is read the same, and a corrupt
// one fails with the standard library's short error, never one that
// repeats the record's bytes, and never a crash.

// maxDepth is how deeply encoding/json nests arrays and objects before it
// refuses a document.
const maxDepth = 10000

// unmarshal decodes the JSON record b into v.
func unmarshal(b []byte, v any) error {
	if tooDeep(b) {
		return stdjson.Unmarshal(b, v)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return stdjson.Unmarshal(b, v)
	}
	return nil
}

// marshal encodes v as a record.
func marshal(v any) ([]byte, error) {
	return stdjson.Marshal(v)
}

// tooDeep reports whether b nests arrays and objects more than maxDepth
// deep, brackets inside strings aside.
func tooDeep(b []byte) bool {
	if len(b) <= maxDepth || bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) <= maxDepth {
		return false // not enough brackets to nest that deep
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > maxDepth {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}
