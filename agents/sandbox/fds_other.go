//go:build !unix

package sandbox

func closeInheritedOnExec() {}
