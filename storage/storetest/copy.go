package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/storage/dump"
)

// CopyStore is every store interface with the skill store: what storage
// copy moves.
type CopyStore interface {
	Store
	skills.Store
}

// CopySource is a store storage copy reads.
type CopySource interface {
	CopyStore
	dump.Source
}

// CopyDestination is a store storage copy loads into.
type CopyDestination interface {
	CopyStore
	dump.Destination
}

// RunCopy fills from, through the store interfaces, with every kind of
// record the stores keep; copies it into to, which holds nothing, with
// dump.Copy; and checks that every read answers the same on both, that
// ids to gives out afterwards follow on from from's, that a redelivery is
// still a duplicate, and that copying into to again is refused.
func RunCopy(t *testing.T, from CopySource, to CopyDestination) {
	ctx := t.Context()
	threads := fill(t, ctx, from)

	counts, err := dump.Copy(ctx, from, to)
	require.NoError(t, err)
	for _, k := range []dump.Kind{
		dump.KindEvent, dump.KindDedup, dump.KindDelivery, dump.KindIngress, dump.KindWorkItem, dump.KindDispatch,
		dump.KindJob, dump.KindOutbox, dump.KindSchedule, dump.KindAudit, dump.KindConversation, dump.KindTranscript,
		dump.KindInstallation, dump.KindPackage, dump.KindSetting, dump.KindApproval, dump.KindRun, dump.KindRunChild,
		dump.KindTask, dump.KindReset, dump.KindBudget, dump.KindRunState, dump.KindRule,
	} {
		require.Positive(t, counts[k], "no %s copied: the fill writes some", k)
	}
	require.Equal(t, 14, counts[dump.KindWorkItem], "twelve messages' work items and two subagents'")

	want, got := snapshot(t, ctx, from, threads), snapshot(t, ctx, to, threads)
	require.Equal(t, want, got)

	// The ids either store gives out next are the same, and new.
	for name, s := range map[string]CopyStore{"source": from, "copy": to} {
		res, err := s.Ingest(ctx, bot.IngestRequest{
			Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "after-copy", Actor: "alice",
				Text: "after the copy", Thread: threads[0], ReceivedAt: at(time.Hour)},
			Route: &bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}, Now: at(time.Hour),
		})
		require.NoError(t, err, name)
		require.Equal(t, "wi_15", res.WorkItem.ID, "%s: the next work item follows the last one ever given (wi_13 and wi_14 were subagents')", name)
		require.Equal(t, "ev_14", res.WorkItem.EventRef, "%s: thirteen events came before", name)
		dup, err := s.Ingest(ctx, routed(bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "d-1",
			Actor: "alice", Text: "again", Thread: threads[0], ReceivedAt: epoch()}, "coder", at(time.Minute)))
		require.NoError(t, err, name)
		require.True(t, dup.Duplicate, "%s: a redelivery within the window is a duplicate of what the first made", name)
		require.Equal(t, "wi_1", dup.WorkItem.ID, name)
		// The running job still holds its thread: the next claim takes
		// the same work on both, under the next job id.
		c, err := s.ClaimNext(ctx, claimReq("w3", at(30*time.Minute)))
		require.NoError(t, err, name)
		require.NotNil(t, c.Job, name)
		require.Equal(t, "job_4", c.Job.ID, name)
		require.Equal(t, want.QueuedItems[len(want.QueuedItems)-1], c.Job.WorkItemIDs[0], "%s: the oldest queued work item of a free thread", name)
		r, err := s.CreateRule(ctx, storedRule("after-copy", 0, at(time.Hour)))
		require.NoError(t, err, name)
		require.Equal(t, "rule_4", r.ID, "%s: stored rules' ids go on after the last one given", name)
	}

	_, err = dump.Copy(ctx, from, to)
	require.Error(t, err, "a second copy into a store that holds records")
	require.Equal(t, bot.ECONFLICT, bot.ErrorCode(err), "error %q", err)
	require.Contains(t, err.Error(), "not empty")
}

