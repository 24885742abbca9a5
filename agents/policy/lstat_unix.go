//go:build unix

package policy

import (
	"io/fs"
	"syscall"
)

// lstatType returns the type of the file at p (fs.ModeDir, fs.ModeSymlink,
// 0 for a regular file …), not following a link at its end. It is os.Lstat
// without the FileInfo, which a check would allocate for every path
// component it resolves.
func lstatType(p string) (fs.FileMode, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(p, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		break
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return fs.ModeDir, nil
	case syscall.S_IFLNK:
		return fs.ModeSymlink, nil
	case syscall.S_IFREG:
		return 0, nil
	}
	return fs.ModeIrregular, nil
}
