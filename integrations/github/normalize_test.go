package github

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// fixtureDir holds public payload examples, one folder per X-GitHub-Event.
const fixtureDir = "../../testdata/github"

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	require.NoError(t, err)
	return b
}

type fixtureFile struct {
	event, name string
	payload     []byte
}

func fixtures(t testing.TB) []fixtureFile {
	t.Helper()
	var out []fixtureFile
	err := filepath.WalkDir(fixtureDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		rel, err := filepath.Rel(fixtureDir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		out = append(out, fixtureFile{event: filepath.Dir(rel), name: rel, payload: b})
		return err
	})
	require.NoError(t, err)
	require.Greater(t, len(out), 250, "the fixtures are where DESIGN.md says")
	return out
}

// Every public payload example goes through the real handler: it is stored
// as a work item or as an ingress record with a reason, never refused as
// unreadable, never a panic.
func TestEveryFixtureNormalises(t *testing.T) {
	e := newEnv(t, func(o *WebhookOptions, _ *GateOptions) { o.NeedsPaths = func() bool { return false } })
	kinds := map[string]bool{}
	for _, f := range fixtures(t) {
		d, err := normalize(f.event, f.name, f.payload)
		require.NoError(t, err, f.name)
		ev := d.ev
		require.Equal(t, bot.SourceGitHub, ev.Source, f.name)
		require.True(t, ev.Kind == "github."+f.event || strings.HasPrefix(ev.Kind, "github."+f.event+"."), "%s: kind %s", f.name, ev.Kind)
		if action, _, _ := strings.Cut(filepath.Base(f.name), "."); supported(f.event, action) && d.installation == nil {
			if r := e.gate.Screen(ev); r != nil {
				require.NotContains(t, []string{bot.IgnoreUnsupported, bot.IgnoreDeleted}, r.Code, f.name)
			}
			require.False(t, ev.Thread.IsZero(), f.name)
			require.Equal(t, ev.Repo, ev.Thread.Owner+"/"+ev.Thread.Repo, f.name)
			require.Positive(t, ev.Number, f.name)
			require.NotEmpty(t, ev.SourceRef, f.name)
			require.NotEmpty(t, ev.Actor, f.name)
		}

		code, a := e.post(f.event, f.name, f.payload)
		if f.event == "ping" {
			require.Equal(t, http.StatusOK, code, f.name)
			continue
		}
		require.Equal(t, http.StatusAccepted, code, "%s: %+v", f.name, a)
		if a.Status != "accepted" {
			require.Equal(t, "ignored", a.Status, f.name)
			require.NotEmpty(t, a.Reason, f.name)
		}
		kinds[ev.Kind] = true
	}
	for _, k := range []string{
		"github.pull_request.opened", "github.pull_request.reopened", "github.pull_request.synchronize",
		"github.pull_request.ready_for_review", "github.pull_request.labeled", "github.pull_request.closed",
		"github.issues.opened", "github.issues.labeled", "github.issues.edited",
		"github.issue_comment.created", "github.issue_comment.edited",
		"github.pull_request_review_comment.created", "github.pull_request_review_comment.edited",
		"github.pull_request_review.submitted", "github.installation.created", "github.installation_repositories.added",
	} {
		require.True(t, kinds[k], "no fixture of %s", k)
	}
}

func TestNormaliseFields(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bot.Event
	}{
		{
			file: "issue_comment/created.payload.json",
			want: bot.Event{
				Kind: "github.issue_comment.created", Actor: "Codertocat", Org: "Codertocat", Repo: "Codertocat/Hello-World",
				Number: 1, Thread: bot.GitHubThread("Codertocat", "Hello-World", 1), SourceRef: "comment:492700400",
				Text: "You are totally right! I'll get this fixed right away.", Labels: []string{"bug"},
			},
		},
		{
			file: "pull_request/opened.payload.json",
			want: bot.Event{
				Kind: "github.pull_request.opened", Actor: "Codertocat", Org: "Codertocat", Repo: "Codertocat/Hello-World",
				Number: 2, Thread: bot.GitHubThread("Codertocat", "Hello-World", 2), SourceRef: "issue:2",
				Text: "This is a pretty simple change that we need to pull into master.", Labels: []string{"bug"},
			},
		},
		{
			file: "pull_request_review_comment/created.payload.json",
			want: bot.Event{
				Kind: "github.pull_request_review_comment.created", Actor: "Codertocat", Org: "Codertocat", Repo: "Codertocat/Hello-World",
				Number: 2, Thread: bot.GitHubThread("Codertocat", "Hello-World", 2), SourceRef: "review_comment:284312630",
				Text: "Maybe you should use more emoji on this line.", Labels: []string{"bug"},
			},
		},
		{
			file: "installation/created.payload.json",
			want: bot.Event{Kind: "github.installation.created", Actor: "Codertocat", Org: "Codertocat", InstallationID: 957387},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			event, _, _ := strings.Cut(tc.file, "/")
			raw := fixture(t, tc.file)
			d, err := normalize(event, "d-1", raw)
			require.NoError(t, err)
			got := *d.ev
			require.Equal(t, raw, got.Raw)
			got.Raw = nil
			want := tc.want
			want.Source, want.DeliveryID = bot.SourceGitHub, "d-1"
			// The sender asked; their permission is looked up later.
			want.Requester = bot.Requester{Source: bot.SourceGitHub, ID: want.Actor}
			if want.InstallationID == 0 {
				want.InstallationID = got.InstallationID
			}
			require.Equal(t, want, got)
		})
	}
}

func TestActorIsBot(t *testing.T) {
	for _, tc := range []struct {
		user ghUser
		want bool
	}{
		{person("alice"), false},
		{botUser("github-actions"), true},
		{person("weird[bot]"), true},
	} {
		d, err := normalize("issue_comment", "d", issueCommentPayload("created", tc.user, "hi", nil).bytes(t))
		require.NoError(t, err)
		require.Equal(t, tc.want, d.ev.ActorIsBot, tc.user.Login)
	}
}

func FuzzNormalize(f *testing.F) {
	events := []string{
		"issue_comment", "issues", "pull_request", "pull_request_review", "pull_request_review_comment",
		"installation", "installation_repositories", "push", "star",
	}
	for i, name := range []string{
		"issue_comment/created.payload.json", "issues/edited.payload.json", "pull_request/opened.payload.json",
		"pull_request_review/submitted.payload.json", "pull_request_review_comment/edited.payload.json",
		"installation/created.payload.json", "installation_repositories/removed.payload.json", "push/payload.json",
		"star/created.payload.json",
	} {
		f.Add(uint8(i), fixture(f, name))
	}
	f.Add(uint8(0), []byte(`{"action":"edited","comment":{"body":"@a"},"changes":{"body":{"from":null}}}`))
	f.Add(uint8(2), []byte(`{"number":-1,"repository":{"name":"x","owner":{"login":"y"}}}`))
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		event := events[int(which)%len(events)]
		d, err := normalize(event, "fuzz", payload)
		if err != nil {
			require.ErrorIs(t, err, errMalformed)
			return
		}
		ev := d.ev
		require.Equal(t, bot.SourceGitHub, ev.Source)
		require.True(t, strings.HasPrefix(ev.Kind, "github."+event))
		if supported(d.event, d.action) && d.installation == nil {
			// Whatever gets past normalisation names a valid thread.
			th, err := bot.ParseThread(ev.Thread.Key())
			require.NoError(t, err)
			require.Equal(t, ev.Thread, th)
		}
		if d.installation != nil {
			require.Positive(t, d.installation.id)
		}
	})
}
