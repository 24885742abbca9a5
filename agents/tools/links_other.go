//go:build !unix

package tools

import "io/fs"

// linkCount is 1 where the system does not count hard links.
func linkCount(fs.FileInfo) uint64 { return 1 }
