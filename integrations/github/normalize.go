package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
)

// delivery is one verified webhook delivery, normalised. Besides the event
// it carries what the webhook needs and the event does not.
type delivery struct {
	ev            *bot.Event
	event, action string
	// comment is set for comment events, whose edits count only for the
	// mentions they add; issue edits only lose their old mentions.
	comment bool
	// edited is set for edits; previous is the body before the edit, nil when
	// the body did not change.
	edited   bool
	previous *string
	// pr is set when the thread is a pull request, whose changed files rules
	// may need.
	pr bool
	// installation is set for installation and installation_repositories
	// events.
	installation *installationChange
}

// installationChange is what an installation event says about which
// repositories the App may act on.
type installationChange struct {
	id             int64
	account        string
	suspended      bool
	deleted        bool
	added, removed []string
}

// errMalformed marks payloads that passed the signature check but cannot be
// read: answered 400 so the delivery shows as failed.
var errMalformed = errors.New("malformed payload")

// supported reports whether Switchyard acts on event with action.
func supported(event, action string) bool {
	switch event {
	case "pull_request":
		switch action {
		case "opened", "reopened", "synchronize", "ready_for_review", "labeled", "closed":
			return true
		}
	case "issues":
		switch action {
		case "opened", "labeled", "edited", "closed":
			return true
		}
	case "issue_comment", "pull_request_review_comment":
		return action == "created" || action == "edited"
	case "pull_request_review":
		return action == "submitted"
	case "installation", "installation_repositories":
		return true
	}
	return false
}

// normalize turns the payload of a delivery of event into a bot.Event. Events
// Switchyard does not act on are read through a small envelope, so every
// delivery, whatever go-github knows of it, leaves an ingress record with its
// actor and thread.
func normalize(event, deliveryID string, payload []byte) (*delivery, error) {
	if p := bytes.TrimLeft(payload, " \t\r\n"); len(p) == 0 || p[0] != '{' {
		return nil, fmt.Errorf("%w: %s payload is not a JSON object", errMalformed, event)
	}
	ev := &bot.Event{Source: bot.SourceGitHub, DeliveryID: deliveryID, Raw: payload}
	d := &delivery{ev: ev}
	switch event {
	case "pull_request", "issues", "issue_comment", "pull_request_review_comment",
		"pull_request_review", "installation", "installation_repositories":
	default:
		if err := d.fromEnvelope(event, payload); err != nil {
			return nil, err
		}
		return d, d.checkAction()
	}
	parsed, err := gh.ParseWebHook(event, payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errMalformed, event, err)
	}
	switch e := parsed.(type) {
	case *gh.PullRequestEvent:
		pr := e.GetPullRequest()
		if pr == nil {
			return nil, missing(event, "pull_request")
		}
		d.pr = true
		number := e.GetNumber()
		if number == 0 {
			number = pr.GetNumber()
		}
		if err := d.about(event, e.GetAction(), e.GetSender(), e.GetInstallation(), e.GetRepo(), number, labelsOf(e.GetAction(), pr.Labels, e.Label)); err != nil {
			return nil, err
		}
		ev.SourceRef = "issue:" + strconv.Itoa(number)
		if e.GetAction() == "opened" {
			ev.Text = pr.GetBody()
		}
	case *gh.IssuesEvent:
		issue := e.GetIssue()
		if issue == nil {
			return nil, missing(event, "issue")
		}
		d.pr = issue.GetPullRequestLinks() != nil
		if err := d.about(event, e.GetAction(), e.GetSender(), e.GetInstallation(), e.GetRepo(), issue.GetNumber(), labelsOf(e.GetAction(), issue.Labels, e.Label)); err != nil {
			return nil, err
		}
		ev.SourceRef = "issue:" + strconv.Itoa(issue.GetNumber())
		switch e.GetAction() {
		case "opened":
			ev.Text = issue.GetBody()
		case "edited":
			ev.Text = issue.GetBody()
			d.edited = true
			d.previous = previousBody(e.GetChanges())
		}
	case *gh.IssueCommentEvent:
		issue, comment := e.GetIssue(), e.GetComment()
		if issue == nil || comment == nil {
			return nil, missing(event, "issue and comment")
		}
		d.pr = issue.GetPullRequestLinks() != nil
		if err := d.about(event, e.GetAction(), e.GetSender(), e.GetInstallation(), e.GetRepo(), issue.GetNumber(), issue.Labels); err != nil {
			return nil, err
		}
		d.commented("comment:"+strconv.FormatInt(comment.GetID(), 10), comment.GetBody(), e.GetChanges())
	case *gh.PullRequestReviewCommentEvent:
		pr, comment := e.GetPullRequest(), e.GetComment()
		if pr == nil || comment == nil {
			return nil, missing(event, "pull_request and comment")
		}
		d.pr = true
		if err := d.about(event, e.GetAction(), e.GetSender(), e.GetInstallation(), e.GetRepo(), pr.GetNumber(), pr.Labels); err != nil {
			return nil, err
		}
		d.commented("review_comment:"+strconv.FormatInt(comment.GetID(), 10), comment.GetBody(), e.GetChanges())
	case *gh.PullRequestReviewEvent:
		pr := e.GetPullRequest()
		if pr == nil {
			return nil, missing(event, "pull_request")
		}
		d.pr = true
		if err := d.about(event, e.GetAction(), e.GetSender(), e.GetInstallation(), e.GetRepo(), pr.GetNumber(), pr.Labels); err != nil {
			return nil, err
		}
		// Reviews take no reactions through the API; the pull request does.
		ev.SourceRef = "issue:" + strconv.Itoa(pr.GetNumber())
		ev.Text = e.GetReview().GetBody()
	case *gh.InstallationEvent:
		inst := e.GetInstallation()
		if inst == nil {
			return nil, missing(event, "installation")
		}
		d.installed(event, e.GetAction(), e.GetSender(), inst)
		d.installation.suspended = inst.SuspendedAt != nil && e.GetAction() != "unsuspend"
		d.installation.deleted = e.GetAction() == "deleted"
		d.installation.added = repoNames(e.Repositories)
	case *gh.InstallationRepositoriesEvent:
		inst := e.GetInstallation()
		if inst == nil {
			return nil, missing(event, "installation")
		}
		d.installed(event, e.GetAction(), e.GetSender(), inst)
		d.installation.suspended = inst.SuspendedAt != nil
		d.installation.added = repoNames(e.RepositoriesAdded)
		d.installation.removed = repoNames(e.RepositoriesRemoved)
	default:
		return nil, fmt.Errorf("%w: %s payload decoded to %T", errMalformed, event, parsed)
	}
	if d.installation != nil && d.installation.id <= 0 {
		return nil, missing(event, "installation id")
	}
	if d.installation != nil {
		for _, repo := range slices.Concat(d.installation.added, d.installation.removed) {
			if owner, name, ok := strings.Cut(repo, "/"); !ok || owner == "" || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("%w: %s payload names repository %.100q, not owner/name", errMalformed, event, repo)
			}
		}
	}
	if err := d.checkAction(); err != nil {
		return nil, err
	}
	if d.edited {
		d.edit()
	}
	return d, nil
}

