package bot_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

// threadRunner runs each thread's job with its own function; threads
// without one finish at once.
type threadRunner struct {
	mu  sync.Mutex
	by  map[string]func(ctx context.Context) error
	log []string
}

func (r *threadRunner) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *threadRunner) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func (r *threadRunner) Run(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
	name := req.Thread.Name
	r.note(name + " started")
	r.mu.Lock()
	f := r.by[name]
	r.mu.Unlock()
	if f != nil {
		if err := f(ctx); err != nil {
			return bot.RunResult{}, err
		}
	}
	r.note(name + " finished")
	return bot.RunResult{Status: bot.ResultSuccess, Reply: name + " done"}, nil
}

func TestRunWaitingForAPersonHoldsNoWorker(t *testing.T) {
	decided := make(chan struct{})
	r := &threadRunner{by: map[string]func(context.Context) error{
		"approval": func(ctx context.Context) error {
			return bot.Await(ctx, func() error {
				select {
				case <-decided:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		},
	}}
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: r, workers: 1})

	waiting := c.send(t, "approval", "deploy, once someone approves")
	require.Eventually(t, func() bool { return len(r.events()) == 1 }, 5*time.Second, 5*time.Millisecond)
	// With the only worker's run waiting for a person, other threads still
	// get their work done.
	for _, th := range []string{"b", "c"} {
		wi := c.send(t, th, "quick one")
		require.Equal(t, bot.StatusDone, c.waitFinished(t, wi.ID).Status)
	}
	got, err := c.store.GetWorkItem(context.Background(), waiting.ID)
	require.NoError(t, err)
	require.Equal(t, bot.StatusRunning, got.Status, "the waiting run is still running")

	close(decided)
	require.Equal(t, "approval done", c.waitFinished(t, waiting.ID).Summary)
}

func TestResumedRunGoesBeforeNewWork(t *testing.T) {
	decided, busyDone := make(chan struct{}), make(chan struct{})
	r := &threadRunner{}
	r.by = map[string]func(context.Context) error{
		"approval": func(ctx context.Context) error {
			err := bot.Await(ctx, func() error { <-decided; return nil })
			r.note("approval resumed")
			return err
		},
		"busy": func(context.Context) error { <-busyDone; return nil },
	}
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: r, workers: 1})
	waiting := c.send(t, "approval", "needs approval")
	require.Eventually(t, func() bool { return len(r.events()) == 1 }, 5*time.Second, 5*time.Millisecond)
	busy := c.send(t, "busy", "holds the only worker")
	require.Eventually(t, func() bool { return len(r.events()) == 2 }, 5*time.Second, 5*time.Millisecond)

	close(decided) // the approval comes while the worker is busy: it queues for it
	time.Sleep(200 * time.Millisecond)
	later := c.send(t, "later", "arrives after the decision")
	time.Sleep(50 * time.Millisecond)
	close(busyDone)
	for _, wi := range []*bot.WorkItem{waiting, busy, later} {
		require.Equal(t, bot.StatusDone, c.waitFinished(t, wi.ID).Status)
	}
	require.Equal(t, []string{
		"approval started", "busy started", "busy finished",
		"approval resumed", "approval finished", "later started", "later finished",
	}, r.events(), "one run at a time, and the resumed run before new work")
}

func TestShutdownHandsWaitingRunsBackAtOnce(t *testing.T) {
	store := openStore(t, t.TempDir())
	r := &threadRunner{by: map[string]func(context.Context) error{
		"approval": func(ctx context.Context) error {
			return bot.Await(ctx, func() error { <-ctx.Done(); return ctx.Err() })
		},
	}}
	c := startCore(t, store, coreOpts{runner: r, workers: 1, grace: time.Minute})
	wi := c.send(t, "approval", "needs approval")
	require.Eventually(t, func() bool { return len(r.events()) == 1 }, 5*time.Second, 5*time.Millisecond)

	stopped := make(chan struct{})
	go func() { c.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown waited out the grace period for a run that only waits for a person")
	}
	got, err := store.GetWorkItem(context.Background(), wi.ID)
	require.NoError(t, err)
	require.Equal(t, bot.StatusQueued, got.Status, "handed back, to ask again after the restart")
}

