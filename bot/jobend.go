package bot

import (
	"context"
	"sync/atomic"
	"time"
)

// JobEnd is the end of a finished job offered to a run of this process that
// writes it in its own next commit (DispatcherOptions.Adopt): a subagent's
// parent waiting for exactly that child saves its turn's results with the
// child's end (RunStateStore.SaveRunStateWithEnds), so a spawn and its
// await cost one commit less. Exactly one of the two writes the end: the
// taker, once it has taken it (Take) and its commit went through
// (Written(nil)); otherwise the job, as when nobody takes it.
type JobEnd struct {
	Outcome JobOutcome

	state   atomic.Int32
	written chan error    // cap 1: how the taker's commit went
	settled chan struct{} // closed once the end is written, by whichever wrote it
}

const (
	endOffered int32 = iota
	endTaken
	endTakenBack
)

func newJobEnd(out JobOutcome) *JobEnd {
	return &JobEnd{Outcome: out, written: make(chan error, 1), settled: make(chan struct{})}
}

// Take claims the end for the taker's next commit. It returns false when
// the job took it back because the taker was slow to write it: the taker
// then leaves it out, and the job writes it.
func (e *JobEnd) Take() bool { return e.state.CompareAndSwap(endOffered, endTaken) }

// Written tells the job how the taker's commit went: with nil its end is
// written; with an error (the commit failed, or the taker will not write
// it: it went away) the job writes it itself. Only the first call counts.
func (e *JobEnd) Written(err error) {
	select {
	case e.written <- err:
	default:
	}
}

// Settled is closed once the job's end is written, by the taker or by the
// job (or the job's own write failed and was logged): a taker that could
// not write it waits for it before going on, so what the child spent is
// counted before its parent's next model call.
func (e *JobEnd) Settled() <-chan struct{} { return e.settled }

// taken waits for the taker's commit and reports whether it wrote the end.
// A taker that has not taken it within limit loses it: the job writes it
// itself rather than be held by a parent that waits for something else.
func (e *JobEnd) taken(limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-e.written:
		return err == nil
	case <-t.C:
	}
	if e.state.CompareAndSwap(endOffered, endTakenBack) {
		return false
	}
	// Taken: its commit is under way.
	return <-e.written == nil
}

// adopt offers out to DispatcherOptions.Adopt; nil when nobody takes it.
func (d *Dispatcher) adopt(ctx context.Context, out JobOutcome) *JobEnd {
	if d.opts.Adopt == nil || out.Records.Run == nil {
		return nil
	}
	end := newJobEnd(out)
	if !d.opts.Adopt(ctx, end) {
		return nil
	}
	return end
}
