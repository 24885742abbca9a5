package agents_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

// withEngine makes the permission engine the runtime's policy, profiles
// and access, auditing into the fixture's store.
func withEngine(t *testing.T, into **policy.Auditor) func(*agents.RuntimeOptions) {
	return func(o *agents.RuntimeOptions) {
		auditor, err := policy.NewAuditor(o.Transcripts.(*bolt.Store), bot.NewRedactor())
		require.NoError(t, err)
		e, err := policy.New(policy.Options{Audit: auditor})
		require.NoError(t, err)
		o.Policy, o.Profiles, o.Access = e, e, e
		*into = auditor
	}
}

// deniedCalls returns the audit log's denials.
func deniedCalls(t *testing.T, a *policy.Auditor) []policy.AuditRecord {
	t.Helper()
	recs, _, err := a.List(context.Background(), policy.AuditFilter{Decision: policy.AuditDeny})
	require.NoError(t, err)
	return recs
}

func TestACalleeNeverGetsMoreThanItsCaller(t *testing.T) {
	model := newBrain(func(_ context.Context, agent string, req llm.Request) (llm.Response, error) {
		last := lastMessage(req)
		switch {
		case agent == "reviewer" && last.Role != llm.RoleTool:
			return call("agent_coder", `{"task":"write notes.txt saying done"}`), nil
		case agent == "coder" && last.Role != llm.RoleTool:
			return call("write_file", `{"path":"notes.txt","content":"done"}`), nil
		}
		return answer(last.Content), nil
	})
	var auditor *policy.Auditor
	f := newFixture(t, model, nil, withEngine(t, &auditor))
	req := request("reviewer", "review and note it")
	owner := bot.Requester{Source: bot.SourceLocal, ID: "ana"}
	req.WorkItems[0].Requester = owner
	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), req, progress)
	require.NoError(t, err)
	require.Contains(t, progress.lines(), "rights read-only: reviewer's own profile, within ops (requested by @ana on the local console)")

	// The owner of the machine asked, but the read-only reviewer called
	// coder: coder writes nothing.
	require.Contains(t, res.Reply, `refused: denied by the ceiling \"read-only\" (called by @reviewer, read-only): tool \"write_file\" is not allowed (needs the write permission)`)
	ws, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(ws, "notes.txt"))
	for _, tool := range model.requests("coder")[0].Tools {
		require.NotEqual(t, "write_file", tool.Name, "coder is not even shown a tool its caller may not use")
	}

	recs := deniedCalls(t, auditor)
	require.Len(t, recs, 1)
	require.Equal(t, "write_file", recs[0].Tool)
	require.Equal(t, "coder", recs[0].Agent)
	require.Equal(t, "contributor", recs[0].Profile)
	require.Equal(t, "ceiling:read-only/permission:write", recs[0].Rule)
	require.Equal(t, &owner, recs[0].Requester)
	require.Equal(t, []bot.Ceiling{
		{Profile: "ops", Reason: "requested by @ana on the local console"},
		{Profile: "read-only", Reason: "called by @reviewer, read-only"},
	}, recs[0].Ceilings)
}

