package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/internal/yamldecode"
	"github.com/switchyard/switchyard/skills"
)

// checkConfig checks the values that can be judged without the agents and
// fills in the defaults of sections that are present. A path that already
// failed to decode is not reported again.
func checkConfig(d *yamldecode.Decoder, c *Config) {
	fail := d.FailAt

	for _, e := range flatten(errors.Join(policy.ValidateProfiles(c.Profiles), policy.ValidateAccess(c.Access, c.Profiles))) {
		var fe *bot.FieldError
		if errors.As(e, &fe) {
			fail(fe.Field, "%s", fe.Msg)
		} else {
			fail("profiles", "%v", e)
		}
	}
	if err := CheckListen(c.Server.Listen); err != nil {
		fail("server.listen", "%v", err)
	}
	checkAPITokens(fail, c.Server)
	checkAdminUsers(fail, c.Admin)
	checkSkills(d, c.Skills)
	if c.Server.PublicURL != "" {
		if why := checkPublicURL(c.Server.PublicURL); why != "" {
			fail("server.public_url", "%s", why)
		}
	}
	checkDataDir(fail, c.DataDir)
	checkStorage(fail, &c.Storage)
	if strings.TrimSpace(c.AgentsDir) == "" {
		fail("agents_dir", "must not be empty")
	} else if err := checkTilde(c.AgentsDir); err != nil {
		fail("agents_dir", "%v", err)
	}
	if c.Workers < 1 || c.Workers > 256 {
		fail("workers", "want 1 to 256, got %d", c.Workers)
	}
	if c.DedupWindow <= 0 {
		fail("dedup_window", "must be positive, got %s", c.DedupWindow)
	}
	if c.ApprovalTimeout < time.Second {
		fail("approval_timeout", "want at least 1s, got %s", c.ApprovalTimeout)
	}
	if c.Dispatch.MaxAttempts < 1 || c.Dispatch.MaxAttempts > 100 {
		fail("dispatch.max_attempts", "want 1 to 100, got %d", c.Dispatch.MaxAttempts)
	}
	if c.Dispatch.Lease < time.Second {
		fail("dispatch.lease", "want at least 1s, got %s", c.Dispatch.Lease)
	}
	for _, r := range []struct {
		key string
		d   time.Duration
	}{{"payloads", c.Retention.Payloads}, {"records", c.Retention.Records}, {"audit", c.Retention.Audit}} {
		if r.d < 0 {
			fail("retention."+r.key, "must not be negative (0 keeps forever), got %s", r.d)
		}
	}
	for _, b := range []struct {
		key string
		n   int64
	}{{"budgets.tree.tokens", c.Budgets.Tree.Tokens}, {"budgets.per_day.requester", c.Budgets.PerDay.Requester},
		{"budgets.per_day.agent", c.Budgets.PerDay.Agent}, {"budgets.per_day.repo", c.Budgets.PerDay.Repo}} {
		if b.n < 0 {
			fail(b.key, "want 0 (no cap) or a number of tokens, got %d", b.n)
		}
	}
	if c.Budgets.Tree.Cost < 0 {
		fail("budgets.tree.cost", "want 0 (no cap) or an amount in %s, got %g", c.Budgets.Currency, c.Budgets.Tree.Cost)
	}
	if c.Budgets.Tree.Cost > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(c.Models)), func(m Model) bool { return m.Prices != nil }) {
		fail("budgets.tree.cost", "caps what models with prices cost, and no model in models: has prices (models.<name>.prices: {input, output} per million tokens)")
	}
	if w := c.Budgets.Tree.WallTime; w != 0 && w < time.Second {
		fail("budgets.tree.wall_time", "want 0 (no cap) or at least 1s, got %s", w)
	}
	if n := c.Subagents.MaxConcurrent; n < 1 || n > 64 {
		fail("subagents.max_concurrent", "want 1 to 64, got %d", n)
	}
	if n := c.Subagents.MaxDepth; n < 1 || n > 5 {
		fail("subagents.max_depth", "want 1 to 5, got %d", n)
	}
	if c.Subagents.Timeout < time.Second {
		fail("subagents.timeout", "want at least 1s, got %s", c.Subagents.Timeout)
	}
	if !slices.Contains(sandbox.Modes(), c.Sandbox.Mode) {
		fail("sandbox.mode", "unknown mode %q (want required, or none to run commands without a sandbox)", c.Sandbox.Mode)
	}

	for name, m := range c.Models {
		p := yamldecode.JoinPath("models", name)
		if m.Timeout == 0 {
			m.Timeout = DefaultModelTimeout
			c.Models[name] = m
		}
		if pr := m.Prices; pr != nil && (pr.Input < 0 || pr.Output < 0) {
			fail(p+".prices", "want prices of 0 or more per million tokens, got input %g and output %g", pr.Input, pr.Output)
		}
		// One check of a model entry, the model client's own.
		for _, e := range flatten(m.LLM().Validate()) {
			var fe *bot.FieldError
			if !errors.As(e, &fe) {
				fail(p, "%v", e)
				continue
			}
			msg := fe.Msg
			if fe.Field == "api_key" {
				msg += apiKeyHint(d, p+".api_key")
			}
			fail(p+"."+fe.Field, "%s", msg)
		}
	}

	names := map[string]int{}
	for i := range c.Schedules {
		s := &c.Schedules[i]
		p := fmt.Sprintf("schedules[%d]", i)
		switch j, dup := names[s.Name]; {
		case strings.TrimSpace(s.Name) == "":
			fail(p+".name", "required: the scheduler remembers the last firing by name")
		case dup:
			fail(p+".name", "duplicate schedule name %q (also schedules[%d])", s.Name, j)
		default:
			names[s.Name] = i
		}
		if strings.TrimSpace(s.Cron) == "" {
			fail(p+".cron", "required: a cron spec such as \"0 9 * * 1-5\" or \"@hourly\"")
		} else if _, err := cron.ParseStandard(s.Cron); err != nil {
			fail(p+".cron", "bad cron spec %q: %s", s.Cron, cronWhy(err))
		} else if why := everyWhy(s.Cron); why != "" {
			fail(p+".cron", "bad cron spec %q: %s", s.Cron, why)
		}
		if s.Agent == "" {
			fail(p+".agent", "required")
		}
		if strings.TrimSpace(s.Text) == "" {
			fail(p+".text", "required: the message the agent receives")
		}
		if s.Thread.IsZero() && s.Name != "" {
			s.Thread = bot.LocalThread("schedule-" + s.Name)
		}
	}

	if g := c.GitHub; g != nil {
		if g.AppID <= 0 {
			fail("github.app_id", "required when the github section is present: the GitHub App's id")
		}
		switch {
		case !g.PrivateKey.IsSet() && g.PrivateKeyFile == "":
			fail("github.private_key", "required when the github section is present: set private_key or private_key_file")
		case g.PrivateKey.IsSet() && g.PrivateKeyFile != "":
			fail("github.private_key_file", "set private_key or private_key_file, not both")
		}
		if !g.WebhookSecret.IsSet() {
			fail("github.webhook_secret", "required when the github section is present")
		}
		g.APIURL = defaultURL(g.APIURL, DefaultGitHubAPIURL)
		if why := checkURL(g.APIURL); why != "" {
			fail("github.api_url", "%s", why)
		}
		if g.MinPermission == "" {
			g.MinPermission = DefaultGitHubPermission
		}
		switch g.MinPermission {
		case "read", "triage", "write", "maintain", "admin":
		default:
			fail("github.min_permission", "unknown permission %q (want read, triage, write, maintain or admin)", g.MinPermission)
		}
		checkList(fail, "github.allow_bots", g.AllowBots)
	}

	if s := c.Slack; s != nil {
		switch s.Mode {
		case SlackSocket:
			if !s.AppToken.IsSet() {
				fail("slack.app_token", "required in socket mode: the app-level token (xapp-...)%s", unsetNote(d, "slack.app_token"))
			}
		case SlackHTTP:
			if !s.SigningSecret.IsSet() {
				fail("slack.signing_secret", "required in http mode")
			}
		case "":
			fail("slack.mode", "required when the slack section is present: socket or http")
		default:
			fail("slack.mode", "unknown mode %q (want socket or http)", s.Mode)
		}
		if !s.BotToken.IsSet() {
			fail("slack.bot_token", "required when the slack section is present: the bot token (xoxb-...)%s", unsetNote(d, "slack.bot_token"))
		}
		checkSlackTokens(fail, s)
		s.APIURL = defaultURL(s.APIURL, DefaultSlackAPIURL)
		if why := checkURL(s.APIURL); why != "" {
			fail("slack.api_url", "%s", why)
		}
		checkList(fail, "slack.allowed_channels", s.AllowedChannels)
		checkList(fail, "slack.allowed_users", s.AllowedUsers)
	}
}

