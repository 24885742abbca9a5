package bot

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sources of events and threads.
const (
	SourceLocal    = "local"
	SourceGitHub   = "github"
	SourceSlack    = "slack"
	SourceSchedule = "schedule"
)

// Thread is where a conversation lives and where reports go. Its canonical
// string, Key, is the session key:
//
//	local:<name>
//	github:<owner>/<repo>#<number>
//	slack:<team>/<channel>/<thread_ts>
//	slack:<team>/<channel>             (the channel's top level)
//
// A Slack thread without a thread ts is the channel itself: only the message
// that opens a slash command's thread is posted there. Threads marshal to and from their key, so stored records and the API carry
// one readable string.
type Thread struct {
	Source string // SourceLocal, SourceGitHub or SourceSlack

	Name string // local

	Owner  string // github
	Repo   string // github
	Number int    // github

	Team     string // slack
	Channel  string // slack
	ThreadTS string // slack
}

// LocalThread returns the local console thread with the given name.
func LocalThread(name string) Thread { return Thread{Source: SourceLocal, Name: name} }

// GitHubThread returns the thread of an issue or pull request.
func GitHubThread(owner, repo string, number int) Thread {
	return Thread{Source: SourceGitHub, Owner: owner, Repo: repo, Number: number}
}

// SlackThread returns a Slack thread; ts is the thread's root message ts, or
// empty for the channel's top level.
func SlackThread(team, channel, ts string) Thread {
	return Thread{Source: SourceSlack, Team: team, Channel: channel, ThreadTS: ts}
}

// Key returns the session key, or "" for the zero Thread.
func (t Thread) Key() string {
	switch t.Source {
	case SourceLocal:
		return "local:" + t.Name
	case SourceGitHub:
		return fmt.Sprintf("github:%s/%s#%d", t.Owner, t.Repo, t.Number)
	case SourceSlack:
		if t.ThreadTS == "" {
			return fmt.Sprintf("slack:%s/%s", t.Team, t.Channel)
		}
		return fmt.Sprintf("slack:%s/%s/%s", t.Team, t.Channel, t.ThreadTS)
	case "":
		return ""
	default:
		return t.Source + ":" + t.Name
	}
}

func (t Thread) String() string { return t.Key() }

// Destination names where a thread's messages are delivered, as far as one
// can be down while another is up: "github/<owner>" (the account one GitHub
// App installation covers), "slack" (the one workspace the bot token
// speaks for), "local". The deliverer pauses per destination while its
// platform fails, and the store keeps undelivered messages grouped by it.
func (t Thread) Destination() string {
	if t.Source == SourceGitHub && t.Owner != "" {
		return SourceGitHub + "/" + strings.ToLower(t.Owner)
	}
	return t.Source
}

// IsZero reports whether t names no thread.
func (t Thread) IsZero() bool { return t.Source == "" }

// ParseThread parses a session key. A bare name without a source prefix is a
// local thread, so people can type "t1" for "local:t1".
func ParseThread(key string) (Thread, error) {
	if key == "" {
		return Thread{}, Errorf(EINVALID, "empty thread")
	}
	source, rest, ok := strings.Cut(key, ":")
	if !ok {
		return validLocal(key)
	}
	switch source {
	case SourceLocal:
		return validLocal(rest)
	case SourceGitHub:
		repo, num, ok := strings.Cut(rest, "#")
		owner, name, ok2 := strings.Cut(repo, "/")
		n, err := strconv.Atoi(num)
		if !ok || !ok2 || owner == "" || name == "" || strings.Contains(name, "/") || err != nil || n <= 0 {
			return Thread{}, Errorf(EINVALID, "thread %q: want github:<owner>/<repo>#<number>", key)
		}
		return GitHubThread(owner, name, n), nil
	case SourceSlack:
		parts := strings.Split(rest, "/")
		if len(parts) == 2 {
			parts = append(parts, "") // the channel's top level
		} else if len(parts) == 3 && parts[2] == "" {
			parts = nil
		}
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return Thread{}, Errorf(EINVALID, "thread %q: want slack:<team>/<channel>/<thread_ts>", key)
		}
		return SlackThread(parts[0], parts[1], parts[2]), nil
	default:
		return Thread{}, Errorf(EINVALID, "thread %q: unknown source %q (want local, github or slack)", key, source)
	}
}

func validLocal(name string) (Thread, error) {
	if name == "" || len(name) > 200 || strings.ContainsAny(name, "\x00\n\r") {
		return Thread{}, Errorf(EINVALID, "local thread name %q: want 1-200 characters, no control characters", name)
	}
	return LocalThread(name), nil
}

// Validate refuses a thread a store could not keep and read back as it is:
// one whose session key does not parse back to it (a GitHub thread without
// a number, a Slack one without a channel, a local name over 200 bytes or
// with a line break), or is not UTF-8 text without NUL (PostgreSQL keeps no
// other text, and the stored record's JSON would read back otherwise).
func (t Thread) Validate() error {
	key := t.Key()
	if err := ValidText("thread", key); err != nil {
		return err
	}
	th, err := ParseThread(key)
	if err != nil {
		return err
	}
	if th != t {
		return Errorf(EINVALID, "thread %q does not read back from its key", key)
	}
	return nil
}

// ValidText refuses text a store keys or selects by (a thread, a delivery
// id, an outbox key, a schedule's name) that is not UTF-8 without NUL,
// naming what it is: PostgreSQL keeps no other text, so neither store
// keeps it, and a lookup by it finds nothing.
func ValidText(what, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return Errorf(EINVALID, "%s %q: want UTF-8 text without NUL", what, s)
	}
	return nil
}

// MarshalText encodes the session key.
func (t Thread) MarshalText() ([]byte, error) { return []byte(t.Key()), nil }

// UnmarshalText decodes a session key; the empty string is the zero Thread.
func (t *Thread) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*t = Thread{}
		return nil
	}
	th, err := ParseThread(string(b))
	if err != nil {
		return err
	}
	*t = th
	return nil
}
