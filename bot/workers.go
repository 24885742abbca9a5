package bot

import (
	"context"
	"slices"
	"sync"
	"time"
)

// workerPool is the dispatcher's run capacity: a fixed number of numbered
// slots. A run holds one from its claim to its end, except while it waits
// for something outside itself (a person's approval, see Await): then the
// slot goes back to the pool so other threads' work is not held up by a
// person who is at lunch.
//
// A parked run that wants to go on is served before new claims, oldest
// first: it has been waiting already, and its thread is blocked on it.
type workerPool struct {
	mu      sync.Mutex
	free    []int                 // free slot numbers
	resumes []chan int            // parked runs waiting for a slot, oldest first
	parked  map[*runSlot]struct{} // runs waiting without a slot
	freed   chan struct{}         // cap 1: a slot came free for claiming
	onPark  func(delta int)       // counts parked runs (metrics)
}

func newWorkerPool(n int, onPark func(int)) *workerPool {
	p := &workerPool{freed: make(chan struct{}, 1), parked: map[*runSlot]struct{}{}, onPark: onPark}
	for i := range n {
		p.free = append(p.free, i+1)
	}
	return p
}

// take hands out a free slot for a new claim, unless none is free or a
// parked run is waiting for one.
func (p *workerPool) take() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 || len(p.resumes) > 0 {
		return 0, false
	}
	slot := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return slot, true
}

// put returns a slot: to the oldest parked run waiting for one, or to the
// free list.
func (p *workerPool) put(slot int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.resumes) > 0 {
		next := p.resumes[0]
		p.resumes = p.resumes[1:]
		next <- slot // buffered: never blocks
		return
	}
	p.free = append(p.free, slot)
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// retake waits for a slot for a parked run, ahead of new claims.
func (p *workerPool) retake(ctx context.Context) (int, error) {
	p.mu.Lock()
	if len(p.free) > 0 {
		slot := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		p.mu.Unlock()
		return slot, nil
	}
	ch := make(chan int, 1)
	p.resumes = append(p.resumes, ch)
	p.mu.Unlock()
	select {
	case slot := <-ch:
		return slot, nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if i := slices.Index(p.resumes, ch); i >= 0 {
		p.resumes = slices.Delete(p.resumes, i, i+1)
		p.mu.Unlock()
		return 0, ctx.Err()
	}
	p.mu.Unlock()
	// put handed a slot over as ctx ended: pass it on.
	p.put(<-ch)
	return 0, ctx.Err()
}

// cancelParked cancels the runs waiting without a slot. At shutdown they
// are handed back at once instead of holding the grace period: whoever they
// wait for can answer after the restart, when the run asks again.
func (p *workerPool) cancelParked(reason error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.parked {
		s.cancel(reason)
	}
}

// runSlot is the slot of one run, carried in the run's context so Await can
// give it back while the run waits.
type runSlot struct {
	pool   *workerPool
	cancel func(reason error)

	mu   sync.Mutex
	slot int
	held bool
	// waiting counts the run's Awaits in progress: a run that waits for
	// several things at once (subagents spawned in one turn) gives its
	// slot back at the first and takes one again after the last.
	waiting int
}

// enter begins a wait: the first gives the slot back.
func (s *runSlot) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	if s.waiting > 1 || !s.held {
		return
	}
	s.held = false
	s.pool.mu.Lock()
	s.pool.parked[s] = struct{}{}
	s.pool.mu.Unlock()
	s.pool.onPark(1)
	s.pool.put(s.slot)
}

// leave ends a wait: after the last, the run takes a slot again before it
// goes on. A wait that begins meanwhile keeps the run parked.
func (s *runSlot) leave(ctx context.Context) error {
	s.mu.Lock()
	s.waiting--
	if s.waiting > 0 || s.held {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	slot, err := s.pool.retake(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held || s.waiting > 0 {
		// Another leave got one first, or a new wait began: the run
		// needs no slot now.
		s.pool.put(slot)
		return nil
	}
	s.slot, s.held = slot, true
	s.pool.mu.Lock()
	delete(s.pool.parked, s)
	s.pool.mu.Unlock()
	s.pool.onPark(-1)
	return nil
}

// release gives the slot back when the run ends.
func (s *runSlot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pool.mu.Lock()
	_, wasParked := s.pool.parked[s]
	delete(s.pool.parked, s)
	s.pool.mu.Unlock()
	if wasParked {
		s.pool.onPark(-1)
	}
	if s.held {
		s.held = false
		s.pool.put(s.slot)
	}
}

type runSlotKey struct{}

// Await runs wait, which blocks on something outside the run such as a
// person's decision or a subagent's answer, with the run's worker handed
// back to the pool, and takes a worker again before it returns. A run
// waiting for a person or for its children thus holds no worker: other
// jobs, its children's among them, run meanwhile. Awaits of one run may
// overlap (subagents spawned in one turn): the worker is given back at the
// first and taken again after the last, so a parent never holds a worker
// while any of its children waits for one. Outside a dispatcher run (tests,
// tools called directly) it just calls wait.
//
// When ctx ends before a worker is free again, Await returns ctx's error
// (unless wait failed first).
func Await(ctx context.Context, wait func() error) error {
	s, _ := ctx.Value(runSlotKey{}).(*runSlot)
	if s == nil {
		return wait()
	}
	s.enter()
	err := wait()
	if rerr := s.leave(ctx); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// workers are a running dispatcher's: its pool and the jobs it runs, which
// the runs it starts may add to (TakeWorker).
type workers struct {
	d      *Dispatcher
	ctx    context.Context // ends when the dispatcher stops claiming
	jobCtx context.Context // what jobs run under
	pool   *workerPool
	jobs   *sync.WaitGroup
}

// start runs claim's job on slot.
func (w *workers) start(claim Claim, slot int) {
	w.jobs.Go(func() { w.d.runJob(w, claim, slot) })
}

type workersKey struct{}

// Worker is a free worker a run took for work it claims itself, in a
// transaction it writes anyway: a spawned subagent's job is leased in the
// transaction that spawns it and starts at once, without the dispatcher's
// own claim, a commit and a hand-over later. Exactly one of Start and
// Release gives it back.
type Worker struct {
	w    *workers
	slot int
}

// TakeWorker takes a free worker of the dispatcher ctx's run works under.
// It returns false outside a dispatcher's run, once the dispatcher stops
// claiming, when every worker is busy, and while a waiting run wants one
// back (runs that waited go first, as before the dispatcher's claims):
// the work then waits in the queue for the dispatcher.
func TakeWorker(ctx context.Context) (*Worker, bool) {
	w, _ := ctx.Value(workersKey{}).(*workers)
	if w == nil || w.ctx.Err() != nil {
		return nil, false
	}
	slot, ok := w.pool.take()
	if !ok {
		return nil, false
	}
	return &Worker{w: w, slot: slot}, true
}

// Claim is the request to lease work for the worker with, at now: its
// identity, and the dispatcher's lease and attempts.
func (wk *Worker) Claim(now time.Time) ClaimRequest {
	o := wk.w.d.opts
	return ClaimRequest{Owner: wk.w.d.worker(wk.slot), Now: now, Lease: o.Lease, MaxAttempts: o.MaxAttempts}
}

// Start runs the job claimed for the worker, as the dispatcher runs the
// jobs it claims; without a job the worker is given back.
func (wk *Worker) Start(claim Claim) {
	if claim.Job == nil {
		wk.Release()
		return
	}
	wk.w.start(claim, wk.slot)
}

// Release gives the worker back unused.
func (wk *Worker) Release() { wk.w.pool.put(wk.slot) }