// apiTokenName is what a token's name may be: it is shown as who decided
// an approval and matched against approver lists.
var apiTokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// MinAPIToken is the length under which an API token is one someone could
// guess: the daemon warns about such a token (ShortAPITokens) but takes it,
// as it was set on purpose.
const MinAPIToken = 16

// CheckAPIToken says what is wrong with tok as a bearer token of the API
// (server.api_token, server.api_tokens, $SWITCHYARD_API_TOKEN for serve):
// white space or a control character, which an Authorization header cannot
// carry as it is. The token is never part of the message.
func CheckAPIToken(tok bot.Secret) error {
	if strings.ContainsFunc(tok.Reveal(), func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return errors.New("must not hold white space or control characters")
	}
	return nil
}

// ShortAPITokens returns the settings of s whose token is shorter than
// MinAPIToken characters ("server.api_token", "server.api_tokens[1].token"),
// for the daemon to warn about.
func (s Server) ShortAPITokens() []string {
	var out []string
	if s.APIToken.IsSet() && len(s.APIToken.Reveal()) < MinAPIToken {
		out = append(out, "server.api_token")
	}
	for i, t := range s.APITokens {
		if t.Token.IsSet() && len(t.Token.Reveal()) < MinAPIToken {
			out = append(out, fmt.Sprintf("server.api_tokens[%d].token", i))
		}
	}
	return out
}

