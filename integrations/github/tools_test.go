package github

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

const (
	threadKey = "github:octo/hello#7"
	slackKey  = "slack:T1/C1/1700000000.000100"
)

type fakeIssue struct {
	Number int
	Title  string
	Body   string
	State  string
	Author string
	Labels []string
	Pull   *fakePull
}

type fakePull struct {
	Base, Head, HeadSHA string
	Draft, Merged       bool
	MergeMethod         string
	MergeTitle          string
	Reviewers, Teams    []string
	Diff                string
}

// toolsEnv is the GitHub tools as the daemon registers them, next to the
// core tools, over a real Client against the fake GitHub, which here also
// serves git's smart HTTP protocol from bare repositories (git http-backend)
// at the API's host, where production derives the git host from.
type toolsEnv struct {
	t         *testing.T
	gh        *fakeGitHub
	client    *Client
	reg       *tools.Registry
	opts      ToolOptions
	workspace string
	home      string // HOME of the test's own git commands
	gitRoot   string // GIT_PROJECT_ROOT: <owner>/<repo>.git

	mu       sync.Mutex
	repos    map[string]string // owner/repo → default branch
	issues   map[string]*fakeIssue
	next     map[string]int
	gitDeny  bool
	gitAuths int // git requests that carried a valid installation token
}

func newToolsEnv(t *testing.T, opts ToolOptions) *toolsEnv {
	t.Helper()
	e := &toolsEnv{
		t: t, gh: newFakeGitHub(t, ""), opts: opts,
		workspace: t.TempDir(), home: t.TempDir(), gitRoot: t.TempDir(),
		repos: map[string]string{}, issues: map[string]*fakeIssue{}, next: map[string]int{},
	}
	e.gh.installs["octo/hello"] = testInstallation
	e.gh.installs["octo/other"] = testInstallation + 1
	e.repos["octo/hello"] = "main"
	e.repos["octo/other"] = "trunk"
	e.routes()
	var err error
	e.client, err = NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: e.gh.url()})
	require.NoError(t, err)
	e.reg, err = tools.NewRegistry(slices.Concat(tools.Core(tools.CoreOptions{}), Tools(e.client, opts))...)
	require.NoError(t, err)
	return e
}

// call runs a tool the way an agent's run does: through a toolset.
func (e *toolsEnv) call(session, name string, input any) tools.Result {
	e.t.Helper()
	raw, err := json.Marshal(input)
	require.NoError(e.t, err)
	ts := tools.NewToolset(e.reg, tools.Scope{Agent: "coder", Profile: tools.ProfileMaintainer}, tools.ToolsetOptions{})
	return ts.Execute(context.Background(), tools.CallContext{SessionKey: session, Workspace: e.workspace}, name, raw)
}

func (e *toolsEnv) ok(session, name string, input any) string {
	e.t.Helper()
	res := e.call(session, name, input)
	require.False(e.t, res.IsError, "%s: %s", name, res.Output)
	return res.Output
}

func (e *toolsEnv) addIssue(repo string, is *fakeIssue) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if is.State == "" {
		is.State = "open"
	}
	e.issues[fmt.Sprintf("%s#%d", repo, is.Number)] = is
	e.next[repo] = max(e.next[repo], is.Number)
}

func (e *toolsEnv) issue(key string) fakeIssue {
	e.mu.Lock()
	defer e.mu.Unlock()
	is := *e.issues[key]
	if is.Pull != nil {
		p := *is.Pull
		is.Pull = &p
	}
	return is
}

func issueJSON(repo string, is *fakeIssue, comments int) map[string]any {
	labels := []map[string]string{}
	for _, l := range is.Labels {
		labels = append(labels, map[string]string{"name": l})
	}
	out := map[string]any{
		"number": is.Number, "title": is.Title, "body": is.Body, "state": is.State,
		"user": map[string]string{"login": is.Author}, "labels": labels, "comments": comments,
		"assignees":  []map[string]string{{"login": "hubot"}},
		"html_url":   fmt.Sprintf("https://github.com/%s/issues/%d", repo, is.Number),
		"created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-02T10:00:00Z",
	}
	if is.Pull != nil {
		out["pull_request"] = map[string]string{"url": "x"}
	}
	return out
}

