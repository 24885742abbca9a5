package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	_ "embed"

	"github.com/switchyard/switchyard/agents/llm"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/internal/yamldecode"
	"github.com/switchyard/switchyard/skills"
)

// Config is the whole configuration file. Fields hold defaults where the
// file says nothing; see Default and config.example.yaml.
type Config struct {
	// Server is the HTTP listener for webhooks, the admin API and the local
	// console.
	Server Server `yaml:"server" json:"server"`
	// Admin configures the admin web UI under /admin/.
	Admin Admin `yaml:"admin" json:"admin"`
	// DataDir holds the bbolt database and anything else Switchyard writes;
	// default "./data".
	DataDir string `yaml:"data_dir" json:"data_dir"`
	// Storage says where the data lives: in a bbolt file in DataDir (the
	// default, one process) or in PostgreSQL (several replicas).
	Storage Storage `yaml:"storage" json:"storage"`
	// Workers is how many jobs run at once; default 4, 1 to 256.
	Workers int `yaml:"workers" json:"workers"`
	// AgentsDir holds user agent definitions, which override packaged and
	// built-in ones; default "./agents". A missing directory is fine.
	AgentsDir string `yaml:"agents_dir" json:"agents_dir"`
	// DedupWindow is how long a delivery id is remembered to drop duplicate
	// deliveries; default 168h.
	DedupWindow time.Duration `yaml:"dedup_window" json:"dedup_window"`
	// Dispatch tunes the dispatch queue.
	Dispatch Dispatch `yaml:"dispatch" json:"dispatch"`
	// Retention says how long what is over is kept; an hourly sweep
	// removes what is older.
	Retention Retention `yaml:"retention" json:"retention"`
	// Models are the model endpoints agents refer to by name.
	Models map[string]Model `yaml:"models,omitempty" json:"models,omitempty"`
	// Routing decides which agent handles an event.
	Routing bot.RoutingConfig `yaml:"routing" json:"routing"`
	// Schedules start agents at cron times.
	Schedules []Schedule `yaml:"schedules,omitempty" json:"schedules,omitempty"`
	// ApprovalTimeout is how long a tool call that needs approval waits for
	// a person before it is denied; default 15m.
	ApprovalTimeout time.Duration `yaml:"approval_timeout" json:"approval_timeout"`
	// Profiles are custom permission profiles, on top of the built-in
	// read-only, contributor, maintainer and ops.
	Profiles map[string]policy.ProfileConfig `yaml:"profiles,omitempty" json:"profiles,omitempty"`
	// Access maps who asks for work to the ceiling profile that bounds
	// every agent working for them.
	Access policy.AccessConfig `yaml:"access" json:"access"`
	// Sandbox says where bash and command tools may run.
	Sandbox Sandbox `yaml:"sandbox" json:"sandbox"`
	// Skills enable packages and skills, and set packages' settings, per
	// scope (global, org:<o>, repo:<o>/<r>, agent:<a>).
	Skills skills.Config `yaml:"skills" json:"skills"`
	// Subagents bound what agents' runs spawn.
	Subagents Subagents `yaml:"subagents" json:"subagents"`
	// Budgets cap what a request's tree of runs, and each requester,
	// agent and repository per day, may spend; zero caps nothing.
	Budgets Budgets `yaml:"budgets" json:"budgets"`
	// GitHub connects a GitHub App; nil (the section absent) disables it.
	GitHub *GitHub `yaml:"github,omitempty" json:"github,omitempty"`
	// Slack connects a Slack app; nil (the section absent) disables it.
	Slack *Slack `yaml:"slack,omitempty" json:"slack,omitempty"`

	// Source is the file the config came from, as given to Load or Parse,
	// or "<defaults>".
	Source string `yaml:"-" json:"-"`

	// pos is a pointer so that printing a Config shows an address rather
	// than every line number.
	pos *yamldecode.Positions
	// skillSecrets are the values of skills' settings that came from the
	// environment: they may be secrets, so they are masked.
	skillSecrets []bot.Secret
}