// checkAPITokens checks the named tokens: names well formed and unique,
// tokens a bearer header can carry and each used once. Token values are never repeated
// in a message.
func checkAPITokens(fail func(string, string, ...any), s Server) {
	if s.APIToken.IsSet() {
		if err := CheckAPIToken(s.APIToken); err != nil {
			fail("server.api_token", "%v", err)
		}
	}
	names := map[string]int{}
	tokens := map[string]int{}
	for i, t := range s.APITokens {
		p := fmt.Sprintf("server.api_tokens[%d]", i)
		key := strings.ToLower(t.Name)
		switch j, dup := names[key]; {
		case t.Name == "":
			fail(p+".name", "required: who the token speaks for")
		case !apiTokenName.MatchString(t.Name):
			fail(p+".name", "%q: want 1 to 64 letters, digits, '.', '_', '-' or '@', starting with a letter or digit", t.Name)
		case key == AdminIdentity:
			fail(p+".name", "%q is the identity of server.api_token and the token file; pick another name", t.Name)
		case dup:
			fail(p+".name", "duplicate name %q (also server.api_tokens[%d])", t.Name, j)
		default:
			names[key] = i
		}
		v := t.Token.Reveal()
		switch j, dup := tokens[v]; {
		case !t.Token.IsSet():
			fail(p+".token", "required")
		case CheckAPIToken(t.Token) != nil:
			fail(p+".token", "%v", CheckAPIToken(t.Token))
		case dup:
			fail(p+".token", "the same token as server.api_tokens[%d]: each name needs its own", j)
		case s.APIToken.IsSet() && v == s.APIToken.Reveal():
			fail(p+".token", "the same token as server.api_token: each name needs its own")
		default:
			tokens[v] = i
		}
	}
}

// checkAdminUsers checks the admin UI's users: names well formed and
// unique, and each password hash a bcrypt hash. A hash is never repeated
// in a message.
func checkAdminUsers(fail func(string, string, ...any), a Admin) {
	names := map[string]int{}
	for i, u := range a.Users {
		p := fmt.Sprintf("admin.users[%d]", i)
		key := strings.ToLower(u.Name)
		switch j, dup := names[key]; {
		case u.Name == "":
			fail(p+".name", "required: who signs in")
		case !apiTokenName.MatchString(u.Name):
			fail(p+".name", "%q: want 1 to 64 letters, digits, '.', '_', '-' or '@', starting with a letter or digit", u.Name)
		case dup:
			fail(p+".name", "duplicate name %q (also admin.users[%d])", u.Name, j)
		default:
			names[key] = i
		}
		if !u.PasswordHash.IsSet() {
			fail(p+".password_hash", "required: the bcrypt hash of the password (switchyard admin hash-password prints one)")
		} else if _, err := bcrypt.Cost([]byte(u.PasswordHash.Reveal())); err != nil {
			fail(p+".password_hash", "not a bcrypt hash: want \"$2a$\", \"$2b$\" or \"$2y$\" and 60 characters, as switchyard admin hash-password prints it")
		}
	}
}

// checkPublicURL returns why u is not the root of an http(s) site, or "".
func checkPublicURL(u string) string {
	if why := checkURL(u); why != "" {
		return why
	}
	parsed, _ := url.Parse(u)
	if parsed.Path != "" && parsed.Path != "/" || parsed.RawQuery != "" || parsed.Fragment != "" {
		return fmt.Sprintf("want scheme and host only, such as https://switchyard.example.com, got %q", parsed.Redacted())
	}
	return ""
}

