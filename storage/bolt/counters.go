package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// Counters are kept in the transactions that change what they count, so
// /metrics reads a number instead of scanning keys. CheckCounters compares
// them with a scan; every test's store is checked that way when it closes.
const (
	counterDispatchesPending = "dispatches_pending" // dispatches in status pending
	counterDispatchesLeased  = "dispatches_leased"  // dispatches in status leased
	counterOutboxPending     = "outbox_pending"     // messages whose latest version is not delivered
	counterOutboxDead        = "outbox_dead"        // messages given up
	// counterPendingAt + destination counts the pending messages of one
	// destination.
	counterPendingAt = "outbox_pending@"
)

func pendingAt(destination string) string { return counterPendingAt + destination }

// countDelta is a change to one counter.
type countDelta struct {
	name  string
	delta int64
}

func encodeCount(n int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(n))
}

func decodeCount(v []byte) int64 {
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// count reads a counter.
func (t txn) count(name string) int64 {
	return decodeCount(t.bucket(bucketCounters).Get([]byte(name)))
}

// add changes a counter; a per-destination counter that reaches zero is
// removed, so destinations that were emptied leave nothing behind.
func (t txn) add(name string, delta int64) error {
	if delta == 0 {
		return nil
	}
	b := t.bucket(bucketCounters)
	n := decodeCount(b.Get([]byte(name))) + delta
	if n < 0 {
		return fmt.Errorf("counter %s would go below zero (%d)", name, n)
	}
	if n == 0 && strings.HasPrefix(name, counterPendingAt) {
		return b.Delete([]byte(name))
	}
	return b.Put([]byte(name), encodeCount(n))
}

// dispatchCounter is the counter of dispatches in status s, or "".
func dispatchCounter(s bot.DispatchStatus) string {
	switch s {
	case bot.DispatchPending:
		return counterDispatchesPending
	case bot.DispatchLeased:
		return counterDispatchesLeased
	}
	return ""
}

// CheckCounters compares every counter with a count of what it counts, and
// returns an error naming each that differs. It also checks that every
// pending outbox message's entry in the pending index says what the
// message does (when it is due, its work item), since Due decides by it.
func CheckCounters(tx *bolt.Tx) error {
	t := txn{tx}
	want := map[string]int64{}
	err := t.bucket(bucketDispatches).ForEach(func(k, v []byte) error {
		var d bot.Dispatch
		if err := unmarshal(v, &d); err != nil {
			return fmt.Errorf("decode dispatch d_%d: %w", seqOf(k), err)
		}
		if name := dispatchCounter(d.Status); name != "" {
			want[name]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = t.bucket(bucketOutbox).ForEach(func(k, v []byte) error {
		var m bot.OutboxMessage
		if err := unmarshal(v, &m); err != nil {
			return fmt.Errorf("decode outbox/%s: %w", k, err)
		}
		if m.Pending() {
			want[counterOutboxPending]++
			want[pendingAt(m.Thread.Destination())]++
			got := t.bucket(bucketOutboxPending).Get(indexKey(m.Thread.Destination(), m.Seq))
			if got == nil {
				return fmt.Errorf("pending outbox message %q is not in the pending index", m.Key)
			}
			if !bytes.Equal(got, pendingOutbox(&m)) {
				return fmt.Errorf("the pending index's entry of outbox message %q does not say when it is due or its work item", m.Key)
			}
		}
		if m.Dead {
			want[counterOutboxDead]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := int64(countKeys(t.bucket(bucketPending))); n != want[counterDispatchesPending] {
		return fmt.Errorf("the pending dispatch index holds %s; a scan finds %s pending", bot.Count(int(n), "dispatch", "dispatches"),
			bot.Count(int(want[counterDispatchesPending]), "dispatch", "dispatches"))
	}
	if n := int64(countKeys(t.bucket(bucketOutboxPending))); n != want[counterOutboxPending] {
		return fmt.Errorf("the pending outbox index holds %s; a scan finds %s pending", bot.Count(int(n), "message", "messages"),
			bot.Count(int(want[counterOutboxPending]), "message", "messages"))
	}
	got := map[string]int64{}
	err = t.bucket(bucketCounters).ForEach(func(k, v []byte) error {
		got[string(k)] = decodeCount(v)
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range []string{counterDispatchesPending, counterDispatchesLeased, counterOutboxPending, counterOutboxDead} {
		if _, ok := want[name]; !ok {
			want[name] = 0
		}
		if _, ok := got[name]; !ok {
			got[name] = 0
		}
	}
	var errs []error
	for name, n := range want {
		if got[name] != n {
			errs = append(errs, fmt.Errorf("counter %s is %d, a scan counts %d", name, got[name], n))
		}
	}
	for name, n := range got {
		if _, ok := want[name]; !ok {
			errs = append(errs, fmt.Errorf("counter %s is %d, a scan counts 0", name, n))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Check checks a file's consistency: bbolt's own check of its pages and
// CheckCounters.
func Check(tx *bolt.Tx) error {
	var errs []error
	for err := range tx.Check() {
		errs = append(errs, err)
	}
	if err := CheckCounters(tx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