func TestAHandoffKeepsTheRightsOfTheRunThatHandedOff(t *testing.T) {
	ctx := context.Background()
	model := newBrain(func(_ context.Context, agent string, req llm.Request) (llm.Response, error) {
		last := lastMessage(req)
		switch {
		case agent == "triage" && last.Role != llm.RoleTool:
			return call("handoff_to", `{"agent":"ops","reason":"needs a deploy"}`), nil
		case agent == "ops" && last.Role != llm.RoleTool:
			return call("write_file", `{"path":"deployed.txt","content":"yes"}`), nil
		}
		return answer(last.Content), nil
	})
	var auditor *policy.Auditor
	f := newFixture(t, model, nil, withEngine(t, &auditor))
	now := time.Now()
	owner := bot.Requester{Source: bot.SourceLocal, ID: "ana"}
	ingested, err := f.store.Ingest(ctx, bot.IngestRequest{
		Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "d1", Text: "deploy it", Thread: thread, Requester: owner},
		Route: &bot.Route{Agent: "triage", Kind: bot.RouteDefault, Reason: "default"}, Now: now, DedupUntil: now.Add(time.Hour),
	})
	require.NoError(t, err)
	req := request("triage", "deploy it")
	req.WorkItems[0] = *ingested.WorkItem
	res, err := f.rt.Run(ctx, req, nil)
	require.NoError(t, err)
	require.Equal(t, "Handed off to @ops: needs a deploy", res.Reply)

	// The next job is ops on the same work item, as the store keeps it.
	wi, err := f.store.GetWorkItem(ctx, ingested.WorkItem.ID)
	require.NoError(t, err)
	req = request("ops", wi.Text)
	req.WorkItems[0] = *wi
	progress := &recorder{}
	res, err = f.rt.Run(ctx, req, progress)
	require.NoError(t, err)
	require.Contains(t, progress.lines(), "rights read-only: handed off by @triage, read-only")
	require.Contains(t, res.Reply, `denied by the ceiling "read-only" (handed off by @triage, read-only)`)
	ws, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(ws, "deployed.txt"))
	recs := deniedCalls(t, auditor)
	require.Len(t, recs, 1)
	require.Equal(t, "ops", recs[0].Agent)
	require.Equal(t, &owner, recs[0].Requester)
}

// permissions answers GitHub permissions as the integration would.
type permissions map[string]string

func (p permissions) ResolveRequester(_ context.Context, r bot.Requester, _ bot.Thread) (bot.Requester, error) {
	if r.Source != bot.SourceGitHub || r.Permission != "" {
		return r, nil
	}
	perm, ok := p[r.ID]
	if !ok {
		return r, errors.New("GitHub did not answer")
	}
	r.Permission = perm
	return r, nil
}

func TestEveryRequesterOfAJobBoundsIt(t *testing.T) {
	model := newBrain(func(_ context.Context, agent string, req llm.Request) (llm.Response, error) {
		if last := lastMessage(req); last.Role == llm.RoleTool {
			return answer(last.Content), nil
		}
		return call("write_file", `{"path":"fix.go","content":"package fix"}`), nil
	})
	var auditor *policy.Auditor
	f := newFixture(t, model, nil, withEngine(t, &auditor), func(o *agents.RuntimeOptions) {
		o.Requesters = permissions{"maintainer-mia": "maintain", "stranger": "read"}
	})
	gh := bot.GitHubThread("acme", "app", 7)
	req := request("coder", "fix it")
	req.Thread, req.Job.Thread = gh, gh
	req.WorkItems = []bot.WorkItem{
		{ID: "wi_1", Kind: "github.issues.labeled", Text: "fix it", Thread: gh, Requester: bot.Requester{Source: bot.SourceGitHub, ID: "maintainer-mia"}},
		{ID: "wi_2", Kind: "github.issue_comment.created", Text: "and this", Thread: gh, Requester: bot.Requester{Source: bot.SourceGitHub, ID: "stranger"}},
	}
	progress := &recorder{}
	res, err := f.rt.Run(context.Background(), req, progress)
	require.NoError(t, err)
	require.Contains(t, progress.lines(), "rights read-only: requested by @stranger, read access",
		"a message batched into the job brings its requester's ceiling")
	require.Contains(t, res.Reply, `denied by the ceiling "read-only" (requested by @stranger, read access)`)
	recs := deniedCalls(t, auditor)
	require.Len(t, recs, 1)
	require.Equal(t, "maintain", recs[0].Requester.Permission, "the permission looked up at run start is recorded")

	// When the rights cannot be known the run does not start.
	req.WorkItems[1].Requester.ID = "unknown"
	_, err = f.rt.Run(context.Background(), req, nil)
	require.EqualError(t, err, "the rights of @unknown, who asked for wi_2, cannot be known: GitHub did not answer")
	entries, _ := os.ReadDir(filepath.Join(f.spaces.Root))
	for _, e := range entries {
		require.NoFileExists(t, filepath.Join(f.spaces.Root, e.Name(), "fix.go"))
	}
	require.False(t, strings.Contains(res.Reply, "wrote"), res.Reply)
}

