package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// recordingBash stands in for the bash tool: it records what it was asked
// to run instead of running it.
type recordingBash struct {
	mu  sync.Mutex
	ran []string
}

func (b *recordingBash) Info() tools.Info {
	return coreInfo(tools.Bash)
}

func (b *recordingBash) Run(_ context.Context, _ tools.CallContext, input json.RawMessage) (string, error) {
	var in struct{ Command string }
	_ = json.Unmarshal(input, &in)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ran = append(b.ran, in.Command)
	return "ok", nil
}

func (b *recordingBash) commands() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.ran...)
}

// threadNotifier records what the thread was told.
type threadNotifier struct {
	mu        sync.Mutex
	requested []bot.Approval
	resolved  []bot.Approval
}

func (n *threadNotifier) ApprovalRequested(_ context.Context, a bot.Approval) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.requested = append(n.requested, a)
	return nil
}

func (n *threadNotifier) ApprovalResolved(_ context.Context, a bot.Approval) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.resolved = append(n.resolved, a)
	return nil
}

func (n *threadNotifier) lastResolved() (bot.Approval, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.resolved) == 0 {
		return bot.Approval{}, false
	}
	return n.resolved[len(n.resolved)-1], true
}

type approvalRig struct {
	f         *fixture
	approvals *policy.Approvals
	auditor   *policy.Auditor
	notifier  *threadNotifier
	bash      *recordingBash
	toolset   *tools.Toolset
}

func newApprovalRig(t *testing.T, timeout time.Duration) *approvalRig {
	t.Helper()
	auditor, store := openAudit(t)
	cfg := map[string]policy.ProfileConfig{
		"deployer": {Extends: "ops", Approval: []string{"kubectl apply"}, Approvers: []string{"alice", "Bob"}},
	}
	f := newFixture(t, cfg)
	e, err := policy.New(policy.Options{Profiles: cfg, Audit: auditor})
	require.NoError(t, err)
	n := &threadNotifier{}
	a, err := policy.NewApprovals(policy.ApprovalOptions{
		Store: store, Approvers: e, Notifier: n, Audit: auditor, Redactor: bot.NewRedactor(configuredSecret), Timeout: timeout,
	})
	require.NoError(t, err)
	bash := &recordingBash{}
	reg, err := tools.NewRegistry(bash)
	require.NoError(t, err)
	ts := tools.NewToolset(reg, tools.Scope{Agent: "ops", Profile: "deployer"}, tools.ToolsetOptions{Policy: e, Profiles: e, Approver: a})
	return &approvalRig{f: f, approvals: a, auditor: auditor, notifier: n, bash: bash, toolset: ts}
}

// execute runs a bash call through the toolset in the background.
func (r *approvalRig) execute(ctx context.Context, command string) <-chan tools.Result {
	out := make(chan tools.Result, 1)
	in, _ := json.Marshal(map[string]string{"command": command})
	go func() {
		out <- r.toolset.Execute(ctx, tools.CallContext{
			SessionKey: "slack:T1/C1/1700000000.000100", JobID: "job_7", WorkItemID: "wi_7", Workspace: r.f.ws,
		}, tools.Bash, in)
	}()
	return out
}

func (r *approvalRig) pending(t *testing.T) bot.Approval {
	t.Helper()
	var got []bot.Approval
	require.Eventually(t, func() bool {
		got, _ = r.approvals.List(context.Background(), false)
		return len(got) == 1
	}, 10*time.Second, 5*time.Millisecond)
	return got[0]
}

