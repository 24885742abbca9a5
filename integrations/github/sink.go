package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
)

const (
	// maxCommentBytes keeps a comment under GitHub's limit of 65536
	// characters, with room for the marker.
	maxCommentBytes = 65000
	// markerPages bounds the search for a comment posted before a crash.
	markerPages = 10
	// markerSkew widens that search for clock differences with GitHub.
	markerSkew = 10 * time.Minute
)

// Sink delivers outbox messages of GitHub threads: status and reply messages
// as issue comments (a status is edited in place), reactions on the comment
// or issue that triggered the work item.
//
// Comments carry a hidden marker naming their outbox key, which is how Find
// recognises a comment an interrupted attempt posted: the deliverer asks it
// before creating a comment again, so a crash between posting and recording
// the post does not post twice. Reactions need no marker: GitHub answers an
// existing reaction instead of adding another.
//
// The installation is found by repository (Client.ForRepo), so threads need
// not carry it and messages survive a reinstallation of the App.
type Sink struct {
	client *Client
	now    func() time.Time
}

var (
	_ bot.Sink   = (*Sink)(nil)
	_ bot.Finder = (*Sink)(nil)
)

// NewSink returns a Sink sending through client.
func NewSink(client *Client) *Sink {
	return &Sink{client: client, now: time.Now}
}

// Deliver implements bot.Sink. Rate limits come back as *bot.DeliveryError
// with RetryAfter, refusals other than rate limits as permanent, server and
// network errors as plain errors the outbox retries.
func (s *Sink) Deliver(ctx context.Context, msg bot.OutboxMessage) (string, error) {
	th := msg.Thread
	if th.Source != bot.SourceGitHub || th.Owner == "" || th.Repo == "" || th.Number <= 0 {
		return "", permanent(fmt.Errorf("thread %q is not a GitHub issue or pull request", th.Key()))
	}
	c, err := s.forRepo(ctx, msg)
	if err != nil {
		return "", err
	}
	switch msg.Kind {
	case bot.OutboxStatus, bot.OutboxReply:
		return s.comment(ctx, c, msg)
	case bot.OutboxReaction:
		return s.react(ctx, c, msg)
	}
	return "", permanent(fmt.Errorf("outbox message %s: unknown kind %q", msg.Key, msg.Kind))
}

func permanent(err error) error { return &bot.DeliveryError{Err: err, Permanent: true} }

// forRepo returns the client of the installation covering the repository
// of msg's thread, or the error to give the outbox. No installation
// covering it is final, but where the App's installation on the account
// went away and the App is on the account no more (uninstalled, to be
// installed again): that is the account's trouble, not the message's, so
// its messages wait, their destination down, and go out once the App is
// installed there again. The installation went away while this process
// ran, or before it started when msg is older than the process: a message
// was made for the account, and made while a webhook from its
// installation came in, so after a restart what waited goes on waiting
// instead of being given up. A repository left out of an installation, or
// an account the App was never seen on, gives the message up.
func (s *Sink) forRepo(ctx context.Context, msg bot.OutboxMessage) (*gh.Client, error) {
	th := msg.Thread
	c, _, err := s.client.ForRepo(ctx, th.Owner, th.Repo)
	if err == nil {
		return c, nil
	}
	if bot.ErrorCode(err) != bot.ENOTFOUND {
		return nil, deliveryError(err, s.now())
	}
	if !s.client.wasLost(th.Owner) && !s.client.before(msg.CreatedAt) {
		return nil, permanent(err)
	}
	installed, ierr := s.client.installedOn(ctx, th.Owner)
	switch {
	case ierr != nil:
		return nil, deliveryError(ierr, s.now())
	case installed:
		return nil, permanent(err)
	}
	s.client.markLost(th.Owner)
	return nil, fmt.Errorf("the GitHub App is not installed on %s; its messages wait until it is installed again", th.Owner)
}

func (s *Sink) comment(ctx context.Context, c *gh.Client, msg bot.OutboxMessage) (string, error) {
	th := msg.Thread
	body := commentBody(msg)
	if msg.RemoteID != "" {
		id, err := strconv.ParseInt(msg.RemoteID, 10, 64)
		if err != nil {
			return "", permanent(fmt.Errorf("outbox message %s: remote id %q is not a comment id", msg.Key, msg.RemoteID))
		}
		if _, _, err := c.Issues.EditComment(ctx, th.Owner, th.Repo, id, &gh.IssueComment{Body: &body}); err != nil {
			return "", deliveryError(fmt.Errorf("edit comment %d on %s: %w", id, th, inWords(err)), s.now())
		}
		return msg.RemoteID, nil
	}
	created, _, err := c.Issues.CreateComment(ctx, th.Owner, th.Repo, th.Number, &gh.IssueComment{Body: &body})
	if err != nil {
		return "", deliveryError(fmt.Errorf("comment on %s: %w", th, inWords(err)), s.now())
	}
	return strconv.FormatInt(created.GetID(), 10), nil
}

