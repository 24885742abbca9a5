package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/skills"
)

// builtinAgents are the five agents Switchyard ships, as the router sees
// them.
func builtinAgents() []bot.AgentInfo {
	return []bot.AgentInfo{
		{Name: "coder", Keywords: []string{"refactor", "bug fix"}},
		{Name: "reviewer", Keywords: []string{"review"}},
		{Name: "ops", Keywords: []string{"deploy", "rollback"}},
		{Name: "triage", Keywords: []string{"triage"}},
		{Name: "docs", Keywords: []string{"documentation"}},
	}
}

func TestDefault(t *testing.T) {
	c := config.Default()
	require.Equal(t, config.DefaultsName, c.Source)
	require.Equal(t, "127.0.0.1:8080", c.Server.Listen)
	require.True(t, c.Server.Console)
	require.False(t, c.Server.APIToken.IsSet())
	require.Equal(t, "./data", c.DataDir)
	require.Equal(t, 4, c.Workers)
	require.Equal(t, "./agents", c.AgentsDir)
	require.Equal(t, 168*time.Hour, c.DedupWindow)
	require.Equal(t, bot.DefaultDedupWindow, c.DedupWindow)
	require.Equal(t, config.Dispatch{MaxAttempts: 3, Lease: 30 * time.Second}, c.Dispatch)
	require.Equal(t, "triage", c.Routing.DefaultAgent)
	require.Equal(t, sandbox.ModeRequired, c.Sandbox.Mode, "commands run only in the sandbox unless the operator says otherwise")
	require.Nil(t, c.GitHub)
	require.Nil(t, c.Slack)

	r, err := c.Compile(builtinAgents())
	require.NoError(t, err)
	ev := &bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: "/deploy staging"}
	ev.FillFromText()
	require.Equal(t, bot.Route{Agent: "ops", Kind: bot.RouteCommand, Reason: "command /deploy"}, r.Route(ev))
}

func TestLoad(t *testing.T) {
	t.Run("no file means defaults", func(t *testing.T) {
		c, err := config.Load("")
		require.NoError(t, err)
		require.Equal(t, config.Default(), c)
	})
	t.Run("a missing file is an I/O error", func(t *testing.T) {
		_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"))
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.False(t, config.IsInvalid(err))
	})
	t.Run("errors name the file as given", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "switchyard.yaml")
		require.NoError(t, os.WriteFile(path, []byte("workers: 0\n"), 0o600))
		_, err := config.Load(path)
		require.EqualError(t, err, path+":1: workers: want 1 to 256, got 0")
		require.True(t, config.IsInvalid(err))
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	})
	t.Run("a file on top of the defaults", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		require.NoError(t, os.WriteFile(path, []byte("server:\n  listen: 0.0.0.0:9000\nworkers: 8\n"), 0o600))
		c, err := config.Load(path)
		require.NoError(t, err)
		require.Equal(t, path, c.Source)
		require.Equal(t, "0.0.0.0:9000", c.Server.Listen)
		require.True(t, c.Server.Console, "keys the file does not mention keep their defaults")
		require.Equal(t, 8, c.Workers)
		require.Equal(t, "./data", c.DataDir)
	})
}

// A short API token is taken, since whoever set it chose it, and named
// for the daemon to warn about.
func TestShortAPITokensAreTakenAndNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	src := "server:\n  api_token: hunter2\n  api_tokens:\n    - name: ana\n      token: abcdefghijklmnop0\n    - name: bob\n      token: bob-token\n"
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	c, err := config.Load(path)
	require.NoError(t, err)
	require.Equal(t, []string{"server.api_token", "server.api_tokens[1].token"}, c.Server.ShortAPITokens())

	c.Server.APIToken = "abcdefghijklmnop1"
	c.Server.APITokens = c.Server.APITokens[:1]
	require.Empty(t, c.Server.ShortAPITokens())
}

