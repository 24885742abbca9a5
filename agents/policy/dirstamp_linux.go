//go:build linux

package policy

import (
	"syscall"
	"time"
)

// dirStamp identifies a directory and the last change to its entries.
type dirStamp struct {
	dev, ino uint64
	ctime    int64 // nanoseconds since the epoch
}

// statDir stamps the directory at dir, not following a link there; ok is
// false when dir is not a directory or cannot be looked at.
func statDir(dir string) (dirStamp, bool) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(dir, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return dirStamp{}, false
		}
		break
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return dirStamp{}, false
	}
	return dirStamp{dev: uint64(st.Dev), ino: st.Ino, ctime: st.Ctim.Nano()}, true
}

// settled reports whether the directory last changed before t.
func (s dirStamp) settled(t time.Time) bool { return s.ctime < t.UnixNano() }
