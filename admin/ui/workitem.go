package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/bot"
)

// The detail of one work item belongs to the work items page, which
// mounts its routes.

// maxTreeDepth bounds the walk from a work item up to the root of its
// tree: parent links are written by runs, each below the one before.
const maxTreeDepth = 64

// workItemView is the detail page of a work item.
type workItemView struct {
	WI        bot.WorkItem
	Requester string
	// Root is the work item leading the tree this one belongs to (itself
	// when top-level); Spend what the tree spent.
	Root  string
	Spend bot.Spend
	Jobs  []bot.Job
	// Status is the living status message of the work item, as the
	// thread shows it; Reply its final answer.
	Status, Reply string
	// Run is the ledger record a subagent's work item runs for.
	Run  *bot.ChildRun
	Tree []admin.RunNode
	// Tasks are the background tasks its jobs started, newest first.
	Tasks []bot.BackgroundTask
	// Transcripts are the runs' conversations, masked when they were
	// stored.
	Transcripts []transcriptView
	// Agents are those it can be re-routed to.
	Agents     []string
	CanCancel  bool
	CanReroute bool
	// Done says what an action just did.
	Done string
}

// transcriptView is one run's conversation.
type transcriptView struct {
	JobID, RunID, Agent, Model string
	Messages                   []messageView
	Response                   agents.AgentResponse
}

type messageView struct {
	Role, Text string
	Calls      []string // "name {input}"
	IsError    bool
}

// workItem shows one work item.
func (u *UI) workItem(w http.ResponseWriter, r *http.Request) {
	v, err := u.workItemDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	v.Done = r.URL.Query().Get("done")
	u.render(w, r, "workitem.html", v)
}

// workItemLive is the part of the detail that changes while the work
// item runs: status, jobs, the run tree, the spending.
func (u *UI) workItemLive(w http.ResponseWriter, r *http.Request) {
	v, err := u.workItemDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.fragment(w, r, "workitem.html", "live", v)
}

func (u *UI) workItemDetail(ctx context.Context, id string) (workItemView, error) {
	store := u.opts.Admin.Store
	wi, err := store.GetWorkItem(ctx, id)
	if err != nil {
		return workItemView{}, err
	}
	v := workItemView{WI: *wi, Root: wi.ID}
	if !wi.Requester.IsZero() {
		v.Requester = wi.Requester.Source + ":" + wi.Requester.ID
	}
	if v.Jobs, err = store.ListJobs(ctx, wi.ID); err != nil {
		return v, err
	}
	for parent, depth := wi.ParentID, 0; parent != "" && depth < maxTreeDepth; depth++ {
		p, err := store.GetWorkItem(ctx, parent)
		if err != nil {
			return v, err
		}
		v.Root, parent = p.ID, p.ParentID
	}
	if u.opts.Records != nil {
		spent, err := u.opts.Records.Spent(ctx, []string{bot.TreeBudgetKey(v.Root)})
		if err != nil {
			return v, err
		}
		v.Spend = spent[0]
		msgs, err := u.opts.Records.ListOutbox(ctx, wi.Thread.Key())
		if err != nil {
			return v, err
		}
		for _, m := range msgs {
			if m.WorkItemID != wi.ID {
				continue
			}
			switch m.Kind {
			case bot.OutboxStatus:
				v.Status = m.Text
			case bot.OutboxReply:
				v.Reply = m.Text
			}
		}
		for _, j := range v.Jobs {
			tasks, _, err := u.opts.Records.ListTasks(ctx, bot.TaskFilter{CreatorJobID: j.ID, Limit: bot.MaxListLimit})
			if err != nil {
				return v, err
			}
			v.Tasks = append(v.Tasks, tasks...)
			docs, err := u.opts.Records.ListTranscripts(ctx, j.ID)
			if err != nil {
				return v, err
			}
			for _, doc := range docs {
				t, err := transcriptOf(doc)
				if err != nil {
					return v, err
				}
				v.Transcripts = append(v.Transcripts, t)
			}
		}
	}
	if runs := u.opts.Admin.Runs; runs != nil {
		if v.Tree, err = admin.RunTree(ctx, runs, wi.ID); err != nil {
			return v, err
		}
		if wi.IsChild() {
			run, err := runs.RunOfWorkItem(ctx, wi.ID)
			switch {
			case err == nil:
				v.Run = run
			case bot.ErrorCode(err) != bot.ENOTFOUND:
				return v, err
			}
		}
	}
	v.CanCancel = u.opts.Admin.Canceller != nil && !wi.Status.Finished() && (v.Run == nil || v.Run.Status.Open())
	if rt := u.opts.Admin.Routing; rt != nil && u.opts.Rerouter != nil && !wi.IsChild() {
		for _, a := range rt.Routing().Agents() {
			if a != wi.Route.Agent {
				v.Agents = append(v.Agents, a)
			}
		}
		v.CanReroute = wi.Status != bot.StatusRunning && len(wi.Hops) < bot.MaxHops && len(v.Agents) > 0
	}
	return v, nil
}