// fill writes every kind of record and returns the threads it used.
func fill(t *testing.T, ctx context.Context, s CopyStore) []bot.Thread {
	t.Helper()
	threads := []bot.Thread{bot.LocalThread("copy-a"), bot.SlackThread("T1", "C1", "1700000000.000100"), bot.LocalThread("copy-c")}
	n := 0
	submit := func(th bot.Thread, text string, reaction string) bot.IngestResult {
		t.Helper()
		n++
		req := routed(bot.Event{
			Source: th.Source, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprintf("d-%d", n), Actor: "alice", Text: text,
			Thread: th, ReceivedAt: epoch(), Raw: []byte(fmt.Sprintf(`{"text":%q}`, text)), SourceRef: "1700000000.0001" + fmt.Sprint(n),
		}, "coder", at(time.Duration(n)*time.Second))
		req.Reaction = reaction
		res, err := s.Ingest(ctx, req)
		require.NoError(t, err)
		return res
	}
	var items []*bot.WorkItem
	for i := range 12 {
		reaction := ""
		if threads[i%3].Source == bot.SourceSlack {
			reaction = bot.ReactionSeen
		}
		items = append(items, submit(threads[i%3], fmt.Sprintf("task %d", i), reaction).WorkItem)
	}
	n++
	_, err := s.Ingest(ctx, ignored(bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: fmt.Sprintf("d-%d", n),
		Actor: "mallory", Text: "ignored", Thread: threads[0], ReceivedAt: epoch()}, "no_route", at(time.Minute)))
	require.NoError(t, err)

	// A finished job, one still running (its lease held), and a subagent
	// of the running one.
	c1, err := s.ClaimNext(ctx, claimReq("w1", at(2*time.Minute)))
	require.NoError(t, err)
	require.NotNil(t, c1.Job)
	require.NoError(t, s.FinishJob(ctx, bot.JobOutcome{JobID: c1.Job.ID, Owner: "w1", Now: at(3 * time.Minute), Success: true, Summary: "done"}))
	c2, err := s.ClaimNext(ctx, bot.ClaimRequest{Owner: "w2", Now: at(4 * time.Minute), Lease: 24 * time.Hour, MaxAttempts: 3})
	require.NoError(t, err)
	require.NotNil(t, c2.Job)
	parent := c2.WorkItems[0]
	spawned, err := s.SpawnChild(ctx, bot.SpawnRequest{
		Run: bot.ChildRun{
			Owner:          bot.Owner{SessionKey: parent.Thread.Key(), AgentID: parent.Route.Agent, SandboxName: "ws-1"},
			Creator:        bot.Creator{JobID: c2.Job.ID, DispatchID: c2.Job.DispatchIDs[0], WorkItemID: parent.ID},
			ParentLinks:    bot.ParentLinks{WorkItemID: parent.ID, JobID: c2.Job.ID, DispatchID: c2.Job.DispatchIDs[0]},
			RootWorkItemID: parent.ID, Agent: "reviewer", Task: "review", Depth: 1, CallID: "call_review",
		},
		Thread: parent.Thread, Requester: bot.Requester{Source: bot.SourceLocal, ID: "alice"}, Now: at(5 * time.Minute),
	})
	require.NoError(t, err)
	run := spawned.Run
	require.NotEmpty(t, run.ChildWorkItemID)
	// Another, spawned for a worker of the spawner's: its job, of one work
	// item, runs from the spawn.
	claim := bot.ClaimRequest{Owner: "w3", Now: at(5 * time.Minute), Lease: 24 * time.Hour, MaxAttempts: 3}
	claimed, err := s.SpawnChild(ctx, bot.SpawnRequest{
		Run: bot.ChildRun{
			Owner:          bot.Owner{SessionKey: parent.Thread.Key(), AgentID: parent.Route.Agent, SandboxName: "ws-1"},
			Creator:        bot.Creator{JobID: c2.Job.ID, DispatchID: c2.Job.DispatchIDs[0], WorkItemID: parent.ID},
			ParentLinks:    bot.ParentLinks{WorkItemID: parent.ID, JobID: c2.Job.ID, DispatchID: c2.Job.DispatchIDs[0]},
			RootWorkItemID: parent.ID, Agent: "tester", Task: "test", Depth: 1, CallID: "call_test",
		},
		Thread: parent.Thread, Requester: bot.Requester{Source: bot.SourceLocal, ID: "alice"}, Now: at(5 * time.Minute), Claim: &claim,
	})
	require.NoError(t, err)
	require.NotNil(t, claimed.Claim.Job)
	require.Equal(t, []string{claimed.Run.ChildWorkItemID}, claimed.Claim.Job.WorkItemIDs)
	_, err = s.AddTask(ctx, bot.BackgroundTask{
		Owner: run.Owner, Creator: run.Creator, Agent: "coder", Command: "npm run dev", Status: bot.TaskRunning,
		LogFile: "/data/tasks/1.log", CreatedAt: at(5 * time.Minute),
	})
	require.NoError(t, err)
	require.NoError(t, s.MarkThreadReset(ctx, threads[2].Key(), at(6*time.Minute)))
	require.NoError(t, s.AddUsage(ctx, bot.Usage{Keys: []string{"tree/" + parent.ID, "day/2025-03-04/agent/coder"}, Tokens: 120, Cost: 0.25, At: at(5 * time.Minute)}))
	require.NoError(t, s.SaveRunState(ctx, parent.ID, []byte(`{"turn":3}`)))

	// The outbox: a status message delivered, one dead, one waiting.
	for i, key := range []string{items[0].ID + "/status", items[1].ID + "/status", items[2].ID + "/status"} {
		_, err := s.Enqueue(ctx, bot.OutboxMessage{Key: key, Thread: threads[i], WorkItemID: items[i].ID, Kind: bot.OutboxStatus, Text: "working on it"})
		require.NoError(t, err)
	}
	require.NoError(t, s.Record(ctx, []bot.DeliveryOutcome{
		{Key: items[0].ID + "/status", Version: 1, Delivered: true, RemoteID: "171.2", At: at(7 * time.Minute)},
		{Key: items[1].ID + "/status", Version: 1, Error: "channel_not_found", Dead: true, At: at(7 * time.Minute)},
	}))

	require.NoError(t, s.SetLastFired(ctx, "nightly", at(8*time.Minute)))
	for i, decision := range []string{"allow", "deny", "allow"} {
		require.NoError(t, s.AppendAudit(ctx, at(time.Duration(9+i)*time.Minute), decision, []byte(fmt.Sprintf(`{"n":%d}`, i))))
	}
	require.NoError(t, s.SaveConversation(ctx, threads[0].Key(), "coder", []byte(`{"messages":2}`)))
	require.NoError(t, s.SaveTranscript(ctx, c1.Job.ID, "run-b", []byte(`{"run":"b"}`)))
	require.NoError(t, s.SaveTranscript(ctx, c1.Job.ID, "run-a", []byte(`{"run":"a"}`)))
	require.NoError(t, s.SaveInstallation(ctx, 42, "octo", false, []string{"octo/Hello", "octo/world"}, nil))
	pkg := pkgRecord("deploy-kit", "1.2.0")
	scope, err := skills.ParseScope("org:octo")
	require.NoError(t, err)
	require.NoError(t, s.PutPackage(ctx, pkg, skills.Setting{Scope: scope, Name: "deploy-kit", Enabled: skills.Enabled, Settings: map[string]any{"region": "eu"}}))
	// Three stored rules, the second deleted: the copy's next id is rule_4.
	for i, name := range []string{"bugs", "gone", "docs"} {
		_, err := s.CreateRule(ctx, storedRule(name, i, at(time.Duration(13+i)*time.Minute)))
		require.NoError(t, err)
	}
	_, err = s.DeleteRule(ctx, "rule_2")
	require.NoError(t, err)
	pending := approval("ap_1", "wi_2/bash/1", at(10*time.Minute))
	_, _, err = s.CreateApproval(ctx, pending)
	require.NoError(t, err)
	decided := approval("ap_2", "wi_3/bash/1", at(11*time.Minute))
	_, _, err = s.CreateApproval(ctx, decided)
	require.NoError(t, err)
	_, err = s.DecideApproval(ctx, "ap_2", bot.ApprovalOutcome{Status: bot.ApprovalApproved, By: "U1", At: at(12 * time.Minute)})
	require.NoError(t, err)
	return threads
}