func TestApprovalPausesTheCallUntilAnApproverDecides(t *testing.T) {
	ctx := context.Background()
	r := newApprovalRig(t, time.Minute)
	done := r.execute(ctx, "kubectl apply -f app.yaml --token="+configuredSecret)

	p := r.pending(t)
	require.Equal(t, bot.ApprovalPending, p.Status)
	require.Equal(t, "slack:T1/C1/1700000000.000100", p.SessionKey, "the thread the call came from is asked")
	require.Equal(t, []string{"alice", "Bob"}, p.Approvers)
	require.Equal(t, "deployer", p.Profile)
	require.Equal(t, "wi_7", p.WorkItemID)
	require.NotContains(t, p.Arguments, configuredSecret)
	require.Contains(t, p.Reason, "kubectl")
	require.WithinDuration(t, p.CreatedAt.Add(time.Minute), p.ExpiresAt, time.Second)
	require.Eventually(t, func() bool {
		r.notifier.mu.Lock()
		defer r.notifier.mu.Unlock()
		return len(r.notifier.requested) == 1
	}, 10*time.Second, 5*time.Millisecond)
	require.Empty(t, r.bash.commands(), "nothing runs before the decision")

	_, err := r.approvals.Grant(ctx, p.ID, "mallory")
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err))
	require.EqualError(t, err, `mallory may not decide approval "`+p.ID+`": calls of profile "deployer" are decided by alice, Bob`)
	_, err = r.approvals.Grant(ctx, p.ID, "")
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	_, err = r.approvals.Grant(ctx, "ap_missing", "alice")
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err))

	decided, err := r.approvals.Grant(ctx, p.ID, "bob")
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalApproved, decided.Status)
	require.Equal(t, "bob", decided.DecidedBy)

	res := <-done
	require.False(t, res.IsError, res.Output)
	require.Len(t, r.bash.commands(), 1)

	_, err = r.approvals.Reject(ctx, p.ID, "alice")
	require.Equal(t, bot.ECONFLICT, bot.ErrorCode(err))
	require.ErrorContains(t, err, "already approved by bob")

	got, err := r.approvals.Get(context.Background(), p.ID)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalApproved, got.Status)
	all, err := r.approvals.List(context.Background(), true)
	require.NoError(t, err)
	require.Len(t, all, 1)
	pending, err := r.approvals.List(context.Background(), false)
	require.NoError(t, err)
	require.Empty(t, pending)

	require.Eventually(t, func() bool {
		a, ok := r.notifier.lastResolved()
		return ok && a.Status == bot.ApprovalApproved
	}, 10*time.Second, 5*time.Millisecond)
	recs, _, err := r.auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditApproved})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "bob", recs[0].By)
	require.Equal(t, p.ID, recs[0].ApprovalID)
	require.NotContains(t, recs[0].Arguments, configuredSecret)
	asked, _, err := r.auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditNeedsApproval})
	require.NoError(t, err)
	require.Len(t, asked, 1)
	strangers, _, err := r.auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditNotApprover})
	require.NoError(t, err)
	require.Len(t, strangers, 1, "a stranger's attempt is on the record")
	require.Equal(t, "mallory", strangers[0].By)
	require.Equal(t, p.ID, strangers[0].ApprovalID)
}

// A decision is the authenticated identity's: a request that claims to be
// someone else changes nothing and is on the record.
func TestApprovalRefusesAClaimedIdentity(t *testing.T) {
	ctx := context.Background()
	r := newApprovalRig(t, time.Minute)
	done := r.execute(ctx, "kubectl apply -f app.yaml")
	p := r.pending(t)

	_, err := r.approvals.Decide(ctx, policy.ApprovalDecision{ID: p.ID, Approve: true, By: "admin", Claimed: "alice"})
	require.Equal(t, bot.EFORBIDDEN, bot.ErrorCode(err))
	require.EqualError(t, err, `you are authenticated as "admin" and cannot decide approval "`+p.ID+`" as "alice": leave out by, or use alice's own token`)
	got, err := r.approvals.Get(context.Background(), p.ID)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalPending, got.Status, "nothing changed")
	recs, _, err := r.auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditWrongIdentity})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "admin", recs[0].By)
	require.Equal(t, p.ID, recs[0].ApprovalID)
	require.Contains(t, recs[0].Reason, `asked to decide as "alice"`)

	// Claiming one's own name, in any case, is fine.
	_, err = r.approvals.Decide(ctx, policy.ApprovalDecision{ID: p.ID, Approve: true, By: "alice", Claimed: "Alice"})
	require.NoError(t, err)
	require.False(t, (<-done).IsError)
}

// decidingTool is a tool that tries to approve a pending call while it runs,
// as an agent that found its way to the approvals would.
type decidingTool struct {
	approvals *policy.Approvals
	id        string
	detach    bool // decide with a context that outlives the call
}

func (d *decidingTool) Info() tools.Info {
	info := declares("approve_it", tools.KindIntegration, policy.PermAdmin)
	info.Schema = json.RawMessage(`{"type":"object"}`)
	return info
}

