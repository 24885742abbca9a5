package config

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/bot"
)

// Error is one problem with a config file, at a line and a path written as
// in the file ("routing.rules[2].agent"). Line is 0 when the problem has no
// place in the file, such as a default that no longer fits; Path is empty for
// problems with the file as a whole, such as a YAML syntax error.
type Error struct {
	File string
	Line int
	Path string
	Msg  string
}

// Error formats the problem as "<file>:<line>: <path>: <why>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// As lets errors.As see a config problem as a *bot.Error with code
// bot.EINVALID, so the edges (HTTP status, exit status 2) map it like any
// other bad input.
func (e *Error) As(target any) bool {
	if t, ok := target.(**bot.Error); ok {
		*t = &bot.Error{Code: bot.EINVALID, Message: e.Error()}
		return true
	}
	return false
}

// Errors is every problem found in a config, sorted by line. Parse and
// Compile report all of them at once rather than the first, so one run of
// `switchyard config check` shows everything to fix.
type Errors []*Error

// Error joins the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each *Error to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path))
	})
}

// IsInvalid reports whether err is a problem with the config itself (exit
// status 2 in the CLI) rather than, say, a file that could not be read.
func IsInvalid(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
