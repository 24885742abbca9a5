package bot

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Event kinds that are not "github.<event>.<action>".
const (
	KindLocalMessage = "local.message"
	KindSlackMention = "slack.app_mention"
	KindSlackMessage = "slack.message"
	KindSlackCommand = "slack.command"
	KindScheduleTick = "schedule.tick"
	// KindSubagent is the kind of a subagent's work item, which no event
	// made: a run spawned it.
	KindSubagent     = "subagent"
	kindGitHubPrefix = "github."
)

// Event is one inbound occurrence normalised from its source. Sources fill
// what they know; the router reads only these fields, never Raw.
type Event struct {
	Source     string `json:"source"`
	Kind       string `json:"kind"`
	DeliveryID string `json:"delivery_id,omitempty"`

	Actor      string `json:"actor,omitempty"`
	ActorIsBot bool   `json:"actor_is_bot,omitempty"`
	// Requester is who asked, with what the source knows of their rights.
	Requester Requester `json:"requester,omitzero"`

	Org            string   `json:"org,omitempty"`
	Repo           string   `json:"repo,omitempty"` // owner/name
	Number         int      `json:"number,omitempty"`
	InstallationID int64    `json:"installation_id,omitempty"`
	Labels         []string `json:"labels,omitempty"`
	Paths          []string `json:"paths,omitempty"` // changed files of a pull request
	Channel        string   `json:"channel,omitempty"`

	Text    string `json:"text,omitempty"`
	Command string `json:"command,omitempty"` // without the slash: "deploy"
	Args    string `json:"args,omitempty"`    // what follows the command
	// Mentions are the agent names the text asks for, as written. Nil
	// means "read them from Text" (FillFromText); a source that set them
	// itself, even to none, keeps them, which is why they are stored as
	// null or a list and never left out.
	Mentions []string `json:"mentions"`

	// Addressed says the author spoke to Switchyard itself: a Slack app
	// mention or direct message, the local console. Such a person is told
	// when nothing will run.
	Addressed bool `json:"addressed,omitempty"`
	// Edited marks an edit of an earlier message and Deleted its deletion
	// (Slack's message_changed and message_deleted, GitHub's edited
	// actions); Subtype is a Slack message's subtype, "" for what people
	// write. Sources' gates read them.
	Edited  bool   `json:"edited,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	Subtype string `json:"subtype,omitempty"`

	Thread Thread `json:"thread"`
	// Conversation, when set, is what the thread is part of, where an
	// agent's work carries on from one thread to the next: a Slack direct
	// message channel, where every message starts a thread of its own.
	Conversation Thread `json:"conversation,omitzero"`
	// SourceRef names the triggering message on its platform, for reactions:
	// a Slack message ts, "comment:<id>", "review_comment:<id>" or
	// "issue:<number>" on GitHub. Empty when there is nothing to react to.
	SourceRef  string    `json:"source_ref,omitempty"`
	ReceivedAt time.Time `json:"received_at"`

	// Raw is the payload as received. It is stored beside the work item, never
	// decoded again on the hot path, and never marshalled with the event.
	Raw []byte `json:"-"`

	// Signature is the verified signature of the signed request that
	// carried the event (its MAC, lower-case hex), which no other request
	// has: the same request sent again carries it whatever delivery id it
	// claims, so it is a second dedup key (SignatureKey). Empty where
	// nothing is signed (Socket Mode, the console, schedules).
	// SignedUntil is when the source would refuse that request anyway
	// (Slack's five-minute timestamp window); zero: the dedup window. Neither
	// is stored with the event.
	Signature   string    `json:"-"`
	SignedUntil time.Time `json:"-"`
}

// DedupKey is the key duplicate deliveries share: source and delivery id. An
// event without a delivery id cannot be deduplicated and returns "".
func (e *Event) DedupKey() string {
	if e.DeliveryID == "" {
		return ""
	}
	return e.Source + ":" + e.DeliveryID
}

// SignatureKey is the dedup key of the signed request that carried the
// event, "" when it was not signed. It cannot be a DedupKey: a source is
// followed by "/" here, by ":" there.
func (e *Event) SignatureKey() string {
	if e.Signature == "" {
		return ""
	}
	return e.Source + "/signed:" + e.Signature
}

// FillFromText sets Mentions, Command and Args from Text when the source did
// not set them itself, from what the author says in their own words (see
// Markup.Spoken): a command is a line that starts with "/"; mentions are
// "@name" tokens in the order they appear. Code, quotes and comments count
// for neither.
func (e *Event) FillFromText() {
	if e.Mentions != nil && e.Command != "" {
		return
	}
	m := MarkupOf(e.Source)
	if e.Mentions == nil {
		e.Mentions = m.Mentions(e.Text)
	}
	if e.Command == "" {
		e.Command, e.Args = m.Command(e.Text)
	}
}

// ParseMentions returns the names of "@name" tokens in plain text, in
// order, as written (the router compares them case-insensitively). An "@"
// inside a word, as in an e-mail address, is not a mention, nor is one in a
// path: "@name/" (a scoped package such as @types/node, a GitHub team
// @org/team) or "/@name" (a URL such as https://medium.com/@name). It reads
// every character; Markup.Mentions reads only what the author says.
func ParseMentions(text string) []string {
	var out []string
	for i := 0; i < len(text); i++ {
		if text[i] != '@' {
			continue
		}
		if i > 0 && (isNameByte(text[i-1]) || text[i-1] == '/') {
			continue
		}
		j := i + 1
		for j < len(text) && isNameByte(text[j]) {
			j++
		}
		if j < len(text) && text[j] == '/' {
			i = j
			continue
		}
		if name := strings.TrimRight(text[i+1:j], ".-"); name != "" {
			out = append(out, name)
		}
		i = j - 1
	}
	return out
}

func isNameByte(b byte) bool {
	return b == '_' || b == '-' || b == '.' || b < 0x80 && (unicode.IsLetter(rune(b)) || unicode.IsDigit(rune(b)))
}

// ParseCommand finds the first line of plain text that starts with "/" and
// returns the command name (lower-cased, without the slash) and the rest of
// the line. Markup.Command reads only what the author says.
func ParseCommand(text string) (command, args string) {
	name, from, to := parseCommand(text)
	if name == "" {
		return "", ""
	}
	return name, strings.TrimSpace(text[from:to])
}

// parseCommand returns the first command of text and where its arguments
// are: text[from:to], untrimmed.
func parseCommand(text string) (name string, from, to int) {
	for start := 0; start <= len(text); {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
		line := text[start:end]
		lead := len(line) - len(strings.TrimLeft(line, " \t\r"))
		rest := strings.TrimRight(line[lead:], " \t\r")
		if len(rest) >= 2 && rest[0] == '/' {
			word, _, _ := strings.Cut(rest[1:], " ")
			if word != "" && isCommandName(word) {
				from = start + lead + 1 + len(word)
				return strings.ToLower(word), from, start + lead + len(rest)
			}
		}
		start = end + 1
	}
	return "", 0, 0
}

func isCommandName(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// CheckDescribed says what is wrong with an event a person described to
// have it explained (explain, POST /api/v1/explain) rather than one a
// source received: a source none knows, a kind of another source, a
// negative number, a repository that is not owner/name. Each problem is a
// *FieldError named by the event's JSON field; an empty source is left to
// the intake.
func (e *Event) CheckDescribed() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	switch e.Source {
	case "":
	case SourceLocal, SourceGitHub, SourceSlack, SourceSchedule:
		if e.Kind != "" && !strings.HasPrefix(e.Kind, e.Source+".") {
			fail("kind", "%q is not an event of %s: want %s.…, such as %s", e.Kind, e.Source, e.Source, DefaultKind(e.Source))
		}
	default:
		fail("source", "unknown source %q: want local, github, slack or schedule", e.Source)
	}
	if e.Number < 0 {
		fail("number", "want a positive issue or pull request number, got %d", e.Number)
	}
	if e.Repo != "" {
		owner, name, ok := strings.Cut(e.Repo, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			fail("repo", "want owner/name, such as acme/api, got %q", e.Repo)
		}
	}
	return errors.Join(errs...)
}

// DefaultKind is the kind an event of source has when a person describing
// one (explain, the admin UI's test form) names none: a console message, a
// Slack mention, a GitHub comment, a schedule's tick; "" for another
// source.
func DefaultKind(source string) string {
	switch source {
	case SourceLocal:
		return KindLocalMessage
	case SourceSlack:
		return KindSlackMention
	case SourceGitHub:
		return "github.issue_comment.created"
	case SourceSchedule:
		return KindScheduleTick
	}
	return ""
}