func (d *decidingTool) Run(ctx context.Context, _ tools.CallContext, _ json.RawMessage) (string, error) {
	if d.detach {
		ctx = context.WithoutCancel(ctx)
	}
	_, err := d.approvals.Decide(ctx, policy.ApprovalDecision{ID: d.id, Approve: true, By: "alice"})
	return "", err
}

// No agent's run decides an approval, another's or its own, even naming an
// approver: a decision asked for from inside a tool call is refused.
func TestNoRunDecidesAnApproval(t *testing.T) {
	ctx := context.Background()
	r := newApprovalRig(t, time.Minute)
	done := r.execute(ctx, "kubectl apply -f app.yaml")
	p := r.pending(t)

	for _, detach := range []bool{false, true} {
		reg, err := tools.NewRegistry(&decidingTool{approvals: r.approvals, id: p.ID, detach: detach})
		require.NoError(t, err)
		other := tools.NewToolset(reg, tools.Scope{Agent: "sneaky"}, tools.ToolsetOptions{})
		res := other.Execute(ctx, tools.CallContext{JobID: "job_8", SessionKey: "local:other"}, "approve_it", nil)
		require.True(t, res.IsError)
		require.Contains(t, res.Output, "cannot be decided from inside an agent's run")
	}
	got, err := r.approvals.Get(context.Background(), p.ID)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalPending, got.Status)
	require.Empty(t, r.bash.commands(), "the call still waits")
	recs, _, err := r.auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditFromRun})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, "agent sneaky", recs[0].By)
	require.Contains(t, recs[0].Reason, "job_8")

	_, err = r.approvals.Grant(ctx, p.ID, "alice")
	require.NoError(t, err, "a person still can")
	require.False(t, (<-done).IsError)
}

func TestRejectedApprovalRefusesTheCall(t *testing.T) {
	ctx := context.Background()
	r := newApprovalRig(t, time.Minute)
	done := r.execute(ctx, "kubectl apply -f app.yaml")
	p := r.pending(t)
	_, err := r.approvals.Reject(ctx, p.ID, "ALICE")
	require.NoError(t, err)
	res := <-done
	require.True(t, res.Refused)
	require.Contains(t, res.Output, "approval denied")
	require.Empty(t, r.bash.commands())
	recs, _, err := r.auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditRejected})
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

func TestApprovalTimesOutAsADenial(t *testing.T) {
	ctx := context.Background()
	r := newApprovalRig(t, 50*time.Millisecond)
	res := <-r.execute(ctx, "kubectl apply -f app.yaml")
	require.True(t, res.Refused)
	require.Contains(t, res.Output, "nobody approved it in time")
	require.Empty(t, r.bash.commands())
	recs, _, err := r.auditor.List(ctx, policy.AuditFilter{Decision: policy.AuditExpired})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	a, ok := r.notifier.lastResolved()
	require.True(t, ok)
	require.Equal(t, bot.ApprovalExpired, a.Status)

	_, err = r.approvals.Grant(ctx, a.ID, "alice")
	require.Equal(t, bot.ECONFLICT, bot.ErrorCode(err))
}

