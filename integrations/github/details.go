package github

import (
	"context"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
)

// Details is the worker's side of a GitHub delivery (bot.Detailer): when a
// job starts, the stored payload is read with go-github's full model —
// which the acknowledgement path leaves out, reading only what deciding
// needs (readDelivery) — and the run is told what the issue or pull
// request is: its title, state, author, branches and address.
type Details struct{}

var _ bot.Detailer = Details{}

// Details implements bot.Detailer. A payload kept no longer (see
// retention) or of an event without an issue or pull request adds nothing.
func (Details) Details(_ context.Context, ev *bot.Event) (string, error) {
	if ev.Source != bot.SourceGitHub || len(ev.Raw) == 0 {
		return "", nil
	}
	event, _ := kindParts(ev.Kind)
	switch event {
	case "pull_request", "issues", "issue_comment", "pull_request_review_comment", "pull_request_review":
	default:
		return "", nil
	}
	payload, err := gh.ParseWebHook(event, ev.Raw)
	if err != nil {
		return "", fmt.Errorf("read %s payload of %s: %w", event, ev.DeliveryID, err)
	}
	switch e := payload.(type) {
	case *gh.PullRequestEvent:
		return pullRequestLine(e.GetPullRequest()), nil
	case *gh.IssuesEvent:
		return issueLine(e.GetIssue()), nil
	case *gh.IssueCommentEvent:
		c := e.GetComment()
		return fmt.Sprintf("%s\nComment by @%s: %s", issueLine(e.GetIssue()), c.GetUser().GetLogin(), c.GetHTMLURL()), nil
	case *gh.PullRequestReviewCommentEvent:
		c := e.GetComment()
		where := c.GetPath()
		if c.GetLine() > 0 {
			where += fmt.Sprintf(":%d", c.GetLine())
		}
		return fmt.Sprintf("%s\nReview comment by @%s on %s: %s", pullRequestLine(e.GetPullRequest()), c.GetUser().GetLogin(), where, c.GetHTMLURL()), nil
	case *gh.PullRequestReviewEvent:
		r := e.GetReview()
		return fmt.Sprintf("%s\nReview by @%s (%s): %s", pullRequestLine(e.GetPullRequest()), r.GetUser().GetLogin(),
			strings.ToLower(strings.ReplaceAll(r.GetState(), "_", " ")), r.GetHTMLURL()), nil
	}
	return "", nil
}

// pullRequestLine says what a pull request is, in one line.
func pullRequestLine(pr *gh.PullRequest) string {
	state := pr.GetState()
	switch {
	case pr.GetMerged():
		state = "merged"
	case pr.GetDraft():
		state += ", draft"
	}
	return fmt.Sprintf("Pull request #%d %q by @%s (%s), %s into %s: %s", pr.GetNumber(), pr.GetTitle(), pr.GetUser().GetLogin(),
		state, pr.GetHead().GetLabel(), pr.GetBase().GetRef(), pr.GetHTMLURL())
}

// issueLine says what an issue is, in one line; a pull request's issue
// says it is one.
func issueLine(issue *gh.Issue) string {
	what := "Issue"
	if issue.IsPullRequest() {
		what = "Pull request"
	}
	return fmt.Sprintf("%s #%d %q by @%s (%s): %s", what, issue.GetNumber(), issue.GetTitle(), issue.GetUser().GetLogin(),
		issue.GetState(), issue.GetHTMLURL())
}
