//go:build !unix

package tools

import "io/fs"

// openNonblock is 0 where opening a file does not wait for another end.
const openNonblock = 0

// linkCount is 1 where the system does not count hard links.
func linkCount(fs.FileInfo) uint64 { return 1 }