func TestApprovalEndsWithItsRun(t *testing.T) {
	r := newApprovalRig(t, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	done := r.execute(ctx, "kubectl apply -f app.yaml")
	p := r.pending(t)
	cancel()
	res := <-done
	require.True(t, res.Refused)
	got, err := r.approvals.Get(context.Background(), p.ID)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalCancelled, got.Status)
	recs, _, err := r.auditor.List(context.Background(), policy.AuditFilter{Decision: policy.AuditCancelled})
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

func TestAnyoneMayApproveWhenTheProfileSaysSo(t *testing.T) {
	cfg := map[string]policy.ProfileConfig{"open": {Extends: "ops", Approval: []string{"bash"}, Approvers: []string{policy.AnyApprover}}}
	f := newFixture(t, cfg)
	_, store := openAudit(t)
	a, err := policy.NewApprovals(policy.ApprovalOptions{Store: store, Approvers: f.engine})
	require.NoError(t, err)
	d := f.bash(t, "open", "ls")
	require.Equal(t, tools.NeedsApproval, d.Verdict, "approval of a tool covers every call of it")

	result := make(chan bool, 1)
	go func() {
		ok, _ := a.Approve(context.Background(), f.call("ops", "open", coreInfo("bash"), map[string]string{"command": "ls"}), d.Reason)
		result <- ok
	}()
	var id string
	require.Eventually(t, func() bool {
		l, _ := a.List(context.Background(), false)
		if len(l) == 1 {
			id = l[0].ID
		}
		return id != ""
	}, 10*time.Second, 5*time.Millisecond)
	l, err := a.List(context.Background(), false)
	require.NoError(t, err)
	require.Equal(t, "[withheld: no redactor configured]", l[0].Arguments)
	_, err = a.Grant(context.Background(), id, "whoever")
	require.NoError(t, err)
	require.True(t, <-result)

	_, err = policy.NewApprovals(policy.ApprovalOptions{})
	require.Error(t, err)
}

// process is one daemon's Approvals over a shared store, as after a
// restart or on another replica.
func newProcess(t *testing.T, store policy.ApprovalStore, e *policy.Engine, n policy.Notifier) *policy.Approvals {
	t.Helper()
	a, err := policy.NewApprovals(policy.ApprovalOptions{Store: store, Approvers: e, Notifier: n, Timeout: time.Minute, Poll: time.Hour})
	require.NoError(t, err)
	return a
}

func deployCall(f *fixture) tools.Call {
	return f.call("ops", "deployer", coreInfo("bash"), map[string]string{"command": "kubectl apply -f app.yaml"})
}

// A pending approval outlives the run that asked when its job is handed
// back (shutdown): the run that resumes the job in the next process waits
// on the same approval, without asking the thread again, and a decision
// made there lets it go on.
func TestPendingApprovalSurvivesARestart(t *testing.T) {
	cfg := map[string]policy.ProfileConfig{"deployer": {Extends: "ops", Approval: []string{"kubectl apply"}, Approvers: []string{"alice"}}}
	f := newFixture(t, cfg)
	_, store := openAudit(t)
	n := &threadNotifier{}
	first := newProcess(t, store, f.engine, n)

	ctx, stop := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := first.Approve(ctx, deployCall(f), "deploys need a person")
		done <- err
	}()
	var id string
	require.Eventually(t, func() bool {
		l, err := first.List(context.Background(), false)
		if err == nil && len(l) == 1 {
			id = l[0].ID
		}
		return id != ""
	}, 10*time.Second, 5*time.Millisecond)
	stop(bot.ErrShutdown)
	require.ErrorIs(t, <-done, context.Canceled)
	got, err := first.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, bot.ApprovalPending, got.Status, "shutdown leaves the approval for the next run")

	second := newProcess(t, store, f.engine, n)
	result := make(chan bool, 1)
	go func() {
		ok, _ := second.Approve(context.Background(), deployCall(f), "deploys need a person")
		result <- ok
	}()
	// The buttons of the first request decide it.
	require.Eventually(t, func() bool {
		_, err := second.Grant(context.Background(), id, "alice")
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	require.True(t, <-result)
	n.mu.Lock()
	defer n.mu.Unlock()
	require.Len(t, n.requested, 1, "the thread was asked once")
	list, err := second.List(context.Background(), true)
	require.NoError(t, err)
	require.Len(t, list, 1, "one approval, not a second one")
}

// A decision made while no run waits (the daemon was down, or the job
// waits for a worker) is what the resumed run finds, once.
func TestApprovalDecidedWhileNoRunWaits(t *testing.T) {
	cfg := map[string]policy.ProfileConfig{"deployer": {Extends: "ops", Approval: []string{"kubectl apply"}, Approvers: []string{"alice"}}}
	f := newFixture(t, cfg)
	_, store := openAudit(t)
	first := newProcess(t, store, f.engine, nil)
	ctx, stop := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	go func() {
		_, _ = first.Approve(ctx, deployCall(f), "deploys need a person")
		close(done)
	}()
	var id string
	require.Eventually(t, func() bool {
		l, err := first.List(context.Background(), false)
		if err == nil && len(l) == 1 {
			id = l[0].ID
		}
		return id != ""
	}, 10*time.Second, 5*time.Millisecond)
	stop(bot.ErrShutdown)
	<-done

	second := newProcess(t, store, f.engine, nil)
	_, err := second.Reject(context.Background(), id, "alice")
	require.NoError(t, err)
	ok, err := second.Approve(context.Background(), deployCall(f), "deploys need a person")
	require.NoError(t, err)
	require.False(t, ok, "the resumed run is told no")
	got, err := second.Get(context.Background(), id)
	require.NoError(t, err)
	require.True(t, got.Taken)

	// The next identical call is a new question.
	ctx2, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = second.Approve(ctx2, deployCall(f), "deploys need a person") }()
	require.Eventually(t, func() bool {
		l, err := second.List(context.Background(), false)
		return err == nil && len(l) == 1 && l[0].ID != id
	}, 10*time.Second, 5*time.Millisecond)
}