// Server configures the HTTP listener.
type Server struct {
	// Listen is the address to listen on; default "127.0.0.1:8080".
	Listen string `yaml:"listen" json:"listen"`
	// APIToken is the bearer token of the API's administrator (identity
	// "admin"). Unset (and no $SWITCHYARD_API_TOKEN), the daemon makes one
	// at first start in <data_dir>/api-token, which the CLI reads.
	APIToken bot.Secret `yaml:"api_token" json:"api_token"`
	// APITokens are further bearer tokens, each giving its holder a name:
	// the identity approvals are decided as. Unlike the rest of Server,
	// they follow a reload: one withdrawn stops authenticating at once.
	APITokens []APIToken `yaml:"api_tokens,omitempty" json:"api_tokens,omitempty"`
	// PublicURL is where people and proxies reach the daemon
	// ("https://switchyard.example.com"); its origin and host are accepted
	// by /api/v1 besides the listen address.
	PublicURL string `yaml:"public_url,omitempty" json:"public_url,omitempty"`
	// Console enables the local console channel (HTTP and `switchyard
	// send`); default true.
	Console bool `yaml:"console" json:"console"`
}

// Admin configures the admin web UI. People sign in with a named API
// token (server.api_token, server.api_tokens) or as one of Users.
type Admin struct {
	// Users sign in with a name and a password, checked against its bcrypt
	// hash. Default none. Reloaded: a user removed, or whose password
	// changed, is signed out at the reload.
	Users []AdminUser `yaml:"users,omitempty" json:"users,omitempty"`
}

// AdminUser is a person who signs in to the admin UI with a password.
type AdminUser struct {
	// Name is the identity the user acts as (approvals are decided as it,
	// changes audited with it): letters, digits, '.', '_', '-' and '@',
	// unique among the users. Required.
	Name string `yaml:"name" json:"name"`
	// PasswordHash is the bcrypt hash of the password ("$2a$…", "$2b$…"
	// or "$2y$…"), as `switchyard admin hash-password` or `htpasswd -nBC
	// 12 ""` print it. Required; never shown.
	PasswordHash bot.Secret `yaml:"password_hash" json:"password_hash"`
}

// AdminIdentity is who the API token of server.api_token, of
// $SWITCHYARD_API_TOKEN or of the token file authenticates as.
const AdminIdentity = "admin"

// APIToken is a named bearer token of the API.
type APIToken struct {
	// Name is who the token speaks for: letters, digits, '.', '_', '-'
	// and '@', unique, not "admin". Required.
	Name string `yaml:"name" json:"name"`
	// Token is the bearer token: no white space; under 16 characters the
	// daemon warns that it could be guessed. Required.
	Token bot.Secret `yaml:"token" json:"token"`
}

// Storage drivers.
const (
	StorageBolt     = "bolt"     // one bbolt file in data_dir: one process at a time
	StoragePostgres = "postgres" // a PostgreSQL database several replicas share
)

// DefaultMaxConns is the size of one replica's PostgreSQL connection pool
// when storage.max_conns says nothing.
const DefaultMaxConns = 10

// Storage configures where work items, events, the outbox, the audit log
// and everything else Switchyard keeps are stored.
type Storage struct {
	// Driver is "bolt" (the default: data_dir/switchyard.db, one process)
	// or "postgres" (a database several replicas share).
	Driver string `yaml:"driver" json:"driver"`
	// DSN is the PostgreSQL connection string, a URL
	// (postgres://user:password@host:5432/switchyard) or key=value pairs;
	// required for postgres. It holds a password: a secret.
	DSN bot.Secret `yaml:"dsn,omitempty" json:"dsn,omitempty"`
	// MaxConns caps one replica's connection pool; default 10, 2 to 1000.
	// Each replica also holds one connection of its own for notifications.
	MaxConns int `yaml:"max_conns,omitempty" json:"max_conns,omitempty"`
}

