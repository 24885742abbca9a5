package httpapi_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/httpapi"
)

// Anyone can open a connection to a webhook and announce a body of 25 MiB
// before any signature is checked: what is set aside for it is bounded by
// what arrives, not by what is announced, and is counted until released.
func TestAnnouncedBodySizeReservesLittle(t *testing.T) {
	const maxBody, prealloc = 25 << 20, 1 << 20
	for _, tc := range []struct {
		name      string
		announced int64
		sent      int
	}{
		{"announces 25 MiB, sends 2 bytes", maxBody, 2},
		{"announces 25 MiB, sends nothing", maxBody, 0},
		{"announces 10 MiB, sends 28 KB", 10 << 20, 28 << 10},
		{"announces 28 KB, sends 28 KB", 28 << 10, 28 << 10},
		{"announces nothing, sends 28 KB", -1, 28 << 10},
		{"announces 2 bytes, sends 2 bytes", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bodies := httpapi.NewBodies(0)
			req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(bytes.Repeat([]byte("x"), tc.sent)))
			req.ContentLength = tc.announced
			body, release, err := bodies.Read(httptest.NewRecorder(), req, maxBody)
			require.NoError(t, err)
			require.Len(t, body, tc.sent)
			require.LessOrEqual(t, cap(body), 2*prealloc+2*tc.sent, "set aside for what was announced")
			require.EqualValues(t, cap(body), bodies.Held(), "what is set aside is counted")
			release()
			require.Zero(t, bodies.Held())
		})
	}
}

// trickle is a body that sends n bytes and then waits for more until its
// stop channel closes: a client still sending. started is closed at its
// first read, when what its request announced is set aside.
type trickle struct {
	n       int
	started chan struct{}
	stop    chan struct{}
}

func (r *trickle) Read(p []byte) (int, error) {
	select {
	case <-r.started:
	default:
		close(r.started)
	}
	if r.n == 0 {
		<-r.stop
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

// The bodies of requests being read hold at most the limit together: while
// clients still sending hold most of it, a request needing more than is
// left is refused at once (ErrBodiesBusy) rather than read, and one that
// fits is read; one over its own limit is refused as too large; and once
// the others are done, what they held is free again.
func TestBodiesArrivingAtOnceHoldAtMostTheLimit(t *testing.T) {
	const limit, maxBody = 3 << 20, 2 << 20
	bodies := httpapi.NewBodies(limit)
	read := func(body io.Reader, announced int64) ([]byte, func(), error) {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", body)
		req.ContentLength = announced
		return bodies.Read(httptest.NewRecorder(), req, maxBody)
	}
	type result struct {
		release func()
		err     error
	}
	stop := make(chan struct{})
	results := make(chan result, 2)
	for range 2 {
		// Each announces 1.5 MiB, sends 1 MiB and keeps the connection.
		tr := &trickle{n: 1 << 20, started: make(chan struct{}), stop: stop}
		go func() {
			_, release, err := read(tr, 3<<19)
			results <- result{release, err}
		}()
		<-tr.started
	}
	require.LessOrEqual(t, bodies.Held(), int64(limit))

	_, release, err := read(bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20)), 1<<20)
	require.ErrorIs(t, err, httpapi.ErrBodiesBusy, "1 MiB more than the 1 MiB left")
	release()
	body, release, err := read(bytes.NewReader(bytes.Repeat([]byte("x"), 28<<10)), 28<<10)
	require.NoError(t, err, "a 28 KB delivery still fits")
	require.Len(t, body, 28<<10)
	release()

	close(stop)
	for range 2 {
		r := <-results
		require.Error(t, r.err)
		r.release()
	}
	require.Zero(t, bodies.Held(), "a request that failed gave its memory back")

	_, release, err = read(bytes.NewReader(bytes.Repeat([]byte("x"), maxBody+1)), -1)
	var tooLarge *http.MaxBytesError
	require.True(t, errors.As(err, &tooLarge), "%v", err)
	release()
	body, release, err = read(bytes.NewReader(bytes.Repeat([]byte("x"), maxBody)), maxBody)
	require.NoError(t, err)
	require.Len(t, body, maxBody)
	release()
	require.Zero(t, bodies.Held())
}