func TestParseEmptyFiles(t *testing.T) {
	for _, data := range []string{"", "# nothing here\n", "---\n", "~\n"} {
		c, err := config.Parse("c.yaml", []byte(data))
		require.NoError(t, err, "%q", data)
		require.Equal(t, 4, c.Workers)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"syntax error", "server:\n  listen: [1, 2\nworkers: 3\n",
			"c.yaml:1: did not find expected ',' or ']'"},
		{"tab indentation", "server:\n\tlisten: x\n",
			"c.yaml:2: found character that cannot start any token"},
		{"two documents", "workers: 2\n---\nworkers: 3\n",
			"c.yaml:2: a file holds one YAML document; found another"},
		{"top level is a list", "- a\n- b\n",
			"c.yaml:1: want a mapping, got a list"},
		{"unknown key, close to a known one", "workrs: 4\n",
			`c.yaml:1: workrs: unknown key; did you mean "workers"?`},
		{"unknown key", "frobnicate: 1\n",
			"c.yaml:1: frobnicate: unknown key; want one of access, admin, agents_dir, approval_timeout, budgets, data_dir, dedup_window, dispatch, github, models, profiles, retention, routing, sandbox, schedules, server, skills, slack, storage, subagents, workers"},
		{"unknown storage driver", "storage:\n  driver: sqlite\n",
			`c.yaml:2: storage.driver: unknown driver "sqlite" (want bolt, or postgres for several replicas)`},
		{"postgres without a dsn", "storage:\n  driver: postgres\n",
			"c.yaml:1: storage.dsn: required for the postgres driver: a connection string such as postgres://switchyard:${PGPASSWORD}@db:5432/switchyard"},
		{"dsn for bolt", "storage:\n  dsn: postgres://u:pw@db/x\n",
			"c.yaml:2: storage.dsn: is for the postgres driver; the bolt driver keeps its file in data_dir"},
		{"max_conns out of range", "storage:\n  driver: postgres\n  dsn: postgres://u:pw@db/x\n  max_conns: 1\n",
			"c.yaml:4: storage.max_conns: want 2 to 1000, got 1"},
		{"unknown nested key", "routing:\n  rules:\n    - name: a\n      agent: coder\n      match:\n        label: [bug]\n",
			`c.yaml:6: routing.rules[0].match.label: unknown key; did you mean "labels"?`},
		{"unknown key is not decoded", "server:\n  token: ${NOPE\n",
			`c.yaml:2: server.token: unknown key; want one of api_token, api_tokens, console, listen, public_url`},
		{"skill setting with a bad scope", "skills:\n  settings:\n    - name: release-notes\n      scope: team:web\n      enabled: false\n",
			`c.yaml:4: skills.settings[0].scope: scope "team:web": unknown kind; want global, org:<org>, repo:<owner>/<repo> or agent:<agent>`},
		{"skill setting without a scope", "skills:\n  settings:\n    - name: release-notes\n      enabled: false\n",
			"c.yaml:3: skills.settings[0].scope: required: global, org:<org>, repo:<owner>/<repo> or agent:<agent>"},
		{"skill setting that says nothing", "skills:\n  settings:\n    - name: release-notes\n      scope: global\n",
			"c.yaml:3: skills.settings[0]: says nothing: give enabled (true or false) or settings"},
		{"skill setting enabled maybe", "skills:\n  settings:\n    - name: release-notes\n      scope: global\n      enabled: maybe\n",
			`c.yaml:5: skills.settings[0].enabled: want true, false or inherit, got "maybe"`},
		{"skill setting name", "skills:\n  settings:\n    - name: Release Notes\n      scope: global\n      enabled: true\n",
			`c.yaml:3: skills.settings[0].name: "Release Notes" is not a package or skill name`},
		{"skill setting key", "skills:\n  settings:\n    - name: release-notes\n      scope: global\n      enable: true\n",
			`c.yaml:5: skills.settings[0].enable: unknown key; did you mean "enabled"?`},
		{"duplicate key", "workers: 2\ndata_dir: x\nworkers: 3\n",
			"c.yaml:3: workers: duplicate key (first on line 1)"},
		{"duplicate nested key", "models:\n  a:\n    provider: openai\n    api_key: k\n    model: x\n    model: y\n",
			`c.yaml:6: models.a.model: duplicate key (first on line 5)`},
		{"api token without a name", "server:\n  api_tokens:\n    - token: abcdefghijklmnop0\n",
			"c.yaml:3: server.api_tokens[0].name: required: who the token speaks for"},
		{"api token name with a space", "server:\n  api_tokens:\n    - name: ana b\n      token: abcdefghijklmnop0\n",
			`c.yaml:3: server.api_tokens[0].name: "ana b": want 1 to 64 letters, digits, '.', '_', '-' or '@', starting with a letter or digit`},
		{"api token named admin", "server:\n  api_tokens:\n    - name: Admin\n      token: abcdefghijklmnop0\n",
			`c.yaml:3: server.api_tokens[0].name: "Admin" is the identity of server.api_token and the token file; pick another name`},
		{"api token names twice", "server:\n  api_tokens:\n    - name: ana\n      token: abcdefghijklmnop0\n    - name: ANA\n      token: abcdefghijklmnop1\n",
			`c.yaml:5: server.api_tokens[1].name: duplicate name "ANA" (also server.api_tokens[0])`},
		{"api token missing", "server:\n  api_tokens:\n    - name: ana\n",
			"c.yaml:3: server.api_tokens[0].token: required"},
		{"api token used twice", "server:\n  api_tokens:\n    - name: ana\n      token: abcdefghijklmnop0\n    - name: bob\n      token: abcdefghijklmnop0\n",
			"c.yaml:6: server.api_tokens[1].token: the same token as server.api_tokens[0]: each name needs its own"},
		{"api token is the admin's", "server:\n  api_token: abcdefghijklmnop0\n  api_tokens:\n    - name: ana\n      token: abcdefghijklmnop0\n",
			"c.yaml:5: server.api_tokens[0].token: the same token as server.api_token: each name needs its own"},
		{"admin user without a name", "admin:\n  users:\n    - password_hash: $2a$04$abcdefghijklmnopqrstuu5Ji4fYxRpgvbz0yOZ.tZ4cbp2K4Oo2\n",
			"c.yaml:3: admin.users[0].name: required: who signs in"},
		{"admin user name with a space", "admin:\n  users:\n    - name: ana b\n      password_hash: $2a$04$abcdefghijklmnopqrstuu5Ji4fYxRpgvbz0yOZ.tZ4cbp2K4Oo2\n",
			`c.yaml:3: admin.users[0].name: "ana b": want 1 to 64 letters, digits, '.', '_', '-' or '@', starting with a letter or digit`},
		{"admin user twice", "admin:\n  users:\n    - name: ana\n      password_hash: $2a$04$abcdefghijklmnopqrstuu5Ji4fYxRpgvbz0yOZ.tZ4cbp2K4Oo2\n    - name: Ana\n      password_hash: $2a$04$abcdefghijklmnopqrstuu5Ji4fYxRpgvbz0yOZ.tZ4cbp2K4Oo2\n",
			`c.yaml:5: admin.users[1].name: duplicate name "Ana" (also admin.users[0])`},
		{"admin user without a hash", "admin:\n  users:\n    - name: ana\n",
			"c.yaml:3: admin.users[0].password_hash: required: the bcrypt hash of the password (switchyard admin hash-password prints one)"},
		{"admin user with a plain password", "admin:\n  users:\n    - name: ana\n      password_hash: hunter2hunter2\n",
			`c.yaml:4: admin.users[0].password_hash: not a bcrypt hash: want "$2a$", "$2b$" or "$2y$" and 60 characters, as switchyard admin hash-password prints it`},
		{"admin user key", "admin:\n  users:\n    - name: ana\n      password: hunter2hunter2\n",
			"c.yaml:3: admin.users[0].password_hash: required: the bcrypt hash of the password (switchyard admin hash-password prints one)\n" +
				"c.yaml:4: admin.users[0].password: unknown key; want one of name, password_hash"},
		{"public url not a url", "server:\n  public_url: switchyard.example.com\n",
			`c.yaml:2: server.public_url: want an http or https URL, got "switchyard.example.com"`},
		{"public url with a path", "server:\n  public_url: https://example.com/switchyard\n",
			`c.yaml:2: server.public_url: want scheme and host only, such as https://switchyard.example.com, got "https://example.com/switchyard"`},
		{"public url with a password", "server:\n  public_url: https://u:pw@example.com\n",
			"c.yaml:2: server.public_url: must not carry a user or password"},
		{"string for an int", "workers: four\n",
			`c.yaml:1: workers: want an integer, got "four"`},
		{"float for an int", "workers: 2.5\n",
			`c.yaml:1: workers: want an integer, got "2.5"`},
		{"quoted int", "workers: \"4\"\n",
			`c.yaml:1: workers: want an integer, got "4"`},
		{"int out of range", "workers: 99999999999999999999\n",
			`c.yaml:1: workers: want an integer, got "99999999999999999999"`},
		{"yes is not a boolean", "server:\n  console: yes\n",
			`c.yaml:2: server.console: want true or false, got "yes"`},
		{"list for a boolean", "server:\n  console: [true]\n",
			`c.yaml:2: server.console: want true or false, got a list`},
		{"mapping where a list is wanted", "routing:\n  rules:\n    - name: a\n      agent: coder\n      match:\n        labels: {bug: true}\n",
			"c.yaml:6: routing.rules[0].match.labels: want a list, got a mapping"},
		{"string where a list is wanted", "routing:\n  rules:\n    - name: a\n      agent: coder\n      match:\n        labels: bug\n",
			"c.yaml:6: routing.rules[0].match.labels: want a list, got a string"},
		{"list where a mapping is wanted", "server: [a, b]\n",
			"c.yaml:1: server: want a mapping, got a list"},
		{"mapping where a string is wanted", "data_dir: {a: b}\n",
			"c.yaml:1: data_dir: want a string, got a mapping"},
		{"bad duration", "models:\n  default:\n    provider: openai\n    base_url: http://127.0.0.1:11434/v1\n    model: m\n    timeout: 5 minutes\n",
			`c.yaml:6: models.default.timeout: bad duration "5 minutes": want a number and a unit, such as 30s, 5m or 168h`},
		{"duration without unit", "dedup_window: 30\n",
			`c.yaml:1: dedup_window: bad duration "30": want a number and a unit, such as 30s, 5m or 168h`},
		{"bad variable reference", "data_dir: ${1DIR}\n",
			`c.yaml:1: data_dir: bad variable reference "${1DIR}": want ${NAME} or ${NAME:-default}`},
		{"unterminated variable reference", "data_dir: /x/${DIR\n",
			`c.yaml:1: data_dir: unterminated variable reference "${DIR"`},
		{"workers out of range", "workers: 300\n",
			"c.yaml:1: workers: want 1 to 256, got 300"},
		{"listen without port", "server:\n  listen: localhost\n",
			`c.yaml:2: server.listen: want host:port such as 127.0.0.1:8080, got "localhost"`},
		{"empty data dir", "data_dir: \"\"\n",
			"c.yaml:1: data_dir: must not be empty"},
		{"admin token with a space", "server:\n  api_token: \"correct horse battery staple\"\n",
			"c.yaml:2: server.api_token: must not hold white space or control characters"},
		{"named token with a tab", "server:\n  api_tokens:\n    - name: ana\n      token: \"abcdefgh\\tijklmnop\"\n",
			"c.yaml:4: server.api_tokens[0].token: must not hold white space or control characters"},
		{"listen port too high", "server:\n  listen: \":99999\"\n",
			`c.yaml:2: server.listen: bad port "99999": want 0 to 65535 (or a service name such as http)`},
		{"listen port negative", "server:\n  listen: 127.0.0.1:-1\n",
			`c.yaml:2: server.listen: bad port "-1": want 0 to 65535 (or a service name such as http)`},
		{"listen port no service", "server:\n  listen: 127.0.0.1:nosuchservice\n",
			`c.yaml:2: server.listen: bad port "nosuchservice": want 0 to 65535 (or a service name such as http)`},
		{"listen on IPv6 without brackets", "server:\n  listen: \"::1:8080\"\n",
			`c.yaml:2: server.listen: want host:port such as 127.0.0.1:8080, got "::1:8080": an IPv6 address goes in brackets, such as [::1]:8080`},
		{"listen on IPv6 with no port", "server:\n  listen: \"[::1]\"\n",
			`c.yaml:2: server.listen: want host:port such as 127.0.0.1:8080, got "[::1]"`},
		{"data dir under ~", "data_dir: ~/switchyard\n",
			`c.yaml:1: data_dir: "~/switchyard" begins with ~, which is not expanded here: write the full path (${HOME}/switchyard in a config file)`},
		{"data dir under another's ~", "data_dir: ~ana/switchyard\n",
			`c.yaml:1: data_dir: "~ana/switchyard" begins with ~, which is not expanded here: write the full path`},
		{"data dir a file", "data_dir: config.go\n",
			"c.yaml:1: data_dir: config.go is a file, not a directory"},
		{"agents dir under ~", "agents_dir: ~/agents\n",
			`c.yaml:1: agents_dir: "~/agents" begins with ~, which is not expanded here: write the full path (${HOME}/agents in a config file)`},
		{"negative dedup window", "dedup_window: -1h\n",
			"c.yaml:1: dedup_window: must be positive, got -1h0m0s"},
		{"negative retention", "retention:\n  records: 2160h\n  audit: -1h\n",
			"c.yaml:3: retention.audit: must not be negative (0 keeps forever), got -1h0m0s"},
		{"short approval timeout", "approval_timeout: 0s\n",
			"c.yaml:1: approval_timeout: want at least 1s, got 0s"},
		{"short lease", "dispatch:\n  lease: 10ms\n",
			"c.yaml:2: dispatch.lease: want at least 1s, got 10ms"},
		{"max attempts", "dispatch:\n  max_attempts: 0\n",
			"c.yaml:2: dispatch.max_attempts: want 1 to 100, got 0"},
		{"subagent limits", "subagents:\n  max_concurrent: 0\n  max_depth: 9\n  timeout: 10ms\n",
			"c.yaml:2: subagents.max_concurrent: want 1 to 64, got 0\n" +
				"c.yaml:3: subagents.max_depth: want 1 to 5, got 9\n" +
				"c.yaml:4: subagents.timeout: want at least 1s, got 10ms"},
		{"budgets", "budgets:\n  tree:\n    tokens: -1\n    wall_time: 10ms\n    cost: 2\n  per_day:\n    agent: -5\n",
			"c.yaml:3: budgets.tree.tokens: want 0 (no cap) or a number of tokens, got -1\n" +
				"c.yaml:4: budgets.tree.wall_time: want 0 (no cap) or at least 1s, got 10ms\n" +
				"c.yaml:5: budgets.tree.cost: caps what models with prices cost, and no model in models: has prices (models.<name>.prices: {input, output} per million tokens)\n" +
				"c.yaml:7: budgets.per_day.agent: want 0 (no cap) or a number of tokens, got -5"},
		{"negative prices", "models:\n  default:\n    provider: openai\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    prices:\n      input: -1\n      output: 2\n",
			"c.yaml:6: models.default.prices: want prices of 0 or more per million tokens, got input -1 and output 2"},
		{"access names an unknown profile", "access:\n  github:\n    read: reader\n",
			`c.yaml:3: access.github.read: unknown profile "reader" (want read-only, contributor, maintainer, ops or one of profiles:)`},
		{"access of a Slack group", "profiles:\n  sre:\n    extends: ops\naccess:\n  slack:\n    groups:\n      S0123: sre\n      S0456: sres\n",
			`c.yaml:8: access.slack.groups.S0456: unknown profile "sres" (want read-only, contributor, maintainer, ops or one of profiles:)`},
		{"access key", "access:\n  github:\n    writ: ops\n",
			`c.yaml:3: access.github.writ: unknown key; did you mean "write"?`},
		{"unknown sandbox mode", "sandbox:\n  mode: off\n",
			`c.yaml:2: sandbox.mode: unknown mode "off" (want required, or none to run commands without a sandbox)`},
		{"sandbox key", "sandbox:\n  mod: none\n",
			`c.yaml:2: sandbox.mod: unknown key; did you mean "mode"?`},
		{"unknown provider", "models:\n  default:\n    provider: opnai\n    model: gpt-4.1\n",
			`c.yaml:3: models.default.provider: unknown provider "opnai" (want openai or anthropic)`},
		{"model without a key", "models:\n  default:\n    provider: anthropic\n    model: claude-sonnet-4-5\n",
			"c.yaml:2: models.default.api_key: required for anthropic without a base_url: set api_key, or base_url for a server that needs no key"},
		{"model whose key is an unset variable", "models:\n  default:\n    provider: anthropic\n    model: claude-sonnet-4-5\n    api_key: ${SY_UNSET_KEY}\n",
			"c.yaml:5: models.default.api_key: required for anthropic without a base_url; ${SY_UNSET_KEY} is unset or empty: set it in the daemon's environment, or remove the model"},
		{"model without provider and model, key quoted in the path", "models:\n  gpt-4.1:\n    timeout: 1m\n",
			"c.yaml:2: models[\"gpt-4.1\"].model: required: the provider's model name\n" +
				"c.yaml:2: models[\"gpt-4.1\"].provider: required: openai or anthropic"},
		{"bad base url", "models:\n  local:\n    provider: openai\n    model: m\n    base_url: localhost:11434\n",
			`c.yaml:5: models.local.base_url: want an http or https URL, got "localhost:11434"`},
		{"base url password is not repeated", "models:\n  local:\n    provider: openai\n    model: m\n    base_url: ftp://me:hunter2@example.com/\n",
			`c.yaml:5: models.local.base_url: want an http or https URL, got "ftp://me:xxxxx@example.com/"`},
		{"bad cron", "schedules:\n  - name: a\n    cron: \"* * *\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "* * *": expected exactly 5 fields, found 3`},
		{"cron field out of range", "schedules:\n  - name: a\n    cron: \"61 * * * *\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "61 * * * *": end of range (61) above maximum (59)`},
		{"cron descriptor", "schedules:\n  - name: a\n    cron: \"@fortnightly\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "@fortnightly": unknown descriptor (want @yearly, @monthly, @weekly, @daily, @hourly or @every <duration>)`},
		{"cron every", "schedules:\n  - name: a\n    cron: \"@every soon\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "@every soon": @every needs a duration such as 30m or 1h30m`},
		{"cron every zero", "schedules:\n  - name: a\n    cron: \"@every 0s\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "@every 0s": @every needs a positive duration such as 30m or 1h30m`},
		{"cron every negative", "schedules:\n  - name: a\n    cron: \"@every -5m\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "@every -5m": @every needs a positive duration such as 30m or 1h30m`},
		{"cron every under a second", "schedules:\n  - name: a\n    cron: \"CRON_TZ=UTC @every 10ms\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "CRON_TZ=UTC @every 10ms": @every needs at least 1s, got 10ms`},
		{"cron time zone", "schedules:\n  - name: a\n    cron: \"CRON_TZ=Mars/Base 0 9 * * *\"\n    agent: triage\n    text: hi\n",
			`c.yaml:3: schedules[0].cron: bad cron spec "CRON_TZ=Mars/Base 0 9 * * *": unknown time zone Mars/Base`},
		{"duplicate schedule", "schedules:\n  - {name: a, cron: \"@hourly\", agent: triage, text: hi}\n  - {name: a, cron: \"@daily\", agent: triage, text: hi}\n",
			`c.yaml:3: schedules[1].name: duplicate schedule name "a" (also schedules[0])`},
		{"bad schedule thread", "schedules:\n  - name: a\n    cron: \"@hourly\"\n    agent: triage\n    text: hi\n    thread: \"github:acme\"\n",
			`c.yaml:6: schedules[0].thread: thread "github:acme": want github:<owner>/<repo>#<number>`},
		{"incomplete schedule", "schedules:\n  - name: a\n",
			"c.yaml:2: schedules[0].agent: required\n" +
				"c.yaml:2: schedules[0].cron: required: a cron spec such as \"0 9 * * 1-5\" or \"@hourly\"\n" +
				"c.yaml:2: schedules[0].text: required: the message the agent receives"},
		{"github webhook secret without app id", "server:\n  listen: 127.0.0.1:8080\ngithub:\n  webhook_secret: s3cr3t\n  private_key_file: key.pem\n",
			"c.yaml:3: github.app_id: required when the github section is present: the GitHub App's id"},
		{"github without key", "github:\n  app_id: 12\n  webhook_secret: s\n",
			"c.yaml:1: github.private_key: required when the github section is present: set private_key or private_key_file"},
		{"github with both keys", "github:\n  app_id: 12\n  webhook_secret: s\n  private_key: k\n  private_key_file: f\n",
			"c.yaml:5: github.private_key_file: set private_key or private_key_file, not both"},
		{"github permission", "github:\n  app_id: 12\n  webhook_secret: s\n  private_key: k\n  min_permission: owner\n",
			`c.yaml:5: github.min_permission: unknown permission "owner" (want read, triage, write, maintain or admin)`},
		{"empty github section is present", "github: {}\n",
			"c.yaml:1: github.app_id: required when the github section is present: the GitHub App's id\n" +
				"c.yaml:1: github.private_key: required when the github section is present: set private_key or private_key_file\n" +
				"c.yaml:1: github.webhook_secret: required when the github section is present"},
		{"slack socket without app token", "slack:\n  mode: socket\n  bot_token: xoxb-1\n",
			"c.yaml:1: slack.app_token: required in socket mode: the app-level token (xapp-...)"},
		{"slack http without signing secret", "slack:\n  mode: http\n  bot_token: xoxb-1\n",
			"c.yaml:1: slack.signing_secret: required in http mode"},
		{"github api_url with credentials", "github:\n  app_id: 12\n  webhook_secret: s\n  private_key: k\n  api_url: https://ci:pw-not-shown@ghe.example.com/api/v3\n",
			"c.yaml:5: github.api_url: must not carry a user or password"},
		{"slack api_url with credentials", "slack:\n  mode: http\n  bot_token: xoxb-1\n  signing_secret: s\n  api_url: https://proxy:pw-not-shown@slack.example.com/api/\n",
			"c.yaml:5: slack.api_url: must not carry a user or password"},
		{"public_url with credentials", "server:\n  public_url: https://ana:pw-not-shown@sy.example.com\n",
			"c.yaml:2: server.public_url: must not carry a user or password"},
		{"slack mode", "slack:\n  mode: websocket\n  bot_token: xoxb-1\n",
			`c.yaml:2: slack.mode: unknown mode "websocket" (want socket or http)`},
		{"slack empty allowed channel", "slack:\n  mode: http\n  bot_token: xoxb-1\n  signing_secret: s\n  allowed_channels: [C1, \"\"]\n",
			"c.yaml:5: slack.allowed_channels[1]: empty value"},
		{"merge of a list", "base: &b [1]\n",
			`c.yaml:1: base: unknown key; want one of access, admin, agents_dir, approval_timeout, budgets, data_dir, dedup_window, dispatch, github, models, profiles, retention, routing, sandbox, schedules, server, skills, slack, storage, subagents, workers`},
		{"merge of a scalar", "server:\n  <<: 3\n",
			"c.yaml:2: server: << merges mappings, got an integer"},
		{"several problems, sorted by line", "workers: 0\nserver:\n  listen: x\n  consol: true\ndata_dir: [a]\n",
			"c.yaml:1: workers: want 1 to 256, got 0\n" +
				`c.yaml:3: server.listen: want host:port such as 127.0.0.1:8080, got "x"` + "\n" +
				`c.yaml:4: server.consol: unknown key; did you mean "console"?` + "\n" +
				"c.yaml:5: data_dir: want a string, got a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse("c.yaml", []byte(tt.yaml))
			require.Nil(t, c)
			require.EqualError(t, err, tt.want)
			require.True(t, config.IsInvalid(err))
			require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
			var errs config.Errors
			require.True(t, errors.As(err, &errs))
			require.Len(t, errs, strings.Count(tt.want, "\n")+1)
		})
	}
}

// A config with routing rules and commands, its rule on line 14.
const compileYAML = `server:
  listen: 127.0.0.1:8080
routing:
  commands:
    ship: opz
  rules:
    - name: bugs
      agent: coder
      match: {labels: [bug]}
    - name: prs
      agent: reviewer
      match: {kinds: ["github.pull_request.*"]}
    - name: triage-all
      agent: tirage
      match:
        kinds:
          - github.issues.*
          - "["
        text: "("
schedules:
  - name: nightly
    cron: "@daily"
    agent: nightwatch
    text: report
`

func TestCompileErrors(t *testing.T) {
	c, err := config.Parse("config.yaml", []byte(compileYAML))
	require.NoError(t, err)
	r, err := c.Compile(builtinAgents())
	require.Nil(t, r)
	require.EqualError(t, err, `config.yaml:5: routing.commands.ship: unknown agent "opz"
config.yaml:14: routing.rules[2].agent: unknown agent "tirage"
config.yaml:18: routing.rules[2].match.kinds[1]: bad glob "[": syntax error in pattern
config.yaml:19: routing.rules[2].match.text: bad regular expression "(": missing closing )
config.yaml:23: schedules[0].agent: unknown agent "nightwatch"`)
	require.True(t, config.IsInvalid(err))
}

func TestCompileErrorLines(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"default agent", "routing:\n  default_agent: tirage\n",
			`c.yaml:2: routing.default_agent: unknown agent "tirage"`},
		{"default agent from the defaults has no line", "workers: 2\n",
			`c.yaml: routing.default_agent: unknown agent "triage"`},
		{"default agent from the defaults, under routing", "workers: 2\nrouting:\n  rules: []\n",
			`c.yaml:2: routing.default_agent: unknown agent "triage"`},
		{"rule without name", "routing:\n  default_agent: coder\n  rules:\n    - agent: coder\n",
			"c.yaml:4: routing.rules[0].name: a rule needs a name (it is recorded with every decision the rule makes)"},
		{"duplicate rule name", "routing:\n  default_agent: coder\n  rules:\n    - {name: a, agent: coder}\n    - name: a\n      agent: coder\n",
			`c.yaml:5: routing.rules[1].name: duplicate rule name "a" (also routing.rules[0])`},
		{"odd command key", "routing:\n  default_agent: coder\n  commands:\n    \"/ship\": coder\n",
			`c.yaml:4: routing.commands["/ship"]: bad command name "/ship": write it without the slash`},
		{"unknown source", "routing:\n  default_agent: coder\n  rules:\n    - name: a\n      agent: coder\n      match:\n        sources: [github, jira]\n",
			`c.yaml:7: routing.rules[0].match.sources[1]: unknown source "jira" (want local, github, slack or schedule)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse("c.yaml", []byte(tt.yaml))
			require.NoError(t, err)
			_, err = c.Compile([]bot.AgentInfo{{Name: "coder"}})
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Setenv("SY_WORKERS", "12")
	t.Setenv("SY_DIR", "/var/lib/switchyard")
	t.Setenv("SY_EMPTY", "")
	t.Setenv("SY_TOKEN", "tok-1234567890abcdef")
	t.Setenv("SY_TRICKY", "a: b\n- c")
	t.Setenv("SY_FALSE", "false")
	c, err := config.Parse("c.yaml", []byte(`
server:
  listen: ${SY_UNSET}
  api_token: ${SY_TOKEN}
  console: ${SY_FALSE}
data_dir: ${SY_DIR}/data
workers: "${SY_WORKERS}"
agents_dir: ${SY_EMPTY:-./my-agents}
dispatch:
  lease: ${SY_UNSET:-45s}
routing:
  rules:
    - name: $$literal and ${SY_TRICKY}
      agent: coder
      match:
        text: 'deploy$|costs \$5|^a$'
`))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", c.Server.Listen, "a value that expands to nothing keeps the default")
	require.Equal(t, "tok-1234567890abcdef", c.Server.APIToken.Reveal())
	require.False(t, c.Server.Console)
	require.Equal(t, "/var/lib/switchyard/data", c.DataDir)
	require.Equal(t, 12, c.Workers, "an expanded value is typed by what it expands to, quoted or not")
	require.Equal(t, "./my-agents", c.AgentsDir)
	require.Equal(t, 45*time.Second, c.Dispatch.Lease)
	require.Equal(t, "$literal and a: b\n- c", c.Routing.Rules[0].Name, "a value cannot change the structure")
	require.Equal(t, `deploy$|costs \$5|^a$`, c.Routing.Rules[0].Match.Text)
}

func TestEnvExpansionExplicitTag(t *testing.T) {
	t.Setenv("SY_WORKERS", "12")
	_, err := config.Parse("c.yaml", []byte("workers: !!str ${SY_WORKERS}\n"))
	require.EqualError(t, err, `c.yaml:1: workers: want an integer, got "${SY_WORKERS}" (as expanded)`)
}

// Secret values come from the environment or the file; none may show up in
// a printed or marshalled config nor in an error.
func TestSecretsNeverPrinted(t *testing.T) {
	secrets := map[string]string{
		"SY_API_TOKEN": "sentinel-api-token", "SY_MODEL_KEY": "sentinel-model-key",
		"SY_GH_KEY": "sentinel-gh-key", "SY_GH_HOOK": "sentinel-gh-hook",
		"SY_SLACK_APP": "xapp-sentinel-slack-app", "SY_SLACK_BOT": "xoxb-sentinel-slack-bot",
		"SY_SLACK_SIGN": "sentinel-slack-sign", "SY_ANA": "sentinel-ana-token",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	c, err := config.Parse("c.yaml", []byte(`
server:
  api_token: ${SY_API_TOKEN}
  api_tokens:
    - name: ana
      token: ${SY_ANA}
models:
  default:
    provider: openai
    model: gpt-4.1
    api_key: ${SY_MODEL_KEY}
github:
  app_id: 1
  private_key: ${SY_GH_KEY}
  webhook_secret: ${SY_GH_HOOK}
slack:
  mode: socket
  app_token: ${SY_SLACK_APP}
  bot_token: ${SY_SLACK_BOT}
  signing_secret: ${SY_SLACK_SIGN}
`))
	require.NoError(t, err)
	require.Equal(t, "sentinel-gh-hook", c.GitHub.WebhookSecret.Reveal())

	var outputs []string
	for _, v := range []any{c, *c, *c.GitHub, *c.Slack, c.Models, c.Server, c.Server.APITokens, c.Server.APITokens[0]} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
			outputs = append(outputs, fmt.Sprintf(verb, v))
		}
		j, err := json.Marshal(v)
		require.NoError(t, err)
		y, err := yaml.Marshal(v)
		require.NoError(t, err)
		outputs = append(outputs, string(j), string(y))
	}
	for _, out := range outputs {
		for _, s := range secrets {
			require.NotContains(t, out, s)
		}
	}
	y, err := yaml.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(y), "webhook_secret: '[REDACTED]'")
}

// TestSlackTokensOfTheWrongKind: config check knows Slack's tokens by their
// prefixes, names both keys when they are swapped, says when a variable is
// unset rather than that a token is wrong, and never quotes a token.
func TestSlackTokensOfTheWrongKind(t *testing.T) {
	t.Setenv("SY_APP", "xapp-1-sentinel")
	t.Setenv("SY_BOT", "xoxb-sentinel")
	t.Setenv("SY_EMPTY", "")
	tests := []struct {
		name, app, bot string
		want           string // "" when valid
	}{
		{"right kinds", "xapp-1-A1-x", "xoxb-1-x", ""},
		{"right kinds from the environment", "${SY_APP}", "${SY_BOT}", ""},
		{"swapped", "xoxb-1-sentinel", "xapp-1-sentinel",
			"c.yaml:3: slack.app_token: holds a bot token (xoxb-...) and slack.bot_token an app-level token (xapp-...): the two are swapped"},
		{"swapped from the environment", "${SY_BOT}", "${SY_APP}",
			"c.yaml:3: slack.app_token: holds a bot token (xoxb-...) and slack.bot_token an app-level token (xapp-...): the two are swapped"},
		{"user token as bot token", "xapp-1-x", "xoxp-sentinel",
			"c.yaml:4: slack.bot_token: want a bot token (xoxb-...), got a user token (xoxp-...)"},
		{"bot token as app token", "xoxb-sentinel", "xoxb-1",
			"c.yaml:3: slack.app_token: want an app-level token (xapp-...), got a bot token (xoxb-...)"},
		{"not a token", "xapp-1", "sentinel",
			"c.yaml:4: slack.bot_token: want a bot token (xoxb-...); the value does not start with xoxb-"},
		{"unset variable", "${SY_UNSET_APP}", "xoxb-1",
			"c.yaml:3: slack.app_token: required in socket mode: the app-level token (xapp-...); ${SY_UNSET_APP} is unset or empty"},
		{"empty variable", "xapp-1", "${SY_EMPTY}",
			"c.yaml:4: slack.bot_token: required when the slack section is present: the bot token (xoxb-...); ${SY_EMPTY} is unset or empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := fmt.Sprintf("slack:\n  mode: socket\n  app_token: %q\n  bot_token: %q\n", tc.app, tc.bot)
			_, err := config.Parse("c.yaml", []byte(doc))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
			require.NotContains(t, err.Error(), "sentinel")
		})
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	t.Setenv("SY_SECRET", "sentinel-from-env")
	for _, doc := range []string{
		"server:\n  api_token: [sentinel-in-file]\n",
		"server:\n  api_token: {sentinel-in-file: sentinel-in-file}\n",
		"github:\n  app_id: 1\n  private_key: [sentinel-in-file]\n  webhook_secret: {a: sentinel-in-file}\n",
		"slack:\n  mode: http\n  bot_token: [sentinel-in-file]\n  signing_secret: [sentinel-in-file]\n  app_token: [sentinel-in-file]\n",
		"models:\n  m:\n    api_key: [sentinel-in-file]\n",
		"server:\n  api_tokens:\n    - name: ana\n      token: [sentinel-in-file]\n",
		"server:\n  api_tokens:\n    - name: ana\n      token: \"sentinel with spaces\"\n",
		"server:\n  api_tokens:\n    - {name: a, token: sentinel-in-file-0}\n    - {name: b, token: sentinel-in-file-0}\n",
		"workers: ${SY_SECRET}\n",
		"dedup_window: ${SY_SECRET}\n",
		"server:\n  console: ${SY_SECRET}\n",
		"github:\n  app_id: ${SY_SECRET}\n  webhook_secret: ${SY_SECRET}\n",
		"dispatch: ${SY_SECRET}\n",
	} {
		_, err := config.Parse("c.yaml", []byte(doc))
		require.Error(t, err, doc)
		require.NotContains(t, err.Error(), "sentinel", doc)
	}
}

func TestAliasesAndMergeKeys(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(`
models:
  default: &base
    provider: openai
    base_url: http://127.0.0.1:8000/v1
    model: gpt-4.1
    timeout: 1m
  long:
    <<: *base
    timeout: 10m
  mixed:
    <<: [*base, {model: other, max_tokens: 5}]
routing:
  rules:
    - name: a
      agent: coder
      match: &m
        labels: &labels [bug]
    - name: b
      agent: docs
      match: *m
    - name: c
      agent: docs
      match:
        labels: *labels
`))
	require.NoError(t, err)
	local := "http://127.0.0.1:8000/v1"
	require.Equal(t, config.Model{Provider: "openai", BaseURL: local, Model: "gpt-4.1", Timeout: time.Minute}, c.Models["default"])
	require.Equal(t, config.Model{Provider: "openai", BaseURL: local, Model: "gpt-4.1", Timeout: 10 * time.Minute}, c.Models["long"])
	require.Equal(t, config.Model{Provider: "openai", BaseURL: local, Model: "gpt-4.1", MaxTokens: 5, Timeout: time.Minute}, c.Models["mixed"],
		"the first merged mapping wins")
	for _, r := range c.Routing.Rules {
		require.Equal(t, []string{"bug"}, r.Match.Labels)
	}
}

func TestAliasBombFailsFast(t *testing.T) {
	var b strings.Builder
	b.WriteString("models:\n  a0: &a0 {provider: openai, model: m}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&b, "  a%d: &a%d {<<: [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]}\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	start := time.Now()
	_, err := config.Parse("c.yaml", []byte(b.String()))
	require.ErrorContains(t, err, "document too large (more than 100000 nodes with aliases expanded)")
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestDefaultsFilledIn(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(`
models:
  m:
    provider: anthropic
    api_key: sk-ant-k
    model: claude
github:
  app_id: 42
  private_key_file: key.pem
  webhook_secret: s
  api_url: https://github.example.com/api/v3
slack:
  mode: http
  bot_token: xoxb-1
  signing_secret: s
schedules:
  - name: nightly
    cron: "CRON_TZ=Europe/Berlin 0 2 * * *"
    agent: triage
    text: report
`))
	require.NoError(t, err)
	require.Equal(t, config.DefaultModelTimeout, c.Models["m"].Timeout)
	require.Equal(t, "https://github.example.com/api/v3/", c.GitHub.APIURL, "the API clients need the trailing slash")
	require.Equal(t, "write", c.GitHub.MinPermission)
	require.Equal(t, "https://slack.com/api/", c.Slack.APIURL)
	require.Equal(t, []bot.Schedule{{
		Name: "nightly", Spec: "CRON_TZ=Europe/Berlin 0 2 * * *", Agent: "triage",
		Thread: bot.LocalThread("schedule-nightly"), Text: "report",
	}}, c.BotSchedules())
}

func TestLine(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(compileYAML))
	require.NoError(t, err)
	require.Equal(t, 7, c.Line("routing.rules[0]"))
	require.Equal(t, 13, c.Line("routing.rules[2]"))
	require.Equal(t, 14, c.Line("routing.rules[2].agent"))
	require.Equal(t, 18, c.Line("routing.rules[2].match.kinds[1]"))
	require.Equal(t, 13, c.Line("routing.rules[2].priority"), "an absent key is placed at its section")
	require.Equal(t, 0, c.Line("github.app_id"))
	require.Equal(t, 0, config.Default().Line("workers"), "the defaults are not a file anyone edits")
}

// exampleEnv sets the variables config.example.yaml references, or, with
// set false, clears them, so the developer's own environment cannot change
// the outcome.
func exampleEnv(t *testing.T, set bool) {
	for k, v := range map[string]string{
		"SWITCHYARD_API_TOKEN": "api-token-0123456789", "ANTHROPIC_API_KEY": "sk-ant",
		"LOCAL_MODEL": "", "LOCAL_MODEL_URL": "", "GITHUB_ORG": "",
		"GITHUB_APP_ID": "12345", "GITHUB_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----",
		"GITHUB_WEBHOOK_SECRET": "hook", "GITHUB_APP_SLUG": "switchyard",
		"SLACK_APP_TOKEN": "xapp-1", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "sign",
	} {
		if !set {
			v = ""
		}
		t.Setenv(k, v)
	}
}

// exampleLine is the line of config.example.yaml that holds text.
func exampleLine(t *testing.T, text string) int {
	t.Helper()
	data, err := os.ReadFile("../config.example.yaml")
	require.NoError(t, err)
	i := strings.Index(string(data), text)
	require.GreaterOrEqual(t, i, 0, "config.example.yaml has %q", text)
	return strings.Count(string(data[:i]), "\n") + 1
}

func TestExampleConfig(t *testing.T) {
	t.Run("as shipped, with no environment", func(t *testing.T) {
		// Its default model is Anthropic's, which needs a key: serve and
		// config check both refuse it, saying how to fix it.
		exampleEnv(t, false)
		_, err := config.Load("../config.example.yaml")
		require.EqualError(t, err, fmt.Sprintf("../config.example.yaml:%d: models.default.api_key: required for anthropic without a base_url; "+
			"${ANTHROPIC_API_KEY} is unset or empty: set it in the daemon's environment, or remove the model", exampleLine(t, "api_key: ${ANTHROPIC_API_KEY}")))
	})
	t.Run("as shipped, with only a model key", func(t *testing.T) {
		exampleEnv(t, false)
		t.Setenv("ANTHROPIC_API_KEY", "sk-ant-k")
		c, err := config.Load("../config.example.yaml")
		require.NoError(t, err)
		require.Nil(t, c.GitHub)
		require.Nil(t, c.Slack)
		_, err = c.Compile(builtinAgents())
		require.NoError(t, err)
	})
	t.Run("as shipped", func(t *testing.T) {
		exampleEnv(t, true)
		c, err := config.Load("../config.example.yaml")
		require.NoError(t, err)
		require.Equal(t, "api-token-0123456789", c.Server.APIToken.Reveal())
		require.Equal(t, "qwen2.5-coder:14b", c.Models["local"].Model)
		require.Equal(t, []string{"acme/*"}, c.Routing.Rules[3].Match.Repos)

		r, err := c.Compile(builtinAgents())
		require.NoError(t, err)
		var names []string
		for _, ri := range r.Rules() {
			names = append(names, ri.Name)
		}
		require.Equal(t, []string{"security", "bugs", "docs-changes", "pull-requests", "incidents", "release-owners"}, names)

		for _, tt := range []struct {
			ev   *bot.Event
			want string
		}{
			{&bot.Event{Source: bot.SourceGitHub, Kind: "github.issues.labeled", Labels: []string{"bug"}}, `rule "bugs" (priority 100)`},
			{&bot.Event{Source: bot.SourceGitHub, Kind: "github.pull_request.opened", Repo: "acme/web", Paths: []string{"docs/a/b.md"}}, `rule "docs-changes" (priority 60)`},
			{&bot.Event{Source: bot.SourceSlack, Kind: bot.KindSlackMessage, Channel: "incidents", Text: "SEV2: checkout is down"}, `rule "incidents" (priority 40)`},
			{&bot.Event{Source: bot.SourceLocal, Kind: bot.KindLocalMessage, Text: "/rollback web"}, "command /rollback"},
		} {
			tt.ev.FillFromText()
			require.Equal(t, tt.want, r.Route(tt.ev).Reason)
		}
	})
	t.Run("with the github and slack sections uncommented", func(t *testing.T) {
		exampleEnv(t, true)
		data, err := os.ReadFile("../config.example.yaml")
		require.NoError(t, err)
		var out []string
		uncomment := false
		for line := range strings.Lines(string(data)) {
			switch {
			case line == "# github:\n" || line == "# slack:\n":
				uncomment = true
			case strings.TrimSpace(line) == "":
				uncomment = false
			}
			if uncomment {
				line = strings.TrimPrefix(line, "# ")
			}
			out = append(out, line)
		}
		c, err := config.Parse("example", []byte(strings.Join(out, "")))
		require.NoError(t, err)
		require.NotNil(t, c.GitHub)
		require.Equal(t, int64(12345), c.GitHub.AppID)
		require.Equal(t, "hook", c.GitHub.WebhookSecret.Reveal())
		require.Equal(t, []string{"dependabot[bot]"}, c.GitHub.AllowBots)
		require.Equal(t, "switchyard", c.GitHub.AppSlug)
		require.NotNil(t, c.Slack)
		require.Equal(t, config.SlackSocket, c.Slack.Mode)
		require.Equal(t, "xoxb-1", c.Slack.BotToken.Reveal())
		_, err = c.Compile(builtinAgents())
		require.NoError(t, err)

		// Without the variables, a present section is incomplete.
		for _, k := range []string{"GITHUB_APP_ID", "SLACK_APP_TOKEN"} {
			t.Setenv(k, "")
		}
		_, err = config.Parse("example", []byte(strings.Join(out, "")))
		require.ErrorContains(t, err, "github.app_id: required when the github section is present")
		require.ErrorContains(t, err, "slack.app_token: required in socket mode")
	})
}

// Every key of the config types appears in the example, so the example
// stays the complete reference.
func TestExampleHasEveryKey(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	require.NoError(t, err)
	var doc map[string]any
	// Marshal a config with every field set, then look for each key.
	full := config.Default()
	full.Models = map[string]config.Model{"m": {Provider: "openai", BaseURL: "x", APIKey: "k", Model: "m", MaxTokens: 1, Timeout: 1}}
	full.Routing = bot.RoutingConfig{DefaultAgent: "a", Commands: map[string]string{"x": "y"}, Rules: []bot.Rule{{Name: "n", Priority: 1, Agent: "a",
		Match: bot.Match{Sources: []string{"s"}, Kinds: []string{"k"}, Labels: []string{"l"}, Repos: []string{"r"}, Paths: []string{"p"}, Text: "t", Actors: []string{"a"}, Channels: []string{"c"}}}}}
	full.Server.APITokens = []config.APIToken{{Name: "n", Token: "t"}}
	full.Server.PublicURL = "u"
	full.Admin.Users = []config.AdminUser{{Name: "n", PasswordHash: "h"}}
	full.Schedules = []config.Schedule{{Name: "n", Cron: "c", Agent: "a", Thread: bot.LocalThread("x"), Text: "t"}}
	full.GitHub = &config.GitHub{AppID: 1, PrivateKey: "k", PrivateKeyFile: "f", WebhookSecret: "s", APIURL: "u", AllowBots: []string{"b"}, MinPermission: "m", AppSlug: "s", AllowOtherRepos: true}
	full.Slack = &config.Slack{Mode: "m", AppToken: "a", BotToken: "b", SigningSecret: "s", APIURL: "u", AllowedChannels: []string{"c"}, AllowedUsers: []string{"u"}}
	y, err := yaml.Marshal(full)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(y, &doc))
	var keys []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys = append(keys, k)
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	require.Greater(t, len(keys), 40)
	for _, k := range keys {
		if k == "m" || k == "x" { // map keys of the sample, not config keys
			continue
		}
		require.Contains(t, string(data), k+":", "config.example.yaml lacks %q", k)
	}
}

func TestCustomProfilesAreValidatedWithPositions(t *testing.T) {
	_, err := config.Parse("c.yaml", []byte("profiles:\n  deployer:\n    extends: contributr\n"))
	require.EqualError(t, err, `c.yaml:3: profiles.deployer.extends: unknown profile "contributr" (want read-only, contributor, maintainer, ops or a custom profile)`)
	require.True(t, config.IsInvalid(err))
	c, err := config.Parse("c.yaml", []byte("profiles:\n  deployer:\n    extends: contributor\n    network: true\n    commands: {deny: [kubectl delete]}\n"))
	require.NoError(t, err)
	require.Equal(t, "contributor", c.Profiles["deployer"].Extends)
}

func TestSkillSettings(t *testing.T) {
	t.Setenv("RELEASE_TOKEN", "rt-0123456789abcdef")
	c, err := config.Parse("c.yaml", []byte(`workers: 2
skills:
  settings:
    - name: release-notes
      scope: global
      enabled: false
    - name: release-helper
      scope: repo:Acme/Web
      enabled: true
      settings:
        changelog_file: docs/CHANGELOG.md
        retries: 3
        token: ${RELEASE_TOKEN}
    - name: incident-triage
      scope: agent:ops
      enabled: inherit
      settings: {channel: "#incidents"}
`))
	require.NoError(t, err)
	got := c.SkillSettings()
	require.Len(t, got, 3)
	require.Equal(t, "global", got[0].Scope.String())
	require.Equal(t, skills.Disabled, got[0].Enabled)
	require.Equal(t, "c.yaml:4", got[0].Origin)
	require.Equal(t, "repo:acme/web", got[1].Scope.String(), "repositories are kept lower-case")
	require.Equal(t, skills.Enabled, got[1].Enabled)
	require.Equal(t, map[string]any{"changelog_file": "docs/CHANGELOG.md", "retries": int64(3), "token": "rt-0123456789abcdef"}, got[1].Settings)
	require.Equal(t, "c.yaml:7", got[1].Origin)
	require.Equal(t, skills.Inherit, got[2].Enabled)
	require.Equal(t, []bot.Secret{"rt-0123456789abcdef"}, c.SkillSecrets(), "values from the environment are masked")

	err = c.SkillErrors(skills.SettingErrors{{Index: 1, Field: "name", Msg: `no package or skill "release-helper"`}})
	require.EqualError(t, err, `c.yaml:7: skills.settings[1].name: no package or skill "release-helper"`)
	require.True(t, config.IsInvalid(err))
}

// The storage section: bolt by default, postgres with its DSN, which is a
// secret the redactor learns with the password in it.
func TestStorage(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("data_dir: /tmp/x\n"))
	require.NoError(t, err)
	require.Equal(t, config.Storage{Driver: config.StorageBolt}, cfg.Storage)

	t.Setenv("TEST_DSN", "postgres://switchyard:s3cret-passw0rd@db:5432/switchyard")
	cfg, err = config.Parse("c.yaml", []byte("storage:\n  driver: postgres\n  dsn: ${TEST_DSN}\n"))
	require.NoError(t, err)
	require.Equal(t, config.DefaultMaxConns, cfg.Storage.MaxConns)
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", cfg.Storage, cfg.Storage, cfg), "s3cret")
	require.ElementsMatch(t, []bot.Secret{"postgres://switchyard:s3cret-passw0rd@db:5432/switchyard", "s3cret-passw0rd"}, cfg.Storage.Secrets())
	kv := config.Storage{Driver: config.StoragePostgres, DSN: "host=db user=switchyard password='kv-passw0rd' dbname=switchyard"}
	require.Contains(t, kv.Secrets(), bot.Secret("kv-passw0rd"))
}

// LoadAccess reads the API token and the data directory past problems
// elsewhere in the file, and refuses only what hides them.
func TestLoadAccessReadsPastProblemsElsewhere(t *testing.T) {
	t.Setenv("A19_TOKEN", "from-the-environment-123")
	for _, tc := range []struct {
		name, file string
		want       config.Access
		problem    string
	}{
		{name: "defaults", file: "", want: config.Access{DataDir: "./data"}},
		{name: "token and data_dir", file: "server: {api_token: tok-1234567890abcdef}\ndata_dir: /srv/sy\n",
			want: config.Access{APIToken: "tok-1234567890abcdef", DataDir: "/srv/sy"}},
		{name: "from the environment", file: "server:\n  api_token: ${A19_TOKEN}\n",
			want: config.Access{APIToken: "from-the-environment-123", DataDir: "./data"}},
		{name: "unknown key", file: "data_dir: /srv/sy\nroutnig: {}\n", want: config.Access{DataDir: "/srv/sy"}},
		{name: "unknown key in server", file: "server: {api_tokne: x, api_token: tok-1234567890abcdef}\n",
			want: config.Access{APIToken: "tok-1234567890abcdef", DataDir: "./data"}},
		{name: "wrong type elsewhere", file: "workers: many\ndata_dir: /srv/sy\n", want: config.Access{DataDir: "/srv/sy"}},
		{name: "duplicate key elsewhere", file: "routing: {}\nrouting: {}\ndata_dir: /srv/sy\n", want: config.Access{DataDir: "/srv/sy"}},
		{name: "unknown agent", file: "routing: {rules: [{name: r, agent: tirage}]}\n", want: config.Access{DataDir: "./data"}},
		{name: "syntax error", file: "server: [\n", problem: "c.yaml:1: did not find expected node content"},
		{name: "server not a mapping", file: "server: [a]\n", problem: "c.yaml:1: server: want a mapping, got a list"},
		{name: "token not a string", file: "server: {api_token: [a]}\n", problem: "c.yaml:1: server.api_token: want a string, got a list"},
		{name: "empty data_dir", file: "data_dir: \" \"\n", problem: "c.yaml:1: data_dir: must not be empty"},
		{name: "duplicate data_dir", file: "data_dir: a\ndata_dir: b\n", problem: "c.yaml:2: data_dir: duplicate key (first on line 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = filepath.Join(t.TempDir(), "c.yaml")
				require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o600))
			}
			got, err := config.LoadAccess(path)
			if tc.problem != "" {
				require.True(t, config.IsInvalid(err), "%v", err)
				require.Equal(t, filepath.Join(filepath.Dir(path), tc.problem), err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := config.LoadAccess(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
