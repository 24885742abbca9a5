package bolt

import (
	"bytes"
	"fmt"

	"github.com/switchyard/switchyard/bot"
)

// bucketOutboxPendingV1 was the pending outbox index of schema 1 (seq →
// key), replaced by the index by destination.
const bucketOutboxPendingV1 = "outbox_pending"

// migrate brings a file of schema version from up to SchemaVersion, inside
// the transaction that creates the buckets it lacked.
func (t txn) migrate(from uint64) error {
	if from < 2 {
		if err := t.migrateV2(); err != nil {
			return fmt.Errorf("migrate to schema 2: %w", err)
		}
	}
	if from < 3 {
		if err := t.migrateV3(); err != nil {
			return fmt.Errorf("migrate to schema 3: %w", err)
		}
	}
	return nil
}

// migrateV2 fills what schema 2 adds: the outbox's index by seq and its
// pending index by destination, the counters, and running jobs' leases in
// jobs_active. Jobs keep their id lists in their records, where they are
// still read.
func (t txn) migrateV2() error {
	if t.bucket(bucketOutboxPendingV1) != nil {
		if err := t.tx.DeleteBucket([]byte(bucketOutboxPendingV1)); err != nil {
			return err
		}
	}
	err := t.bucket(bucketOutbox).ForEach(func(k, v []byte) error {
		var m bot.OutboxMessage
		if err := unmarshal(v, &m); err != nil {
			return fmt.Errorf("decode outbox/%s: %w", k, err)
		}
		if err := t.bucket(bucketOutboxBySeq).Put(seqKey(m.Seq), k); err != nil {
			return err
		}
		if m.Pending() {
			dest := m.Thread.Destination()
			if err := t.bucket(bucketOutboxPending).Put(indexKey(dest, m.Seq), k); err != nil {
				return err
			}
			if err := t.add(counterOutboxPending, 1); err != nil {
				return err
			}
			if err := t.add(pendingAt(dest), 1); err != nil {
				return err
			}
		}
		if m.Dead {
			return t.add(counterOutboxDead, 1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = t.bucket(bucketDispatches).ForEach(func(k, v []byte) error {
		var d bot.Dispatch
		if err := unmarshal(v, &d); err != nil {
			return fmt.Errorf("decode dispatch %x: %w", k, err)
		}
		if name := dispatchCounter(d.Status); name != "" {
			return t.add(name, 1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	type lease struct {
		unit, value []byte
	}
	var leases []lease
	err = t.bucket(bucketActive).ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return nil
		}
		j, err := t.jobAt(v)
		if err != nil {
			return err
		}
		if j == nil {
			return fmt.Errorf("jobs_active names job_%d, which does not exist", seqOf(v))
		}
		leases = append(leases, lease{append([]byte(nil), k...), activeValue(seqOf(v), j.LeaseExpires)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, l := range leases {
		if err := t.bucket(bucketActive).Put(l.unit, l.value); err != nil {
			return err
		}
	}
	return nil
}

// migrateV3 rewrites the values of the pending outbox index, which held a
// message's key, as schema 3 lays them out: the message's next attempt and
// work item before its key (pendingOutbox), so Due reads only the messages
// it returns.
func (t txn) migrateV3() error {
	b := t.bucket(bucketOutboxPending)
	type entry struct{ index, key []byte }
	var entries []entry
	err := b.ForEach(func(k, v []byte) error {
		entries = append(entries, entry{bytes.Clone(k), bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		m, err := t.outbox(string(e.key))
		if err != nil {
			return fmt.Errorf("the pending outbox index names a message it cannot read: %w", err)
		}
		// An entry of a message that is not pending, or that sits where
		// another message belongs, would have Due return that message on
		// every round, delivered or not, and nothing would take it out.
		switch {
		case !m.Pending():
			return fmt.Errorf("the pending outbox index names message %q, which is not pending (delivered or dead)", m.Key)
		case !bytes.Equal(e.index, indexKey(m.Thread.Destination(), m.Seq)):
			return fmt.Errorf("the pending outbox index names message %q at %s, where it is at %s seq %d",
				m.Key, describeIndexKey(e.index), m.Thread.Destination(), m.Seq)
		}
		if err := b.Put(e.index, pendingOutbox(m)); err != nil {
			return err
		}
	}
	return nil
}

// describeIndexKey reads a key of an index by destination or thread
// (name, 0, seq) for a message: "slack/T1 seq 4".
func describeIndexKey(k []byte) string {
	if len(k) < 9 || k[len(k)-9] != 0 {
		return fmt.Sprintf("the key %q", k)
	}
	return fmt.Sprintf("%s seq %d", k[:len(k)-9], seqOf(k[len(k)-8:]))
}