// Replicas: a decision made through one process wakes the run waiting in
// another at once (its Decided hook tells the other's Changed), not at its
// next poll.
func TestApprovalDecidedOnAnotherReplica(t *testing.T) {
	cfg := map[string]policy.ProfileConfig{"deployer": {Extends: "ops", Approval: []string{"kubectl apply"}, Approvers: []string{"alice"}}}
	f := newFixture(t, cfg)
	_, store := openAudit(t)
	a := newProcess(t, store, f.engine, nil)
	b, err := policy.NewApprovals(policy.ApprovalOptions{Store: store, Approvers: f.engine, Timeout: time.Minute, Poll: time.Hour,
		Decided: a.Changed})
	require.NoError(t, err)

	result := make(chan bool, 1)
	go func() {
		ok, _ := a.Approve(context.Background(), deployCall(f), "deploys need a person")
		result <- ok
	}()
	var id string
	require.Eventually(t, func() bool {
		l, err := b.List(context.Background(), false)
		if err == nil && len(l) == 1 {
			id = l[0].ID
		}
		return id != ""
	}, 10*time.Second, 5*time.Millisecond)
	_, err = b.Grant(context.Background(), id, "alice")
	require.NoError(t, err)
	select {
	case ok := <-result:
		require.True(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("the run on the other replica was not woken")
	}
}

// keepingNotifier is a thread whose first requests are lost (the asking
// process died after storing its approval, or the outbox refused it), and
// which records what a resuming run makes sure of.
type keepingNotifier struct {
	threadNotifier
	lose int // requests lost before one is made
	kept []bot.Approval
}

func (n *keepingNotifier) ApprovalRequested(ctx context.Context, a bot.Approval) error {
	n.mu.Lock()
	lost := n.lose > 0
	if lost {
		n.lose--
	}
	n.mu.Unlock()
	if lost {
		return errors.New("the process died before asking")
	}
	return n.threadNotifier.ApprovalRequested(ctx, a)
}

func (n *keepingNotifier) KeepApprovalRequested(_ context.Context, a bot.Approval) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.kept = append(n.kept, a)
	return nil
}

// A request the asking process never made (it died between storing the
// approval and asking the thread) is made when a run resumes its wait on
// that approval, rather than leaving the thread without a question.
func TestARequestNeverMadeIsMadeWhenTheRunResumes(t *testing.T) {
	cfg := map[string]policy.ProfileConfig{"deployer": {Extends: "ops", Approval: []string{"kubectl apply"}, Approvers: []string{"alice"}}}
	f := newFixture(t, cfg)
	_, store := openAudit(t)
	n := &keepingNotifier{lose: 1}
	first := newProcess(t, store, f.engine, n)
	ctx, stop := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := first.Approve(ctx, deployCall(f), "deploys need a person")
		done <- err
	}()
	var id string
	require.Eventually(t, func() bool {
		l, err := first.List(context.Background(), false)
		if err == nil && len(l) == 1 {
			id = l[0].ID
		}
		return id != ""
	}, 10*time.Second, 5*time.Millisecond)
	stop(bot.ErrShutdown)
	<-done

	second := newProcess(t, store, f.engine, n)
	result := make(chan bool, 1)
	go func() {
		ok, _ := second.Approve(context.Background(), deployCall(f), "deploys need a person")
		result <- ok
	}()
	require.Eventually(t, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.kept) == 1
	}, 10*time.Second, 5*time.Millisecond, "the resumed run makes sure the thread is asked")
	n.mu.Lock()
	require.Equal(t, id, n.kept[0].ID)
	require.Equal(t, bot.ApprovalPending, n.kept[0].Status)
	require.Empty(t, n.requested, "no request made twice")
	n.mu.Unlock()
	_, err := second.Grant(context.Background(), id, "alice")
	require.NoError(t, err)
	require.True(t, <-result)
}
