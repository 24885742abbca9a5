package bot

import "time"

// RoutingConfig is the routing section of the config file. It is compiled
// into a Router before use; Router construction is where it is validated.
type RoutingConfig struct {
	// DefaultAgent receives what nothing else routes; "triage" when empty.
	DefaultAgent string `yaml:"default_agent" json:"default_agent,omitempty"`
	// Commands maps a command name (without "/") to an agent, on top of the
	// built-in deploy: ops, review: reviewer, triage: triage, docs: docs.
	Commands map[string]string `yaml:"commands" json:"commands,omitempty"`
	// Rules are tried by priority, higher first, then in file order.
	Rules []Rule `yaml:"rules" json:"rules,omitempty"`
	// ThreadWindow is how long after an agent's last work in a thread
	// finished a message there nobody addressed still goes to it;
	// DefaultThreadWindow when zero. While the agent works, it always does.
	ThreadWindow time.Duration `yaml:"thread_window" json:"thread_window,omitempty"`
}

// Rule routes events its Match accepts to Agent.
type Rule struct {
	Name     string `yaml:"name" json:"name"`
	Priority int    `yaml:"priority" json:"priority"`
	Agent    string `yaml:"agent" json:"agent"`
	Match    Match  `yaml:"match" json:"match"`
	// Origin is where the rule is written, for listings and messages:
	// "config.yaml:12" (the config loader sets it), "stored:<id>" for a
	// stored rule; "config" when empty.
	Origin string `yaml:"-" json:"-"`
}

// Match holds the conditions of a rule. Every field that is present must
// hold; a list holds when any of its entries does.
type Match struct {
	Sources  []string `yaml:"sources" json:"sources,omitempty"`   // event sources
	Kinds    []string `yaml:"kinds" json:"kinds,omitempty"`       // globs over event kinds: "github.pull_request.*"
	Labels   []string `yaml:"labels" json:"labels,omitempty"`     // any of the event's labels
	Repos    []string `yaml:"repos" json:"repos,omitempty"`       // globs over owner/name
	Paths    []string `yaml:"paths" json:"paths,omitempty"`       // globs over changed files; any file matching any glob
	Text     string   `yaml:"text" json:"text,omitempty"`         // a regular expression over the text
	Actors   []string `yaml:"actors" json:"actors,omitempty"`     // actor logins, case-insensitive
	Channels []string `yaml:"channels" json:"channels,omitempty"` // Slack channel ids or names
}

// AgentInfo is what the router knows of an agent: its name and the keywords
// content matching looks for.
type AgentInfo struct {
	Name     string
	Keywords []string
}

// DefaultCommands are the commands every router knows.
func DefaultCommands() map[string]string {
	return map[string]string{"deploy": "ops", "review": "reviewer", "triage": "triage", "docs": "docs"}
}

// FieldError is a config error at a field path such as
// "routing.rules[2].agent". The config loader adds the file and line.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// As lets errors.As see a problem with a field as a *Error with code
// EINVALID, so the edges (HTTP status, exit status 2) map it like any
// other bad input.
func (e *FieldError) As(target any) bool {
	if t, ok := target.(**Error); ok {
		*t = &Error{Code: EINVALID, Message: e.Error()}
		return true
	}
	return false
}