// apiKeyHint says how to give a model the key it lacks.
func apiKeyHint(d *yamldecode.Decoder, path string) string {
	if note := unsetNote(d, path); note != "" {
		return note + ": set it in the daemon's environment, or remove the model"
	}
	return ": set api_key, or base_url for a server that needs no key"
}

// flatten lists the errors joined in err, however deeply.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// unsetNote says which variable left path empty, when one did.
func unsetNote(d *yamldecode.Decoder, path string) string {
	if raw, ok := d.Unset(path); ok {
		return fmt.Sprintf("; %s is unset or empty", raw)
	}
	return ""
}

// Slack token kinds, by the prefix Slack gives each.
var slackTokenKinds = []struct{ prefix, kind string }{
	{"xapp-", "an app-level token (xapp-...)"},
	{"xoxb-", "a bot token (xoxb-...)"},
	{"xoxp-", "a user token (xoxp-...)"},
	{"xoxe", "a refresh or configuration token (xoxe...)"},
	{"xoxa-", "a workspace app token (xoxa-...)"},
}

// slackTokenKind names the kind of token s looks like, or "".
func slackTokenKind(s string) string {
	for _, k := range slackTokenKinds {
		if strings.HasPrefix(s, k.prefix) {
			return k.kind
		}
	}
	return ""
}

// checkSlackTokens recognises tokens of the wrong kind by their prefixes:
// app_token must be an app-level token (xapp-), bot_token a bot token
// (xoxb-). Swapped tokens are one error naming both keys. Messages name the
// kind a value looks like, never the value.
func checkSlackTokens(fail func(string, string, ...any), s *Slack) {
	app, bot := s.AppToken.Reveal(), s.BotToken.Reveal()
	if strings.HasPrefix(app, "xoxb-") && strings.HasPrefix(bot, "xapp-") {
		fail("slack.app_token", "holds a bot token (xoxb-...) and slack.bot_token an app-level token (xapp-...): the two are swapped")
		return
	}
	check := func(path, value, prefix, want string) {
		if value == "" || strings.HasPrefix(value, prefix) {
			return
		}
		if kind := slackTokenKind(value); kind != "" {
			fail(path, "want %s, got %s", want, kind)
			return
		}
		fail(path, "want %s; the value does not start with %s", want, prefix)
	}
	check("slack.app_token", app, "xapp-", "an app-level token (xapp-...)")
	check("slack.bot_token", bot, "xoxb-", "a bot token (xoxb-...)")
}

// everyWhy says what is wrong with the interval of an "@every" spec the
// cron parser took: it makes any interval under a second (0s, -1m, 10ms)
// one second, so a mistake would start a work item, and an agent's run,
// every second.
func everyWhy(spec string) string {
	_, interval, ok := strings.Cut(spec, "@every ")
	if !ok {
		return ""
	}
	d, err := time.ParseDuration(strings.TrimSpace(interval))
	switch {
	case err != nil:
		return ""
	case d <= 0:
		return "@every needs a positive duration such as 30m or 1h30m"
	case d < time.Second:
		return fmt.Sprintf("@every needs at least 1s, got %s", d)
	}
	return ""
}

// cronWhy says what the cron parser found wrong, in words, without the
// parts of the spec it repeats (the message already quotes the spec) or
// the Go slice it prints them as.
func cronWhy(err error) string {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "expected exactly"):
		// "expected exactly 5 fields, found 3: [* * *]"
		msg, _, _ = strings.Cut(msg, ": [")
	case strings.HasPrefix(msg, "end of range"), strings.HasPrefix(msg, "beginning of range"):
		// "end of range (61) above maximum (59): 61"
		if i := strings.LastIndex(msg, ": "); i > 0 {
			msg = msg[:i]
		}
	case strings.HasPrefix(msg, "unrecognized descriptor"):
		msg = "unknown descriptor (want @yearly, @monthly, @weekly, @daily, @hourly or @every <duration>)"
	case strings.HasPrefix(msg, "failed to parse duration"):
		msg = "@every needs a duration such as 30m or 1h30m"
	case strings.HasPrefix(msg, "provided bad location"):
		// "provided bad location Nope/Zone: unknown time zone Nope/Zone"
		if _, why, ok := strings.Cut(msg, ": "); ok {
			msg = why
		}
	}
	return msg
}

func checkList(fail func(string, string, ...any), path string, list []string) {
	for i, s := range list {
		if strings.TrimSpace(s) == "" {
			fail(fmt.Sprintf("%s[%d]", path, i), "empty value")
		}
	}
}

// defaultURL applies def to an empty base URL and gives any other the
// trailing slash the API clients need to resolve paths beneath it.
func defaultURL(u, def string) string {
	if u == "" {
		return def
	}
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u
}

