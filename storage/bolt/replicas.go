package bolt

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// One process holds a bbolt file (its lock), so what replicas of a shared
// store coordinate through is this process's own: notifications go to the
// listeners in it, and leases are held in memory.

// bus delivers notifications to the listeners of this process.
type bus struct {
	mu        sync.Mutex
	listeners map[chan notification]struct{}
	leases    map[string]heldLease
}

type notification struct{ topic, payload string }

type heldLease struct {
	holder string
	until  time.Time
}

// Notify tells the listeners of this process.
func (s *Store) Notify(ctx context.Context, topic, payload string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if topic == "" {
		return bot.Errorf(bot.EINVALID, "notification without a topic")
	}
	s.bus.mu.Lock()
	list := make([]chan notification, 0, len(s.bus.listeners))
	for ch := range s.bus.listeners {
		list = append(list, ch)
	}
	s.bus.mu.Unlock()
	for _, ch := range list {
		select {
		case ch <- notification{topic, payload}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Listen calls fn with each notification of this process until ctx ends.
func (s *Store) Listen(ctx context.Context, fn func(topic, payload string)) error {
	ch := make(chan notification, 64)
	s.bus.mu.Lock()
	if s.bus.listeners == nil {
		s.bus.listeners = map[chan notification]struct{}{}
	}
	s.bus.listeners[ch] = struct{}{}
	s.bus.mu.Unlock()
	defer func() {
		s.bus.mu.Lock()
		delete(s.bus.listeners, ch)
		s.bus.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-ch:
			fn(n.topic, n.payload)
		}
	}
}

// HoldLease takes or renews a lease of this process.
func (s *Store) HoldLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if name == "" || holder == "" || ttl <= 0 {
		return false, bot.Errorf(bot.EINVALID, "lease %q for %q: a name, a holder and a positive time are required", name, holder)
	}
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if s.bus.leases == nil {
		s.bus.leases = map[string]heldLease{}
	}
	if l, ok := s.bus.leases[name]; ok && l.holder != holder && l.until.After(now) {
		return false, nil
	}
	s.bus.leases[name] = heldLease{holder: holder, until: now.Add(ttl)}
	return true, nil
}

// ReleaseLease gives up holder's lease.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if l, ok := s.bus.leases[name]; ok && l.holder == holder {
		delete(s.bus.leases, name)
	}
	return nil
}

// Where is the store's file.
func (s *Store) Where() string { return s.path }
