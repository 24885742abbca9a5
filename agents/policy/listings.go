package policy

import (
	"io/fs"
	"os"
	"sync"
	"time"
)

// listings remembers the listings of directories a check read — for a
// glob, or a walk for links — with each entry's name and type. A listing
// is used again only while
// the directory is provably unchanged — the same inode, and the same
// change time, which the kernel sets on every entry added, removed or
// renamed and no process without the power to set the clock can set back —
// and a directory changed in the last second is not remembered at all, so
// a change in the same clock tick as the listing cannot hide behind it.
// Reading a directory costs four system calls and its entries; checking
// the stamp costs one. A nil *listings remembers nothing.
type listings struct {
	mu      sync.Mutex
	m       map[string]listing
	entries int // in all listings remembered
}

// listing is a directory's entries, sorted by name, with the stamp they
// were read under.
type listing struct {
	stamp   dirStamp
	entries []listEntry
}

type listEntry struct {
	name string
	typ  fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 for a regular file …
}

// maxListed bounds the entries remembered for one workspace; past it, the
// next walk starts again from the file system.
const maxListed = 1 << 16

// settleTime is how long ago a directory must last have changed for its
// listing to be remembered: far more than the kernel's clock tick, and than
// the two seconds the coarsest file system's times are kept to.
const settleTime = 3 * time.Second

func newListings() *listings { return &listings{m: map[string]listing{}} }

// list returns the listing of dir: remembered, when dir is unchanged since,
// or read now. ok is false when dir cannot be read.
func (l *listings) list(dir string) (listing, bool) {
	stamp, stamped := statDir(dir)
	if l != nil && stamped {
		l.mu.Lock()
		got, hit := l.m[dir]
		l.mu.Unlock()
		if hit && got.stamp == stamp {
			return got, true
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil && len(entries) == 0 {
		return listing{}, false
	}
	got := listing{stamp: stamp, entries: make([]listEntry, len(entries))}
	for i, e := range entries {
		got.entries[i] = listEntry{name: e.Name(), typ: e.Type()}
	}
	if l != nil && stamped && err == nil && len(entries) <= maxListed && stamp.settled(time.Now().Add(-settleTime)) {
		l.mu.Lock()
		if l.entries+len(entries) > maxListed {
			clear(l.m)
			l.entries = 0
		}
		if old, ok := l.m[dir]; ok {
			l.entries -= len(old.entries)
		}
		l.m[dir] = got
		l.entries += len(entries)
		l.mu.Unlock()
	}
	return got, true
}
