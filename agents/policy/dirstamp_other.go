//go:build !linux

package policy

import "time"

// dirStamp identifies a directory and the last change to its entries.
// Outside Linux no stamp is taken, and every walk reads the file system.
type dirStamp struct{}

// statDir stamps the directory at dir; outside Linux it never does.
func statDir(string) (dirStamp, bool) { return dirStamp{}, false }

// settled reports whether the directory last changed before t.
func (dirStamp) settled(time.Time) bool { return false }
