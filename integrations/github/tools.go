package github

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

// Names of the GitHub agent tools.
const (
	ToolGetIssue         = "github_get_issue"
	ToolGetPullRequest   = "github_get_pull_request"
	ToolPullRequestDiff  = "github_pull_request_diff"
	ToolListChangedFiles = "github_list_changed_files"
	ToolCheckout         = "github_checkout"
	ToolComment          = "github_comment"
	ToolAddLabels        = "github_add_labels"
	ToolRemoveLabel      = "github_remove_label"
	ToolRequestReview    = "github_request_review"
	ToolPushBranch       = "github_push_branch"
	ToolOpenPullRequest  = "github_open_pull_request"
	ToolMergePullRequest = "github_merge_pull_request"
)

// ReadTools are the GitHub tools that change nothing on GitHub: reading
// issues and pull requests, and cloning into the run's own workspace.
func ReadTools() []string {
	return []string{ToolGetIssue, ToolGetPullRequest, ToolPullRequestDiff, ToolListChangedFiles, ToolCheckout}
}

// WriteTools are the GitHub tools a contributor uses: they comment, label,
// ask for reviews, push branches other than the default one and open pull
// requests, but never change the default branch.
func WriteTools() []string {
	return []string{ToolComment, ToolAddLabels, ToolRemoveLabel, ToolRequestReview, ToolPushBranch, ToolOpenPullRequest}
}

// MergeTools are the GitHub tools that change a protected history: merging a
// pull request. They belong to the maintainer profile and above.
func MergeTools() []string {
	return []string{ToolMergePullRequest}
}

// Defaults of ToolOptions.
const (
	DefaultMaxDiffBytes = 30000
	DefaultGitTimeout   = 10 * time.Minute
)

// ToolOptions configure the GitHub agent tools.
type ToolOptions struct {
	// AllowOtherRepos lets a run on one repository's thread act on other
	// repositories the App is installed on. Runs whose thread is not on
	// GitHub (Slack, local) name the repository in every call and may act
	// on any of them.
	AllowOtherRepos bool
	// MaxDiffBytes caps what github_pull_request_diff returns; 0 means
	// DefaultMaxDiffBytes, which fits under the toolset's default output
	// cap so a diff is cut once, where the tool says so.
	MaxDiffBytes int
	// GitTimeout bounds one checkout or push; 0 means DefaultGitTimeout.
	GitTimeout time.Duration
}

// Tools returns the GitHub agent tools acting through client: the
// installation that covers the repository a call names, found per call.
// Register them next to tools.Core.
func Tools(client *Client, opts ToolOptions) []tools.Tool {
	if opts.MaxDiffBytes <= 0 {
		opts.MaxDiffBytes = DefaultMaxDiffBytes
	}
	if opts.GitTimeout <= 0 {
		opts.GitTimeout = DefaultGitTimeout
	}
	k := &toolkit{client: client, opts: opts}
	// Reading GitHub, and cloning into the run's own workspace (how a
	// reviewer reads code; nobody else sees it), needs read; what others
	// see on GitHub needs push; merging needs merge.
	read := []tools.Permission{tools.PermRead}
	push := []tools.Permission{tools.PermPush}
	merge := []tools.Permission{tools.PermMerge}
	return []tools.Tool{
		newTool(ToolGetIssue, read, getIssueSchema, k.getIssue,
			"Read a GitHub issue or pull request: title, state, author, labels, assignees, description and its most recent comments. "+
				"repo and number default to the issue or pull request this conversation is on."),
		newTool(ToolGetPullRequest, read, numberSchema, k.getPullRequest,
			"Read a GitHub pull request: state, draft, base and head branches, head commit, whether it can be merged, size, labels, requested reviewers and description. "+
				"repo and number default to the pull request this conversation is on. For the conversation use github_get_issue; for the changes github_list_changed_files and github_pull_request_diff."),
		newTool(ToolPullRequestDiff, read, diffSchema, k.pullRequestDiff,
			fmt.Sprintf("Read the unified diff of a GitHub pull request, at most %d bytes; a longer diff is cut and says so. "+
				"Give paths (see github_list_changed_files) to read only those files' changes. repo and number default to the pull request this conversation is on.", opts.MaxDiffBytes)),
		newTool(ToolListChangedFiles, read, numberSchema, k.listChangedFiles,
			"List the files a GitHub pull request changes, with their status (added, modified, removed, renamed) and lines added and removed. "+
				"repo and number default to the pull request this conversation is on."),
		newTool(ToolCheckout, read, checkoutSchema, k.checkout,
			"Clone a GitHub repository into the workspace (default directory: the repository's name), or update an existing checkout, and check out ref: a branch, a tag, a commit SHA or pull/<number>/head. "+
				"ref defaults to the default branch; to work on a pull request use its head branch (github_get_pull_request shows it) or pull/<number>/head. "+
				"A branch is checked out as a local branch tracking origin. The checkout holds no credentials: plain git fetch and git push there will fail; use github_push_branch to publish commits. repo defaults to this conversation's repository."),
		newTool(ToolComment, push, commentSchema, k.comment,
			"Post a new comment on a GitHub issue or pull request. Your progress and final answer already appear in this conversation's thread; "+
				"use this for a message that must stand on its own, such as a note on another issue. GitHub Markdown. repo and number default to the issue or pull request this conversation is on."),
		newTool(ToolAddLabels, push, addLabelsSchema, k.addLabels,
			"Add labels to a GitHub issue or pull request; labels the repository does not have yet are created. Returns the labels it has afterwards. "+
				"repo and number default to the issue or pull request this conversation is on."),
		newTool(ToolRemoveLabel, push, removeLabelSchema, k.removeLabel,
			"Remove one label from a GitHub issue or pull request. Returns the labels it has afterwards. repo and number default to the issue or pull request this conversation is on."),
		newTool(ToolRequestReview, push, requestReviewSchema, k.requestReview,
			"Ask people (GitHub logins) or teams (team slugs of the repository's organisation) to review a GitHub pull request. "+
				"They must have access to the repository. repo and number default to the pull request this conversation is on."),
		newTool(ToolPushBranch, push, pushSchema, k.pushBranch,
			"Push a local branch of a workspace checkout (made by github_checkout) to the GitHub repository, under the same name. "+
				"Commit first with git in that directory. branch defaults to the branch checked out there. Pushing to the repository's default branch is refused: push a new branch and open a pull request. "+
				"force replaces the remote branch's history (only for branches you created). repo defaults to this conversation's repository."),
		newTool(ToolOpenPullRequest, push, openPullRequestSchema, k.openPullRequest,
			"Open a pull request on GitHub from a pushed branch (head, see github_push_branch) into base, which defaults to the repository's default branch. "+
				"Returns its number and URL. repo defaults to this conversation's repository."),
		newTool(ToolMergePullRequest, merge, mergeSchema, k.mergePullRequest,
			"Merge a GitHub pull request (method merge, squash or rebase; default merge). Give sha, the head commit you reviewed, so nothing pushed since is merged unseen. "+
				"Needs the maintainer permission profile (or one granting merge). repo and number default to the pull request this conversation is on."),
	}
}

// ToolInfos describes the GitHub agent tools without a connection, for
// calls checked offline (`switchyard policy check`).
func ToolInfos() []tools.Info {
	ts := Tools(nil, ToolOptions{})
	out := make([]tools.Info, len(ts))
	for i, t := range ts {
		out[i] = t.Info()
	}
	return out
}