func TestRightsAreToldBeforeARun(t *testing.T) {
	var auditor *policy.Auditor
	f := newFixture(t, nil, nil, withEngine(t, &auditor), func(o *agents.RuntimeOptions) {
		o.Requesters = permissions{"stranger": "read"}
	})
	ctx := context.Background()
	gh := bot.GitHubThread("acme", "app", 7)
	got, err := f.rt.Rights(ctx, "coder", bot.Requester{Source: bot.SourceGitHub, ID: "stranger"}, gh)
	require.NoError(t, err)
	require.Equal(t, "read-only: requested by @stranger, read access", got.String())

	// When the permission cannot be looked up, explain still answers and
	// says so; a run would wait.
	got, err = f.rt.Rights(ctx, "coder", bot.Requester{Source: bot.SourceGitHub, ID: "someone"}, gh)
	require.NoError(t, err)
	require.Equal(t, "read-only: requested by @someone, whose access to the repository is unknown "+
		"(looking it up failed: GitHub did not answer; a run waits until it can be known)", got.String())

	_, err = f.rt.Rights(ctx, "ghost", bot.Requester{}, gh)
	require.Equal(t, bot.ENOTFOUND, bot.ErrorCode(err))
}

// A run held to a skill it cannot unload cannot be rid of it by handing its
// work on: the next agent is held to what the skill refuses.
func TestAHandoffKeepsTheSkillsTheRunCannotUnload(t *testing.T) {
	ctx := context.Background()
	model := newBrain(func(_ context.Context, agent string, req llm.Request) (llm.Response, error) {
		last := lastMessage(req)
		switch {
		case agent == "stamper" && last.Role != llm.RoleTool:
			return call("handoff_to", `{"agent":"coder","reason":"needs a file written"}`), nil
		case agent == "coder" && last.Role != llm.RoleTool:
			return call("write_file", `{"path":"x.txt","content":"x"}`), nil
		}
		return answer(last.Content), nil
	})
	src := "---\nname: stamper\ndescription: Stamps releases.\nskills: [stamping]\ntools: [read_file, handoff_to]\n---\nYou stamp.\n"
	f := newFixture(t, model, map[string]string{"stamper": src}, withSkills(t, skillSetup(t, "agent:stamper")))
	now := time.Now()
	owner := bot.Requester{Source: bot.SourceLocal, ID: "ana"}
	ingested, err := f.store.Ingest(ctx, bot.IngestRequest{
		Event: bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: "d1", Text: "write x.txt", Thread: thread, Requester: owner},
		Route: &bot.Route{Agent: "stamper", Kind: bot.RouteDefault, Reason: "default"}, Now: now, DedupUntil: now.Add(time.Hour),
	})
	require.NoError(t, err)
	req := request("stamper", "write x.txt")
	req.WorkItems[0] = *ingested.WorkItem
	res, err := f.rt.Run(ctx, req, nil)
	require.NoError(t, err)
	require.Equal(t, "Handed off to @coder: needs a file written", res.Reply)

	wi, err := f.store.GetWorkItem(ctx, ingested.WorkItem.ID)
	require.NoError(t, err)
	req = request("coder", wi.Text)
	req.WorkItems[0] = *wi
	res, err = f.rt.Run(ctx, req, &recorder{})
	require.NoError(t, err)
	require.Contains(t, res.Reply, `denied by skill "stamping": tool "write_file" is forbidden (forbidden_tools); `+
		`a ceiling of this run: handed off by @stamper, which is held to skill "stamping"`)
	ws, err := f.spaces.Dir(thread.Key())
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(ws, "x.txt"))
}