// transcriptOf reads a stored transcript for the page.
func transcriptOf(doc []byte) (transcriptView, error) {
	var t agents.Transcript
	if err := json.Unmarshal(doc, &t); err != nil {
		return transcriptView{}, fmt.Errorf("decode a transcript: %w", err)
	}
	out := transcriptView{JobID: t.JobID, RunID: t.RunID, Agent: t.Agent, Model: t.Model, Response: t.Response}
	for _, m := range t.Messages {
		mv := messageView{Role: string(m.Role), Text: m.Content, IsError: m.IsError}
		for _, c := range m.ToolCalls {
			mv.Calls = append(mv.Calls, c.Name+" "+string(c.Input))
		}
		out.Messages = append(out.Messages, mv)
	}
	return out, nil
}

// cancelWorkItem cancels a queued or running work item as the signed-in
// person (a subagent's through the ledger), with the reason they gave.
func (u *UI) cancelWorkItem(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if u.opts.Admin.Canceller == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "this daemon cannot cancel work items"))
		return
	}
	who := identity(r)
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	// The canceller audits it as who, as it does a cancel through the API.
	if _, err := u.opts.Admin.Canceller.CancelWorkItem(r.Context(), id, reason, who); err != nil {
		u.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/workitems/"+url.PathEscape(id)+"?done=cancelled", http.StatusSeeOther)
}

// rerouteWorkItem hands a work item that is not running to another agent,
// as an agent's handoff does, and audits it.
func (u *UI) rerouteWorkItem(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if u.opts.Rerouter == nil || u.opts.Admin.Routing == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "this daemon cannot re-route work items"))
		return
	}
	to := strings.TrimPrefix(strings.TrimSpace(r.PostFormValue("agent")), "@")
	if !slices.Contains(u.opts.Admin.Routing.Routing().Agents(), to) {
		u.fail(w, r, bot.Errorf(bot.EINVALID, "agent %q: no such agent", to))
		return
	}
	wi, err := u.opts.Admin.Store.GetWorkItem(r.Context(), id)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	switch {
	case wi.IsChild():
		u.fail(w, r, bot.Errorf(bot.ECONFLICT, "%s is a subagent's work item: its parent run decides where it goes", id))
		return
	case wi.Status == bot.StatusRunning:
		u.fail(w, r, bot.Errorf(bot.ECONFLICT, "%s is running: re-route it once it has finished", id))
		return
	}
	who := identity(r)
	reason := "re-routed in the admin UI by " + who
	if why := strings.TrimSpace(r.PostFormValue("reason")); why != "" {
		reason += ": " + why
	}
	if _, err := u.opts.Rerouter.RerouteWorkItem(r.Context(), id, bot.Hop{To: to, Reason: reason}); err != nil {
		u.fail(w, r, err)
		return
	}
	if err := u.audit(r, Change{Action: "workitem.reroute", WorkItemID: id,
		Detail: map[string]string{"from": wi.Route.Agent, "to": to, "reason": reason}}); err != nil {
		u.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/workitems/"+url.PathEscape(id)+"?done=rerouted", http.StatusSeeOther)
}