// Input schemas. repo and number are optional in the schema because the
// conversation's thread supplies them; the tool says when it cannot.
const (
	repoProp   = `"repo":{"type":"string","description":"Repository as owner/name; default: this conversation's repository"}`
	numberProp = `"number":{"type":"integer","minimum":1,"description":"Issue or pull request number; default: this conversation's"}`
)

func objectSchema(required []string, props ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") +
		`},"required":` + string(req) + `,"additionalProperties":false}`)
}

var (
	getIssueSchema = objectSchema(nil, repoProp, numberProp,
		`"comments":{"type":"integer","minimum":0,"maximum":100,"description":"How many of the most recent comments to include; default 20"}`)
	numberSchema = objectSchema(nil, repoProp, numberProp)
	diffSchema   = objectSchema(nil, repoProp, numberProp,
		`"paths":{"type":"array","items":{"type":"string"},"description":"Only the changes of these files (paths as github_list_changed_files lists them)"}`)
	checkoutSchema = objectSchema(nil, repoProp,
		`"ref":{"type":"string","description":"Branch, tag, commit SHA or pull/<number>/head; default: the default branch"}`,
		`"path":{"type":"string","description":"Directory of the checkout, relative to the workspace; default: the repository's name"}`)
	commentSchema = objectSchema([]string{"body"}, repoProp, numberProp,
		`"body":{"type":"string","minLength":1,"description":"The comment, GitHub Markdown"}`)
	addLabelsSchema = objectSchema([]string{"labels"}, repoProp, numberProp,
		`"labels":{"type":"array","items":{"type":"string","minLength":1},"minItems":1,"description":"Label names"}`)
	removeLabelSchema = objectSchema([]string{"label"}, repoProp, numberProp,
		`"label":{"type":"string","minLength":1,"description":"The label's name"}`)
	requestReviewSchema = objectSchema(nil, repoProp, numberProp,
		`"reviewers":{"type":"array","items":{"type":"string","minLength":1},"description":"GitHub logins"}`,
		`"team_reviewers":{"type":"array","items":{"type":"string","minLength":1},"description":"Team slugs, without the organisation"}`)
	pushSchema = objectSchema(nil, repoProp,
		`"branch":{"type":"string","description":"Local branch to push; default: the branch checked out"}`,
		`"path":{"type":"string","description":"Directory of the checkout, relative to the workspace; default: the repository's name"}`,
		`"force":{"type":"boolean","description":"Overwrite the remote branch even if that drops commits"}`)
	openPullRequestSchema = objectSchema([]string{"head", "title"}, repoProp,
		`"head":{"type":"string","minLength":1,"description":"The pushed branch with the changes"}`,
		`"base":{"type":"string","description":"Branch to merge into; default: the default branch"}`,
		`"title":{"type":"string","minLength":1}`,
		`"body":{"type":"string","description":"Description, GitHub Markdown"}`,
		`"draft":{"type":"boolean","description":"Open as a draft"}`)
	mergeSchema = objectSchema(nil, repoProp, numberProp,
		`"method":{"type":"string","enum":["merge","squash","rebase"],"description":"Default merge"}`,
		`"sha":{"type":"string","description":"Head commit SHA the pull request must still have"}`,
		`"commit_title":{"type":"string","description":"Title of the merge or squash commit"}`,
		`"commit_message":{"type":"string","description":"Message of the merge or squash commit"}`)
)

// toolkit holds what every GitHub tool shares.
type toolkit struct {
	client *Client
	opts   ToolOptions
}

type ghTool struct {
	info tools.Info
	run  func(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error)
}

var _ tools.Tool = (*ghTool)(nil)

func (t *ghTool) Info() tools.Info { return t.info }

func (t *ghTool) Run(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	return t.run(ctx, cc, input)
}

func newTool(name string, perms []tools.Permission, schema json.RawMessage, run func(context.Context, tools.CallContext, json.RawMessage) (string, error), desc string) tools.Tool {
	return &ghTool{info: tools.Info{Name: name, Description: desc, Schema: schema, Kind: tools.KindIntegration, Permissions: perms}, run: run}
}

// target is the repository, and the issue or pull request, a call acts on.
type target struct {
	owner, repo string
	number      int
}

func (t target) full() string { return t.owner + "/" + t.repo }

func (t target) String() string {
	if t.number > 0 {
		return fmt.Sprintf("%s/%s#%d", t.owner, t.repo, t.number)
	}
	return t.full()
}