// maxActionBytes is the longest action GitHub sends: a repository
// dispatch's action is the event type its sender chose, at most 100
// characters; every other action is a short name.
const maxActionBytes = 100

// checkAction refuses an action GitHub would not send: it becomes part of
// the event's kind, which is stored, shown, logged and counted in metrics
// by kind.
func (d *delivery) checkAction() error {
	ok := len(d.action) <= maxActionBytes && utf8.ValidString(d.action)
	for _, r := range d.action {
		ok = ok && !unicode.IsControl(r)
	}
	if !ok {
		return fmt.Errorf("%w: %s action is longer than %d bytes or has control characters", errMalformed, d.event, maxActionBytes)
	}
	return nil
}

// edit makes an edit ask only for what it adds: its mentions are those the
// previous body did not have. An issue edit that adds none keeps no text,
// so its old mentions do not trigger again while a rule may still match
// its labels; a comment edit that adds none is refused by the gate.
func (d *delivery) edit() {
	ev := d.ev
	ev.Edited = true
	added := addedMentions(d.previous, ev.Text)
	switch {
	case len(added) > 0:
		ev.Mentions = added
	case d.comment:
		ev.Mentions = []string{}
	default:
		ev.Text = ""
		ev.Mentions = []string{}
	}
}

// envelopeOf is what every repository-level payload shares, for events
// Switchyard does not act on, its sender a U: go-github's user here, the
// acknowledgement's reader's own (fastEnvelope) there.
type envelopeOf[U any] struct {
	Action     string `json:"action"`
	Number     int    `json:"number"`
	Sender     *U     `json:"sender"`
	Repository *struct {
		Name  string `json:"name"`
		Owner struct {
			Login string `json:"login"`
		} `json:"owner"`
	} `json:"repository"`
	Installation struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	Issue struct {
		Number int `json:"number"`
	} `json:"issue"`
	PullRequest struct {
		Number int `json:"number"`
	} `json:"pull_request"`
}

// envelope is the envelope normalize reads.
type envelope = envelopeOf[gh.User]

