package bolt

import (
	"bytes"
	"encoding/base64"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Listings page newest first: a page ends at a record, and the next page
// starts below its key. A cursor is that key, tagged with its listing and
// encoded for a URL; to callers it is opaque. Records added while someone
// pages have greater keys than any cursor handed out, so paging on skips
// and repeats nothing.
const (
	cursorWorkItems byte = 'w' // key: seq (8)
	cursorIngress   byte = 'i' // key: seq (8)
	cursorAudit     byte = 'a' // key: time (8) + seq (8)
)

func encodeCursor(tag byte, key []byte) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{tag}, key...))
}

// decodeCursor returns the key of a cursor of the listing tag, or EINVALID
// for anything else ("" is the first page: a nil key).
func decodeCursor(tag byte, cursor string, keyLen int) ([]byte, error) {
	if cursor == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != 1+keyLen || b[0] != tag {
		return nil, bot.BadCursor(cursor)
	}
	return b[1:], nil
}

// pager collects at most limit records and notes whether there are more.
type pager struct {
	limit int
	n     int
	more  bool
	last  []byte // the key of the last record taken
}

// take reports whether the record with key is to be added; after limit
// records it notes that there are more and stops the scan.
func (p *pager) take(key []byte) (ok, goOn bool) {
	if p.n == p.limit {
		p.more = true
		return false, false
	}
	p.n++
	p.last = append(p.last[:0], key...)
	return true, true
}

// next is the cursor of the page after this one, "" when it was the last.
func (p *pager) next(tag byte) string {
	if !p.more {
		return ""
	}
	return encodeCursor(tag, p.last)
}

// scanBefore calls fn with the keys of b that are prefix followed by
// exactly suffixLen bytes, newest (greatest) first, starting below
// prefix+before (from the last one when before is nil).
func scanBefore(b *bolt.Bucket, prefix []byte, suffixLen int, before []byte, fn func(k, v []byte) (bool, error)) error {
	if before == nil {
		return scanPrefix(b, prefix, suffixLen, true, fn)
	}
	c := b.Cursor()
	var v []byte
	k, _ := c.Seek(append(append([]byte(nil), prefix...), before...))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
		if len(k) != len(prefix)+suffixLen {
			continue
		}
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// indexPrefix is the prefix of an index's keys for one value.
func indexPrefix(value string) []byte {
	return append([]byte(value), 0)
}