// view is what a store answers to every read of the records fill made.
type view struct {
	Items         []bot.WorkItem
	Jobs          map[string][]bot.Job
	Events        map[string]*bot.Event
	Deliveries    map[string]bot.IngestResult
	Ingress       []bot.IngressRecord
	Outbox        map[string][]bot.OutboxMessage
	Pending, Dead int
	Depth         int
	LastFired     time.Time
	Audit         []string
	Conversation  string
	Transcripts   []string
	Installation  int64
	Packages      []skills.InstalledPackage
	Settings      []skills.Setting
	Rules         []bot.StoredRule
	Approvals     map[bool][]bot.Approval
	Runs          []bot.ChildRun
	RunOf         map[string]*bot.ChildRun
	Tasks         []bot.BackgroundTask
	Reset         time.Time
	Spent         []bot.Spend
	RunState      string
	ThreadItems   map[string][]string
	QueuedItems   []string
}

func snapshot(t *testing.T, ctx context.Context, s CopyStore, threads []bot.Thread) view {
	t.Helper()
	var v view
	// Every work item, a page of five at a time.
	for cursor := ""; ; {
		page, next, err := s.ListWorkItems(ctx, bot.WorkItemFilter{Limit: 5, Cursor: cursor})
		require.NoError(t, err)
		v.Items = append(v.Items, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	v.Jobs, v.Events, v.Deliveries, v.RunOf = map[string][]bot.Job{}, map[string]*bot.Event{}, map[string]bot.IngestResult{}, map[string]*bot.ChildRun{}
	for _, wi := range v.Items {
		got, err := s.GetWorkItem(ctx, wi.ID)
		require.NoError(t, err)
		require.Equal(t, wi, *got)
		if v.Jobs[wi.ID], err = s.ListJobs(ctx, wi.ID); err != nil {
			require.NoError(t, err)
		}
		if wi.EventRef != "" {
			v.Events[wi.EventRef], err = s.GetEvent(ctx, wi.EventRef)
			require.NoError(t, err)
		}
		if wi.DeliveryID != "" {
			v.Deliveries[wi.DeliveryID], err = s.FindDelivery(ctx, wi.Source, wi.DeliveryID)
			require.NoError(t, err)
		}
		if r, err := s.RunOfWorkItem(ctx, wi.ID); err == nil {
			v.RunOf[wi.ID] = r
		} else {
			require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err), "error %q", err)
		}
	}
	var err error
	v.Ingress, _, err = s.ListIngress(ctx, bot.IngressFilter{})
	require.NoError(t, err)
	v.Outbox, v.ThreadItems = map[string][]bot.OutboxMessage{}, map[string][]string{}
	for _, th := range threads {
		v.Outbox[th.Key()], err = s.ListOutbox(ctx, th.Key())
		require.NoError(t, err)
		v.ThreadItems[th.Key()] = ids(listAll(t, ctx, s, bot.WorkItemFilter{Thread: th.Key()}))
	}
	v.QueuedItems = ids(listAll(t, ctx, s, bot.WorkItemFilter{Status: bot.StatusQueued}))
	v.Pending, v.Dead, err = s.OutboxPending(ctx)
	require.NoError(t, err)
	v.Depth, err = s.QueueDepth(ctx)
	require.NoError(t, err)
	var ok bool
	v.LastFired, ok, err = s.LastFired(ctx, "nightly")
	require.NoError(t, err)
	require.True(t, ok)
	docs, _, err := s.ListAudit(ctx, time.Time{}, "", 0, "")
	require.NoError(t, err)
	v.Audit = docStrings(docs)
	allowed, _, err := s.ListAudit(ctx, time.Time{}, "allow", 0, "")
	require.NoError(t, err)
	v.Audit = append(v.Audit, docStrings(allowed)...)
	conv, err := s.LoadConversation(ctx, threads[0].Key(), "coder")
	require.NoError(t, err)
	v.Conversation = string(conv)
	jobs := v.Jobs[v.Items[len(v.Items)-1].ID]
	require.NotEmpty(t, jobs, "the first work item ran")
	tr, err := s.ListTranscripts(ctx, jobs[0].ID)
	require.NoError(t, err)
	v.Transcripts = docStrings(tr)
	v.Installation, err = s.InstallationForRepo(ctx, "OCTO/hello")
	require.NoError(t, err)
	v.Packages, err = s.ListPackages(ctx)
	require.NoError(t, err)
	v.Rules, err = s.ListRules(ctx)
	require.NoError(t, err)
	v.Settings, err = s.ListSettings(ctx)
	require.NoError(t, err)
	v.Approvals = map[bool][]bot.Approval{}
	for _, decided := range []bool{false, true} {
		v.Approvals[decided], err = s.ListApprovals(ctx, decided, 0)
		require.NoError(t, err)
	}
	v.Runs, _, err = s.ListRuns(ctx, bot.RunFilter{})
	require.NoError(t, err)
	v.Tasks, _, err = s.ListTasks(ctx, bot.TaskFilter{})
	require.NoError(t, err)
	v.Reset, err = s.ThreadResetAt(ctx, threads[2].Key())
	require.NoError(t, err)
	parent := v.Runs[0].ParentLinks.WorkItemID
	v.Spent, err = s.Spent(ctx, []string{"tree/" + parent, "day/2025-03-04/agent/coder"})
	require.NoError(t, err)
	state, err := s.LoadRunState(ctx, parent)
	require.NoError(t, err)
	v.RunState = string(state)
	return v
}

func listAll(t *testing.T, ctx context.Context, s CopyStore, f bot.WorkItemFilter) []bot.WorkItem {
	t.Helper()
	f.Limit = 1000
	items, _, err := s.ListWorkItems(ctx, f)
	require.NoError(t, err)
	return items
}
