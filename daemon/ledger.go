package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// runsDesk is the ledger of runs for the admin API: reads from the store,
// waits and cancels through the daemon's subagents, so a waiting parent is
// woken and a running child stopped.
type runsDesk struct{ d *Daemon }

func (r runsDesk) ListRuns(ctx context.Context, f bot.RunFilter) ([]bot.ChildRun, string, error) {
	return r.d.store.ListRuns(ctx, f)
}

func (r runsDesk) GetRun(ctx context.Context, id string) (*bot.ChildRun, error) {
	return r.d.store.GetRun(ctx, id)
}

func (r runsDesk) RunOfWorkItem(ctx context.Context, workItemID string) (*bot.ChildRun, error) {
	return r.d.store.RunOfWorkItem(ctx, workItemID)
}

func (r runsDesk) AwaitRun(ctx context.Context, id string, timeout time.Duration) (*bot.ChildRun, error) {
	return r.d.subagents.Await(ctx, id, timeout)
}

// CancelRun cancels a record with the work it stands for: a subagent's
// run is stopped; a handoff's work item, which the agent it went to works
// on, is cancelled first and the record takes its receipt; an agent called
// as a tool ends with its caller's call, so it is refused with where to
// cancel instead. No record says cancelled beside work that goes on.
func (r runsDesk) CancelRun(ctx context.Context, id, reason, by string) (*bot.ChildRun, error) {
	rec, err := r.d.store.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Status.Open() {
		switch rec.Kind {
		case bot.RunAgentCall:
			return nil, bot.Errorf(bot.ECONFLICT, "%s is @%s called as a tool inside the run of %s, and ends with that call; "+
				"cancel %s to stop it", id, rec.Agent, rec.ParentLinks.WorkItemID, rec.ParentLinks.WorkItemID)
		case bot.RunHandoff:
			if _, err := canceller(r).CancelWorkItem(ctx, rec.ChildWorkItemID, reason, by); err != nil {
				return nil, fmt.Errorf("cancel %s, the work item %s handed on: %w", id, rec.ChildWorkItemID, err)
			}
			return r.d.subagents.CancelHandoff(ctx, rec, reason, by)
		}
	}
	return r.d.subagents.Cancel(ctx, id, reason, by)
}

// rerouter hands work items to another agent for the admin UI, as an
// agent's handoff does, and tells every replica's workers there is work.
type rerouter struct{ d *Daemon }

func (r rerouter) RerouteWorkItem(ctx context.Context, id string, hop bot.Hop) (*bot.WorkItem, error) {
	wi, err := r.d.store.RerouteWorkItem(ctx, id, hop)
	if err != nil {
		return nil, err
	}
	r.d.notify(bot.TopicWork, "")
	return wi, nil
}

// canceller cancels work items for the admin API and UI. A subagent's goes
// through the ledger, as its parent's cancel does; any other is cancelled
// in the store, and its run, when it runs, is stopped where it runs: here
// at once, on another replica when the notification reaches it, and at the
// job's next lease renewal (a third of the lease) when it does not.
type canceller struct{ d *Daemon }

func (c canceller) CancelWorkItem(ctx context.Context, id, reason, by string) (*bot.WorkItem, error) {
	d := c.d
	run, err := d.store.RunOfWorkItem(ctx, id)
	switch {
	case err == nil && run.Kind == bot.RunSubagent:
		why := reason
		if why == "" {
			why = "cancelled by " + by
		}
		if _, err := d.subagents.Cancel(ctx, run.ID, why, by); err != nil {
			return nil, err
		}
		return d.store.GetWorkItem(ctx, id)
	case err != nil && bot.ErrorCode(err) != bot.ENOTFOUND:
		return nil, err
	}
	wi, job, err := d.store.CancelWorkItem(ctx, id, bot.Cancelled{By: by, Reason: reason, At: d.clock.Now()})
	if err != nil {
		return nil, err
	}
	if job != nil && !d.dispatcher.CheckJob(job.ID) {
		d.notify(bot.TopicCancel, job.ID)
	}
	return wi, c.audit(ctx, wi, reason, by)
}

// audit records a cancel as a change made by by, whichever way it came
// (the API, the CLI or the admin UI). The cancel stands whatever the audit
// log answers; a record that cannot be written is the request's error.
func (c canceller) audit(ctx context.Context, wi *bot.WorkItem, reason, by string) error {
	detail := map[string]string{"status": string(wi.Status)}
	if reason != "" {
		detail["reason"] = reason
	}
	args, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode the audit record of a cancel: %w", err)
	}
	rec := policy.AuditRecord{Decision: policy.AuditChange, Tool: "workitem.cancel", Arguments: string(args), WorkItemID: wi.ID, By: by}
	if err := c.d.audit.Record(ctx, rec); err != nil {
		return fmt.Errorf("%s was cancelled, but its audit record could not be written: %w", wi.ID, err)
	}
	return nil
}

// runCancelled closes what the run of a cancelled job left open in its
// thread: its subagents are cancelled and its background tasks stopped,
// each with a receipt.
func (d *Daemon) runCancelled(ctx context.Context, job *bot.Job, c *bot.Cancelled) {
	if _, err := d.closeOwned(ctx, job.Thread.Key(), "the run that started it was "+c.Error(), c.By, false); err != nil {
		d.log.Error("close what a cancelled run left open", slog.String("job", job.ID), slog.String("error", err.Error()))
	}
}

