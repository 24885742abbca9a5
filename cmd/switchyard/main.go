// Command switchyard is the Switchyard daemon and its command-line client.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set by the linker (see Makefile).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stdout, stderr := terminalSafe{os.Stdout}, terminalSafe{os.Stderr}
	err := newRootCmd(stdout, stderr).ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err, stderr))
}

// exitError carries a process exit status through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so the process exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and the outcome was a failure
	exitUsage   = 2 // bad input: flags, config, arguments
)

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "switchyard:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "switchyard:", err)
	return exitFailure
}