func pullJSON(repo string, is *fakeIssue) map[string]any {
	p := is.Pull
	out := issueJSON(repo, is, 0)
	delete(out, "pull_request")
	out["html_url"] = fmt.Sprintf("https://github.com/%s/pull/%d", repo, is.Number)
	out["draft"], out["merged"] = p.Draft, p.Merged
	out["base"] = map[string]any{"ref": p.Base, "repo": map[string]string{"full_name": repo}}
	out["head"] = map[string]any{"ref": p.Head, "sha": p.HeadSHA, "repo": map[string]string{"full_name": repo}}
	out["mergeable"], out["mergeable_state"] = true, "clean"
	out["commits"], out["changed_files"], out["additions"], out["deletions"] = 2, 2, 5, 1
	var reviewers []map[string]string
	for _, r := range p.Reviewers {
		reviewers = append(reviewers, map[string]string{"login": r})
	}
	var teams []map[string]string
	for _, tm := range p.Teams {
		teams = append(teams, map[string]string{"slug": tm})
	}
	out["requested_reviewers"], out["requested_teams"] = reviewers, teams
	return out
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

// routes adds the REST endpoints the tools use, and git, to the fake.
func (e *toolsEnv) routes() {
	f := e.gh
	repoOf := func(r *http.Request) string { return r.PathValue("owner") + "/" + r.PathValue("repo") }
	// lookup finds the issue of the request, holding e.mu.
	lookup := func(w http.ResponseWriter, r *http.Request, pull bool) (*fakeIssue, bool) {
		is, ok := e.issues[repoOf(r)+"#"+r.PathValue("number")]
		if !ok || pull && is.Pull == nil {
			notFound(w)
			return nil, false
		}
		return is, true
	}
	f.route("GET /repos/{owner}/{repo}", false, func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		def, ok := e.repos[repoOf(r)]
		e.mu.Unlock()
		if !ok {
			notFound(w)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"full_name": repoOf(r), "default_branch": def})
	})
	f.route("GET /repos/{owner}/{repo}/issues/{number}", false, func(w http.ResponseWriter, r *http.Request) {
		n := len(f.threadComments(threadOf(r)))
		e.mu.Lock()
		defer e.mu.Unlock()
		if is, ok := lookup(w, r, false); ok {
			writeJSON(w, http.StatusOK, issueJSON(repoOf(r), is, n))
		}
	})
	f.route("GET /repos/{owner}/{repo}/pulls/{number}", false, func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		is, ok := lookup(w, r, true)
		if !ok {
			return
		}
		if r.Header.Get("Accept") == "application/vnd.github.v3.diff" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, is.Pull.Diff)
			return
		}
		writeJSON(w, http.StatusOK, pullJSON(repoOf(r), is))
	})
	labelsJSON := func(is *fakeIssue) []map[string]string {
		out := []map[string]string{}
		for _, l := range is.Labels {
			out = append(out, map[string]string{"name": l})
		}
		return out
	}
	f.route("POST /repos/{owner}/{repo}/issues/{number}/labels", false, func(w http.ResponseWriter, r *http.Request) {
		var labels []string
		if err := json.NewDecoder(r.Body).Decode(&labels); err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Invalid request"})
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if is, ok := lookup(w, r, false); ok {
			for _, l := range labels {
				if !slices.Contains(is.Labels, l) {
					is.Labels = append(is.Labels, l)
				}
			}
			writeJSON(w, http.StatusOK, labelsJSON(is))
		}
	})
	f.route("DELETE /repos/{owner}/{repo}/issues/{number}/labels/{name}", false, func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		is, ok := lookup(w, r, false)
		if !ok {
			return
		}
		i := slices.Index(is.Labels, r.PathValue("name"))
		if i < 0 {
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "Label does not exist"})
			return
		}
		is.Labels = slices.Delete(is.Labels, i, i+1)
		writeJSON(w, http.StatusOK, labelsJSON(is))
	})
	f.route("POST /repos/{owner}/{repo}/pulls/{number}/requested_reviewers", false, func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Reviewers     []string `json:"reviewers"`
			TeamReviewers []string `json:"team_reviewers"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		e.mu.Lock()
		defer e.mu.Unlock()
		is, ok := lookup(w, r, true)
		if !ok {
			return
		}
		if slices.Contains(in.Reviewers, "stranger") {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Reviews may only be requested from collaborators. One or more of the users or teams you specified is not a collaborator of the octo/hello repository."})
			return
		}
		is.Pull.Reviewers = append(is.Pull.Reviewers, in.Reviewers...)
		is.Pull.Teams = append(is.Pull.Teams, in.TeamReviewers...)
		writeJSON(w, http.StatusCreated, pullJSON(repoOf(r), is))
	})
	f.route("POST /repos/{owner}/{repo}/pulls", false, func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Title, Head, Base, Body string
			Draft                   bool
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		// GitHub opens a pull request only from a branch it has.
		sha, err := e.gitOutput(filepath.Join(e.gitRoot, repoOf(r)+".git"), "rev-parse", "--verify", "--quiet", "refs/heads/"+in.Head)
		if err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
				"errors": []map[string]string{{"resource": "PullRequest", "field": "head", "code": "invalid"}}})
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.next[repoOf(r)]++
		is := &fakeIssue{Number: e.next[repoOf(r)], Title: in.Title, Body: in.Body, State: "open", Author: "switchyard[bot]",
			Pull: &fakePull{Base: in.Base, Head: in.Head, HeadSHA: sha, Draft: in.Draft}}
		e.issues[fmt.Sprintf("%s#%d", repoOf(r), is.Number)] = is
		writeJSON(w, http.StatusCreated, pullJSON(repoOf(r), is))
	})
	f.route("PUT /repos/{owner}/{repo}/pulls/{number}/merge", false, func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			CommitTitle string `json:"commit_title"`
			SHA         string `json:"sha"`
			MergeMethod string `json:"merge_method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		e.mu.Lock()
		defer e.mu.Unlock()
		is, ok := lookup(w, r, true)
		if !ok {
			return
		}
		switch {
		case is.Pull.Merged || is.Pull.Draft:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"message": "Pull Request is not mergeable"})
		case in.SHA != "" && in.SHA != is.Pull.HeadSHA:
			writeJSON(w, http.StatusConflict, map[string]string{"message": "Head branch was modified. Review and try the merge again."})
		default:
			is.Pull.Merged, is.Pull.MergeMethod, is.Pull.MergeTitle = true, in.MergeMethod, in.CommitTitle
			is.State = "closed"
			writeJSON(w, http.StatusOK, map[string]any{"sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "merged": true, "message": "Pull Request successfully merged"})
		}
	})

	// git's smart HTTP, authenticated as GitHub does: Basic with the
	// installation token as the password.
	gitPath, err := exec.LookPath("git")
	require.NoError(e.t, err, "the GitHub tools need git")
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Env: []string{
		"GIT_PROJECT_ROOT=" + e.gitRoot, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + e.home,
	}, Stderr: io.Discard}
	f.mux.HandleFunc("/{owner}/{repo}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.PathValue("repo"), ".git") {
			e.t.Errorf("fake GitHub: unexpected %s %s", r.Method, r.URL.Path)
			notFound(w)
			return
		}
		user, pass, ok := r.BasicAuth()
		f.mu.Lock()
		_, known := f.tokens[pass]
		f.mu.Unlock()
		e.mu.Lock()
		deny := e.gitDeny
		if ok && known && user == "x-access-token" && !deny {
			e.gitAuths++
		} else {
			ok = false
		}
		e.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token. Password authentication is not supported for Git operations.", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
}

// gitOutput runs the test's own git (as a person or the agent's shell
// would), outside the tools.
func (e *toolsEnv) gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=init.defaultBranch", "GIT_CONFIG_VALUE_0=main",
		"GIT_CONFIG_KEY_1=advice.detachedHead", "GIT_CONFIG_VALUE_1=false",
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (e *toolsEnv) git(dir string, args ...string) string {
	e.t.Helper()
	out, err := e.gitOutput(dir, args...)
	require.NoError(e.t, err, "git %s: %s", strings.Join(args, " "), out)
	return out
}

