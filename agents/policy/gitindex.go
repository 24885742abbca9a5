package policy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// indexPaths returns the paths a git index file (.git/index, versions 2 to
// 4) tracks, relative to its repository's top. hashLen is the length of an
// object id in the repository's object format: 20 for SHA-1, 32 for
// SHA-256.
func indexPaths(data []byte, hashLen int) (map[string]bool, error) {
	if len(data) < 12 || string(data[:4]) != "DIRC" {
		return nil, errors.New("not a git index")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("git index version %d", version)
	}
	count := binary.BigEndian.Uint32(data[8:12])
	if uint64(count) > uint64(len(data)) {
		return nil, errors.New("git index holds more entries than bytes")
	}
	out := make(map[string]bool, count)
	fixed := 40 + hashLen + 2
	pos := 12
	prev := ""
	for range count {
		start := pos
		if pos+fixed > len(data) {
			return nil, errors.New("git index entry cut off")
		}
		flags := binary.BigEndian.Uint16(data[pos+40+hashLen:])
		pos += fixed
		if flags&0x4000 != 0 {
			if version < 3 || pos+2 > len(data) {
				return nil, errors.New("git index entry with extended flags cut off")
			}
			pos += 2
		}
		var name string
		if version == 4 {
			strip, n, ok := indexVarint(data[pos:])
			if !ok || strip > uint64(len(prev)) {
				return nil, errors.New("git index path prefix out of range")
			}
			pos += n
			end := bytes.IndexByte(data[pos:], 0)
			if end < 0 {
				return nil, errors.New("git index path cut off")
			}
			name = prev[:len(prev)-int(strip)] + string(data[pos:pos+end])
			pos += end + 1
		} else {
			end := bytes.IndexByte(data[pos:], 0)
			if end < 0 {
				return nil, errors.New("git index path cut off")
			}
			name = string(data[pos : pos+end])
			// The entry is padded with one to eight NULs to a multiple
			// of eight bytes.
			pos = start + (pos+end-start+8)&^7
			if pos > len(data) {
				return nil, errors.New("git index entry padding cut off")
			}
		}
		out[name] = true
		prev = name
	}
	return out, nil
}

// indexVarint reads the offset-encoded number of a version 4 index.
func indexVarint(b []byte) (val uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	c := b[0]
	n = 1
	val = uint64(c & 127)
	for c&128 != 0 {
		if n >= len(b) || n > 9 {
			return 0, 0, false
		}
		val++
		c = b[n]
		n++
		val = val<<7 + uint64(c&127)
	}
	return val, n, true
}

// trackedIn returns the paths the repository at top (a directory holding
// a .git directory) tracks. ok is false when that cannot be known: .git is
// a file pointing elsewhere, or its index does not read as one.
func trackedIn(top string) (tracked map[string]bool, ok bool) {
	gitDir := filepath.Join(top, ".git")
	fi, err := os.Lstat(gitDir)
	switch {
	case err != nil:
		return nil, true // no repository: nothing tracked
	case !fi.IsDir():
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(gitDir, "index"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, true // nothing added yet
	}
	if err != nil {
		return nil, false
	}
	hashLen := 20
	if cfg, err := os.ReadFile(filepath.Join(gitDir, "config")); err == nil &&
		strings.Contains(strings.ToLower(string(cfg)), "sha256") {
		hashLen = 32
	}
	tracked, err = indexPaths(data, hashLen)
	return tracked, err == nil
}