var (
	// Owners of Enterprise Managed Users carry an _shortcode suffix.
	ownerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$`)
	repoName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// parseRepo reads owner/name. The parts go into API paths unescaped by
// go-github, so only GitHub's own name characters pass.
func parseRepo(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(strings.TrimSuffix(strings.TrimSpace(s), ".git"), "/")
	if !ok || !ownerName.MatchString(owner) || !repoName.MatchString(name) || name == "." || name == ".." {
		return "", "", fmt.Errorf("invalid input: repo %q: want owner/name, such as octocat/hello-world", s)
	}
	return owner, name, nil
}

// resolve works out what a call acts on: the thread's repository and number
// unless the input names others, and only the thread's repository unless
// other repositories are allowed.
func (k *toolkit) resolve(cc tools.CallContext, repo string, number int, needNumber bool) (target, error) {
	th, err := bot.ParseThread(cc.SessionKey)
	onGitHub := err == nil && th.Source == bot.SourceGitHub
	var t target
	switch {
	case repo != "":
		owner, name, err := parseRepo(repo)
		if err != nil {
			return target{}, err
		}
		t = target{owner: owner, repo: name}
	case onGitHub:
		t = target{owner: th.Owner, repo: th.Repo}
	default:
		return target{}, errors.New("invalid input: repo is required (owner/name): this conversation is not on a GitHub issue or pull request")
	}
	sameRepo := onGitHub && strings.EqualFold(t.owner, th.Owner) && strings.EqualFold(t.repo, th.Repo)
	if onGitHub && !sameRepo && !k.opts.AllowOtherRepos {
		return target{}, tools.Refuse("this conversation is on %s, and the GitHub tools may act only on %s/%s here; %s is another repository (an operator can allow that with the GitHub tools' allow_other_repos setting)",
			th.Key(), th.Owner, th.Repo, t.full())
	}
	if sameRepo {
		t.owner, t.repo = th.Owner, th.Repo
	}
	if !needNumber {
		return t, nil
	}
	switch {
	case number < 0:
		return target{}, fmt.Errorf("invalid input: number %d: want a positive issue or pull request number", number)
	case number > 0:
		t.number = number
	case sameRepo:
		t.number = th.Number
	default:
		return target{}, fmt.Errorf("invalid input: number is required: which issue or pull request of %s?", t.full())
	}
	return t, nil
}

// api returns the installation client for t's repository.
// open resolves the call's target and returns the client of the
// installation that covers its repository.
func (k *toolkit) open(ctx context.Context, cc tools.CallContext, repo string, number int, needNumber bool) (*gh.Client, target, error) {
	t, err := k.resolve(cc, repo, number, needNumber)
	if err != nil {
		return nil, t, err
	}
	c, _, err := k.api(ctx, t)
	return c, t, err
}

func (k *toolkit) api(ctx context.Context, t target) (*gh.Client, int64, error) {
	c, id, err := k.client.ForRepo(ctx, t.owner, t.repo)
	if err != nil {
		if bot.ErrorCode(err) == bot.ENOTFOUND {
			return nil, 0, errors.New(bot.ErrorMessage(err))
		}
		return nil, 0, explain(err, "find the GitHub App's installation on "+t.full(), "the GitHub App is not installed on "+t.full())
	}
	return c, id, nil
}

// explain turns an API error into text the model can act on: what failed,
// GitHub's own words, and what to do. notFound is what a 404 means for the
// call. Nothing of the request (headers, tokens) is included.
func explain(err error, action, notFound string) error {
	closeTokenError(err)
	var rle *gh.RateLimitError
	if errors.As(err, &rle) {
		return fmt.Errorf("could not %s: GitHub's rate limit for this installation is used up until %s; try again later",
			action, rle.Rate.Reset.Time.UTC().Format(time.RFC3339))
	}
	var are *gh.AbuseRateLimitError
	if errors.As(err, &are) {
		wait := defaultRetryAfter
		if are.RetryAfter != nil && *are.RetryAfter > 0 {
			wait = *are.RetryAfter
		}
		return fmt.Errorf("could not %s: GitHub's secondary rate limit was hit; wait %s before trying again", action, wait)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("could not %s: GitHub did not answer in time; try again later", action)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("could not %s: the call was cancelled", action)
	}
	resp := errorResponse(err)
	if resp == nil {
		return fmt.Errorf("could not %s: GitHub could not be reached; try again later", action)
	}
	var he *ghinstallation.HTTPError
	if errors.As(err, &he) {
		if resp.StatusCode >= 500 {
			return fmt.Errorf("could not %s: GitHub failed to issue an installation token (%d); try again later", action, resp.StatusCode)
		}
		return fmt.Errorf("could not %s: GitHub refused the App an installation token (%d); the installation may be suspended or have lost access", action, resp.StatusCode)
	}
	msg := githubMessage(err)
	switch code := resp.StatusCode; {
	case code == http.StatusForbidden && isRateLimited(resp.Header):
		return fmt.Errorf("could not %s: GitHub's rate limit was hit; wait %s before trying again", action, retryAfter(resp.Header, time.Now()))
	case code == http.StatusNotFound:
		return errors.New(notFound)
	case code == http.StatusUnauthorized:
		return fmt.Errorf("could not %s: GitHub did not accept the App's credentials (401)", action)
	case code == http.StatusForbidden:
		return fmt.Errorf("could not %s: GitHub refused (403)%s; the App's installation may lack the permission", action, msg)
	case code == http.StatusTooManyRequests:
		return fmt.Errorf("could not %s: GitHub's rate limit was hit (429); try again later", action)
	case code >= 500:
		return fmt.Errorf("could not %s: GitHub failed (%d); try again later", action, code)
	default:
		return fmt.Errorf("could not %s: GitHub refused (%d)%s", action, code, msg)
	}
}

// githubMessage is GitHub's explanation of a refusal: its message and the
// details of each validation error, as ": message (detail; detail)".
func githubMessage(err error) string {
	var er *gh.ErrorResponse
	if !errors.As(err, &er) {
		return ""
	}
	var details []string
	for _, e := range er.Errors {
		switch {
		case e.Message != "":
			details = append(details, e.Message)
		case e.Field != "":
			details = append(details, fmt.Sprintf("%s %s: %s", e.Resource, e.Field, e.Code))
		}
	}
	out := ""
	if er.Message != "" {
		out = ": " + er.Message
	}
	if len(details) > 0 {
		out += " (" + strings.Join(details, "; ") + ")"
	}
	return out
}

func statusOf(err error) int {
	if resp := errorResponse(err); resp != nil {
		return resp.StatusCode
	}
	return 0
}

// Limits of what the read tools return.
const (
	maxBodyBytes        = 16 << 10
	maxCommentShow      = 4 << 10
	defaultComments     = 20
	maxChangedFiles     = 3000 // GitHub lists no more
	maxGitHubCommentLen = 65536
)

// clip cuts s to max bytes on a rune boundary and says so.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[… %d more bytes not shown]", len(s)-cut)
}

func when(t gh.Timestamp) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (k *toolkit) getIssue(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo     string `json:"repo"`
		Number   int    `json:"number"`
		Comments *int   `json:"comments"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	want := defaultComments
	if in.Comments != nil {
		want = min(max(*in.Comments, 0), 100)
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	is, _, err := c.Issues.Get(ctx, t.owner, t.repo, t.number)
	if err != nil {
		return "", explain(err, "read "+t.String(), fmt.Sprintf("no issue or pull request #%d in %s", t.number, t.full()))
	}
	var b strings.Builder
	kind := "issue"
	if is.IsPullRequest() {
		kind = "pull request"
	}
	fmt.Fprintf(&b, "%s (%s): %s\n", t, kind, is.GetTitle())
	state := is.GetState()
	if r := is.GetStateReason(); r != "" && state == "closed" {
		state += " as " + strings.ReplaceAll(r, "_", " ")
	}
	fmt.Fprintf(&b, "State: %s · author: %s · created %s · updated %s\n", state, is.GetUser().GetLogin(), when(is.GetCreatedAt()), when(is.GetUpdatedAt()))
	var assignees []string
	for _, a := range is.Assignees {
		assignees = append(assignees, a.GetLogin())
	}
	fmt.Fprintf(&b, "Labels: %s · assignees: %s · comments: %d\n", listOrNone(labelNames(is.Labels)), listOrNone(assignees), is.GetComments())
	if m := is.GetMilestone(); m != nil {
		fmt.Fprintf(&b, "Milestone: %s\n", m.GetTitle())
	}
	fmt.Fprintf(&b, "URL: %s\n", is.GetHTMLURL())
	if is.IsPullRequest() {
		b.WriteString("(A pull request: github_get_pull_request shows its branches and merge state, github_pull_request_diff its changes.)\n")
	}
	b.WriteString("\n")
	if body := strings.TrimSpace(is.GetBody()); body != "" {
		b.WriteString(clip(body, maxBodyBytes))
	} else {
		b.WriteString("(no description)")
	}
	b.WriteString("\n")
	if want == 0 || is.GetComments() == 0 {
		return b.String(), nil
	}
	comments, err := lastComments(ctx, c, t, is.GetComments(), want)
	if err != nil {
		return "", explain(err, "read the comments of "+t.String(), fmt.Sprintf("no issue or pull request #%d in %s", t.number, t.full()))
	}
	total := max(is.GetComments(), len(comments))
	if len(comments) < total {
		fmt.Fprintf(&b, "\n--- the last %d of %d comments ---\n", len(comments), total)
	} else {
		fmt.Fprintf(&b, "\n--- %d comments ---\n", total)
	}
	for _, cm := range comments {
		fmt.Fprintf(&b, "\n[%s, %s]\n%s\n", cm.GetUser().GetLogin(), when(cm.GetCreatedAt()), clip(strings.TrimSpace(cm.GetBody()), maxCommentShow))
	}
	return b.String(), nil
}

// lastComments returns the last n of the count comments of t, oldest
// first. GitHub lists comments oldest first, so they are on the last page
// and, when it holds fewer than n, the one before: two requests at most,
// however long the discussion.
func lastComments(ctx context.Context, c *gh.Client, t target, count, n int) ([]*gh.IssueComment, error) {
	const per = 100
	last := max((count+per-1)/per, 1)
	var kept []*gh.IssueComment
	for page := last; page >= 1 && page >= last-1 && len(kept) < n; page-- {
		opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: per, Page: page}}
		got, _, err := c.Issues.ListComments(ctx, t.owner, t.repo, t.number, opts)
		if err != nil {
			return nil, err
		}
		kept = append(got, kept...)
	}
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	return kept, nil
}

