// Package filekind names the kind of a file in words, for the messages
// that refuse a file for being what it is: a symbolic link where a regular
// file was wanted, a named pipe in a package.
package filekind

import "io/fs"

// Of names the kind of file mode m describes, without an article:
// "symbolic link", "directory", "named pipe", "socket", "device",
// "regular file", or "special file" for anything else.
func Of(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}
