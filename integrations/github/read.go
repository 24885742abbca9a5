package github

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/segmentio/encoding/json"

	"github.com/switchyard/switchyard/bot"
)

// readDelivery is how the webhook reads a delivery before it answers: only
// the fields routing, the gate and dedup need (event, action, ids,
// repository, sender, labels, the text that holds mentions and commands,
// the installation), decoded in one pass by github.com/segmentio/encoding,
// which checks the whole payload as it goes and skips what it does not
// need, into small types shaped as go-github's: for a 28 KB pull request a
// tenth of go-github's time and a few small allocations instead of 815
// (BenchmarkReadDelivery). Installation events, rare and small, are read
// by normalize.
//
// It reads what normalize would: the members are those go-github's types
// have, pointers where go-github's are, so encoding/json's rules (names in
// any case; a repeated member updates what the one before set; null clears
// a pointer) apply to both alike, and the same text comes out. A payload
// normalize reads, readDelivery reads the same; one it cannot read, it
// hands to normalize, whose answer it gives. It is more lenient only about members it does not read,
// whose type normalize checks (FuzzReadDelivery holds all of this).
func readDelivery(event, deliveryID string, payload []byte) (*delivery, error) {
	if p := bytes.TrimLeft(payload, " \t\r\n"); len(p) == 0 || p[0] != '{' {
		return nil, fmt.Errorf("%w: %s payload is not a JSON object", errMalformed, event)
	}
	switch event {
	case "installation", "installation_repositories":
		return normalize(event, deliveryID, payload)
	}
	if err := checkDepth(payload); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errMalformed, event, err)
	}
	ev := &bot.Event{Source: bot.SourceGitHub, DeliveryID: deliveryID, Raw: payload}
	d := &delivery{ev: ev}
	var err error
	switch event {
	case "pull_request", "issues", "issue_comment", "pull_request_review_comment", "pull_request_review":
		err = d.readEvent(event, payload)
	default:
		err = d.readEnvelope(event, payload)
	}
	if err != nil {
		// What it cannot read is normalize's to answer: a payload go-github
		// reads is never refused here, and the error says what is wrong as
		// encoding/json does, without quoting the payload as
		// segmentio/encoding's errors do (a log line must not carry a
		// comment's text).
		return normalize(event, deliveryID, payload)
	}
	if err := d.checkAction(); err != nil {
		return nil, err
	}
	if d.edited {
		d.edit()
	}
	return d, nil
}

// maxDepth is encoding/json's limit on nesting, which normalize meets.
const maxDepth = 10000