func (k *toolkit) getPullRequest(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo   string `json:"repo"`
		Number int    `json:"number"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	pr, _, err := c.PullRequests.Get(ctx, t.owner, t.repo, t.number)
	if err != nil {
		return "", explain(err, "read pull request "+t.String(), noPull(t))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (pull request): %s\n", t, pr.GetTitle())
	state := pr.GetState()
	switch {
	case pr.GetMerged():
		state = fmt.Sprintf("merged by %s at %s", pr.GetMergedBy().GetLogin(), when(pr.GetMergedAt()))
	case pr.GetDraft():
		state += " (draft)"
	}
	fmt.Fprintf(&b, "State: %s · author: %s · created %s · updated %s\n", state, pr.GetUser().GetLogin(), when(pr.GetCreatedAt()), when(pr.GetUpdatedAt()))
	head := pr.GetHead()
	headName := head.GetRef()
	if hr := head.GetRepo().GetFullName(); hr != "" && !strings.EqualFold(hr, t.full()) {
		headName = hr + ":" + headName + " (a fork)"
	}
	fmt.Fprintf(&b, "Base: %s ← head: %s at %s\n", pr.GetBase().GetRef(), headName, head.GetSHA())
	if !pr.GetMerged() && pr.GetState() == "open" {
		mergeable := "not yet known (GitHub is computing it; ask again shortly)"
		switch {
		case pr.Mergeable == nil:
		case pr.GetMergeable():
			mergeable = "yes"
		default:
			mergeable = "no"
		}
		if s := pr.GetMergeableState(); s != "" && s != "unknown" {
			mergeable += " (state: " + s + ")"
		}
		fmt.Fprintf(&b, "Mergeable: %s\n", mergeable)
	}
	fmt.Fprintf(&b, "Size: %d commits, %d files changed, +%d −%d\n", pr.GetCommits(), pr.GetChangedFiles(), pr.GetAdditions(), pr.GetDeletions())
	var reviewers []string
	for _, u := range pr.RequestedReviewers {
		reviewers = append(reviewers, u.GetLogin())
	}
	for _, tm := range pr.RequestedTeams {
		reviewers = append(reviewers, "team "+tm.GetSlug())
	}
	fmt.Fprintf(&b, "Labels: %s · review requested from: %s\n", listOrNone(labelNames(pr.Labels)), listOrNone(reviewers))
	fmt.Fprintf(&b, "URL: %s\n\n", pr.GetHTMLURL())
	if body := strings.TrimSpace(pr.GetBody()); body != "" {
		b.WriteString(clip(body, maxBodyBytes))
	} else {
		b.WriteString("(no description)")
	}
	b.WriteString("\n")
	return b.String(), nil
}

func noPull(t target) string {
	return fmt.Sprintf("no pull request #%d in %s", t.number, t.full())
}

func (k *toolkit) pullRequestDiff(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo   string   `json:"repo"`
		Number int      `json:"number"`
		Paths  []string `json:"paths"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	diff, _, err := c.PullRequests.GetRaw(ctx, t.owner, t.repo, t.number, gh.RawOptions{Type: gh.Diff})
	if err != nil {
		if statusOf(err) == http.StatusNotAcceptable || statusOf(err) == http.StatusUnprocessableEntity {
			return "", fmt.Errorf("GitHub will not produce the diff of %s%s; it is too large: read it per file with github_checkout and git diff, or list the files with github_list_changed_files", t, githubMessage(err))
		}
		return "", explain(err, "read the diff of "+t.String(), noPull(t))
	}
	if len(in.Paths) > 0 {
		var missing []string
		diff, missing = filterDiff(diff, in.Paths)
		if diff == "" {
			return "", fmt.Errorf("%s changes none of %s; github_list_changed_files lists what it changes", t, strings.Join(in.Paths, ", "))
		}
		if len(missing) > 0 {
			diff += fmt.Sprintf("\n[not changed by %s: %s]\n", t, strings.Join(missing, ", "))
		}
	}
	if diff == "" {
		return fmt.Sprintf("%s changes nothing (empty diff)", t), nil
	}
	if len(diff) <= k.opts.MaxDiffBytes {
		return diff, nil
	}
	cut := strings.LastIndexByte(diff[:k.opts.MaxDiffBytes], '\n') + 1
	if cut == 0 {
		cut = k.opts.MaxDiffBytes
		for cut > 0 && !utf8.RuneStart(diff[cut]) {
			cut--
		}
	}
	return diff[:cut] + fmt.Sprintf("\n[diff truncated: showing the first %d of %d bytes. Ask for the rest file by file with paths (github_list_changed_files lists them), or check it out with github_checkout.]\n", cut, len(diff)), nil
}

// filterDiff keeps the sections of a unified git diff that touch one of
// paths, old or new name, and names the paths no section touched.
func filterDiff(diff string, paths []string) (string, []string) {
	want := map[string]bool{}
	for _, p := range paths {
		want[strings.TrimPrefix(strings.TrimSpace(p), "/")] = true
	}
	found := map[string]bool{}
	var out strings.Builder
	for _, sec := range splitDiff(diff) {
		a, b := diffNames(sec)
		if want[a] || want[b] {
			out.WriteString(sec)
			found[a], found[b] = true, true
		}
	}
	var missing []string
	for _, p := range paths {
		if !found[strings.TrimPrefix(strings.TrimSpace(p), "/")] {
			missing = append(missing, p)
		}
	}
	return out.String(), missing
}

// splitDiff cuts a git diff into one section per file, each starting at its
// "diff --git" line.
func splitDiff(diff string) []string {
	var secs []string
	start := -1
	for i := 0; i < len(diff); {
		end := strings.IndexByte(diff[i:], '\n')
		next := len(diff)
		if end >= 0 {
			next = i + end + 1
		}
		if strings.HasPrefix(diff[i:], "diff --git ") {
			if start >= 0 {
				secs = append(secs, diff[start:i])
			}
			start = i
		}
		i = next
	}
	if start >= 0 {
		secs = append(secs, diff[start:])
	}
	return secs
}

// diffNames reads a section's old and new path from its ---/+++ lines, or
// from the "diff --git a/X b/Y" line when it has none (renames, binaries,
// mode changes).
func diffNames(sec string) (a, b string) {
	for line := range strings.Lines(sec) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "--- "):
			a = strings.TrimPrefix(strings.TrimPrefix(line, "--- "), "a/")
		case strings.HasPrefix(line, "+++ "):
			b = strings.TrimPrefix(strings.TrimPrefix(line, "+++ "), "b/")
			return a, b
		case strings.HasPrefix(line, "rename from "):
			a = strings.TrimPrefix(line, "rename from ")
		case strings.HasPrefix(line, "rename to "):
			b = strings.TrimPrefix(line, "rename to ")
		case strings.HasPrefix(line, "@@"):
			return a, b
		}
	}
	if a == "" && b == "" {
		first, _, _ := strings.Cut(sec, "\n")
		rest := strings.TrimPrefix(first, "diff --git a/")
		// "X b/X" for a file that keeps its name.
		if n := len(rest); n%2 == 1 {
			half := (n - 3) / 2
			if half > 0 && rest[half:half+3] == " b/" && rest[:half] == rest[half+3:] {
				return rest[:half], rest[:half]
			}
		}
	}
	return a, b
}

