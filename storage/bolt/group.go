package bolt

import (
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// groupCommit writes concurrent callers' functions in shared transactions:
// whoever finds no commit running commits its own function and every one
// that queued meanwhile in one transaction, and hands over to the first
// caller that queued while it committed. Under load a transaction takes
// everything that arrived during the one before; a lone caller commits at
// once, without waiting for others.
//
// bbolt's DB.Batch, which intake used before, closes a batch when its
// timer fires or it is full, and the batches that closed while a commit ran
// then commit one after another, each with the few callers of its 2 ms:
// with callers that spend time between calls (reading and checking a
// webhook), its batches stayed small and every caller waited for several
// commits.
//
// As with Batch, a function may run more than once (when another function
// of its transaction fails, each is run again in a transaction of its own),
// so it must change nothing outside the transaction.
type groupCommit struct {
	db *bolt.DB

	mu    sync.Mutex
	busy  bool
	queue []*groupCall
}

type groupCall struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// errLead tells a queued caller to commit the queue.
var errLead = errors.New("lead the next group commit")

// do runs fn in a write transaction shared with concurrent callers and
// returns once that transaction has committed or failed.
func (g *groupCommit) do(fn func(*bolt.Tx) error) error {
	c := &groupCall{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.busy {
		g.mu.Unlock()
		if err := <-c.done; err != errLead {
			return err
		}
		g.mu.Lock()
	} else {
		g.busy = true
	}
	calls := g.queue
	g.queue = nil
	g.mu.Unlock()

	g.commit(calls)

	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- errLead
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return <-c.done
}

// commit runs calls in one transaction, or, when one fails, each in its own.
func (g *groupCommit) commit(calls []*groupCall) {
	err := g.db.Update(func(tx *bolt.Tx) error {
		for _, c := range calls {
			if err := safely(c.fn, tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(calls) == 1 {
		for _, c := range calls {
			c.done <- err
		}
		return
	}
	for _, c := range calls {
		c.done <- g.db.Update(func(tx *bolt.Tx) error { return safely(c.fn, tx) })
	}
}

// safely runs fn, turning a panic into an error: the callers waiting on
// the same commit must hear back.
func safely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in a group commit: %v", r)
		}
	}()
	return fn(tx)
}