// checkDepth refuses JSON nested deeper than maxDepth, as encoding/json
// does. Payloads with too few brackets to get there, all of GitHub's, are
// only counted.
func checkDepth(payload []byte) error {
	if bytes.Count(payload, []byte{'{'})+bytes.Count(payload, []byte{'['}) <= maxDepth {
		return nil
	}
	depth, inString := 0, false
	for i := 0; i < len(payload); i++ {
		c := payload[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("nested deeper than %d", maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// The members of go-github's types that normalize uses, with go-github's
// names and Go types.
type (
	// fastUser is a gh.User.
	fastUser struct {
		Login *string `json:"login"`
		Type  *string `json:"type"`
		Name  *string `json:"name"`
	}
	// fastRepo is a gh.Repository.
	fastRepo struct {
		Name  *string   `json:"name"`
		Owner *fastUser `json:"owner"`
	}
	// fastInstallation is a gh.Installation.
	fastInstallation struct {
		ID *int64 `json:"id"`
	}
	// fastLabel is a gh.Label.
	fastLabel struct {
		Name *string `json:"name"`
	}
	// fastPull is a gh.PullRequest.
	fastPull struct {
		Number *int         `json:"number"`
		Body   *string      `json:"body"`
		Labels []*fastLabel `json:"labels"`
	}
	// fastIssue is a gh.Issue; only whether PullRequestLinks is there
	// counts (it is a pull request).
	fastIssue struct {
		Number           *int         `json:"number"`
		Body             *string      `json:"body"`
		Labels           []*fastLabel `json:"labels"`
		PullRequestLinks *struct{}    `json:"pull_request"`
	}
	// fastComment is a gh.IssueComment or gh.PullRequestComment.
	fastComment struct {
		ID   *int64  `json:"id"`
		Body *string `json:"body"`
	}
	// fastReview is a gh.PullRequestReview.
	fastReview struct {
		Body *string `json:"body"`
	}
	// fastChanges is a gh.EditChange.
	fastChanges struct {
		Body *struct {
			From *string `json:"from"`
		} `json:"body"`
	}
)

// The members of go-github's events that normalize uses, one type an
// event: a member one event has and another has not is checked only where
// go-github checks it.
type (
	fastPullRequestEvent struct {
		Action       *string           `json:"action"`
		Number       *int              `json:"number"`
		Label        *fastLabel        `json:"label"`
		PullRequest  *fastPull         `json:"pull_request"`
		Repo         *fastRepo         `json:"repository"`
		Sender       *fastUser         `json:"sender"`
		Installation *fastInstallation `json:"installation"`
	}
	fastIssuesEvent struct {
		Action       *string           `json:"action"`
		Label        *fastLabel        `json:"label"`
		Issue        *fastIssue        `json:"issue"`
		Changes      *fastChanges      `json:"changes"`
		Repo         *fastRepo         `json:"repository"`
		Sender       *fastUser         `json:"sender"`
		Installation *fastInstallation `json:"installation"`
	}
	fastIssueCommentEvent struct {
		Action       *string           `json:"action"`
		Issue        *fastIssue        `json:"issue"`
		Comment      *fastComment      `json:"comment"`
		Changes      *fastChanges      `json:"changes"`
		Repo         *fastRepo         `json:"repository"`
		Sender       *fastUser         `json:"sender"`
		Installation *fastInstallation `json:"installation"`
	}
	fastReviewCommentEvent struct {
		Action       *string           `json:"action"`
		PullRequest  *fastPull         `json:"pull_request"`
		Comment      *fastComment      `json:"comment"`
		Changes      *fastChanges      `json:"changes"`
		Repo         *fastRepo         `json:"repository"`
		Sender       *fastUser         `json:"sender"`
		Installation *fastInstallation `json:"installation"`
	}
	fastReviewEvent struct {
		Action       *string           `json:"action"`
		Review       *fastReview       `json:"review"`
		PullRequest  *fastPull         `json:"pull_request"`
		Repo         *fastRepo         `json:"repository"`
		Sender       *fastUser         `json:"sender"`
		Installation *fastInstallation `json:"installation"`
	}
)

// fastEnvelope is normalize's envelope, its sender a fastUser.
type fastEnvelope = envelopeOf[fastUser]

// about is what every event on an issue or pull request says, as read.
type about struct {
	action       *string
	sender       *fastUser
	installation *fastInstallation
	repo         *fastRepo
	number       int
	labels       []*fastLabel
}

// readEvent reads an issue, pull request, comment or review event as
// normalize reads it into go-github's event types.
func (d *delivery) readEvent(event string, payload []byte) error {
	ev := d.ev
	var a about
	switch event {
	case "pull_request":
		var e fastPullRequestEvent
		if err := json.Unmarshal(payload, &e); err != nil {
			return err
		}
		if e.PullRequest == nil {
			return fmt.Errorf("no pull_request")
		}
		d.pr = true
		a = about{e.Action, e.Sender, e.Installation, e.Repo, deref(e.Number), fastLabelsOf(deref(e.Action), e.PullRequest.Labels, e.Label)}
		if a.number == 0 {
			a.number = deref(e.PullRequest.Number)
		}
		ev.SourceRef = "issue:" + strconv.Itoa(a.number)
		if deref(e.Action) == "opened" {
			ev.Text = deref(e.PullRequest.Body)
		}
	case "issues":
		var e fastIssuesEvent
		if err := json.Unmarshal(payload, &e); err != nil {
			return err
		}
		if e.Issue == nil {
			return fmt.Errorf("no issue")
		}
		d.pr = e.Issue.PullRequestLinks != nil
		a = about{e.Action, e.Sender, e.Installation, e.Repo, deref(e.Issue.Number), fastLabelsOf(deref(e.Action), e.Issue.Labels, e.Label)}
		ev.SourceRef = "issue:" + strconv.Itoa(a.number)
		switch deref(e.Action) {
		case "opened":
			ev.Text = deref(e.Issue.Body)
		case "edited":
			ev.Text = deref(e.Issue.Body)
			d.edited = true
			d.previous = e.Changes.previous()
		}
	case "issue_comment":
		var e fastIssueCommentEvent
		if err := json.Unmarshal(payload, &e); err != nil {
			return err
		}
		if e.Issue == nil || e.Comment == nil {
			return fmt.Errorf("no issue and comment")
		}
		d.pr = e.Issue.PullRequestLinks != nil
		a = about{e.Action, e.Sender, e.Installation, e.Repo, deref(e.Issue.Number), e.Issue.Labels}
		d.commentedOn("comment:", deref(e.Action), e.Comment, e.Changes)
	case "pull_request_review_comment":
		var e fastReviewCommentEvent
		if err := json.Unmarshal(payload, &e); err != nil {
			return err
		}
		if e.PullRequest == nil || e.Comment == nil {
			return fmt.Errorf("no pull_request and comment")
		}
		d.pr = true
		a = about{e.Action, e.Sender, e.Installation, e.Repo, deref(e.PullRequest.Number), e.PullRequest.Labels}
		d.commentedOn("review_comment:", deref(e.Action), e.Comment, e.Changes)
	case "pull_request_review":
		var e fastReviewEvent
		if err := json.Unmarshal(payload, &e); err != nil {
			return err
		}
		if e.PullRequest == nil {
			return fmt.Errorf("no pull_request")
		}
		d.pr = true
		a = about{e.Action, e.Sender, e.Installation, e.Repo, deref(e.PullRequest.Number), e.PullRequest.Labels}
		// Reviews take no reactions through the API; the pull request does.
		ev.SourceRef = "issue:" + strconv.Itoa(a.number)
		if e.Review != nil {
			ev.Text = deref(e.Review.Body)
		}
	}
	return d.aboutFields(event, a)
}

// fastLabelsOf is labelsOf for what readEvent read.
func fastLabelsOf(action string, labels []*fastLabel, added *fastLabel) []*fastLabel {
	if action == "labeled" {
		return []*fastLabel{added}
	}
	return labels
}

// commentedOn records a comment: its reference, its text and, for an edit,
// the body before.
func (d *delivery) commentedOn(prefix, action string, c *fastComment, changes *fastChanges) {
	d.comment = true
	d.ev.SourceRef, d.ev.Text = prefix+strconv.FormatInt(deref(c.ID), 10), deref(c.Body)
	if action == "edited" {
		d.edited = true
		d.previous = changes.previous()
	}
}

// previous is the body before an edit, or nil when the edit left it alone.
func (c *fastChanges) previous() *string {
	if c == nil || c.Body == nil {
		return nil
	}
	return c.Body.From
}

// aboutFields is about for what readEvent read.
func (d *delivery) aboutFields(event string, a about) error {
	d.setKind(event, deref(a.action))
	d.setSenderFields(a.sender)
	if a.installation != nil {
		d.ev.InstallationID = deref(a.installation.ID)
	}
	for _, l := range a.labels {
		if l != nil && deref(l.Name) != "" {
			d.ev.Labels = append(d.ev.Labels, *l.Name)
		}
	}
	var owner, name string
	if a.repo != nil {
		name = deref(a.repo.Name)
		if a.repo.Owner != nil {
			owner = deref(a.repo.Owner.Login)
		}
	}
	if owner == "" || name == "" || a.number <= 0 {
		return fmt.Errorf("no repository and number")
	}
	if err := checkRepo(owner, name); err != nil {
		return fmt.Errorf("payload names %v", err)
	}
	d.ev.Org = owner
	d.ev.Repo = owner + "/" + name
	d.ev.Number = a.number
	d.ev.Thread = bot.GitHubThread(owner, name, a.number)
	return nil
}

func (d *delivery) setSenderFields(u *fastUser) {
	var login, typ, name string
	if u != nil {
		login, typ, name = deref(u.Login), deref(u.Type), deref(u.Name)
	}
	d.ev.Actor = login
	d.ev.ActorIsBot = typ == "Bot" || strings.HasSuffix(login, "[bot]")
	d.ev.Requester = bot.Requester{Source: bot.SourceGitHub, ID: login, Name: name}
}

// readEnvelope reads what every repository-level payload shares, for
// events Switchyard does not act on, as fromEnvelope reads it.
func (d *delivery) readEnvelope(event string, payload []byte) error {
	var env fastEnvelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return err
	}
	d.setKind(event, env.Action)
	d.setSenderFields(env.Sender)
	d.ev.InstallationID = env.Installation.ID
	if r := env.Repository; r != nil && r.Owner.Login != "" && r.Name != "" {
		if err := checkRepo(r.Owner.Login, r.Name); err != nil {
			return fmt.Errorf("payload names %v", err)
		}
		d.ev.Org = r.Owner.Login
		d.ev.Repo = r.Owner.Login + "/" + r.Name
		if n := max(env.Number, env.Issue.Number, env.PullRequest.Number); n > 0 {
			d.ev.Number = n
			d.ev.Thread = bot.GitHubThread(r.Owner.Login, r.Name, n)
		}
	}
	return nil
}

// deref is *p, or the zero value for nil, as go-github's getters read.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