func (e *toolsEnv) commit(dir, file, content, msg string) string {
	e.t.Helper()
	require.NoError(e.t, os.MkdirAll(filepath.Dir(filepath.Join(dir, file)), 0o755))
	require.NoError(e.t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
	e.git(dir, "add", file)
	e.git(dir, "commit", "--quiet", "-m", msg)
	return e.git(dir, "rev-parse", "HEAD")
}

// upstream is octo/hello on the fake GitHub: main with two commits, a
// feature branch, a tag v1.0 and a contributor's commit reachable only from
// refs/pull/7/head.
type upstream struct {
	bare                           string
	tagged, main, feature, contrib string
}

func (e *toolsEnv) seedUpstream() upstream {
	e.t.Helper()
	u := upstream{bare: filepath.Join(e.gitRoot, "octo", "hello.git")}
	e.git(e.gitRoot, "init", "--quiet", "--bare", u.bare)
	e.git(u.bare, "config", "http.receivepack", "true")
	work := e.t.TempDir()
	e.git(work, "init", "--quiet")
	u.tagged = e.commit(work, "README.md", "hello\n", "initial")
	e.git(work, "tag", "v1.0")
	e.git(work, "switch", "--quiet", "-c", "feature")
	u.feature = e.commit(work, "feature.txt", "a feature\n", "feature work")
	e.git(work, "switch", "--quiet", "main")
	u.main = e.commit(work, "main.go", "package main\n", "second on main")
	e.git(work, "switch", "--quiet", "-c", "contrib", u.tagged)
	u.contrib = e.commit(work, "contrib.txt", "from a fork\n", "contributor's change")
	e.git(work, "push", "--quiet", u.bare, "main", "feature", "v1.0", "contrib:refs/pull/7/head")
	return u
}

// requireNoToken asserts that no installation token the fake handed out,
// nor its Basic form, is in s.
func (e *toolsEnv) requireNoToken(s, where string) {
	e.t.Helper()
	e.gh.mu.Lock()
	defer e.gh.mu.Unlock()
	require.NotEmpty(e.t, e.gh.tokens, "no token was ever issued")
	for tok := range e.gh.tokens {
		require.NotContains(e.t, s, tok, "token in %s", where)
		require.NotContains(e.t, s, base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok)), "token in %s", where)
	}
	require.NotContains(e.t, s, "ghs_", "token-like text in %s", where)
}

// requireNoTokenInWorkspace reads every file of the workspace, .git
// included.
func (e *toolsEnv) requireNoTokenInWorkspace() {
	e.t.Helper()
	n := 0
	err := filepath.WalkDir(e.workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		e.requireNoToken(string(b), p)
		return nil
	})
	require.NoError(e.t, err)
	require.Greater(e.t, n, 10, "the workspace should hold a checkout")
}

func TestToolsRegisterWithStrictSchemasAndOneProfileClassEach(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{})
	classes := slices.Concat(ReadTools(), WriteTools(), MergeTools())
	ghTools := Tools(e.client, ToolOptions{})
	require.Len(t, ghTools, 12)
	var names []string
	for _, tl := range ghTools {
		info := tl.Info()
		names = append(names, info.Name)
		require.True(t, tools.ValidName(info.Name), info.Name)
		require.Equal(t, 1, strings.Count(strings.Join(classes, " ")+" ", info.Name+" "), "%s in exactly one of ReadTools, WriteTools, MergeTools", info.Name)
		require.Equal(t, tools.KindIntegration, info.Kind, "GitHub tools are not core tools")
		want := tools.PermRead
		switch {
		case slices.Contains(WriteTools(), info.Name):
			want = tools.PermPush
		case slices.Contains(MergeTools(), info.Name):
			want = tools.PermMerge
		}
		require.Equal(t, []tools.Permission{want}, info.Permissions, "%s declares what it needs", info.Name)
		require.Greater(t, len(info.Description), 80, "%s: a description a model can act on", info.Name)

		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(info.Schema, &schema), info.Name)
		require.Equal(t, "object", schema.Type)
		require.NotNil(t, schema.AdditionalProperties, info.Name)
		require.False(t, *schema.AdditionalProperties, info.Name)
		require.NotNil(t, schema.Required, "%s: required is listed, even when empty", info.Name)
		for _, r := range schema.Required {
			require.Contains(t, schema.Properties, r, info.Name)
		}
		require.Contains(t, schema.Properties, "repo", info.Name)
	}
	require.ElementsMatch(t, classes, names)
	merge, ok := e.reg.Get(ToolMergePullRequest)
	require.True(t, ok)
	require.Contains(t, merge.Info().Description, "maintainer")
	require.Subset(t, e.reg.Names(), tools.CoreNames())

	// Misspelt fields are errors the model can correct.
	res := e.call(threadKey, ToolGetIssue, map[string]any{"numbr": 3})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, `unknown field "numbr"`)
}

