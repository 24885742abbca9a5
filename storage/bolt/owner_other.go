//go:build !unix

package bolt

import "os"

// keepOwner is a no-op where files have no owner Go can set.
func keepOwner(string, os.FileInfo) error { return nil }