// Secrets returns the DSN and the password written in it, which the
// redactor masks wherever they would show.
func (s Storage) Secrets() []bot.Secret {
	if !s.DSN.IsSet() {
		return nil
	}
	dsn := s.DSN.Reveal()
	out := []bot.Secret{s.DSN}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, bot.Secret(pw))
		}
		return out
	}
	for _, field := range strings.Fields(dsn) {
		if pw, ok := strings.CutPrefix(field, "password="); ok {
			out = append(out, bot.Secret(strings.Trim(pw, "'")))
		}
	}
	return out
}

// Sandbox configures where agents' commands run.
type Sandbox struct {
	// Mode is "required" (the default: bash and command tools run only
	// under bubblewrap, and are refused where it cannot run) or "none"
	// (they run as plain processes, and the daemon warns at every start).
	Mode sandbox.Mode `yaml:"mode" json:"mode"`
}

// Subagents bound spawn_subagent; agents may set their own in their
// frontmatter.
type Subagents struct {
	// MaxConcurrent is how many of a run's subagents may be open at once;
	// a spawn beyond it is refused. Default 4.
	MaxConcurrent int `yaml:"max_concurrent" json:"max_concurrent"`
	// MaxDepth is how deep spawns may nest: 1 (the default) lets runs
	// spawn and their children not.
	MaxDepth int `yaml:"max_depth" json:"max_depth"`
	// Timeout is the longest a subagent may take from its spawn; a spawn
	// may ask for less. Default 10m.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
}

// Retention says how long what is over is kept; 0 keeps it forever.
type Retention struct {
	// Payloads is how long an event's raw payload is kept (what was
	// decided from it stays with what it made); default 720h (30 days).
	Payloads time.Duration `yaml:"payloads" json:"payloads"`
	// Records is how long finished work items, with their jobs, ingress
	// records, and outbox messages delivered or given up are kept; default
	// 2160h (90 days). Nothing unfinished or still to deliver is removed.
	Records time.Duration `yaml:"records" json:"records"`
	// Audit is how long audit records are kept; default 8760h (1 year).
	Audit time.Duration `yaml:"audit" json:"audit"`
}

// Bot is the retention as the store takes it.
func (r Retention) Bot() bot.Retention {
	return bot.Retention{Payloads: r.Payloads, Records: r.Records, Audit: r.Audit}
}

// Budgets cap spending, counted from the model provider's reported usage
// and checked before every model call. A run at a cap pauses and asks in
// its thread, through the approval mechanism, for as much again.
type Budgets struct {
	// Tree caps a work item tree: the request and every run it started.
	Tree TreeBudget `yaml:"tree" json:"tree"`
	// PerDay caps each requester, agent and repository per UTC day.
	PerDay DailyBudgets `yaml:"per_day" json:"per_day"`
	// Currency names the unit of the models' prices and of cost caps;
	// default USD.
	Currency string `yaml:"currency" json:"currency"`
}

// TreeBudget is what one work item tree may spend.
type TreeBudget struct {
	// Tokens, as the provider counts them (input and output).
	Tokens int64 `yaml:"tokens" json:"tokens"`
	// WallTime counts from the tree's first model call.
	WallTime time.Duration `yaml:"wall_time" json:"wall_time"`
	// Cost, in budgets.currency, of the calls of models with prices.
	Cost float64 `yaml:"cost" json:"cost"`
}

// DailyBudgets are tokens per UTC day.
type DailyBudgets struct {
	Requester int64 `yaml:"requester" json:"requester"`
	Agent     int64 `yaml:"agent" json:"agent"`
	Repo      int64 `yaml:"repo" json:"repo"`
}

