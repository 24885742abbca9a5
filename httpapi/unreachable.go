package httpapi

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
)

// Unreachable says in a few words why an HTTP request got no answer, for a
// message that names the server itself: Go's error repeats the method, the
// URL and the address ("Post "http://127.0.0.1:8080/api/v1/messages": dial
// tcp 127.0.0.1:8080: connect: connection refused" says "connection
// refused").
func Unreachable(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case errors.As(err, &dns):
		return dns.Err
	case errors.As(err, &op) && op.Err != nil:
		var sc *os.SyscallError
		if errors.As(op.Err, &sc) {
			return sc.Err.Error()
		}
		return op.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
