package skills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// ScopeKind is a level of the scope chain, from the broadest.
type ScopeKind string

// Scope kinds. Enablement and settings are resolved global → org → repo →
// agent: the most specific explicit setting wins.
const (
	ScopeGlobal ScopeKind = "global"
	ScopeOrg    ScopeKind = "org"
	ScopeRepo   ScopeKind = "repo"
	ScopeAgent  ScopeKind = "agent"
)

// rank orders the kinds from the broadest.
func (k ScopeKind) rank() int {
	switch k {
	case ScopeGlobal:
		return 0
	case ScopeOrg:
		return 1
	case ScopeRepo:
		return 2
	}
	return 3
}

// ScopeDefault is the scope Effective names when no setting decided.
const ScopeDefault = "default"

// Scope is where a setting applies: global, org:<o>, repo:<o>/<r> or
// agent:<a>. Org and repository names are kept lower-case, as GitHub
// compares them.
type Scope struct {
	Kind ScopeKind
	// Name is "" for global, the org, owner/repo, or the agent.
	Name string
}

// Global is the global scope.
var Global = Scope{Kind: ScopeGlobal}

// ParseScope reads a scope as the CLI and the config write it.
func ParseScope(s string) (Scope, error) {
	kind, name, hasName := strings.Cut(strings.TrimSpace(s), ":")
	bad := func(why string) (Scope, error) {
		return Scope{}, fmt.Errorf("scope %q: %s; want global, org:<org>, repo:<owner>/<repo> or agent:<agent>", s, why)
	}
	switch ScopeKind(kind) {
	case ScopeGlobal:
		if hasName {
			return bad("global names nothing")
		}
		return Global, nil
	case ScopeOrg:
		name = strings.ToLower(name)
		if !validOwner(name) {
			return bad("not an org name")
		}
	case ScopeRepo:
		name = strings.ToLower(name)
		owner, repo, ok := strings.Cut(name, "/")
		if !ok || !validOwner(owner) || !validRepo(repo) {
			return bad("not owner/repo")
		}
	case ScopeAgent:
		if !ValidAgentName(name) {
			return bad("not an agent name")
		}
	default:
		return bad("unknown kind")
	}
	return Scope{Kind: ScopeKind(kind), Name: name}, nil
}