// closeOwned cancels, stops or (with archive) archives everything
// sessionKey owns, with a receipt per record: subagents, then background
// tasks.
func (d *Daemon) closeOwned(ctx context.Context, sessionKey, reason, by string, archive bool) ([]bot.Receipt, error) {
	runs, err := d.subagents.CloseOwned(ctx, sessionKey, reason, by, archive)
	if err != nil {
		return runs, fmt.Errorf("close the runs of %s: %w", sessionKey, err)
	}
	tasks, err := d.background.CloseOwned(ctx, sessionKey, reason, by, archive)
	if err != nil {
		return append(runs, tasks...), fmt.Errorf("stop the background tasks of %s: %w", sessionKey, err)
	}
	return append(runs, tasks...), nil
}

// threadResetter resets a thread for the API and Slack: everything it owns
// is cancelled, stopped or archived with receipts, its agents' conversations
// are forgotten, and nothing from before is carried over into its next run.
type threadResetter struct{ d *Daemon }

func (r threadResetter) ResetThread(ctx context.Context, sessionKey, by string) (admin.ResetResult, error) {
	d := r.d
	res := admin.ResetResult{Thread: sessionKey}
	if err := d.store.MarkThreadReset(ctx, sessionKey, d.clock.Now()); err != nil {
		return res, fmt.Errorf("reset %s: %w", sessionKey, err)
	}
	receipts, err := d.closeOwned(ctx, sessionKey, "the thread was reset by "+by, by, true)
	res.Receipts = receipts
	if err != nil {
		return res, err
	}
	if res.Cleared, err = d.store.ResetConversations(ctx, sessionKey); err != nil {
		return res, fmt.Errorf("reset conversations of %s: %w", sessionKey, err)
	}
	d.log.Info("thread reset", "thread", sessionKey, "by", by, "conversations", res.Cleared, "receipts", len(res.Receipts))
	return res, nil
}

// slackResetter resets a thread for /switchyard reset.
type slackResetter struct{ d *Daemon }

func (r slackResetter) ResetThread(ctx context.Context, sessionKey, by string) ([]bot.Receipt, error) {
	res, err := threadResetter(r).ResetThread(ctx, sessionKey, "slack:"+by)
	return res.Receipts, err
}

// workspaces deletes threads' workspaces for the API.
type workspaces struct{ d *Daemon }

// DeleteWorkspace deletes the workspace of sessionKey. Work of the thread
// still queued or running refuses it whatever force says (a run works in
// it); records the thread owns that are open refuse it unless force, which
// closes them with receipts first.
func (w workspaces) DeleteWorkspace(ctx context.Context, sessionKey string, force bool, by string) (admin.WorkspaceDeletion, error) {
	d := w.d
	name := tools.WorkspaceName(sessionKey)
	res := admin.WorkspaceDeletion{Thread: sessionKey, Workspace: name, Receipts: []bot.Receipt{}}
	if busy, err := d.unfinishedWork(ctx, sessionKey); err != nil {
		return res, err
	} else if len(busy) > 0 {
		return res, bot.Errorf(bot.ECONFLICT, "the workspace of %s is in use: %s still %s; wait for %s to finish",
			sessionKey, strings.Join(busy, ", "), verb(len(busy), "runs", "run"), pronoun(len(busy)))
	}
	open, err := d.openOwned(ctx, sessionKey)
	if err != nil {
		return res, err
	}
	if len(open) > 0 && !force {
		return res, bot.Errorf(bot.ECONFLICT, "the workspace of %s has %s open (%s): stop them first, or delete with --force, which closes them with receipts",
			sessionKey, bot.Count(len(open), "record", "records"), strings.Join(open, ", "))
	}
	if len(open) > 0 {
		receipts, err := d.closeOwned(ctx, sessionKey, "its workspace was deleted (forced) by "+by, by, false)
		res.Receipts = append(res.Receipts, receipts...)
		if err != nil {
			return res, err
		}
	}
	dir := filepath.Join(d.cfg.DataDir, "workspaces", name)
	switch _, err := os.Lstat(dir); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return res, fmt.Errorf("workspace of %s: %w", sessionKey, err)
	default:
		if err := os.RemoveAll(dir); err != nil {
			return res, fmt.Errorf("delete the workspace of %s: %w", sessionKey, err)
		}
		res.Deleted = true
	}
	d.log.Info("workspace deleted", "thread", sessionKey, "workspace", name, "by", by, "forced", force, "receipts", len(res.Receipts))
	return res, nil
}

// unfinishedWork names the thread's work items, its subagents' aside, that
// are queued or running.
func (d *Daemon) unfinishedWork(ctx context.Context, sessionKey string) ([]string, error) {
	var out []string
	f := bot.WorkItemFilter{Thread: sessionKey, Limit: 1000}
	for {
		items, next, err := d.store.ListWorkItems(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, wi := range items {
			if !wi.IsChild() && !wi.Status.Finished() {
				out = append(out, wi.ID)
			}
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}

// openOwned names the records sessionKey owns that are still open.
func (d *Daemon) openOwned(ctx context.Context, sessionKey string) ([]string, error) {
	var out []string
	rs, _, err := d.store.ListRuns(ctx, bot.RunFilter{OwnerSessionKey: sessionKey, Open: true, Limit: 1000})
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %s", r.ID, strings.ReplaceAll(string(r.Kind), "_", " "), r.Status))
	}
	ts, _, err := d.store.ListTasks(ctx, bot.TaskFilter{OwnerSessionKey: sessionKey, Open: true, Limit: 1000})
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%s background task %s", t.ID, t.Status))
	}
	return out, nil
}

func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