func (d *delivery) fromEnvelope(event string, payload []byte) error {
	var env envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return fmt.Errorf("%w: %s: %v", errMalformed, event, err)
	}
	d.setKind(event, env.Action)
	d.setSender(env.Sender)
	d.ev.InstallationID = env.Installation.ID
	if r := env.Repository; r != nil && r.Owner.Login != "" && r.Name != "" {
		if err := checkRepo(r.Owner.Login, r.Name); err != nil {
			return fmt.Errorf("%w: %s payload names %v", errMalformed, event, err)
		}
		d.ev.Org = r.Owner.Login
		d.ev.Repo = r.Owner.Login + "/" + r.Name
		n := max(env.Number, env.Issue.Number, env.PullRequest.Number)
		if n > 0 {
			d.ev.Number = n
			d.ev.Thread = bot.GitHubThread(r.Owner.Login, r.Name, n)
		}
	}
	return nil
}

func (d *delivery) setKind(event, action string) {
	d.event, d.action = event, action
	d.ev.Kind = "github." + event
	if action != "" {
		d.ev.Kind += "." + action
	}
}

func (d *delivery) setSender(u *gh.User) {
	d.ev.Actor = u.GetLogin()
	d.ev.ActorIsBot = u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]")
	d.ev.Requester = bot.Requester{Source: bot.SourceGitHub, ID: u.GetLogin(), Name: u.GetName()}
}

// about records what every event on an issue or pull request says: its
// kind, who sent it, the installation, the labels and the thread.
func (d *delivery) about(event, action string, sender *gh.User, inst *gh.Installation, repo *gh.Repository, number int, labels []*gh.Label) error {
	d.setKind(event, action)
	d.setSender(sender)
	d.ev.InstallationID = inst.GetID()
	d.ev.Labels = labelNames(labels)
	return d.setThread(repo, number)
}

// installed records what both installation events say: their kind, who
// sent them and the installation, whose change the caller fills in.
func (d *delivery) installed(event, action string, sender *gh.User, inst *gh.Installation) {
	d.setKind(event, action)
	d.setSender(sender)
	d.ev.InstallationID = inst.GetID()
	d.ev.Org = inst.GetAccount().GetLogin()
	d.installation = &installationChange{id: inst.GetID(), account: d.ev.Org}
}

// commented records the comment of a comment event; an edit keeps the body
// before it, so only mentions it adds trigger.
func (d *delivery) commented(ref, body string, changes *gh.EditChange) {
	d.comment = true
	d.ev.SourceRef, d.ev.Text = ref, body
	if d.action == "edited" {
		d.edited = true
		d.previous = previousBody(changes)
	}
}

func (d *delivery) setThread(repo *gh.Repository, number int) error {
	owner, name := repo.GetOwner().GetLogin(), repo.GetName()
	if owner == "" || name == "" || number <= 0 {
		return fmt.Errorf("%w: %s payload names no repository and number", errMalformed, d.ev.Kind)
	}
	if err := checkRepo(owner, name); err != nil {
		return fmt.Errorf("%w: %s payload names %v", errMalformed, d.ev.Kind, err)
	}
	d.ev.Org = owner
	d.ev.Repo = owner + "/" + name
	d.ev.Number = number
	d.ev.Thread = bot.GitHubThread(owner, name, number)
	return nil
}

// checkRepo refuses a repository owner or name no store can key a thread
// by: not UTF-8 text, or with the "/" or "#" a session key is read back at.
// GitHub's names are short ASCII without either; one that is not is no
// GitHub delivery's, and storing it would fail as an internal error.
func checkRepo(owner, name string) error {
	if err := bot.GitHubThread(owner, name, 1).Validate(); err != nil {
		return fmt.Errorf("a repository no thread can be kept for (%s)", bot.ErrorMessage(err))
	}
	return nil
}

func missing(event, what string) error {
	return fmt.Errorf("%w: %s payload has no %s", errMalformed, event, what)
}

// previousBody is the body before an edit, or nil when the edit left it alone.
func previousBody(c *gh.EditChange) *string {
	if c == nil || c.Body == nil {
		return nil
	}
	return c.Body.From
}

// labelsOf is the labels rules see: for a "labeled" event the label it
// added, so that labelling an issue that has "bug" with anything else does
// not match a rule on "bug" again; for other events those the issue or
// pull request has.
func labelsOf(action string, labels []*gh.Label, added *gh.Label) []*gh.Label {
	if action == "labeled" {
		return []*gh.Label{added}
	}
	return labels
}

func labelNames(labels []*gh.Label) []string {
	var out []string
	for _, l := range labels {
		if n := l.GetName(); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func repoNames(repos []*gh.Repository) []string {
	var out []string
	for _, r := range repos {
		if n := r.GetFullName(); n != "" {
			out = append(out, n)
		}
	}
	return out
}
