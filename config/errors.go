package config

import (
	"errors"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

// Error is one problem with a config file, at a line and a path written as
// in the file ("routing.rules[2].agent"), formatted as
// "<file>:<line>: <path>: <why>". It is the one decoder's error type, so a
// problem the decoder finds and one a check finds read the same, and both
// map to bot.EINVALID at the edges.
type Error = yamldecode.Error

// Errors is every problem found in a config, sorted by line. Parse and
// Compile report all of them at once rather than the first, so one run of
// `switchyard config check` shows everything to fix.
type Errors = yamldecode.Errors

// IsInvalid reports whether err is a problem with the config itself (exit
// status 2 in the CLI) rather than, say, a file that could not be read.
func IsInvalid(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