func TestReadTools(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{})
	e.addIssue("octo/hello", &fakeIssue{Number: 3, Title: "Login fails on Safari", Body: "Steps: open /login in Safari 17.", Author: "alice", Labels: []string{"bug", "p1"}})
	e.gh.addComment("octo/hello#3", "I can reproduce this.", ghUser{Login: "bob", Type: "User"})
	e.gh.addComment("octo/hello#3", "Fixed by #7?", ghUser{Login: "carol", Type: "User"})
	diff := "diff --git a/login.go b/login.go\nindex 1..2 100644\n--- a/login.go\n+++ b/login.go\n@@ -1 +1 @@\n-old\n+new\n" +
		"diff --git a/docs/safari.md b/docs/safari.md\nnew file mode 100644\n--- /dev/null\n+++ b/docs/safari.md\n@@ -0,0 +1 @@\n+Safari notes\n"
	e.addIssue("octo/hello", &fakeIssue{Number: 7, Title: "Fix Safari login", Body: "Fixes #3.", Author: "dave", Labels: []string{"bug"},
		Pull: &fakePull{Base: "main", Head: "fix-safari", HeadSHA: "0123456789abcdef0123456789abcdef01234567", Reviewers: []string{"erin"}, Teams: []string{"web"}, Diff: diff}})
	e.gh.mu.Lock()
	e.gh.files["octo/hello#7"] = []string{"login.go", "renamed:docs/old.md->docs/safari.md"}
	e.gh.mu.Unlock()

	for _, tc := range []struct {
		name    string
		session string
		tool    string
		input   map[string]any
		want    []string
		notWant []string
	}{
		{name: "issue named on a Slack thread", session: slackKey, tool: ToolGetIssue, input: map[string]any{"repo": "octo/hello", "number": 3},
			want: []string{"octo/hello#3 (issue): Login fails on Safari", "State: open · author: alice", "Labels: bug, p1 · assignees: hubot · comments: 2",
				"Steps: open /login in Safari 17.", "--- 2 comments ---", "[bob, ", "I can reproduce this.", "[carol, ", "Fixed by #7?"}},
		{name: "issue: the last comments only", session: slackKey, tool: ToolGetIssue, input: map[string]any{"repo": "octo/hello", "number": 3, "comments": 1},
			want: []string{"--- the last 1 of 2 comments ---", "Fixed by #7?"}, notWant: []string{"I can reproduce"}},
		{name: "the thread's own pull request read as an issue", session: threadKey, tool: ToolGetIssue, input: map[string]any{},
			want: []string{"octo/hello#7 (pull request): Fix Safari login", "github_get_pull_request shows its branches", "Fixes #3."}},
		{name: "another issue of the thread's repository", session: threadKey, tool: ToolGetIssue, input: map[string]any{"number": 3},
			want: []string{"octo/hello#3 (issue)"}},
		{name: "the thread's repository named in another case", session: threadKey, tool: ToolGetIssue, input: map[string]any{"repo": "Octo/Hello"},
			want: []string{"octo/hello#7 (pull request)"}},
		{name: "pull request from the thread", session: threadKey, tool: ToolGetPullRequest, input: map[string]any{},
			want: []string{"octo/hello#7 (pull request): Fix Safari login", "Base: main ← head: fix-safari at 0123456789abcdef0123456789abcdef01234567",
				"Mergeable: yes (state: clean)", "Size: 2 commits, 2 files changed, +5 −1", "review requested from: erin, team web", "https://github.com/octo/hello/pull/7"}},
		{name: "diff from the thread", session: threadKey, tool: ToolPullRequestDiff, input: map[string]any{},
			want: []string{"+++ b/login.go", "+Safari notes"}},
		{name: "diff of one file", session: threadKey, tool: ToolPullRequestDiff, input: map[string]any{"paths": []string{"docs/safari.md", "nope.go"}},
			want: []string{"+Safari notes", "[not changed by octo/hello#7: nope.go]"}, notWant: []string{"login.go"}},
		{name: "changed files from the thread", session: threadKey, tool: ToolListChangedFiles, input: map[string]any{},
			want: []string{"octo/hello#7 changes 2 files", "modified  login.go", "renamed   docs/old.md → docs/safari.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := e.ok(tc.session, tc.tool, tc.input)
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
			for _, w := range tc.notWant {
				require.NotContains(t, out, w)
			}
		})
	}
}

// A long discussion costs two requests at most, and the model sees its end.
func TestGetIssueShowsTheLatestComments(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{})
	e.addIssue("octo/hello", &fakeIssue{Number: 7, Title: "Long"})
	for i := range 130 {
		e.gh.addComment("octo/hello#7", fmt.Sprintf("comment %d.", i), ghUser{Login: "bob", Type: "User"})
	}
	const list = "GET /repos/{owner}/{repo}/issues/{number}/comments"

	out := e.ok(threadKey, ToolGetIssue, map[string]any{})
	require.Contains(t, out, "--- the last 20 of 130 comments ---")
	require.Contains(t, out, "comment 110.")
	require.Contains(t, out, "comment 129.")
	require.NotContains(t, out, "comment 109.")
	require.Equal(t, 1, e.gh.callCount(list))

	out = e.ok(threadKey, ToolGetIssue, map[string]any{"comments": 40})
	require.Contains(t, out, "--- the last 40 of 130 comments ---")
	require.Contains(t, out, "comment 90.")
	require.NotContains(t, out, "comment 89.")
	require.Less(t, strings.Index(out, "comment 99."), strings.Index(out, "comment 100."), "oldest first")
	require.Equal(t, 3, e.gh.callCount(list))

	out = e.ok(threadKey, ToolGetIssue, map[string]any{"comments": 0})
	require.NotContains(t, out, "comment 129.")
	require.Equal(t, 3, e.gh.callCount(list))
}

func TestPullRequestDiffIsCappedAndSaysSo(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{MaxDiffBytes: 400})
	var diff strings.Builder
	for i := range 20 {
		fmt.Fprintf(&diff, "diff --git a/f%d.go b/f%d.go\n--- a/f%d.go\n+++ b/f%d.go\n@@ -1 +1 @@\n-old line %d\n+new line %d\n", i, i, i, i, i, i)
	}
	e.addIssue("octo/hello", &fakeIssue{Number: 7, Title: "Big", Pull: &fakePull{Base: "main", Head: "big", Diff: diff.String()}})

	out := e.ok(threadKey, ToolPullRequestDiff, map[string]any{})
	require.Less(t, len(out), 400+300)
	require.Contains(t, out, "diff --git a/f0.go b/f0.go")
	require.Contains(t, out, fmt.Sprintf("of %d bytes", diff.Len()))
	require.Contains(t, out, "[diff truncated")
	require.NotContains(t, out, "f19.go")
	body, _, _ := strings.Cut(out, "\n[diff truncated")
	require.True(t, strings.HasSuffix(body, "\n"), "cut on a line boundary")

	out = e.ok(threadKey, ToolPullRequestDiff, map[string]any{"paths": []string{"f19.go"}})
	require.Contains(t, out, "+new line 19")
	require.NotContains(t, out, "truncated")
}

