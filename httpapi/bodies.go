package httpapi

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// DefaultBodiesLimit is the memory the bodies of webhook requests arriving
// at once may hold together before they are known to be the platform's:
// enough for GitHub's largest delivery several times over, and for
// thousands of ordinary ones.
const DefaultBodiesLimit = 128 << 20

// ErrBodiesBusy is Bodies.Read's error when the bodies arriving at once
// already hold all the memory they may.
var ErrBodiesBusy = errors.New("too many request bodies are arriving at once")

// Bodies bounds the memory that the bodies of requests not yet
// authenticated hold together. A webhook's signature covers its body, so
// the body is read before anyone knows who sent it: without a bound shared
// by all of them, a hundred connections each sending GitHub's 25 MiB would
// hold 2.5 GiB, whatever each one's own limit. A body is counted by the
// memory set aside for it as it arrives, from its first byte until the
// handler releases it, and a request that would take the total past the
// limit is refused at once (ErrBodiesBusy, answered 503 with Retry-After)
// rather than made to wait on connections that may never finish.
type Bodies struct {
	limit int64
	held  atomic.Int64
}

// NewBodies returns a bound of limit bytes (DefaultBodiesLimit when not
// positive).
func NewBodies(limit int64) *Bodies {
	if limit <= 0 {
		limit = DefaultBodiesLimit
	}
	return &Bodies{limit: limit}
}

// Held is the memory the bodies being read or handled hold now.
func (b *Bodies) Held() int64 { return b.held.Load() }

// maxBodyPrealloc bounds what is set aside for a body before any of it
// arrives: a request announcing 25 MiB and sending nothing holds little.
const maxBodyPrealloc = 1 << 20

// Read reads r's body, at most max bytes (*http.MaxBytesError beyond, and
// the connection is closed after the answer), into a buffer of the size
// the request announces (up to 1 MiB before any of it arrives; a body that
// is larger grows as it arrives), so a 28 KB delivery is read once, not
// copied from buffer to growing buffer. It returns ErrBodiesBusy when the
// memory the body needs would take the bodies being read past the limit.
// release gives the body's memory back: call it once the body is no longer
// used. On an error the memory is already given back, and release does
// nothing.
func (b *Bodies) Read(w http.ResponseWriter, r *http.Request, max int64) (body []byte, release func(), err error) {
	var charged int64
	release = func() {
		b.held.Add(-charged)
		charged = 0
	}
	grow := func(buf []byte, size int64) ([]byte, error) {
		extra := size - int64(cap(buf))
		if b.held.Add(extra) > b.limit {
			b.held.Add(-extra)
			return buf, ErrBodiesBusy
		}
		charged += extra
		next := make([]byte, len(buf), size)
		copy(next, buf)
		return next, nil
	}
	// One byte past what is announced, so that reading the end finds the
	// buffer not yet full and needs no second one.
	size := int64(512)
	if n := r.ContentLength; n > 0 && n <= max {
		size = min(n, maxBodyPrealloc) + 1
	}
	buf, err := grow(nil, size)
	if err != nil {
		release()
		return nil, release, err
	}
	src := http.MaxBytesReader(w, r.Body, max)
	for {
		if len(buf) == cap(buf) {
			if buf, err = grow(buf, min(2*int64(cap(buf)), max+1)); err != nil {
				release()
				return nil, release, err
			}
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, release, nil
		case err != nil:
			release()
			return nil, release, err
		}
	}
}
