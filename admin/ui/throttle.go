package ui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Guessing at the sign-in form is slowed down twice over. Failures are
// counted per client address and per name (each attempt as it is let
// through, so that attempts sent at once are counted before any of them
// is checked): after freeFailures of them,
// sign-in from that address, or as that name, waits a backoff from the
// latest failure (one second, doubling to maxBackoff) and is refused with
// 429 before anything it sent is checked; a success, or failureMemory
// without a failure, forgets them. A backoff rather than a lock-out, so
// that someone guessing at a name keeps its owner out for minutes at
// most. And at most maxChecks password comparisons (bcrypt, a quarter
// of a second of CPU each) run at once, so a flood of guesses from many
// addresses cannot take the daemon's CPU.
//
// The counts live in each process: behind several replicas a guesser gets
// freeFailures at each.
const (
	freeFailures  = 5
	maxBackoff    = 5 * time.Minute
	failureMemory = 15 * time.Minute
	maxTracked    = 10000 // addresses and names counted at once
	maxChecks     = 2
	checkWait     = 5 * time.Second // how long a sign-in waits for a comparison slot
)

type signInGuard struct {
	now    func() time.Time
	checks chan struct{}

	mu       sync.Mutex
	failures map[string]*failureCount
	swept    time.Time // when forgetOld last looked
}

type failureCount struct {
	n    int
	last time.Time
}

func newSignInGuard(now func() time.Time) *signInGuard {
	return &signInGuard{now: now, checks: make(chan struct{}, maxChecks), failures: map[string]*failureCount{}}
}

// addrKey starts the key of a client address.
const addrKey = "addr "

// signInKeys are what a sign-in's failures count against: its client's
// address (an IPv6 address by its /64, which one client commonly holds
// whole, so that it cannot take a fresh address for each guess), and the
// name it signs in as, if any, by its SHA-256, so that a name of any
// length costs the counts the same few bytes.
func signInKeys(r *http.Request, name string) []string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().Is6() {
		host = netip.PrefixFrom(ip, 64).Masked().String()
	}
	keys := []string{addrKey + host}
	if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
		sum := sha256.Sum256([]byte(name))
		keys = append(keys, "name "+hex.EncodeToString(sum[:]))
	}
	return keys
}

// admit decides whether a sign-in for keys may be checked now: wait is
// how long it must still wait (0: it may), and when it may, the attempt
// is counted against keys at once, as a failure until succeeded takes it
// back. Counting it before it is checked, in the one step that looked at
// the counts, is what holds sign-ins sent all at once to the same
// allowance as sign-ins sent one after another: none of them is checked
// on a count that the others have not added to yet. slowed reports that
// this attempt brought one of keys to its first backoff (worth a line in
// the log should it fail; the later ones are not).
func (g *signInGuard) admit(keys []string) (wait time.Duration, slowed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for _, k := range keys {
		f := g.failures[k]
		if f == nil || f.n < freeFailures || now.Sub(f.last) >= failureMemory {
			continue
		}
		if left := backoff(f.n) - now.Sub(f.last); left > wait {
			wait = left
		}
	}
	if wait > 0 {
		return wait, false
	}
	g.forgetOld(now)
	for _, k := range keys {
		f := g.failures[k]
		if f == nil {
			if len(g.failures) >= maxTracked {
				continue // counted again once older ones are forgotten
			}
			f = &failureCount{}
			g.failures[k] = f
		}
		if now.Sub(f.last) >= failureMemory {
			f.n = 0
		}
		f.n++
		f.last = now
		slowed = slowed || f.n == freeFailures
	}
	return 0, slowed
}

// unchecked takes back an attempt admit counted that was never checked
// (no comparison slot came free): it was no guess.
func (g *signInGuard) unchecked(keys []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		if f := g.failures[k]; f != nil && f.n > 0 {
			f.n--
		}
	}
}

// backoff is how long after its latest failure a key with n failures
// waits.
func backoff(n int) time.Duration {
	if n < freeFailures {
		return 0
	}
	d := time.Second
	for i := freeFailures; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// succeeded takes back the attempt admit counted for a sign-in that
// succeeded, and forgets the failures of the name it proved. The
// address's other failures stand: someone holding a credential of their
// own could otherwise sign in with it between guesses and guess at other
// names or tokens without ever waiting.
func (g *signInGuard) succeeded(keys []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		f := g.failures[k]
		switch {
		case f == nil:
		case strings.HasPrefix(k, addrKey) && f.n > 1:
			f.n--
		default:
			delete(g.failures, k)
		}
	}
}

// forgetOld drops the counts of keys without a failure for failureMemory,
// once the map is half full, at most once a minute.
func (g *signInGuard) forgetOld(now time.Time) {
	if len(g.failures) < maxTracked/2 || now.Sub(g.swept) < time.Minute {
		return
	}
	g.swept = now
	for k, f := range g.failures {
		if now.Sub(f.last) >= failureMemory {
			delete(g.failures, k)
		}
	}
}

// check runs a password comparison when a slot is free, waiting for one
// at most checkWait; false: none came free (or ctx ended), nothing was
// compared.
func (g *signInGuard) check(ctx context.Context, compare func()) bool {
	t := time.NewTimer(checkWait)
	defer t.Stop()
	select {
	case g.checks <- struct{}{}:
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
	defer func() { <-g.checks }()
	compare()
	return true
}