func TestWriteTools(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{})
	e.addIssue("octo/hello", &fakeIssue{Number: 7, Title: "Fix Safari login", Author: "dave", Labels: []string{"bug", "needs triage", "area/web"},
		Pull: &fakePull{Base: "main", Head: "fix-safari", HeadSHA: "0123456789abcdef0123456789abcdef01234567"}})
	e.addIssue("octo/hello", &fakeIssue{Number: 3, Title: "Login fails", Author: "alice"})

	out := e.ok(threadKey, ToolComment, map[string]any{"body": "Reproduced on Safari 17; fix below."})
	require.Contains(t, out, "Commented on octo/hello#7")
	comments := e.gh.threadComments("octo/hello#7")
	require.Len(t, comments, 1)
	require.Equal(t, "Reproduced on Safari 17; fix below.", comments[0].Body)

	out = e.ok(threadKey, ToolComment, map[string]any{"number": 3, "body": "See #7."})
	require.Contains(t, out, "Commented on octo/hello#3")
	require.Len(t, e.gh.threadComments("octo/hello#3"), 1)

	out = e.ok(threadKey, ToolAddLabels, map[string]any{"labels": []string{"p1", "bug", " p1 "}})
	require.Equal(t, "Added p1, bug to octo/hello#7; its labels now: bug, needs triage, area/web, p1", out)

	out = e.ok(threadKey, ToolRemoveLabel, map[string]any{"label": "needs triage"})
	require.Equal(t, `Removed label "needs triage" from octo/hello#7; its labels now: bug, area/web, p1`, out)
	out = e.ok(threadKey, ToolRemoveLabel, map[string]any{"label": "area/web"})
	require.Contains(t, out, "its labels now: bug, p1")
	res := e.call(threadKey, ToolRemoveLabel, map[string]any{"label": "wontfix"})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, `octo/hello#7 has no label "wontfix"`)

	out = e.ok(threadKey, ToolRequestReview, map[string]any{"reviewers": []string{"@erin"}, "team_reviewers": []string{"octo/web"}})
	require.Equal(t, "Requested reviews on octo/hello#7 from erin, team web; reviews now requested from: erin, team web", out)
	require.Equal(t, []string{"erin"}, e.issue("octo/hello#7").Pull.Reviewers)
	require.Equal(t, []string{"web"}, e.issue("octo/hello#7").Pull.Teams)
	res = e.call(threadKey, ToolRequestReview, map[string]any{"reviewers": []string{"stranger"}})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "GitHub refused (422): Reviews may only be requested from collaborators")
	res = e.call(threadKey, ToolRequestReview, map[string]any{})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "at least one of reviewers")

	// A stale sha protects against merging what was not reviewed.
	res = e.call(threadKey, ToolMergePullRequest, map[string]any{"sha": "ffffffffffffffffffffffffffffffffffffffff"})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "octo/hello#7 was not merged: Head branch was modified")
	out = e.ok(threadKey, ToolMergePullRequest, map[string]any{"method": "squash", "sha": "0123456789abcdef0123456789abcdef01234567", "commit_title": "Fix Safari login (#7)"})
	require.Equal(t, "Merged octo/hello#7 (squash) as 6dcb09b5b57875f334f61aebed695e2e4193db5e", out)
	merged := e.issue("octo/hello#7")
	require.True(t, merged.Pull.Merged)
	require.Equal(t, "squash", merged.Pull.MergeMethod)
	require.Equal(t, "Fix Safari login (#7)", merged.Pull.MergeTitle)
	res = e.call(threadKey, ToolMergePullRequest, map[string]any{})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "octo/hello#7 cannot be merged: Pull Request is not mergeable")
	res = e.call(threadKey, ToolMergePullRequest, map[string]any{"method": "fast-forward"})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "want merge, squash or rebase")
}

// Which repository and number a call acts on: the thread's by default, the
// input's when named, and another repository only when allowed.
func TestToolTargets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allow   bool
		session string
		input   map[string]any
		want    string // output or error text
		refused bool
		isError bool
	}{
		{name: "thread default", session: threadKey, input: map[string]any{}, want: "octo/hello#7 (issue)"},
		{name: "other number, thread repository", session: threadKey, input: map[string]any{"number": 9}, want: "octo/hello#9 (issue)"},
		{name: "other repository refused", session: threadKey, input: map[string]any{"repo": "octo/other", "number": 1}, refused: true,
			want: "refused: this conversation is on github:octo/hello#7, and the GitHub tools may act only on octo/hello here; octo/other is another repository"},
		{name: "other repository allowed", allow: true, session: threadKey, input: map[string]any{"repo": "octo/other", "number": 1}, want: "octo/other#1 (issue)"},
		{name: "other repository needs a number", allow: true, session: threadKey, input: map[string]any{"repo": "octo/other"}, isError: true,
			want: "number is required: which issue or pull request of octo/other?"},
		{name: "not a GitHub thread: repo required", session: slackKey, input: map[string]any{"number": 7}, isError: true,
			want: "repo is required (owner/name): this conversation is not on a GitHub issue or pull request"},
		{name: "not a GitHub thread: number required", session: slackKey, input: map[string]any{"repo": "octo/hello"}, isError: true,
			want: "number is required"},
		{name: "not a GitHub thread: any installed repository", session: slackKey, input: map[string]any{"repo": "octo/other", "number": 1}, want: "octo/other#1 (issue)"},
		{name: "local thread", session: "local:t1", input: map[string]any{"repo": "octo/hello", "number": 9}, want: "octo/hello#9 (issue)"},
		{name: "malformed repo", session: slackKey, input: map[string]any{"repo": "octo/../etc", "number": 1}, isError: true,
			want: `repo "octo/../etc": want owner/name`},
		{name: "repo with a path", session: slackKey, input: map[string]any{"repo": "octo/hello/issues", "number": 1}, isError: true, want: "want owner/name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newToolsEnv(t, ToolOptions{AllowOtherRepos: tc.allow})
			for _, n := range []int{7, 9} {
				e.addIssue("octo/hello", &fakeIssue{Number: n, Title: "t"})
			}
			e.addIssue("octo/other", &fakeIssue{Number: 1, Title: "t"})
			res := e.call(tc.session, ToolGetIssue, tc.input)
			require.Contains(t, res.Output, tc.want)
			require.Equal(t, tc.refused, res.Refused, res.Output)
			require.Equal(t, tc.refused || tc.isError, res.IsError, res.Output)
			if tc.refused || tc.isError {
				require.Zero(t, e.gh.callCount("GET /repos/{owner}/{repo}/issues/{number}"), "nothing asked of GitHub")
			}
		})
	}
}