// checkURL returns why u is not an absolute http(s) URL without a user or
// password, or "". A password in the URL is not repeated.
func checkURL(u string) string {
	parsed, err := url.Parse(u)
	switch {
	case err != nil:
		return "want an http or https URL, got something unparsable"
	case parsed.Scheme != "http" && parsed.Scheme != "https" || parsed.Host == "":
		return fmt.Sprintf("want an http or https URL, got %q", parsed.Redacted())
	case parsed.User != nil:
		// It would reach logs and error messages with the URL; the
		// GitHub client refuses it at start too.
		return "must not carry a user or password"
	}
	return ""
}

// checkSkills checks the skills section's settings as written; which
// packages and skills exist, and the settings their schemas allow, are the
// registry's to check when the daemon starts or reloads.
func checkSkills(d *yamldecode.Decoder, sc skills.Config) {
	fail := d.FailAt
	for i, s := range sc.Settings {
		p := fmt.Sprintf("skills.settings[%d]", i)
		switch {
		case s.Name == "":
			fail(p+".name", "required: a package or a skill")
		case !skills.ValidName(s.Name):
			fail(p+".name", "%q is not a package or skill name", s.Name)
		}
		if s.Scope.Kind == "" {
			fail(p+".scope", "required: global, org:<org>, repo:<owner>/<repo> or agent:<agent>")
		}
		if s.Enabled == skills.Inherit && len(s.Settings) == 0 && !d.FailedUnder(p) {
			fail(p, "says nothing: give enabled (true or false) or settings")
		}
	}
}

// checkDataDir checks data_dir, which clients of the daemon read too.
func checkDataDir(fail func(path, format string, args ...any), dir string) {
	if err := CheckDataDir(dir); err != nil {
		fail("data_dir", "%v", err)
	}
}

// CheckListen says what is wrong with addr as the address the daemon
// listens on (server.listen, serve --listen), before anything starts: what
// the listener would refuse only once the store is open. An empty port
// (127.0.0.1:) is any free one, as 0 is.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Count(addr, ":") > 1 && !strings.Contains(addr, "[") {
			return fmt.Errorf("want host:port such as 127.0.0.1:8080, got %q: an IPv6 address goes in brackets, such as [::1]:8080", addr)
		}
		return fmt.Errorf("want host:port such as 127.0.0.1:8080, got %q", addr)
	}
	if _, err := net.LookupPort("tcp", port); port != "" && err != nil {
		return fmt.Errorf("bad port %q: want 0 to 65535 (or a service name such as http)", port)
	}
	return nil
}

// CheckDataDir says what is wrong with dir as the data directory
// (data_dir, serve --data-dir): empty, beginning with a ~ nothing expands,
// or a file. One that does not exist yet is made at the first start.
func CheckDataDir(dir string) error {
	if strings.TrimSpace(dir) == "" {
		return errors.New("must not be empty")
	}
	if err := checkTilde(dir); err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s is a file, not a directory", dir)
	}
	return nil
}

// checkTilde refuses a path beginning with ~, which neither the config nor
// a quoted flag expands: it would name a directory called "~" in the
// current one.
func checkTilde(path string) error {
	if !strings.HasPrefix(path, "~") {
		return nil
	}
	why := fmt.Sprintf("%q begins with ~, which is not expanded here: write the full path", path)
	if rest := strings.TrimPrefix(path, "~"); rest == "" || strings.HasPrefix(rest, "/") {
		why += fmt.Sprintf(" (${HOME}%s in a config file)", rest)
	}
	return errors.New(why)
}

// checkStorage checks the storage section; the DSN, a secret, is never
// quoted.
func checkStorage(fail func(path, format string, args ...any), s *Storage) {
	switch s.Driver {
	case StorageBolt:
		if s.DSN.IsSet() {
			fail("storage.dsn", "is for the postgres driver; the bolt driver keeps its file in data_dir")
		}
		if s.MaxConns != 0 {
			fail("storage.max_conns", "is for the postgres driver")
		}
	case StoragePostgres:
		if !s.DSN.IsSet() {
			fail("storage.dsn", "required for the postgres driver: a connection string such as postgres://switchyard:${PGPASSWORD}@db:5432/switchyard")
		}
		if s.MaxConns == 0 {
			s.MaxConns = DefaultMaxConns
		}
		if s.MaxConns < 2 || s.MaxConns > 1000 {
			fail("storage.max_conns", "want 2 to 1000, got %d", s.MaxConns)
		}
	default:
		fail("storage.driver", "unknown driver %q (want bolt, or postgres for several replicas)", s.Driver)
	}
}