func validOwner(s string) bool {
	if s == "" || len(s) > 39 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func validRepo(s string) bool {
	if s == "" || len(s) > 100 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// String writes the scope as ParseScope reads it.
func (s Scope) String() string {
	if s.Kind == ScopeGlobal {
		return string(ScopeGlobal)
	}
	return string(s.Kind) + ":" + s.Name
}

// MarshalText writes the scope as a string.
func (s Scope) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a scope as ParseScope does.
func (s *Scope) UnmarshalText(b []byte) error {
	v, err := ParseScope(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Enablement is an explicit setting's verdict: on, off, or inherit (what
// the broader scopes say).
type Enablement int8

// Enablements.
const (
	Inherit Enablement = iota
	Enabled
	Disabled
)

// String is true, false or inherit.
func (e Enablement) String() string {
	switch e {
	case Enabled:
		return "true"
	case Disabled:
		return "false"
	}
	return "inherit"
}

// EnablementOfVerb returns what the verb enable, disable or inherit sets,
// as the API's paths, the CLI and the admin UI's buttons name it.
func EnablementOfVerb(verb string) (Enablement, error) {
	switch verb {
	case "enable":
		return Enabled, nil
	case "disable":
		return Disabled, nil
	case "inherit":
		return Inherit, nil
	}
	return Inherit, fmt.Errorf("%s: want enable, disable or inherit", strconv.Quote(verb))
}

// MarshalText writes true, false or inherit.
func (e Enablement) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads true, false or inherit.
func (e *Enablement) UnmarshalText(b []byte) error {
	switch s := strings.TrimSpace(string(b)); s {
	case "true":
		*e = Enabled
	case "false":
		*e = Disabled
	case "inherit", "":
		*e = Inherit
	default:
		return fmt.Errorf("want true, false or inherit, got %s", strconv.Quote(s))
	}
	return nil
}

// Setting is one explicit setting: at a scope, for a package (all it
// contributes) or a skill, whether it is enabled and the package's
// settings there.
type Setting struct {
	Scope Scope `json:"scope"`
	// Name is a package or a skill.
	Name    string     `json:"name"`
	Enabled Enablement `json:"enabled"`
	// Settings are the package's settings at this scope, validated against
	// its config schema; they merge key by key over broader scopes'.
	Settings map[string]any `json:"settings,omitempty"`
	// Origin says where it was set: "config.yaml:12" for the config file,
	// "" for the store (the CLI or the API).
	Origin string `json:"origin,omitempty"`
}

// Target is where a run happens: the thread's org and repository (either
// may be empty) and the agent.
type Target struct {
	Org   string `json:"org,omitempty"`
	Repo  string `json:"repo,omitempty"` // owner/name
	Agent string `json:"agent,omitempty"`
}

// scopes returns the target's scopes from the most specific.
func (t Target) scopes() []Scope {
	out := make([]Scope, 0, 4)
	if t.Agent != "" {
		out = append(out, Scope{Kind: ScopeAgent, Name: t.Agent})
	}
	repo := strings.ToLower(t.Repo)
	org := strings.ToLower(t.Org)
	if repo != "" {
		out = append(out, Scope{Kind: ScopeRepo, Name: repo})
		if owner, _, ok := strings.Cut(repo, "/"); ok && org == "" {
			org = owner
		}
	}
	if org != "" {
		out = append(out, Scope{Kind: ScopeOrg, Name: org})
	}
	return append(out, Global)
}

// TargetOf returns the target a scope's own settings are judged at: a repo
// scope includes its org.
func TargetOf(s Scope) Target {
	switch s.Kind {
	case ScopeOrg:
		return Target{Org: s.Name}
	case ScopeRepo:
		return Target{Repo: s.Name}
	case ScopeAgent:
		return Target{Agent: s.Name}
	}
	return Target{}
}

// Effective is whether a skill is enabled for a target, and the scope that
// decided (ScopeDefault when no setting did).
type Effective struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Scope   string `json:"scope"`
	// Package contributed the skill.
	Package string `json:"package,omitempty"`
	// Origin is where the deciding setting was made ("config.yaml:12", or
	// "store"); empty for the default.
	Origin string `json:"origin,omitempty"`
}

// settingKey identifies a setting of one source.
type settingKey struct {
	scope Scope
	name  string
}

// settings indexes the explicit settings of the config and of the store.
type settings struct {
	config map[settingKey]Setting
	store  map[settingKey]Setting
}

func indexSettings(list []Setting) map[settingKey]Setting {
	out := make(map[settingKey]Setting, len(list))
	for _, s := range list {
		out[settingKey{s.Scope, s.Name}] = s
	}
	return out
}

// decide returns the setting that decides whether a skill of pkg is
// enabled at target, or false when none does. Scopes are tried from the
// most specific; at one scope a setting of the skill beats one of its
// package, and the config's beats the store's for the same name.
func (ss *settings) decide(target Target, skill, pkg string) (Setting, bool) {
	for _, sc := range target.scopes() {
		for _, name := range [2]string{skill, pkg} {
			if name == "" {
				continue
			}
			k := settingKey{sc, name}
			if s, ok := ss.config[k]; ok && s.Enabled != Inherit {
				return s, true
			}
			if s, ok := ss.store[k]; ok && s.Enabled != Inherit {
				return s, true
			}
		}
	}
	return Setting{}, false
}

// merged returns pkg's settings at target: each scope's, from the broadest,
// key by key, the store's under the config's at one scope.
func (ss *settings) merged(target Target, pkg string) map[string]any {
	scopes := target.scopes()
	var out map[string]any
	for i := len(scopes) - 1; i >= 0; i-- {
		k := settingKey{scopes[i], pkg}
		for _, src := range [2]map[settingKey]Setting{ss.store, ss.config} {
			if s, ok := src[k]; ok && len(s.Settings) > 0 {
				if out == nil {
					out = map[string]any{}
				}
				maps.Copy(out, s.Settings)
			}
		}
	}
	return out
}

// UnmarshalJSON reads a setting, its settings' numbers as the config's
// decoder gives them (int64 when whole, float64 otherwise), so a setting
// reads back from a store exactly as it was made.
func (s *Setting) UnmarshalJSON(b []byte) error {
	type plain Setting
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	for k, v := range p.Settings {
		p.Settings[k] = normalizeNumbers(v)
	}
	*s = Setting(p)
	return nil
}

// ParseSettingValue reads one package setting as a person types it (the
// CLI's --set key=value, a field of the admin UI's form): a JSON value
// when the text is one, its whole numbers int64 as the config file gives
// them, otherwise the text itself, as a string. What it returns can be
// stored: it encodes as JSON.
func ParseSettingValue(text string) any {
	if !json.Valid([]byte(text)) {
		return text
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return text
	}
	v = normalizeNumbers(v)
	if _, err := json.Marshal(v); err != nil {
		return text // a number beyond float64 (1e999): kept as typed
	}
	return v
}

func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	}
	return v
}

// Config is the skills section of the config file: settings per scope, as
// `switchyard skills enable|disable` makes them, for the operator to keep
// in the file.
type Config struct {
	Settings []ConfigSetting `yaml:"settings" json:"settings,omitempty"`
}

// ConfigSetting is one setting of the config file.
type ConfigSetting struct {
	// Name is a package (everything it contributes) or a skill.
	Name string `yaml:"name" json:"name"`
	// Scope is global, org:<o>, repo:<o>/<r> or agent:<a>.
	Scope Scope `yaml:"scope" json:"scope"`
	// Enabled is true, false or inherit (the default).
	Enabled Enablement `yaml:"enabled" json:"enabled"`
	// Settings are the package's settings at this scope; values that are
	// secrets come from ${ENV}.
	Settings map[string]any `yaml:"settings" json:"settings,omitempty"`
}
