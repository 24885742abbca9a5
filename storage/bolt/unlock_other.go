//go:build !unix

package bolt

import "os"

// unlock is a no-op where bbolt does not lock with flock; closing the file
// releases what it holds.
func unlock(*os.File) {}