// GitHub's refusals come back as text the model can act on, without
// credentials.
func TestToolsExplainGitHubErrors(t *testing.T) {
	const (
		getIssue = "GET /repos/{owner}/{repo}/issues/{number}"
		comment  = "POST /repos/{owner}/{repo}/issues/{number}/comments"
	)
	for _, tc := range []struct {
		name    string
		fail    string
		answer  failure
		tool    string
		session string
		input   map[string]any
		want    string
		// freshClient makes the call with a client that holds no token yet.
		freshClient bool
	}{
		{name: "no such issue", tool: ToolGetIssue, session: threadKey, input: map[string]any{"number": 12},
			want: "no issue or pull request #12 in octo/hello"},
		{name: "no such pull request", tool: ToolGetPullRequest, session: threadKey, input: map[string]any{"number": 12},
			want: "no pull request #12 in octo/hello"},
		{name: "an issue is not a pull request", tool: ToolPullRequestDiff, session: threadKey, input: map[string]any{"number": 3},
			want: "no pull request #3 in octo/hello"},
		{name: "App not installed", tool: ToolGetIssue, session: slackKey, input: map[string]any{"repo": "acme/api", "number": 1},
			want: "the GitHub App is not installed on acme/api"},
		{name: "comment on a missing issue", fail: comment, answer: failure{status: 404, body: `{"message":"Not Found"}`},
			tool: ToolComment, session: threadKey, input: map[string]any{"number": 12, "body": "hi"}, want: "no issue or pull request #12 in octo/hello"},
		{name: "forbidden", fail: getIssue, answer: failure{status: 403, body: `{"message":"Resource not accessible by integration"}`},
			tool: ToolGetIssue, session: threadKey, input: map[string]any{},
			want: "could not read octo/hello#7: GitHub refused (403): Resource not accessible by integration; the App's installation may lack the permission"},
		{name: "validation details", fail: comment, answer: failure{status: 422, body: `{"message":"Validation Failed","errors":[{"resource":"IssueComment","field":"body","code":"too_long"}]}`},
			tool: ToolComment, session: threadKey, input: map[string]any{"body": "x"},
			want: "could not comment on octo/hello#7: GitHub refused (422): Validation Failed (IssueComment body: too_long)"},
		{name: "server error", fail: getIssue, answer: failure{status: 502, body: `{"message":"Bad Gateway"}`},
			tool: ToolGetIssue, session: threadKey, input: map[string]any{}, want: "could not read octo/hello#7: GitHub failed (502); try again later"},
		{name: "secondary rate limit", fail: getIssue, answer: failure{status: 403, header: map[string]string{"Retry-After": "30"}, body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`},
			tool: ToolGetIssue, session: threadKey, input: map[string]any{}, want: "secondary rate limit was hit; wait 30s before trying again"},
		{name: "rate limit", fail: getIssue, answer: failure{status: 403, header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Reset": "4102444800"}, body: `{"message":"API rate limit exceeded"}`},
			tool: ToolGetIssue, session: threadKey, input: map[string]any{}, want: "rate limit for this installation is used up until 2100-01-01T00:00:00Z"},
		{name: "token exchange refused", fail: "POST /app/installations/{id}/access_tokens", answer: failure{status: 403, body: `{"message":"This installation has been suspended"}`},
			tool: ToolGetIssue, session: threadKey, input: map[string]any{}, freshClient: true,
			want: "could not read octo/hello#7: GitHub refused the App an installation token (403); the installation may be suspended"},
		{name: "forbidden by rate limit without a documentation URL", fail: getIssue, answer: failure{status: 403, header: map[string]string{"Retry-After": "12"}, body: `{"message":"slow down"}`},
			tool: ToolGetIssue, session: threadKey, input: map[string]any{}, want: "GitHub's rate limit was hit; wait 12s before trying again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newToolsEnv(t, ToolOptions{})
			e.addIssue("octo/hello", &fakeIssue{Number: 7, Title: "t", Pull: &fakePull{Base: "main", Head: "x"}})
			e.addIssue("octo/hello", &fakeIssue{Number: 3, Title: "t"})
			// A token exists before the failure, so the test can look for it.
			e.ok(threadKey, ToolGetIssue, map[string]any{"number": 3})
			if tc.fail != "" {
				e.gh.fail(tc.fail, tc.answer)
			}
			if tc.freshClient {
				// A fresh client must exchange a token, and is refused.
				var err error
				e.client, err = NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: e.gh.url()})
				require.NoError(t, err)
				e.reg, err = tools.NewRegistry(Tools(e.client, ToolOptions{})...)
				require.NoError(t, err)
			}
			res := e.call(tc.session, tc.tool, tc.input)
			require.True(t, res.IsError, res.Output)
			require.False(t, res.Refused, res.Output)
			require.Contains(t, res.Output, tc.want)
			e.requireNoToken(res.Output, "the output")
			require.NotContains(t, res.Output, "Bearer")
			require.NotContains(t, res.Output, e.gh.srv.URL, "no request URLs: the model needs none")
		})
	}
}

func TestCheckoutAndPush(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{})
	up := e.seedUpstream()
	e.addIssue("octo/hello", &fakeIssue{Number: 7, Title: "Fix Safari login"})
	repo := filepath.Join(e.workspace, "hello")

	// A fresh clone at the default branch.
	out := e.ok(threadKey, ToolCheckout, map[string]any{})
	require.Contains(t, out, "Cloned octo/hello into hello/ and checked out branch main (at "+up.main[:7])
	require.Contains(t, out, "second on main")
	require.Contains(t, out, "Local branch main tracks origin/main")
	e.requireNoToken(out, "the output")
	e.requireNoTokenInWorkspace()
	require.FileExists(t, filepath.Join(repo, "main.go"))
	require.Equal(t, up.main, e.git(repo, "rev-parse", "HEAD"))
	require.Equal(t, "origin/main", e.git(repo, "rev-parse", "--abbrev-ref", "main@{upstream}"))
	require.Equal(t, e.gh.srv.URL+"/octo/hello.git", e.git(repo, "config", "--get", "remote.origin.url"),
		"the remote is GitHub's git host, derived from the API URL, without credentials")
	require.Equal(t, up.feature, e.git(repo, "rev-parse", "origin/feature"), "every branch is there, as after git clone")
	require.Equal(t, up.tagged, e.git(repo, "rev-parse", "v1.0^{commit}"))
	e.mu.Lock()
	require.Positive(t, e.gitAuths, "git authenticated with the installation token")
	e.mu.Unlock()
	_, err := e.gitOutput(repo, "fetch", "origin")
	require.Error(t, err, "the checkout holds no credentials of its own")

	// The same checkout moves to other refs.
	for _, tc := range []struct{ ref, want, head string }{
		{"feature", "Updated octo/hello into hello/ and checked out branch feature", up.feature},
		{"v1.0", "checked out tag v1.0", up.tagged},
		{up.feature[:10], "checked out commit " + up.feature[:10], up.feature},
		{"pull/7/head", "checked out pull request pull/7/head", up.contrib},
		{up.contrib, "checked out commit " + up.contrib, up.contrib},
		{"main", "checked out branch main", up.main},
	} {
		out := e.ok(threadKey, ToolCheckout, map[string]any{"ref": tc.ref})
		require.Contains(t, out, tc.want)
		require.Equal(t, tc.head, e.git(repo, "rev-parse", "HEAD"), tc.ref)
		e.requireNoToken(out, "the output")
	}
	e.requireNoTokenInWorkspace()

	// The agent commits on a branch of its own and pushes it.
	e.git(repo, "switch", "--quiet", "-c", "fix-safari")
	fix := e.commit(repo, "login.go", "package main // fixed\n", "Fix Safari login")
	out = e.ok(threadKey, ToolPushBranch, map[string]any{})
	require.Contains(t, out, "Pushed fix-safari ("+fix[:12]+") from hello/ to octo/hello.")
	e.requireNoToken(out, "the output")
	require.Equal(t, fix, e.git(up.bare, "rev-parse", "refs/heads/fix-safari"))
	require.Equal(t, "origin/fix-safari", e.git(repo, "rev-parse", "--abbrev-ref", "fix-safari@{upstream}"))
	e.requireNoTokenInWorkspace()

	// ... and opens a pull request from it.
	out = e.ok(threadKey, ToolOpenPullRequest, map[string]any{"head": "fix-safari", "title": "Fix Safari login", "body": "Fixes #3."})
	require.Equal(t, "Opened pull request octo/hello#8 (fix-safari → main): https://github.com/octo/hello/pull/8", out)
	pr := e.issue("octo/hello#8")
	require.Equal(t, fix, pr.Pull.HeadSHA)
	require.Equal(t, "main", pr.Pull.Base)
	res := e.call(threadKey, ToolOpenPullRequest, map[string]any{"head": "never-pushed", "title": "x"})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "GitHub refused (422): Validation Failed (PullRequest head: invalid)")

	// Never the default branch, under any name.
	for _, in := range []map[string]any{{"branch": "main"}, {"branch": "refs/heads/main"}} {
		res := e.call(threadKey, ToolPushBranch, in)
		require.True(t, res.Refused, res.Output)
		require.Contains(t, res.Output, "main is the default branch of octo/hello; push your commits to a new branch")
	}
	e.git(repo, "switch", "--quiet", "main")
	e.commit(repo, "direct.txt", "x\n", "straight to main")
	res = e.call(threadKey, ToolPushBranch, map[string]any{})
	require.True(t, res.Refused, res.Output)
	require.Equal(t, up.main, e.git(up.bare, "rev-parse", "refs/heads/main"), "main unchanged on GitHub")

	// Someone else pushes to the branch: a plain push is rejected, with
	// what to do; force replaces it.
	other := t.TempDir()
	e.git(other, "init", "--quiet")
	e.git(other, "fetch", "--quiet", up.bare, "fix-safari")
	e.git(other, "switch", "--quiet", "-c", "fix-safari", "FETCH_HEAD")
	theirs := e.commit(other, "theirs.txt", "theirs\n", "their change")
	e.git(other, "push", "--quiet", up.bare, "fix-safari")
	e.git(repo, "switch", "--quiet", "fix-safari")
	mine := e.commit(repo, "login.go", "package main // fixed twice\n", "Fix it again")
	res = e.call(threadKey, ToolPushBranch, map[string]any{"branch": "fix-safari"})
	require.True(t, res.IsError)
	require.False(t, res.Refused)
	require.Contains(t, res.Output, "GitHub rejected the push of fix-safari to octo/hello: the branch there has commits yours lacks")
	e.requireNoToken(res.Output, "the output")
	require.Equal(t, theirs, e.git(up.bare, "rev-parse", "refs/heads/fix-safari"))
	out = e.ok(threadKey, ToolPushBranch, map[string]any{"branch": "fix-safari", "force": true})
	require.Contains(t, out, "(forced)")
	require.Equal(t, mine, e.git(up.bare, "rev-parse", "refs/heads/fix-safari"))

	// Checking out over uncommitted work is an error, not data loss.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "login.go"), []byte("work in progress\n"), 0o644))
	res = e.call(threadKey, ToolCheckout, map[string]any{"ref": "main"})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "the checkout in hello has uncommitted changes")
	require.Equal(t, "fix-safari", e.git(repo, "symbolic-ref", "--short", "HEAD"))

	// A local branch ahead of GitHub's keeps its commits; one behind is
	// brought up to date; one that diverged is left alone, and said so.
	e.git(repo, "checkout", "--quiet", "--", "login.go")
	e.git(repo, "switch", "--quiet", "feature")
	local := e.commit(repo, "local.txt", "local\n", "local only")
	e.git(repo, "switch", "--quiet", "main")
	out = e.ok(threadKey, ToolCheckout, map[string]any{"ref": "refs/heads/feature"})
	require.Contains(t, out, "checked out branch feature")
	require.NotContains(t, out, "Note:")
	require.Equal(t, local, e.git(repo, "rev-parse", "HEAD"))

	e.git(other, "fetch", "--quiet", up.bare, "main")
	e.git(other, "switch", "--quiet", "-c", "main", "FETCH_HEAD")
	upstreamMain := e.commit(other, "news.txt", "news\n", "meanwhile on main")
	e.git(other, "push", "--quiet", up.bare, "main")
	e.git(repo, "switch", "--quiet", "main")
	e.git(repo, "reset", "--quiet", "--hard", up.main) // drop "straight to main"
	e.git(repo, "switch", "--quiet", "feature")
	out = e.ok(threadKey, ToolCheckout, map[string]any{"ref": "main"})
	require.NotContains(t, out, "Note:")
	require.Equal(t, upstreamMain, e.git(repo, "rev-parse", "HEAD"), "main fast-forwarded to GitHub's")

	e.git(other, "fetch", "--quiet", up.bare, "feature")
	e.git(other, "switch", "--quiet", "-c", "feature2", "FETCH_HEAD")
	e.commit(other, "feature2.txt", "x\n", "meanwhile on feature")
	e.git(other, "push", "--quiet", "--force", up.bare, "feature2:feature")
	out = e.ok(threadKey, ToolCheckout, map[string]any{"ref": "feature"})
	require.Contains(t, out, "Note: local branch feature has commits that origin/feature lacks")
	require.Equal(t, local, e.git(repo, "rev-parse", "HEAD"), "the local branch is untouched")
	e.requireNoTokenInWorkspace()
}

func TestCheckoutRefusalsAndErrors(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{})
	e.seedUpstream()
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(e.workspace, "link")))
	require.NoError(t, os.MkdirAll(filepath.Join(e.workspace, "notes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.workspace, "notes", "todo.md"), []byte("x"), 0o644))

	for _, tc := range []struct {
		name    string
		tool    string
		input   map[string]any
		refused bool
		want    string
	}{
		{name: "absolute path", tool: ToolCheckout, input: map[string]any{"path": "/tmp/x"}, refused: true, want: "is absolute"},
		{name: "parent directory", tool: ToolCheckout, input: map[string]any{"path": "../x"}, refused: true, want: "outside the workspace"},
		{name: "symbolic link out", tool: ToolCheckout, input: map[string]any{"path": "link/hello"}, refused: true, want: "leads outside the workspace through a symbolic link"},
		{name: "occupied directory", tool: ToolCheckout, input: map[string]any{"path": "notes"}, want: "notes exists and is not a git checkout"},
		{name: "unknown ref", tool: ToolCheckout, input: map[string]any{"ref": "no-such-branch"}, want: `no branch, tag or commit "no-such-branch" in octo/hello; the default branch is main`},
		{name: "unknown commit", tool: ToolCheckout, input: map[string]any{"ref": "0000000000000000000000000000000000000001"}, want: "no branch, tag or commit"},
		{name: "unknown pull request", tool: ToolCheckout, input: map[string]any{"ref": "pull/99/head"}, want: "no pull request #99 in octo/hello"},
		{name: "option as ref", tool: ToolCheckout, input: map[string]any{"ref": "--upload-pack=touch /tmp/pwned"}, want: "is not a valid branch, tag or commit name"},
		{name: "repository not on GitHub", tool: ToolCheckout, input: map[string]any{"repo": "octo/other"}, refused: true, want: "may act only on octo/hello"},
		{name: "push without a checkout", tool: ToolPushBranch, input: map[string]any{"path": "elsewhere"}, want: "there is no checkout in elsewhere; make one with github_checkout first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.call(threadKey, tc.tool, tc.input)
			require.True(t, res.IsError, res.Output)
			require.Equal(t, tc.refused, res.Refused, res.Output)
			require.Contains(t, res.Output, tc.want)
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}

	ts := tools.NewToolset(e.reg, tools.Scope{Agent: "coder"}, tools.ToolsetOptions{})
	res := ts.Execute(context.Background(), tools.CallContext{SessionKey: threadKey}, ToolCheckout, json.RawMessage(`{}`))
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "this run has no workspace")

	// A checkout of another repository is not mixed with this one.
	e.ok(threadKey, ToolCheckout, map[string]any{"path": "mine"})
	e.git(filepath.Join(e.workspace, "mine"), "remote", "set-url", "origin", "https://example.com/someone/else.git")
	res = e.call(threadKey, ToolPushBranch, map[string]any{"path": "mine", "branch": "feature"})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "mine is a checkout of https://example.com/someone/else.git, not of octo/hello")
	res = e.call(threadKey, ToolPushBranch, map[string]any{"path": "mine"})
	require.Contains(t, res.Output, "not of octo/hello")
}

func TestCheckoutTokenRefusedByGit(t *testing.T) {
	e := newToolsEnv(t, ToolOptions{})
	e.seedUpstream()
	e.mu.Lock()
	e.gitDeny = true
	e.mu.Unlock()
	res := e.call(threadKey, ToolCheckout, map[string]any{})
	require.True(t, res.IsError)
	require.Contains(t, res.Output, "could not fetch octo/hello: GitHub refused the App's installation token for git")
	e.requireNoToken(res.Output, "the output")
	entries, err := os.ReadDir(e.workspace)
	require.NoError(t, err)
	require.Empty(t, entries, "a failed fetch leaves nothing behind")
}

func TestGitBaseURL(t *testing.T) {
	for _, tc := range []struct{ api, want string }{
		{"https://api.github.com/", "https://github.com/"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com/"},
		{"https://ghe.example.com/api/v3", "https://ghe.example.com/"},
		{"https://ghe.example.com:8443/prefix/api/v3/", "https://ghe.example.com:8443/prefix/"},
		{"https://api.acme.ghe.com/", "https://acme.ghe.com/"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/"},
	} {
		u, err := url.Parse(tc.api)
		require.NoError(t, err)
		require.Equal(t, tc.want, gitBaseURL(u).String(), tc.api)
	}
}

func TestFilterDiff(t *testing.T) {
	diff := "diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-1\n+2\n" +
		"diff --git a/old.txt b/new.txt\nsimilarity index 100%\nrename from old.txt\nrename to new.txt\n" +
		"diff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n" +
		"diff --git a/gone.go b/gone.go\ndeleted file mode 100644\n--- a/gone.go\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
	for _, tc := range []struct {
		paths   []string
		want    []string
		missing []string
	}{
		{paths: []string{"a.go"}, want: []string{"a/a.go"}},
		{paths: []string{"new.txt"}, want: []string{"rename to new.txt"}},
		{paths: []string{"old.txt"}, want: []string{"rename from old.txt"}},
		{paths: []string{"img.png"}, want: []string{"Binary files"}},
		{paths: []string{"gone.go", "x.go"}, want: []string{"deleted file"}, missing: []string{"x.go"}},
	} {
		got, missing := filterDiff(diff, tc.paths)
		for _, w := range tc.want {
			require.Contains(t, got, w, tc.paths)
		}
		require.Equal(t, tc.missing, missing, tc.paths)
		require.Equal(t, 1, strings.Count(got, "diff --git"), tc.paths)
	}
}

func FuzzFilterDiff(f *testing.F) {
	f.Add("diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-1\n+2\n", "a.go")
	f.Add("diff --git a/x y b/x y\nBinary files differ\n", "x y")
	f.Add("diff --git a/\n", "")
	f.Add("no diff at all", "a")
	f.Fuzz(func(t *testing.T, diff, path string) {
		got, missing := filterDiff(diff, []string{path})
		require.True(t, strings.Contains(diff, got), "a filtered diff is part of the diff")
		require.True(t, got == "" || strings.HasPrefix(got, "diff --git "))
		require.LessOrEqual(t, len(missing), 1)
		for _, sec := range splitDiff(diff) {
			require.True(t, strings.HasPrefix(sec, "diff --git "))
			diffNames(sec)
		}
	})
}

func TestValidRef(t *testing.T) {
	for ref, ok := range map[string]bool{
		"main": true, "feature/login-fix": true, "v1.2.3": true, "release_2024": true, "0123abc": true, "pull/12/head": true,
		"": false, "-x": false, "--upload-pack=x": false, "a..b": false, "a b": false, "a~1": false, "a^": false, "a:b": false,
		"x.lock": false, "/a": false, "a/": false, "a//b": false, ".hidden": false, "a/.b": false, "a@{1}": false, "a\nb": false,
	} {
		require.Equal(t, ok, validRef(ref) == nil, strconv.Quote(ref))
	}
}
