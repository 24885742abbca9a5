package bot

import (
	"errors"
	"fmt"
)

// Error codes. They are mapped to transport status (HTTP, exit codes) at the
// edge, never inside the domain.
const (
	EINVALID      = "invalid"      // the caller sent something malformed
	ENOTFOUND     = "not_found"    // the named thing does not exist
	ECONFLICT     = "conflict"     // the request conflicts with stored state
	EUNAUTHORIZED = "unauthorized" // missing or wrong credentials
	EFORBIDDEN    = "forbidden"    // who asks is known and may not do this
	ETOOLARGE     = "too_large"    // a body or field over its limit
	EUNAVAILABLE  = "unavailable"  // shutting down, or a dependency is down
	EINTERNAL     = "internal"     // a bug or an unexpected failure
)

// Error is a domain error with a code the edge maps to a status, and a message
// safe to show to the caller.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EINTERNAL
// for any other non-nil error, or "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic message for other errors, which may carry internal detail.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