// Find implements bot.Finder: it looks among the issue's comments since the
// message was enqueued for the App's own comment carrying msg's marker.
// Markers are easy to guess: another App or a workflow's bot could post one
// first, and a comment Switchyard cannot edit must not be taken for its
// own. Reactions are never looked for.
func (s *Sink) Find(ctx context.Context, msg bot.OutboxMessage) (string, bool, error) {
	th := msg.Thread
	if msg.Kind == bot.OutboxReaction || th.Source != bot.SourceGitHub || th.Owner == "" || th.Repo == "" || th.Number <= 0 {
		return "", false, nil
	}
	slug, err := s.client.AppSlug(ctx)
	if err != nil {
		return "", false, deliveryError(err, s.now())
	}
	self := slug + "[bot]"
	c, err := s.forRepo(ctx, msg)
	if err != nil {
		return "", false, err
	}
	mark := marker(msg.Key)
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	if !msg.CreatedAt.IsZero() {
		since := msg.CreatedAt.Add(-markerSkew)
		opts.Since = &since
	}
	for range markerPages {
		comments, resp, err := c.Issues.ListComments(ctx, th.Owner, th.Repo, th.Number, opts)
		if err != nil {
			return "", false, deliveryError(fmt.Errorf("list comments of %s: %w", th, inWords(err)), s.now())
		}
		for _, cm := range comments {
			if u := cm.GetUser(); u.GetType() == "Bot" && strings.EqualFold(u.GetLogin(), self) && strings.Contains(cm.GetBody(), mark) {
				return strconv.FormatInt(cm.GetID(), 10), true, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return "", false, nil
}

// commentBody is msg's text, cut to fit, with its marker. A pending
// approval request is written from its view (approvalRequest).
func commentBody(msg bot.OutboxMessage) string {
	text := msg.Text
	if v := msg.Approval; v != nil && v.State == "pending" && strings.TrimSpace(v.Arguments) != "" {
		text = approvalRequest(v)
	}
	if len(text) > maxCommentBytes {
		cut := maxCommentBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "\n\n… (cut to fit a GitHub comment)"
	}
	return text + "\n\n" + marker(msg.Key)
}

// maxApprovalArgs bounds the arguments an approval request shows; the
// audit log keeps them whole.
const maxApprovalArgs = 1500

// approvalRequest is the comment asking to approve what an agent wants to
// run. The arguments are the model's words: they are shown as code, in a
// fence longer than any run of backticks they hold, as plain text
// (bot.Plain: nothing that reorders them or is not text), so nothing in
// them is rendered as Markdown, links to anywhere, pings anyone or passes
// for the request's own words, and the approver reads what runs. The rest
// is the policy's words and the ids Switchyard gives out.
func approvalRequest(v *bot.ApprovalView) string {
	args := bot.Plain(strings.TrimSpace(v.Arguments))
	if len(args) > maxApprovalArgs {
		cut := maxApprovalArgs
		for cut > 0 && !utf8.RuneStart(args[cut]) {
			cut--
		}
		args = args[:cut] + "\n… (cut; the audit log has it whole)"
	}
	fence := strings.Repeat("`", max(3, longestRun(args, '`')+1))
	var b strings.Builder
	fmt.Fprintf(&b, "🔐 %s wants to run %s:\n\n%s\n%s\n%s\n", bot.Plain(v.Agent), bot.Plain(v.Tool), fence, args, fence)
	if v.Reason != "" {
		b.WriteString("\n" + bot.Plain(v.Reason) + "\n")
	}
	fmt.Fprintf(&b, "\nApprove with a comment `/approve %s` or deny with `/deny %s` before %s; it is denied then.",
		v.ID, v.ID, v.ExpiresAt.UTC().Format("15:04 UTC"))
	return b.String()
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			n = 0
			continue
		}
		n++
		longest = max(longest, n)
	}
	return longest
}

// marker is the hidden HTML comment naming an outbox key. Keys that could
// end the HTML comment early are replaced by their digest.
func marker(key string) string {
	safe := key != "" && !strings.Contains(key, "--")
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:@+=-", r)) {
			safe = false
			break
		}
	}
	if !safe {
		sum := sha256.Sum256([]byte(key))
		key = "sha256-" + hex.EncodeToString(sum[:16])
	}
	return "<!-- switchyard:" + key + " -->"
}

// reactionContent maps the core's reaction names to GitHub's fixed set:
// 👀 stays eyes; GitHub has no check mark, so success is rocket (🚀); failure
// is confused (😕), because -1 would read as disapproval of the person's
// request. GitHub's own names pass through.
func reactionContent(name string) (string, bool) {
	switch name {
	case bot.ReactionSeen:
		return "eyes", true
	case bot.ReactionSuccess:
		return "rocket", true
	case bot.ReactionFailure:
		return "confused", true
	case "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket":
		return name, true
	}
	return "", false
}

func (s *Sink) react(ctx context.Context, c *gh.Client, msg bot.OutboxMessage) (string, error) {
	if msg.RemoteID != "" {
		return msg.RemoteID, nil // a reaction is never edited
	}
	th := msg.Thread
	content, ok := reactionContent(msg.Reaction)
	if !ok {
		return "", permanent(fmt.Errorf("outbox message %s: GitHub has no reaction %q", msg.Key, msg.Reaction))
	}
	target := msg.Target
	if target == "" {
		target = "issue:" + strconv.Itoa(th.Number)
	}
	kind, ref, _ := strings.Cut(target, ":")
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil || id <= 0 {
		return "", permanent(fmt.Errorf("outbox message %s: target %q: want comment:<id>, review_comment:<id> or issue:<number>", msg.Key, target))
	}
	var r *gh.Reaction
	switch kind {
	case "comment":
		r, _, err = c.Reactions.CreateIssueCommentReaction(ctx, th.Owner, th.Repo, id, content)
	case "review_comment":
		r, _, err = c.Reactions.CreatePullRequestCommentReaction(ctx, th.Owner, th.Repo, id, content)
	case "issue":
		r, _, err = c.Reactions.CreateIssueReaction(ctx, th.Owner, th.Repo, int(id), content)
	default:
		return "", permanent(fmt.Errorf("outbox message %s: target %q: want comment:<id>, review_comment:<id> or issue:<number>", msg.Key, target))
	}
	if err != nil {
		return "", deliveryError(fmt.Errorf("react %s on %s %s: %w", content, th, target, inWords(err)), s.now())
	}
	return strconv.FormatInt(r.GetID(), 10), nil
}