func (k *toolkit) listChangedFiles(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo   string `json:"repo"`
		Number int    `json:"number"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	var files []*gh.CommitFile
	opts := &gh.ListOptions{PerPage: 100}
	for len(files) < maxChangedFiles {
		page, resp, err := c.PullRequests.ListFiles(ctx, t.owner, t.repo, t.number, opts)
		if err != nil {
			return "", explain(err, "list the files of "+t.String(), noPull(t))
		}
		files = append(files, page...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if len(files) == 0 {
		return fmt.Sprintf("%s changes no files", t), nil
	}
	var b strings.Builder
	adds, dels := 0, 0
	for _, f := range files {
		adds += f.GetAdditions()
		dels += f.GetDeletions()
	}
	fmt.Fprintf(&b, "%s changes %d files (+%d −%d):\n", t, len(files), adds, dels)
	for _, f := range files {
		name := f.GetFilename()
		if prev := f.GetPreviousFilename(); prev != "" {
			name = prev + " → " + name
		}
		fmt.Fprintf(&b, "%-9s %s (+%d −%d)\n", f.GetStatus(), name, f.GetAdditions(), f.GetDeletions())
	}
	if len(files) >= maxChangedFiles {
		fmt.Fprintf(&b, "[GitHub lists at most %d files; check the pull request out with github_checkout to see all]\n", maxChangedFiles)
	}
	return b.String(), nil
}

func (k *toolkit) comment(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo   string `json:"repo"`
		Number int    `json:"number"`
		Body   string `json:"body"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	if strings.TrimSpace(in.Body) == "" {
		return "", errors.New("invalid input: body is required")
	}
	if n := utf8.RuneCountInString(in.Body); n > maxGitHubCommentLen {
		return "", fmt.Errorf("invalid input: body has %d characters; GitHub takes at most %d", n, maxGitHubCommentLen)
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	cm, _, err := c.Issues.CreateComment(ctx, t.owner, t.repo, t.number, &gh.IssueComment{Body: &in.Body})
	if err != nil {
		return "", explain(err, "comment on "+t.String(), fmt.Sprintf("no issue or pull request #%d in %s", t.number, t.full()))
	}
	return fmt.Sprintf("Commented on %s: %s", t, cm.GetHTMLURL()), nil
}

func (k *toolkit) addLabels(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo   string   `json:"repo"`
		Number int      `json:"number"`
		Labels []string `json:"labels"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	var labels []string
	for _, l := range in.Labels {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	if len(labels) == 0 {
		return "", errors.New("invalid input: labels is required: at least one label name")
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	now, _, err := c.Issues.AddLabelsToIssue(ctx, t.owner, t.repo, t.number, labels)
	if err != nil {
		return "", explain(err, "label "+t.String(), fmt.Sprintf("no issue or pull request #%d in %s", t.number, t.full()))
	}
	return fmt.Sprintf("Added %s to %s; its labels now: %s", strings.Join(labels, ", "), t, listOrNone(labelNames(now))), nil
}

func (k *toolkit) removeLabel(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo   string `json:"repo"`
		Number int    `json:"number"`
		Label  string `json:"label"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	label := strings.TrimSpace(in.Label)
	if label == "" {
		return "", errors.New("invalid input: label is required")
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	// go-github puts the name into the path as it is; labels such as
	// "area/api" or "help wanted?" need escaping.
	if _, err := c.Issues.RemoveLabelForIssue(ctx, t.owner, t.repo, t.number, url.PathEscape(label)); err != nil {
		return "", explain(err, fmt.Sprintf("remove label %q from %s", label, t),
			fmt.Sprintf("%s has no label %q (or there is no issue or pull request #%d in %s)", t, label, t.number, t.full()))
	}
	is, _, err := c.Issues.Get(ctx, t.owner, t.repo, t.number)
	if err != nil {
		return fmt.Sprintf("Removed label %q from %s", label, t), nil
	}
	return fmt.Sprintf("Removed label %q from %s; its labels now: %s", label, t, listOrNone(labelNames(is.Labels))), nil
}

func (k *toolkit) requestReview(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo          string   `json:"repo"`
		Number        int      `json:"number"`
		Reviewers     []string `json:"reviewers"`
		TeamReviewers []string `json:"team_reviewers"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	clean := func(xs []string) []string {
		var out []string
		for _, x := range xs {
			if x = strings.TrimPrefix(strings.TrimSpace(x), "@"); x != "" && !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
		return out
	}
	req := gh.ReviewersRequest{Reviewers: clean(in.Reviewers), TeamReviewers: clean(in.TeamReviewers)}
	for i, tm := range req.TeamReviewers {
		// "org/team" is how people write a team; the API wants the slug.
		if _, slug, ok := strings.Cut(tm, "/"); ok {
			req.TeamReviewers[i] = slug
		}
	}
	if len(req.Reviewers)+len(req.TeamReviewers) == 0 {
		return "", errors.New("invalid input: name at least one of reviewers (logins) or team_reviewers (team slugs)")
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	pr, _, err := c.PullRequests.RequestReviewers(ctx, t.owner, t.repo, t.number, req)
	if err != nil {
		return "", explain(err, "request reviews on "+t.String(), noPull(t))
	}
	var now []string
	for _, u := range pr.RequestedReviewers {
		now = append(now, u.GetLogin())
	}
	for _, tm := range pr.RequestedTeams {
		now = append(now, "team "+tm.GetSlug())
	}
	asked := slices.Concat(req.Reviewers, prefixed("team ", req.TeamReviewers))
	return fmt.Sprintf("Requested reviews on %s from %s; reviews now requested from: %s", t, strings.Join(asked, ", "), listOrNone(now)), nil
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

func (k *toolkit) openPullRequest(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo  string `json:"repo"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Title string `json:"title"`
		Body  string `json:"body"`
		Draft bool   `json:"draft"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	in.Head, in.Base, in.Title = strings.TrimSpace(in.Head), strings.TrimSpace(in.Base), strings.TrimSpace(in.Title)
	if in.Head == "" || in.Title == "" {
		return "", errors.New("invalid input: head and title are required")
	}
	c, t, err := k.open(ctx, cc, in.Repo, 0, false)
	if err != nil {
		return "", err
	}
	if in.Base == "" {
		r, _, err := c.Repositories.Get(ctx, t.owner, t.repo)
		if err != nil {
			return "", explain(err, "read "+t.full(), noRepo(t))
		}
		in.Base = r.GetDefaultBranch()
	}
	if in.Head == in.Base {
		return "", fmt.Errorf("invalid input: head and base are both %q; push your changes to a new branch with github_push_branch and open the pull request from it", in.Head)
	}
	np := &gh.NewPullRequest{Title: &in.Title, Head: &in.Head, Base: &in.Base, Draft: &in.Draft}
	if in.Body != "" {
		np.Body = &in.Body
	}
	pr, _, err := c.PullRequests.Create(ctx, t.owner, t.repo, np)
	if err != nil {
		return "", explain(err, fmt.Sprintf("open a pull request from %s into %s of %s", in.Head, in.Base, t.full()), noRepo(t))
	}
	draft := ""
	if pr.GetDraft() {
		draft = " as a draft"
	}
	return fmt.Sprintf("Opened pull request %s#%d (%s → %s)%s: %s", t.full(), pr.GetNumber(), in.Head, in.Base, draft, pr.GetHTMLURL()), nil
}

func noRepo(t target) string {
	return fmt.Sprintf("no repository %s (or the GitHub App cannot see it)", t.full())
}

func (k *toolkit) mergePullRequest(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo          string `json:"repo"`
		Number        int    `json:"number"`
		Method        string `json:"method"`
		SHA           string `json:"sha"`
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	switch in.Method {
	case "":
		in.Method = "merge"
	case "merge", "squash", "rebase":
	default:
		return "", fmt.Errorf("invalid input: method %q: want merge, squash or rebase", in.Method)
	}
	c, t, err := k.open(ctx, cc, in.Repo, in.Number, true)
	if err != nil {
		return "", err
	}
	res, _, err := c.PullRequests.Merge(ctx, t.owner, t.repo, t.number, in.CommitMessage,
		&gh.PullRequestOptions{MergeMethod: in.Method, SHA: strings.TrimSpace(in.SHA), CommitTitle: in.CommitTitle})
	if err != nil {
		switch statusOf(err) {
		case http.StatusMethodNotAllowed:
			return "", fmt.Errorf("%s cannot be merged%s; github_get_pull_request shows its state (checks, reviews, conflicts, draft)", t, githubMessage(err))
		case http.StatusConflict:
			return "", fmt.Errorf("%s was not merged%s; its head is not the commit you named: read it again and review what was pushed", t, githubMessage(err))
		}
		return "", explain(err, "merge "+t.String(), noPull(t))
	}
	if !res.GetMerged() {
		return "", fmt.Errorf("GitHub did not merge %s: %s", t, res.GetMessage())
	}
	return fmt.Sprintf("Merged %s (%s) as %s", t, in.Method, res.GetSHA()), nil
}

// Git: checkout and push.
//
// The installation token reaches git only through the environment of git
// processes that work in a fresh repository in a temporary directory outside
// the workspace, as an http.<url>.extraHeader scoped to GitHub's git host.
// Those processes never read configuration, hooks or anything else the
// agent can write: a checkout's .git/config could otherwise run a program
// (core.fsmonitor, a hook, an ext:: URL rewrite) that reads the token. The
// workspace checkout is filled from, and pushed through, that temporary
// repository by plain local git, which holds no credentials.

// gitBaseURL is where git reaches repositories of the GitHub that serves the
// REST API at api: github.com for api.github.com, the same host for GitHub
// Enterprise Server (https://HOST/api/v3/), and the host without "api." for
// GitHub Enterprise Cloud with data residency (api.SUBDOMAIN.ghe.com).
func gitBaseURL(api *url.URL) *url.URL {
	u := &url.URL{Scheme: api.Scheme, Host: api.Host, Path: "/"}
	switch {
	case strings.HasSuffix(strings.TrimSuffix(api.Path, "/"), "/api/v3"):
		u.Path = strings.TrimSuffix(strings.TrimSuffix(api.Path, "/"), "api/v3")
	case strings.HasPrefix(api.Hostname(), "api."):
		u.Host = strings.TrimPrefix(api.Host, "api.")
	}
	return u
}

// remoteURL is the credential-free URL of t's repository for git.
func (k *toolkit) remoteURL(t target) string {
	return gitBaseURL(k.client.base).String() + t.owner + "/" + t.repo + ".git"
}

// git runs git commands for one tool call.
type git struct {
	home  string // an empty directory of our own: HOME and hooks path
	base  []string
	token string // "" for commands that need no credentials
	auth  string // the header value carrying token
	// redactor masks the token, raw and as its header carries it.
	redactor *bot.Redactor
}

// newGit returns a git runner whose HOME (so: global config) and hooks path
// are the empty directory home.
func newGit(home string) *git {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{
		"PATH=" + path, "HOME=" + home, "LANG=C", "LC_ALL=C",
		"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_ASKPASS=", "SSH_ASKPASS=",
	}
	// How the host reaches GitHub is the operator's to configure, and git
	// needs it as much as the daemon does.
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
		"ALL_PROXY", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return &git{home: home, base: env}
}

// withToken returns a runner that sends token to gitBase, and only there.
func (g *git) withToken(token bot.Secret, gitBase string) *git {
	cp := *g
	cp.token = token.Reveal()
	cp.auth = "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+cp.token))
	cp.redactor = bot.NewRedactor(token, bot.Base64Secret("x-access-token:"+cp.token))
	cp.base = append(slices.Clone(g.base), gitConfigEnv([][2]string{{"http." + gitBase + ".extraHeader", cp.auth}}, g.home)...)
	return &cp
}

// gitConfigEnv passes configuration through the environment: the hardening
// every command gets, then extra.
func gitConfigEnv(extra [][2]string, home string) []string {
	kv := append([][2]string{
		{"credential.helper", ""},
		{"core.hooksPath", home},
		{"core.fsmonitor", "false"},
		{"protocol.ext.allow", "never"},
		{"advice.detachedHead", "false"},
		{"init.defaultBranch", "main"},
	}, extra...)
	env := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(len(kv))}
	for i, p := range kv {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, p[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, p[1]))
	}
	return env
}

// run executes git args in dir and returns its output, with the token
// scrubbed from it for good measure.
func (g *git) run(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = g.base
	if g.token == "" {
		cmd.Env = append(slices.Clone(g.base), gitConfigEnv(nil, g.home)...)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	text := strings.TrimSpace(g.scrub(out.String()))
	if err != nil {
		if ctx.Err() != nil {
			return text, fmt.Errorf("git %s: %w", args[0], context.Cause(ctx))
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return text, fmt.Errorf("git %s: exit code %d: %s", args[0], exit.ExitCode(), lastLines(text, 6))
		}
		return text, fmt.Errorf("git %s: %w", args[0], err)
	}
	return text, nil
}

func (g *git) scrub(s string) string {
	if g.token == "" {
		return s
	}
	return g.redactor.Redact(s)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// gitFailure explains a failed git transfer from git's own words.
func gitFailure(err error, action string, t target) error {
	low := strings.ToLower(err.Error())
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(low, s) })
	}
	switch {
	case has("repository not found", "returned error: 404"):
		return fmt.Errorf("could not %s: %s", action, noRepo(t))
	case has("authentication failed", "could not read username", "returned error: 401", "returned error: 403"):
		return fmt.Errorf("could not %s: GitHub refused the App's installation token for git; the installation may lack the contents permission on %s", action, t.full())
	}
	return fmt.Errorf("could not %s: %w", action, err)
}

// workspaceDir resolves p (default def) inside the run's workspace through
// the one workspace confinement every tool uses.
func workspaceDir(workspace, p, def string) (abs, rel string, err error) {
	if workspace == "" {
		return "", "", errors.New("this run has no workspace to check out into")
	}
	if strings.TrimSpace(p) == "" {
		p = def
	}
	wp, err := tools.Resolve(workspace, p)
	if err != nil {
		return "", "", err
	}
	return wp.Abs, wp.Rel, nil
}

var (
	hexSHA   = regexp.MustCompile(`^[0-9a-fA-F]{7,40}$`)
	pullRef  = regexp.MustCompile(`^(?:refs/)?pull/([0-9]+)/(head|merge)$`)
	gitRefOK = regexp.MustCompile(`^[A-Za-z0-9._/+@-]+$`)
)

// validRef accepts what git accepts as a branch or tag name, less the
// characters no one uses, and never an option.
func validRef(ref string) error {
	bad := ref == "" || strings.HasPrefix(ref, "-") || strings.HasPrefix(ref, "/") || strings.HasSuffix(ref, "/") ||
		strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock") || strings.Contains(ref, "..") ||
		strings.Contains(ref, "//") || strings.Contains(ref, "@{") || strings.Contains(ref, "/.") || strings.HasPrefix(ref, ".") ||
		!gitRefOK.MatchString(ref)
	if bad {
		return fmt.Errorf("invalid input: %q is not a valid branch, tag or commit name", ref)
	}
	return nil
}

// tempGit makes the temporary directory a call's credentialed git works in:
// an empty home and a fresh bare repository, outside the workspace.
func tempGit(ctx context.Context) (g *git, bare string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "switchyard-git-")
	if err != nil {
		return nil, "", nil, fmt.Errorf("temporary directory for git: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	home := filepath.Join(dir, "home")
	bare = filepath.Join(dir, "repo.git")
	if err := os.Mkdir(home, 0o700); err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("temporary directory for git: %w", err)
	}
	g = newGit(home)
	if _, err := g.run(ctx, dir, "init", "--quiet", "--bare", bare); err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return g, bare, cleanup, nil
}

func (k *toolkit) checkout(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo string `json:"repo"`
		Ref  string `json:"ref"`
		Path string `json:"path"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	in.Ref = strings.TrimPrefix(strings.TrimSpace(in.Ref), "refs/heads/")
	if in.Ref != "" {
		if err := validRef(in.Ref); err != nil {
			return "", err
		}
	}
	t, err := k.resolve(cc, in.Repo, 0, false)
	if err != nil {
		return "", err
	}
	dest, rel, err := workspaceDir(cc.Workspace, in.Path, t.repo)
	if err != nil {
		return "", err
	}
	existing, err := checkoutState(dest, rel)
	if err != nil {
		return "", err
	}
	c, inst, err := k.api(ctx, t)
	if err != nil {
		return "", err
	}
	r, _, err := c.Repositories.Get(ctx, t.owner, t.repo)
	if err != nil {
		return "", explain(err, "read "+t.full(), noRepo(t))
	}
	defaultBranch := r.GetDefaultBranch()
	ref := in.Ref
	if ref == "" {
		ref = defaultBranch
	}
	ctx, cancel := context.WithTimeoutCause(ctx, k.opts.GitTimeout, fmt.Errorf("took longer than %s", k.opts.GitTimeout))
	defer cancel()
	g, bare, cleanup, err := tempGit(ctx)
	if err != nil {
		return "", err
	}
	defer cleanup()
	remote := k.remoteURL(t)
	if existing {
		if err := sameOrigin(ctx, g, dest, rel, remote, t); err != nil {
			return "", err
		}
		if out, err := g.run(ctx, dest, "status", "--porcelain", "--untracked-files=no"); err != nil {
			return "", fmt.Errorf("read the checkout in %s: %w", rel, err)
		} else if out != "" {
			return "", fmt.Errorf("the checkout in %s has uncommitted changes to tracked files; commit or discard them first, or check out into another path:\n%s", rel, clip(out, 2000))
		}
	}

	// Fetch from GitHub into the temporary repository, with the token.
	tok, err := k.client.Token(ctx, inst)
	if err != nil {
		return "", explain(err, "get an installation token for "+t.full(), "the GitHub App is not installed on "+t.full())
	}
	authed := g.withToken(tok, gitBaseURL(k.client.base).String())
	specs := []string{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}
	m := pullRef.FindStringSubmatch(ref)
	if m != nil {
		ref = "refs/pull/" + m[1] + "/" + m[2]
		specs = append(specs, "+"+ref+":"+ref)
	}
	if _, err := authed.run(ctx, bare, slices.Concat([]string{"fetch", "--quiet", "--no-write-fetch-head", remote}, specs)...); err != nil {
		if m != nil && strings.Contains(strings.ToLower(err.Error()), "couldn't find remote ref") {
			return "", fmt.Errorf("no pull request #%s in %s (GitHub has no %s)", m[1], t.full(), ref)
		}
		return "", gitFailure(err, "fetch "+t.full(), t)
	}
	// A commit that no branch or tag reaches is fetched on its own.
	kind, rev := "", ""
	switch {
	case m != nil:
		kind, rev = "pull request", ref
	case hasRef(ctx, g, bare, "refs/heads/"+ref):
		kind, rev = "branch", ref
	case hasRef(ctx, g, bare, "refs/tags/"+strings.TrimPrefix(ref, "refs/tags/")):
		ref = strings.TrimPrefix(ref, "refs/tags/")
		kind, rev = "tag", "refs/tags/"+ref
	case hexSHA.MatchString(ref):
		kind = "commit"
		full, err := g.run(ctx, bare, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
		if err != nil && len(ref) == 40 {
			if _, ferr := authed.run(ctx, bare, "fetch", "--quiet", "--no-write-fetch-head", remote, "+"+ref+":refs/switchyard/commit"); ferr == nil {
				full, err = g.run(ctx, bare, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
			}
		}
		if err != nil {
			return "", fmt.Errorf("no branch, tag or commit %q in %s", in.Ref, t.full())
		}
		if _, err := g.run(ctx, bare, "update-ref", "refs/switchyard/commit", full); err != nil {
			return "", err
		}
		rev = full
	default:
		return "", fmt.Errorf("no branch, tag or commit %q in %s; the default branch is %s", in.Ref, t.full(), defaultBranch)
	}

	// Fill the workspace checkout from the temporary repository, without
	// credentials.
	if !existing {
		if err := os.MkdirAll(dest, 0o750); err != nil {
			return "", fmt.Errorf("create %s: %w", rel, err)
		}
		if _, err := g.run(ctx, dest, "init", "--quiet"); err != nil {
			return "", err
		}
		if _, err := g.run(ctx, dest, "remote", "add", "origin", remote); err != nil {
			return "", err
		}
	}
	local := []string{"fetch", "--quiet", "--no-write-fetch-head", bare,
		"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*", "+refs/pull/*:refs/remotes/origin/pull/*"}
	if kind == "commit" {
		local = append(local, "+refs/switchyard/commit:refs/switchyard/commit")
	}
	if _, err := g.run(ctx, dest, local...); err != nil {
		return "", fmt.Errorf("fill the checkout in %s: %w", rel, err)
	}
	if kind == "commit" {
		// HEAD keeps the commit; the ref was only its way in.
		defer func() { _, _ = g.run(context.WithoutCancel(ctx), dest, "update-ref", "-d", "refs/switchyard/commit") }()
	}
	if defaultBranch != "" {
		_, _ = g.run(ctx, dest, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/"+defaultBranch)
	}
	note := ""
	switch kind {
	case "branch":
		if hasRef(ctx, g, dest, "refs/heads/"+ref) {
			if _, err := g.run(ctx, dest, "checkout", "--quiet", ref); err != nil {
				return "", fmt.Errorf("check out %s in %s: %w", ref, rel, err)
			}
			if _, err := g.run(ctx, dest, "merge", "--quiet", "--ff-only", "refs/remotes/origin/"+ref); err != nil {
				note = fmt.Sprintf("\nNote: local branch %s has commits that origin/%s lacks, or the other way round; it was left as it was. Compare with git log %s...origin/%s.", ref, ref, ref, ref)
			}
		} else if _, err := g.run(ctx, dest, "checkout", "--quiet", "-b", ref, "--track", "origin/"+ref); err != nil {
			return "", fmt.Errorf("check out %s in %s: %w", ref, rel, err)
		}
	default:
		if _, err := g.run(ctx, dest, "checkout", "--quiet", "--detach", localRev(kind, rev)); err != nil {
			return "", fmt.Errorf("check out %s in %s: %w", in.Ref, rel, err)
		}
	}
	head, err := g.run(ctx, dest, "log", "-1", "--format=%h %s")
	if err != nil {
		return "", fmt.Errorf("read the checkout in %s: %w", rel, err)
	}
	var b strings.Builder
	verb := "Cloned"
	if existing {
		verb = "Updated"
	}
	fmt.Fprintf(&b, "%s %s into %s/ and checked out %s %s (at %s).\n", verb, t.full(), rel, kind, displayRef(kind, ref), head)
	if kind == "branch" {
		fmt.Fprintf(&b, "Local branch %s tracks origin/%s.", ref, ref)
	} else {
		b.WriteString("HEAD is detached; create a branch (git switch -c <name>) before committing.")
	}
	fmt.Fprintf(&b, " The default branch is %s. Work with git in %s/; publish commits with github_push_branch (git push there has no credentials).%s", defaultBranch, rel, note)
	return b.String(), nil
}

func localRev(kind, rev string) string {
	switch kind {
	case "pull request":
		return "refs/remotes/origin/" + strings.TrimPrefix(rev, "refs/")
	case "commit":
		return "refs/switchyard/commit"
	}
	return rev
}

func displayRef(kind, ref string) string {
	if kind == "pull request" {
		return strings.TrimPrefix(ref, "refs/")
	}
	return ref
}

// checkoutState says whether dest holds a checkout already; an empty or
// missing directory is fine too, anything else is in the way.
func checkoutState(dest, rel string) (existing bool, err error) {
	st, err := os.Stat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: %w", rel, err)
	case !st.IsDir():
		return false, fmt.Errorf("%s is a file; check out into another path", rel)
	}
	if st, err := os.Stat(filepath.Join(dest, ".git")); err == nil && st.IsDir() {
		return true, nil
	}
	entries, err := os.ReadDir(dest)
	if err != nil {
		return false, fmt.Errorf("%s: %w", rel, err)
	}
	if len(entries) > 0 {
		return false, fmt.Errorf("%s exists and is not a git checkout; check out into another path", rel)
	}
	return false, nil
}

// sameOrigin checks that the checkout in dest is of t, so a checkout or push
// does not mix two repositories' histories.
func sameOrigin(ctx context.Context, g *git, dest, rel, remote string, t target) error {
	origin, err := g.run(ctx, dest, "config", "--get", "remote.origin.url")
	if err != nil {
		return fmt.Errorf("%s is a git checkout without an origin; check out %s into another path", rel, t.full())
	}
	if !strings.EqualFold(strings.TrimSuffix(origin, ".git"), strings.TrimSuffix(remote, ".git")) {
		return fmt.Errorf("%s is a checkout of %s, not of %s; use another path", rel, origin, t.full())
	}
	return nil
}

func hasRef(ctx context.Context, g *git, dir, ref string) bool {
	_, err := g.run(ctx, dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	return err == nil
}

func (k *toolkit) pushBranch(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Repo   string `json:"repo"`
		Branch string `json:"branch"`
		Path   string `json:"path"`
		Force  bool   `json:"force"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	t, err := k.resolve(cc, in.Repo, 0, false)
	if err != nil {
		return "", err
	}
	dest, rel, err := workspaceDir(cc.Workspace, in.Path, t.repo)
	if err != nil {
		return "", err
	}
	if existing, err := checkoutState(dest, rel); err != nil {
		return "", err
	} else if !existing {
		return "", fmt.Errorf("there is no checkout in %s; make one with github_checkout first", rel)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, k.opts.GitTimeout, fmt.Errorf("took longer than %s", k.opts.GitTimeout))
	defer cancel()
	g, bare, cleanup, err := tempGit(ctx)
	if err != nil {
		return "", err
	}
	defer cleanup()
	remote := k.remoteURL(t)
	if err := sameOrigin(ctx, g, dest, rel, remote, t); err != nil {
		return "", err
	}
	branch := strings.TrimPrefix(strings.TrimSpace(in.Branch), "refs/heads/")
	if branch == "" {
		cur, err := g.run(ctx, dest, "symbolic-ref", "--quiet", "--short", "HEAD")
		if err != nil || cur == "" {
			return "", fmt.Errorf("HEAD in %s is not on a branch; create one with git switch -c <name>, commit, and push that", rel)
		}
		branch = cur
	}
	if err := validRef(branch); err != nil {
		return "", err
	}
	sha, err := g.run(ctx, dest, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("there is no local branch %s in %s; git branch lists the branches there", branch, rel)
	}
	c, inst, err := k.api(ctx, t)
	if err != nil {
		return "", err
	}
	r, _, err := c.Repositories.Get(ctx, t.owner, t.repo)
	if err != nil {
		return "", explain(err, "read "+t.full(), noRepo(t))
	}
	if def := r.GetDefaultBranch(); strings.EqualFold(branch, def) {
		return "", tools.Refuse("%s is the default branch of %s; push your commits to a new branch (git switch -c <name> in %s) and open a pull request with github_open_pull_request", def, t.full(), rel)
	}

	// Take the branch, and what is known of the remote, into the temporary
	// repository without credentials; push from there with them. The
	// remote-tracking refs let git send only what GitHub lacks.
	if _, err := g.run(ctx, bare, "fetch", "--quiet", "--no-write-fetch-head", dest,
		"+refs/heads/"+branch+":refs/heads/"+branch, "+refs/remotes/origin/*:refs/remotes/origin/*"); err != nil {
		return "", fmt.Errorf("read branch %s from %s: %w", branch, rel, err)
	}
	tok, err := k.client.Token(ctx, inst)
	if err != nil {
		return "", explain(err, "get an installation token for "+t.full(), "the GitHub App is not installed on "+t.full())
	}
	spec := "refs/heads/" + branch + ":refs/heads/" + branch
	if in.Force {
		spec = "+" + spec
	}
	authed := g.withToken(tok, gitBaseURL(k.client.base).String())
	if _, err := authed.run(ctx, bare, "push", "--quiet", "--no-verify", remote, spec); err != nil {
		low := strings.ToLower(err.Error())
		switch {
		case strings.Contains(low, "non-fast-forward") || strings.Contains(low, "fetch first") || strings.Contains(low, "updates were rejected"):
			return "", fmt.Errorf("GitHub rejected the push of %s to %s: the branch there has commits yours lacks. Update the checkout (github_checkout with ref %s) and rebase or merge, or set force if the branch is yours alone", branch, t.full(), branch)
		case strings.Contains(low, "protected branch") || strings.Contains(low, "gh006"):
			return "", fmt.Errorf("GitHub rejected the push of %s to %s: the branch is protected; push to another branch and open a pull request", branch, t.full())
		}
		return "", gitFailure(err, fmt.Sprintf("push %s to %s", branch, t.full()), t)
	}
	// The checkout learns what GitHub now has, as a fetch would have told it.
	if _, err := g.run(ctx, dest, "update-ref", "refs/remotes/origin/"+branch, sha); err == nil {
		_, _ = g.run(ctx, dest, "branch", "--quiet", "--set-upstream-to=origin/"+branch, branch)
	}
	forced := ""
	if in.Force {
		forced = " (forced)"
	}
	return fmt.Sprintf("Pushed %s (%s) from %s/ to %s%s. Open a pull request with github_open_pull_request (head %q) if there is none yet.",
		branch, shortSHA(sha), rel, t.full(), forced, branch), nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