// Dispatch tunes the dispatch queue.
type Dispatch struct {
	// MaxAttempts is how often a dispatch is claimed before it fails;
	// default 3.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// Lease is how long a worker's claim holds without renewal; default 30s.
	Lease time.Duration `yaml:"lease" json:"lease"`
}

// Model providers.
const (
	ProviderOpenAI    = "openai"    // the OpenAI API or any compatible server
	ProviderAnthropic = "anthropic" // the Anthropic Messages API
)

// DefaultModelTimeout bounds one model request when a model sets no timeout.
const DefaultModelTimeout = 2 * time.Minute

// Model is one model endpoint.
type Model struct {
	// Provider is "openai" (also for compatible servers such as vLLM,
	// Ollama, LM Studio) or "anthropic". Required.
	Provider string `yaml:"provider" json:"provider"`
	// BaseURL overrides the provider's endpoint; empty means the official
	// API.
	BaseURL string `yaml:"base_url,omitempty" json:"base_url,omitempty"`
	// APIKey authenticates to the provider; local servers may need none.
	APIKey bot.Secret `yaml:"api_key,omitempty" json:"api_key,omitempty"`
	// Model is the provider's model name. Required.
	Model string `yaml:"model" json:"model"`
	// MaxTokens caps the tokens of one response; 0 leaves it to the agent
	// or the provider.
	MaxTokens int `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	// Timeout bounds one request; default 2m.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// Prices are what the model costs, for budgets' cost caps; nil counts
	// its calls' tokens only.
	Prices *Prices `yaml:"prices,omitempty" json:"prices,omitempty"`
}

// Prices are a model's prices per million tokens, in budgets.currency.
type Prices struct {
	Input  float64 `yaml:"input" json:"input"`
	Output float64 `yaml:"output" json:"output"`
}

// LLM is the model client's form of m.
func (m Model) LLM() llm.Config {
	return llm.Config{
		Provider: m.Provider, BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Model,
		MaxTokens: m.MaxTokens, Timeout: m.Timeout,
	}
}

// Schedule starts an agent at every firing of a cron spec.
type Schedule struct {
	// Name identifies the schedule; unique, required. The scheduler
	// remembers its last firing under this name.
	Name string `yaml:"name" json:"name"`
	// Cron is a standard 5-field spec ("0 9 * * 1-5") or a descriptor
	// ("@hourly", "@every 30m"), optionally prefixed "CRON_TZ=Europe/Berlin".
	Cron string `yaml:"cron" json:"cron"`
	// Agent runs at each firing. Required.
	Agent string `yaml:"agent" json:"agent"`
	// Thread is where the work item lives and reports go, as a session key
	// ("slack:T1/C2/1700000000.000100", "github:acme/web#12", "local:ops");
	// default the local thread "schedule-<name>".
	Thread bot.Thread `yaml:"thread" json:"thread"`
	// Text is the message the agent receives. Required.
	Text string `yaml:"text" json:"text"`
}

// Defaults of the integration sections, applied when the section is present.
const (
	DefaultGitHubAPIURL     = "https://api.github.com/"
	DefaultGitHubPermission = "write"
	DefaultSlackAPIURL      = "https://slack.com/api/"
)

// GitHub configures the GitHub App integration.
type GitHub struct {
	// AppID is the GitHub App's id. Required.
	AppID int64 `yaml:"app_id" json:"app_id"`
	// PrivateKey is the App's PEM private key; exactly one of PrivateKey and
	// PrivateKeyFile is required.
	PrivateKey bot.Secret `yaml:"private_key,omitempty" json:"private_key,omitempty"`
	// PrivateKeyFile is a path to the PEM private key, relative to the
	// working directory.
	PrivateKeyFile string `yaml:"private_key_file,omitempty" json:"private_key_file,omitempty"`
	// WebhookSecret verifies webhook signatures. Required.
	WebhookSecret bot.Secret `yaml:"webhook_secret" json:"webhook_secret"`
	// APIURL is the REST API base, with a trailing slash; default
	// "https://api.github.com/". GitHub Enterprise Server:
	// "https://github.example.com/api/v3/".
	APIURL string `yaml:"api_url" json:"api_url"`
	// AllowBots lists bot logins ("dependabot[bot]") whose events are acted
	// on; other bots are ignored.
	AllowBots []string `yaml:"allow_bots,omitempty" json:"allow_bots,omitempty"`
	// MinPermission is the repository permission an actor needs: read,
	// triage, write, maintain or admin; default write.
	MinPermission string `yaml:"min_permission" json:"min_permission"`
	// AllowOtherRepos lets agents' GitHub tools act on repositories other
	// than the one their thread is on; default false.
	AllowOtherRepos bool `yaml:"allow_other_repos,omitempty" json:"allow_other_repos,omitempty"`
	// AppSlug is the App's URL name; mentions of @<slug> address the bot
	// itself and its own comments are ignored. Empty: looked up at start.
	AppSlug string `yaml:"app_slug,omitempty" json:"app_slug,omitempty"`
}

// Slack connection modes.
const (
	SlackSocket = "socket" // Socket Mode: no public URL needed
	SlackHTTP   = "http"   // Events API and slash commands over HTTPS
)

// Slack configures the Slack integration.
type Slack struct {
	// Mode is "socket" (needs AppToken and BotToken) or "http" (needs
	// SigningSecret and BotToken). Required.
	Mode string `yaml:"mode" json:"mode"`
	// AppToken is the app-level token (xapp-...) for Socket Mode.
	AppToken bot.Secret `yaml:"app_token,omitempty" json:"app_token,omitempty"`
	// BotToken is the bot user token (xoxb-...) for the Web API.
	BotToken bot.Secret `yaml:"bot_token" json:"bot_token"`
	// SigningSecret verifies HTTP requests from Slack.
	SigningSecret bot.Secret `yaml:"signing_secret,omitempty" json:"signing_secret,omitempty"`
	// APIURL is the Web API base, with a trailing slash; default
	// "https://slack.com/api/".
	APIURL string `yaml:"api_url" json:"api_url"`
	// AllowedChannels, when set, limits Switchyard to these channel ids.
	AllowedChannels []string `yaml:"allowed_channels,omitempty" json:"allowed_channels,omitempty"`
	// AllowedUsers, when set, limits Switchyard to these user ids.
	AllowedUsers []string `yaml:"allowed_users,omitempty" json:"allowed_users,omitempty"`
}

// DefaultsName is the Source of the embedded defaults.
const DefaultsName = "<defaults>"

//go:embed defaults.yaml
var defaultsYAML []byte

// Default returns the configuration used when there is no config file:
// listen on 127.0.0.1:8080, data in ./data, the local console on. It is
// parsed from the embedded defaults.yaml by the same code as any file.
func Default() *Config {
	cfg, err := parse(&Config{}, DefaultsName, defaultsYAML, os.LookupEnv)
	if err != nil {
		// The file is part of the binary and its tests parse it.
		panic(fmt.Sprintf("config: embedded defaults: %v", err))
	}
	cfg.pos = nil // its lines are of a file nobody edits
	return cfg
}

// Load reads and parses the config file at path; errors name the file as
// given. An empty path means no config file: Load returns Default(). A file
// that cannot be read is an I/O error, not IsInvalid.
func Load(path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Access is what a client of the running daemon needs from its config
// file: the API token set there, if any, and the data directory that holds
// the token file the daemon makes otherwise.
type Access struct {
	APIToken bot.Secret
	DataDir  string
}

// LoadAccess reads server.api_token and data_dir from the config file at
// path (the built-in defaults when path is ""), with the decoder Load uses.
// Problems elsewhere in the file do not stop it: a client still reaches
// the daemon with a config it is about to be asked to reload, and refuse.
// A file that does not parse, or a problem with either key, is returned as
// Errors; a file that cannot be read is an I/O error.
func LoadAccess(path string) (Access, error) {
	c := Default()
	if path == "" {
		return Access{APIToken: c.Server.APIToken, DataDir: c.DataDir}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Access{}, fmt.Errorf("read config: %w", err)
	}
	d := yamldecode.New(path, yamldecode.Options{Lookup: os.LookupEnv})
	d.Document(data, c)
	checkDataDir(d.FailAt, c.DataDir)
	var errs Errors
	for _, e := range d.Errors() {
		switch e.Path {
		case "", "server", "server.api_token", "data_dir":
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return Access{}, errs
	}
	return Access{APIToken: c.Server.APIToken, DataDir: c.DataDir}, nil
}

// Parse decodes data, the contents of the file called name, on top of the
// defaults, and checks everything that does not depend on the agents. A
// config problem is returned as Errors, every problem found, sorted by line.
func Parse(name string, data []byte) (*Config, error) {
	return parse(Default(), name, data, os.LookupEnv)
}

func parse(base *Config, name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	d := yamldecode.New(name, yamldecode.Options{Lookup: lookup})
	d.Document(data, base)
	checkConfig(d, base)
	if errs := d.Errors(); len(errs) > 0 {
		return nil, errs
	}
	base.Source = name
	pos := d.Positions()
	base.pos = &pos
	base.skillSecrets = nil
	for _, v := range d.FromEnvironment("skills") {
		base.skillSecrets = append(base.skillSecrets, bot.Secret(v))
	}
	return base, nil
}

// Line returns the line of the file where path (as in an Error, e.g.
// "routing.rules[2]") or its nearest enclosing section is written, or 0.
// `switchyard rules list` uses it to say where each rule is.
func (c *Config) Line(path string) int {
	if c.pos == nil {
		return 0
	}
	return c.pos.Line(path)
}

// Compile builds the router from the routing section for the given agents
// and checks the agent of every schedule. Problems are returned as Errors
// with the file's line numbers.
func (c *Config) Compile(agents []bot.AgentInfo) (*bot.Router, error) {
	var errs Errors
	fail := func(path, msg string) {
		errs = append(errs, &Error{File: c.Source, Line: c.Line(path), Path: path, Msg: msg})
	}
	// Each rule says where it is written, for listings.
	routing := c.Routing
	routing.Rules = slices.Clone(c.Routing.Rules)
	for i := range routing.Rules {
		if line := c.Line(fmt.Sprintf("routing.rules[%d]", i)); line > 0 {
			routing.Rules[i].Origin = fmt.Sprintf("%s:%d", c.Source, line)
		}
	}
	router, err := bot.NewRouter(routing, agents)
	if err != nil {
		list := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			list = j.Unwrap()
		}
		for _, e := range list {
			var fe *bot.FieldError
			if errors.As(e, &fe) {
				fail(fe.Field, fe.Msg)
			} else {
				fail("routing", e.Error())
			}
		}
	}
	known := make(map[string]bool, len(agents))
	for _, a := range agents {
		known[a.Name] = true
	}
	for i, s := range c.Schedules {
		if s.Agent != "" && !known[s.Agent] {
			fail(fmt.Sprintf("schedules[%d].agent", i), fmt.Sprintf("unknown agent %q", s.Agent))
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return router, nil
}

// Positioned returns the *bot.FieldError values joined in err as Errors
// at the lines of this file, for checks made outside this package (the
// approvals that name tools of connected platforms). Any other error comes
// back as it is; nil stays nil.
func (c *Config) Positioned(err error) error {
	if err == nil {
		return nil
	}
	var errs Errors
	for _, e := range flatten(err) {
		var fe *bot.FieldError
		if !errors.As(e, &fe) {
			return err
		}
		errs = append(errs, &Error{File: c.Source, Line: c.Line(fe.Field), Path: fe.Field, Msg: fe.Msg})
	}
	errs.Sort()
	return errs
}

// BotSchedules returns the schedules in the form the scheduler takes.
func (c *Config) BotSchedules() []bot.Schedule {
	out := make([]bot.Schedule, len(c.Schedules))
	for i, s := range c.Schedules {
		out[i] = bot.Schedule{Name: s.Name, Spec: s.Cron, Agent: s.Agent, Thread: s.Thread, Text: s.Text}
	}
	return out
}

// The types that hold secrets print with %v whatever the verb. bot.Secret
// redacts itself for the verbs that consult String (%v, %s, %q, %x), but fmt
// prints a value it cannot format with the verb asked for (%d of a struct,
// %s of a pointer inside one) by walking it without calling any method, which
// would show a secret as it is.

type (
	plainConfig   Config
	plainServer   Server
	plainStorage  Storage
	plainAPIToken APIToken
	plainModel    Model
	plainGitHub   GitHub
	plainSlack    Slack
)

// Format implements fmt.Formatter.
func (c Config) Format(f fmt.State, verb rune) { formatAsV(f, verb, plainConfig(c), "Config") }

// Format implements fmt.Formatter.
func (s Server) Format(f fmt.State, verb rune) { formatAsV(f, verb, plainServer(s), "Server") }

// Format implements fmt.Formatter.
func (s Storage) Format(f fmt.State, verb rune) { formatAsV(f, verb, plainStorage(s), "Storage") }

// Format implements fmt.Formatter.
func (t APIToken) Format(f fmt.State, verb rune) { formatAsV(f, verb, plainAPIToken(t), "APIToken") }

// Format implements fmt.Formatter.
func (m Model) Format(f fmt.State, verb rune) { formatAsV(f, verb, plainModel(m), "Model") }

// Format implements fmt.Formatter.
func (g GitHub) Format(f fmt.State, verb rune) { formatAsV(f, verb, plainGitHub(g), "GitHub") }

// Format implements fmt.Formatter.
func (s Slack) Format(f fmt.State, verb rune) { formatAsV(f, verb, plainSlack(s), "Slack") }

func formatAsV(f fmt.State, verb rune, v any, name string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		s := fmt.Sprintf("%#v", v)
		fmt.Fprint(f, strings.Replace(s, "config.plain"+name, "config."+name, 1))
	case f.Flag('+'):
		fmt.Fprintf(f, "%+v", v)
	default:
		fmt.Fprintf(f, "%v", v)
	}
}

// SkillSettings returns the settings of the skills section, each with
// where it is written ("config.yaml:12") as its origin.
func (c *Config) SkillSettings() []skills.Setting {
	out := make([]skills.Setting, len(c.Skills.Settings))
	for i, s := range c.Skills.Settings {
		out[i] = skills.Setting{
			Scope: s.Scope, Name: s.Name, Enabled: s.Enabled, Settings: s.Settings,
			Origin: fmt.Sprintf("%s:%d", c.Source, c.Line(fmt.Sprintf("skills.settings[%d]", i))),
		}
	}
	return out
}

// SkillSecrets are the values of the skills section's settings that came
// from the environment (${VAR}): they may be secrets and are masked
// wherever text is shown or stored.
func (c *Config) SkillSecrets() []bot.Secret { return c.skillSecrets }

// SkillErrors places the problems the skills registry found with the
// settings of SkillSettings at their lines. Any other error comes back as
// it is.
func (c *Config) SkillErrors(err error) error {
	var ses skills.SettingErrors
	if !errors.As(err, &ses) {
		return err
	}
	var errs Errors
	for _, se := range ses {
		path := fmt.Sprintf("skills.settings[%d].%s", se.Index, se.Field)
		errs = append(errs, &Error{File: c.Source, Line: c.Line(path), Path: path, Msg: se.Msg})
	}
	errs.Sort()
	return errs
}