func TestAwaitOutsideARunJustWaits(t *testing.T) {
	called := false
	require.NoError(t, bot.Await(context.Background(), func() error { called = true; return nil }))
	require.True(t, called)
}

// A run that waits for several things at once (subagents spawned in one
// turn) holds no worker until the last of them is done, so with one worker
// the work it waits for still runs, one piece after the other.
func TestOverlappingAwaitsHoldNoWorkerUntilTheLast(t *testing.T) {
	doneA, doneB := make(chan struct{}), make(chan struct{})
	r := &threadRunner{}
	r.by = map[string]func(context.Context) error{
		"parent": func(ctx context.Context) error {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, ch := range []chan struct{}{doneA, doneB} {
				wg.Go(func() {
					errs[i] = bot.Await(ctx, func() error {
						select {
						case <-ch:
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					})
				})
			}
			wg.Wait()
			r.note("parent resumed")
			return errors.Join(errs...)
		},
		"a": func(context.Context) error { close(doneA); return nil },
		"b": func(context.Context) error { close(doneB); return nil },
	}
	c := startCore(t, openStore(t, t.TempDir()), coreOpts{runner: r, workers: 1})
	parent := c.send(t, "parent", "wait for a and b")
	require.Eventually(t, func() bool { return len(r.events()) == 1 }, 5*time.Second, 5*time.Millisecond)
	a := c.send(t, "a", "first")
	require.Equal(t, bot.StatusDone, c.waitFinished(t, a.ID).Status)
	b := c.send(t, "b", "second")
	require.Equal(t, bot.StatusDone, c.waitFinished(t, b.ID).Status)
	require.Equal(t, bot.StatusDone, c.waitFinished(t, parent.ID).Status)
	require.Equal(t, []string{"parent started", "a started", "a finished", "b started", "b finished", "parent resumed", "parent finished"}, r.events())
}

// spawningRunner's runs of a thread's own work items spawn a child, handed
// to a free worker when there is one, and wait for it holding no worker;
// a child's run answers at once.
type spawningRunner struct {
	store         *bolt.Store
	waitForWorker bool // a worker is free, if not at once then once the dispatcher's look for work ends

	mu     sync.Mutex
	handed []bool              // per parent run: whether a worker was free
	jobs   map[string]*bot.Job // child work item → the job it was claimed in at its spawn
	ran    map[string]string   // child work item → the job that ran it
}

func (r *spawningRunner) Run(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
	lead := req.WorkItems[0]
	if lead.IsChild() {
		r.mu.Lock()
		r.ran[lead.ID] = req.Job.ID
		r.mu.Unlock()
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "helped"}, nil
	}
	w, ok := bot.TakeWorker(ctx)
	// The dispatcher holds a free slot while it looks for work; a test
	// that wants the free worker waits for that look to end.
	for deadline := time.Now().Add(5 * time.Second); !ok && r.waitForWorker && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		w, ok = bot.TakeWorker(ctx)
	}
	var claim *bot.ClaimRequest
	if ok {
		c := w.Claim(time.Now())
		claim = &c
	}
	spawned, err := r.store.SpawnChild(ctx, bot.SpawnRequest{
		Run: bot.ChildRun{
			Owner:       bot.Owner{SessionKey: req.Thread.Key(), AgentID: req.Agent},
			ParentLinks: bot.ParentLinks{WorkItemID: lead.ID, JobID: req.Job.ID}, RootWorkItemID: lead.ID,
			Agent: req.Agent, Task: "help", Depth: 1,
		},
		Thread: req.Thread, Now: time.Now(), Claim: claim,
	})
	if err != nil {
		if ok {
			w.Release()
		}
		return bot.RunResult{}, err
	}
	if ok {
		w.Start(spawned.Claim)
	}
	r.mu.Lock()
	r.handed = append(r.handed, ok)
	r.jobs[spawned.Run.ChildWorkItemID] = spawned.Claim.Job
	r.mu.Unlock()
	err = bot.Await(ctx, func() error {
		for {
			wi, err := r.store.GetWorkItem(ctx, spawned.Run.ChildWorkItemID)
			if err != nil || wi.Status.Finished() {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	if err != nil {
		return bot.RunResult{}, err
	}
	return bot.RunResult{Status: bot.ResultSuccess, Reply: "spawned"}, nil
}

func TestASpawnedChildGoesStraightToAFreeWorkerAndWaitsInTheQueueWithoutOne(t *testing.T) {
	for _, tt := range []struct {
		name    string
		workers int
		handed  bool
	}{
		{"a worker is free", 2, true},
		// The parent holds the only worker: its child waits in the queue
		// until the parent gives the worker back to wait for it.
		{"the parent holds the only worker", 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := openStore(t, t.TempDir())
			r := &spawningRunner{store: store, waitForWorker: tt.handed, jobs: map[string]*bot.Job{}, ran: map[string]string{}}
			c := startCore(t, store, coreOpts{runner: r, workers: tt.workers})
			wi := c.send(t, "tree", "spawn one")
			require.Equal(t, bot.StatusDone, c.waitFinished(t, wi.ID).Status)

			r.mu.Lock()
			defer r.mu.Unlock()
			require.Equal(t, []bool{tt.handed}, r.handed)
			require.Len(t, r.ran, 1)
			for child, job := range r.jobs {
				if !tt.handed {
					require.Nil(t, job)
					require.NotEmpty(t, r.ran[child], "the dispatcher claimed it")
					continue
				}
				require.NotNil(t, job)
				require.Equal(t, []string{child}, job.WorkItemIDs)
				require.Equal(t, job.ID, r.ran[child], "it ran in the job leased at its spawn")
				rec, err := store.RunOfWorkItem(context.Background(), child)
				require.NoError(t, err)
				require.Equal(t, bot.RunDone, rec.Status)
				require.Equal(t, job.ID, rec.ChildJobID)
			}
		})
	}
	_, ok := bot.TakeWorker(context.Background())
	require.False(t, ok, "outside a dispatcher's run there is no worker to take")
}

// childRunner's children answer at once with their record's end; a parent
// waits until told to go on.
type childRunner struct {
	store    *bolt.Store
	parentGo chan struct{}
}

func (r childRunner) Run(ctx context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
	lead := req.WorkItems[0]
	if !lead.IsChild() {
		if req.Thread.Name != "tree" {
			return bot.RunResult{Status: bot.ResultSuccess, Reply: "quick"}, nil
		}
		select {
		case <-r.parentGo:
		case <-ctx.Done():
			return bot.RunResult{}, ctx.Err()
		}
		return bot.RunResult{Status: bot.ResultSuccess, Reply: "led"}, nil
	}
	rec, err := r.store.RunOfWorkItem(ctx, lead.ID)
	if err != nil {
		return bot.RunResult{}, err
	}
	return bot.RunResult{Status: bot.ResultSuccess, Reply: "helped", TokensUsed: 15, Records: bot.JobRecords{
		Run: &bot.RunEnd{ID: rec.ID, ParentWorkItemID: lead.ParentID, Status: bot.RunDone, Result: "helped", Tokens: 15, At: time.Now()},
	}}, nil
}

func TestAFinishedChildsEndGoesToTheRunThatTakesItAndBackToItsJobOtherwise(t *testing.T) {
	tests := []struct {
		name string
		// settle is what the taker does with the end.
		settle func(t *testing.T, store *bolt.Store, parent string, end *bot.JobEnd)
		// held: the taker holds the end until it settles it; taken: it
		// wrote it.
		held, taken bool
	}{
		{"the taker writes it with its own state", func(t *testing.T, store *bolt.Store, parent string, end *bot.JobEnd) {
			require.True(t, end.Take())
			require.NoError(t, store.SaveRunStateWithEnds(context.Background(), bot.RunState{WorkItemID: parent, Doc: []byte(`{"turn":1}`)},
				[]bot.JobOutcome{end.Outcome}))
			end.Written(nil)
		}, true, true},
		{"the taker's commit failed: the job writes it", func(t *testing.T, _ *bolt.Store, _ string, end *bot.JobEnd) {
			require.True(t, end.Take())
			end.Written(errors.New("the commit failed"))
		}, true, false},
		{"the taker went away: the job writes it", func(t *testing.T, _ *bolt.Store, _ string, end *bot.JobEnd) {
			end.Written(errors.New("the run stopped waiting"))
		}, true, false},
		{"the taker never takes it into a commit: the job takes it back", func(t *testing.T, _ *bolt.Store, _ string, end *bot.JobEnd) {
			<-end.Settled()
			require.False(t, end.Take(), "taken back")
		}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := openStore(t, t.TempDir())
			ends := make(chan *bot.JobEnd, 1)
			r := childRunner{store: store, parentGo: make(chan struct{})}
			c := startCore(t, store, coreOpts{runner: r, workers: 2, adoptWait: 200 * time.Millisecond,
				adopt: func(_ context.Context, end *bot.JobEnd) bool { ends <- end; return true }})
			parent := c.send(t, "tree", "lead")
			var job *bot.Job
			require.Eventually(t, func() bool {
				jobs, err := store.ListJobs(context.Background(), parent.ID)
				require.NoError(t, err)
				if len(jobs) == 0 {
					return false
				}
				job = &jobs[0]
				return true
			}, 5*time.Second, 5*time.Millisecond)
			spawned, err := store.SpawnChild(context.Background(), bot.SpawnRequest{
				Run: bot.ChildRun{
					Owner:       bot.Owner{SessionKey: parent.Thread.Key(), AgentID: "triage"},
					ParentLinks: bot.ParentLinks{WorkItemID: parent.ID, JobID: job.ID}, RootWorkItemID: parent.ID,
					Agent: "triage", Task: "help", Depth: 1,
				},
				Thread: parent.Thread, Now: time.Now(),
			})
			require.NoError(t, err)
			c.dispatcher.Wake()
			var end *bot.JobEnd
			select {
			case end = <-ends:
			case <-time.After(10 * time.Second):
				t.Fatal("the child's end was not offered")
			}
			require.Equal(t, spawned.Run.ID, end.Outcome.Records.Run.ID)
			require.True(t, end.Outcome.Success)
			if tt.held {
				// Its worker was given back at once: with the parent on the
				// other, other work goes on while the end waits.
				quick := c.send(t, "other", "quick one")
				require.Equal(t, bot.StatusDone, c.waitFinished(t, quick.ID).Status)
				child, err := store.GetWorkItem(context.Background(), spawned.Run.ChildWorkItemID)
				require.NoError(t, err)
				require.Equal(t, bot.StatusRunning, child.Status, "nothing of its end is written before the taker says")
			}

			tt.settle(t, store, parent.ID, end)
			select {
			case <-end.Settled():
			case <-time.After(10 * time.Second):
				t.Fatal("the child's end was never written")
			}
			child := c.waitFinished(t, spawned.Run.ChildWorkItemID)
			require.Equal(t, bot.StatusDone, child.Status)
			require.Equal(t, "helped", child.Summary)
			rec, err := store.GetRun(context.Background(), spawned.Run.ID)
			require.NoError(t, err)
			require.Equal(t, bot.RunDone, rec.Status)
			require.Equal(t, 15, rec.Tokens)
			jobs, err := store.ListJobs(context.Background(), child.ID)
			require.NoError(t, err)
			require.Len(t, jobs, 1, "ended once, by one of the two")
			require.Equal(t, bot.JobSucceeded, jobs[0].Status)
			doc, err := store.LoadRunState(context.Background(), parent.ID)
			require.NoError(t, err)
			require.Equal(t, tt.taken, doc != nil, "the taker's state is saved with the end it wrote")

			close(r.parentGo)
			require.Equal(t, bot.StatusDone, c.waitFinished(t, parent.ID).Status)
		})
	}
}
