package skills_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// acmeTools is an installed package with one skill.
var acmeTools = map[string]string{
	"manifest.yaml": `name: acme-tools
version: 1.2.0
description: Acme's deploy checks.
skills:
  - name: deploy-check
    description: Check a deploy before it goes out.
    instructions: Check it.
    allowed_tools: [bash]
    execution_protocol: [Run the checks with bash.]
config:
  type: object
  properties:
    environment: {type: string, enum: [staging, production]}
    retries: {type: integer, minimum: 0}
  additionalProperties: false
`,
}

func scope(t *testing.T, s string) skills.Scope {
	t.Helper()
	sc, err := skills.ParseScope(s)
	require.NoError(t, err)
	return sc
}

// setting is a setting as the table writes it: "store" or "config", scope,
// name, enabled.
type setting struct{ src, scope, name, enabled string }

func TestEffectiveScopes(t *testing.T) {
	web := skills.Target{Repo: "acme/web", Agent: "coder"}
	cases := []struct {
		name     string
		settings []setting
		target   skills.Target
		skill    string
		enabled  bool
		scope    string
	}{
		{"a built-in with no setting is enabled", nil, web, "release-notes", true, "default"},
		{"an installed package with no setting is enabled nowhere", nil, web, "deploy-check", false, "default"},
		{"global disable of a built-in", []setting{{"store", "global", "release-notes", "false"}}, web, "release-notes", false, "global"},
		{"org disable applies to the org's repos", []setting{{"store", "org:acme", "release-notes", "false"}}, web, "release-notes", false, "org:acme"},
		{"org disable does not apply elsewhere", []setting{{"store", "org:acme", "release-notes", "false"}}, skills.Target{Repo: "other/api"}, "release-notes", true, "default"},
		{"repo enable of an installed package", []setting{{"store", "repo:acme/web", "acme-tools", "true"}}, web, "deploy-check", true, "repo:acme/web"},
		{"repo enable does not reach the org's other repos", []setting{{"store", "repo:acme/web", "acme-tools", "true"}}, skills.Target{Repo: "acme/api"}, "deploy-check", false, "default"},
		{"an agent-level disable of a repo-level enable", []setting{{"store", "repo:acme/web", "acme-tools", "true"}, {"store", "agent:coder", "deploy-check", "false"}}, web, "deploy-check", false, "agent:coder"},
		{"the repo enable still holds for other agents", []setting{{"store", "repo:acme/web", "acme-tools", "true"}, {"store", "agent:coder", "deploy-check", "false"}}, skills.Target{Repo: "acme/web", Agent: "ops"}, "deploy-check", true, "repo:acme/web"},
		{"agent enable over a global disable", []setting{{"store", "global", "release-notes", "false"}, {"store", "agent:docs", "release-notes", "true"}}, skills.Target{Repo: "acme/web", Agent: "docs"}, "release-notes", true, "agent:docs"},
		{"repo re-enables what the org disables", []setting{{"store", "org:acme", "release-notes", "false"}, {"store", "repo:acme/web", "release-notes", "true"}}, web, "release-notes", true, "repo:acme/web"},
		{"inherit at the repo defers to the org", []setting{{"store", "org:acme", "acme-tools", "true"}, {"store", "repo:acme/web", "acme-tools", "inherit"}}, web, "deploy-check", true, "org:acme"},
		{"inherit at the agent defers to the repo", []setting{{"store", "repo:acme/web", "release-notes", "false"}, {"store", "agent:coder", "release-notes", "inherit"}}, web, "release-notes", false, "repo:acme/web"},
		{"the skill's setting beats its package's at one scope", []setting{{"store", "repo:acme/web", "acme-tools", "true"}, {"store", "repo:acme/web", "deploy-check", "false"}}, web, "deploy-check", false, "repo:acme/web"},
		{"a package setting at a narrower scope beats a skill setting at a broader one", []setting{{"store", "global", "deploy-check", "false"}, {"store", "repo:acme/web", "acme-tools", "true"}}, web, "deploy-check", true, "repo:acme/web"},
		{"config at a broad scope, store at a narrow one: the narrow wins", []setting{{"config", "global", "acme-tools", "true"}, {"store", "repo:acme/web", "acme-tools", "false"}}, web, "deploy-check", false, "repo:acme/web"},
		{"store at a broad scope, config at a narrow one: the narrow wins", []setting{{"store", "global", "acme-tools", "true"}, {"config", "repo:acme/web", "deploy-check", "false"}}, web, "deploy-check", false, "repo:acme/web"},
		{"config alone", []setting{{"config", "org:acme", "incident-triage", "false"}}, web, "incident-triage", false, "org:acme"},
		{"repository names compare case-insensitively", []setting{{"store", "repo:acme/web", "acme-tools", "true"}}, skills.Target{Repo: "Acme/Web"}, "deploy-check", true, "repo:acme/web"},
		{"the org comes from the repository", []setting{{"store", "org:acme", "acme-tools", "true"}}, skills.Target{Repo: "ACME/web"}, "deploy-check", true, "org:acme"},
		{"a thread with no repository: org and repo settings do not apply", []setting{{"store", "org:acme", "release-notes", "false"}, {"store", "repo:acme/web", "release-notes", "false"}}, skills.Target{Agent: "coder"}, "release-notes", true, "default"},
		{"an agent setting applies in any repository", []setting{{"store", "agent:coder", "acme-tools", "true"}}, skills.Target{Repo: "other/thing", Agent: "coder"}, "deploy-check", true, "agent:coder"},
		{"an agent setting of another agent does not apply", []setting{{"store", "agent:ops", "acme-tools", "true"}}, web, "deploy-check", false, "default"},
		{"an org given without a repository", []setting{{"store", "org:acme", "acme-tools", "true"}}, skills.Target{Org: "acme"}, "deploy-check", true, "org:acme"},
		{"built-in disabled at the org, enabled for one agent", []setting{{"store", "org:acme", "code-review-checklist", "false"}, {"store", "agent:reviewer", "code-review-checklist", "true"}}, skills.Target{Repo: "acme/web", Agent: "reviewer"}, "code-review-checklist", true, "agent:reviewer"},
		{"a package disabled at the repo, its skill enabled there", []setting{{"store", "repo:acme/web", "acme-tools", "false"}, {"store", "repo:acme/web", "deploy-check", "true"}}, web, "deploy-check", true, "repo:acme/web"},
		{"a package disabled at the repo, its skill enabled globally", []setting{{"store", "global", "deploy-check", "true"}, {"store", "repo:acme/web", "acme-tools", "false"}}, web, "deploy-check", false, "repo:acme/web"},
		{"a package disabled at the repo, its skill enabled for the agent", []setting{{"store", "repo:acme/web", "acme-tools", "false"}, {"store", "agent:coder", "deploy-check", "true"}}, web, "deploy-check", true, "agent:coder"},
		{"a package enabled for the agent, disabled at the repo by config", []setting{{"config", "repo:acme/web", "acme-tools", "false"}, {"store", "agent:coder", "acme-tools", "true"}}, web, "deploy-check", true, "agent:coder"},
		{"inherit at every level falls to the default", []setting{{"store", "global", "acme-tools", "inherit"}, {"store", "org:acme", "acme-tools", "inherit"}, {"store", "repo:acme/web", "deploy-check", "inherit"}, {"store", "agent:coder", "deploy-check", "inherit"}}, web, "deploy-check", false, "default"},
		{"unknown skill", nil, web, "nope", false, "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRegistry(t)
			addPackage(t, r, acmeTools)
			var config []skills.Setting
			for i, s := range tc.settings {
				var e skills.Enablement
				require.NoError(t, e.UnmarshalText([]byte(s.enabled)))
				st := skills.Setting{Scope: scope(t, s.scope), Name: s.name, Enabled: e}
				if s.src == "config" {
					st.Origin = "config.yaml:" + string(rune('1'+i))
					config = append(config, st)
					continue
				}
				require.NoError(t, r.Set(context.Background(), st))
			}
			require.NoError(t, r.SetConfig(config))
			got := r.Enabled(tc.target, tc.skill)
			require.Equal(t, tc.enabled, got.Enabled, "enabled")
			require.Equal(t, tc.scope, got.Scope, "scope")
			var listed bool
			for _, e := range r.Effective(tc.target) {
				if e.Name == tc.skill {
					listed = true
					require.Equal(t, got, e, "effective lists what Enabled says")
				}
			}
			require.Equal(t, tc.skill != "nope", listed)
		})
	}
}

func TestSettingsChangeTakesEffectAtOnce(t *testing.T) {
	r := newRegistry(t)
	addPackage(t, r, acmeTools)
	changes := 0
	r.Subscribe(func() { changes++ })
	web := skills.Target{Repo: "acme/web"}
	require.False(t, r.Enabled(web, "deploy-check").Enabled)
	require.NoError(t, r.Set(context.Background(), skills.Setting{Scope: scope(t, "repo:acme/web"), Name: "acme-tools", Enabled: skills.Enabled}))
	require.True(t, r.Enabled(web, "deploy-check").Enabled, "the next run sees it")
	require.True(t, r.PackageEnabled(web, "acme-tools").Enabled)
	require.Equal(t, 1, changes)
	// Inherit with no settings forgets the setting.
	require.NoError(t, r.Set(context.Background(), skills.Setting{Scope: scope(t, "repo:acme/web"), Name: "acme-tools"}))
	_, stored := r.StoredSetting(scope(t, "repo:acme/web"), "acme-tools")
	require.False(t, stored)
	require.False(t, r.Enabled(web, "deploy-check").Enabled)
}

func TestConfigSettingsWinAndAreNamed(t *testing.T) {
	r := newRegistry(t)
	addPackage(t, r, acmeTools)
	require.NoError(t, r.SetConfig([]skills.Setting{{Scope: scope(t, "repo:acme/web"), Name: "acme-tools", Enabled: skills.Enabled, Origin: "config.yaml:12"}}))
	err := r.Set(context.Background(), skills.Setting{Scope: scope(t, "repo:acme/web"), Name: "acme-tools", Enabled: skills.Disabled})
	require.EqualError(t, err, "config.yaml:12 sets acme-tools at repo:acme/web (enabled: true); change it there")
	_, err = r.Remove(context.Background(), "acme-tools")
	require.EqualError(t, err, "acme-tools cannot be uninstalled: config.yaml:12 sets acme-tools at repo:acme/web; remove that first")

	err = r.SetConfig([]skills.Setting{
		{Scope: skills.Global, Name: "acme-tool", Enabled: skills.Enabled, Origin: "config.yaml:3"},
		{Scope: skills.Global, Name: "deploy-check", Settings: map[string]any{"environment": "prod"}, Origin: "config.yaml:5"},
		{Scope: skills.Global, Name: "acme-tools", Settings: map[string]any{"environment": "prod"}, Origin: "config.yaml:7"},
		{Scope: skills.Global, Name: "acme-tools", Enabled: skills.Enabled, Origin: "config.yaml:9"},
		{Scope: skills.Global, Name: "release-notes", Enabled: skills.Disabled, Origin: "config.yaml:11"},
		{Scope: scope(t, "org:acme"), Name: "acme-tools", Settings: map[string]any{"environment": "prod"}, Origin: "config.yaml:13"},
	})
	var es skills.SettingErrors
	require.ErrorAs(t, err, &es)
	require.Len(t, es, 4)
	require.Equal(t, 3, es[0].Index)
	require.Equal(t, "acme-tools is set twice at global (first at config.yaml:7)", es[0].Msg)
	require.Equal(t, `no package or skill "acme-tool"; did you mean "acme-tools"?`, es[1].Msg)
	require.Equal(t, "deploy-check is a skill; settings belong to its package", es[2].Msg)
	require.Equal(t, 5, es[3].Index)
	require.Contains(t, es[3].Msg, "at org:acme: settings of package acme-tools: at /environment:")
	require.True(t, r.Enabled(skills.Target{Repo: "acme/web"}, "deploy-check").Enabled, "a refused config changes nothing")
}

func TestPackageSettingsMergeByScope(t *testing.T) {
	r := newRegistry(t)
	addPackage(t, r, acmeTools)
	ctx := context.Background()
	require.NoError(t, r.SetConfig([]skills.Setting{{Scope: skills.Global, Name: "acme-tools", Settings: map[string]any{"environment": "staging", "retries": int64(1)}, Origin: "config.yaml:4"}}))
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: scope(t, "repo:acme/web"), Name: "acme-tools", Enabled: skills.Enabled, Settings: map[string]any{"environment": "production"}}))
	require.Equal(t, map[string]any{"environment": "production", "retries": int64(1)}, r.Settings(skills.Target{Repo: "acme/web"}, "acme-tools"))
	require.Equal(t, map[string]any{"environment": "staging", "retries": int64(1)}, r.Settings(skills.Target{Repo: "acme/api"}, "acme-tools"))

	err := r.Set(ctx, skills.Setting{Scope: scope(t, "org:acme"), Name: "acme-tools", Settings: map[string]any{"retries": -1}})
	require.ErrorContains(t, err, "at org:acme: settings of package acme-tools: at /retries:")
	err = r.Set(ctx, skills.Setting{Scope: scope(t, "org:acme"), Name: "acme-tools", Settings: map[string]any{"environment": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}})
	require.ErrorContains(t, err, "looks like a credential")
}

// A credential is refused wherever it sits in a setting's value: inside an
// object, an array or a key, at any depth, as the CLI's --set key=<JSON>
// and the API's settings give them, so none is stored or shown.
func TestSettingsRefuseACredentialAtAnyDepth(t *testing.T) {
	r := newRegistry(t)
	addPackage(t, r, map[string]string{"manifest.yaml": `name: hooks
version: 1.0.0
description: Posts to a webhook.
config:
  type: object
  properties:
    headers: {type: object}
    tags: {type: array}
    retries: {type: integer}
`})
	ctx := context.Background()
	const token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	for _, set := range []string{
		`headers={"Authorization":"token ` + token + `"}`,
		`headers={"a":{"b":{"c":["` + token + `"]}}}`,
		`headers={"` + token + `":"x"}`,
		`tags=["ok","` + token + `"]`,
		`tags=[[[["` + token + `"]]]]`,
		`tags=[{"k":"xoxb-1234567890-1234567890123-abcdefghijklmnopqrstuvwx"}]`,
	} {
		key, value, _ := strings.Cut(set, "=")
		err := r.Set(ctx, skills.Setting{Scope: skills.Global, Name: "hooks", Enabled: skills.Enabled,
			Settings: map[string]any{key: skills.ParseSettingValue(value), "retries": int64(2)}})
		require.EqualError(t, err, "setting "+key+" of hooks looks like a credential; give secrets as ${ENV} in the skills section of the config, never through the API", set)
		_, stored := r.StoredSetting(skills.Global, "hooks")
		require.False(t, stored, "nothing stored: %s", set)
	}
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: skills.Global, Name: "hooks", Enabled: skills.Enabled,
		Settings: map[string]any{"headers": map[string]any{"X-Team": "web"}, "tags": []any{"a", int64(1)}}}), "settings without a credential")
}

func TestParseScope(t *testing.T) {
	for in, want := range map[string]string{
		"global": "global", "org:Acme": "org:acme", "repo:Acme/Web.js": "repo:acme/web.js", "agent:coder": "agent:coder",
	} {
		s, err := skills.ParseScope(in)
		require.NoError(t, err, in)
		require.Equal(t, want, s.String())
	}
	for _, bad := range []string{"", "global:x", "org:", "org:a/b", "repo:acme", "repo:acme/", "agent:Coder", "team:x", "repo:a/b/c", "repo:acme/.."} {
		_, err := skills.ParseScope(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "want global, org:<org>, repo:<owner>/<repo> or agent:<agent>", bad)
	}
}

func TestCheckEnableRefusesBeforeAnythingChanges(t *testing.T) {
	var asked []string
	r, err := skills.NewRegistry(t.Context(), skills.Options{
		Masker: bot.NewRedactor(),
		CheckEnable: func(p *skills.Package, at skills.Scope) error {
			asked = append(asked, p.Name()+"@"+at.String())
			if at.Kind == skills.ScopeAgent {
				return fmt.Errorf("tool changelog_since needs exec, which profile read-only of agent %s lacks", at.Name)
			}
			return nil
		},
	})
	require.NoError(t, err)
	ctx := context.Background()
	err = r.Add(ctx, loadPkg(t, acmeTools), skills.InstalledPackage{Name: "acme-tools", Version: "1.2.0", Digest: "sha256:x", Dir: "/x"},
		skills.Setting{Scope: scope(t, "agent:reviewer"), Name: "acme-tools", Enabled: skills.Enabled})
	require.EqualError(t, err, "tool changelog_since needs exec, which profile read-only of agent reviewer lacks")
	_, ok := r.Package("acme-tools")
	require.False(t, ok, "nothing installed")

	addPackage(t, r, acmeTools)
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: scope(t, "repo:acme/web"), Name: "acme-tools", Enabled: skills.Enabled}))
	err = r.Set(ctx, skills.Setting{Scope: scope(t, "agent:reviewer"), Name: "acme-tools", Enabled: skills.Enabled})
	require.ErrorContains(t, err, "profile read-only of agent reviewer lacks")
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: scope(t, "agent:reviewer"), Name: "deploy-check", Enabled: skills.Enabled}), "a skill's setting is not a package's")
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: scope(t, "agent:reviewer"), Name: "acme-tools", Enabled: skills.Disabled}), "disabling is never refused")

	err = r.SetConfig([]skills.Setting{{Scope: scope(t, "agent:ops"), Name: "acme-tools", Enabled: skills.Enabled, Origin: "config.yaml:3"}})
	var es skills.SettingErrors
	require.ErrorAs(t, err, &es)
	require.Equal(t, "enabled", es[0].Field)
	require.Contains(t, asked, "acme-tools@repo:acme/web")
}

func loadPkg(t *testing.T, files map[string]string) *skills.Package {
	t.Helper()
	p, err := skills.LoadPackage(mapFS(files), skills.LoadOptions{})
	require.NoError(t, err)
	return p
}

func TestExplicitSettingsAreFoundWhereTheyAreMade(t *testing.T) {
	r := newRegistry(t)
	addPackage(t, r, acmeTools)
	ctx := context.Background()
	require.NoError(t, r.SetConfig([]skills.Setting{{Scope: scope(t, "org:acme"), Name: "acme-tools", Enabled: skills.Enabled, Origin: "config.yaml:7"}}))
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: scope(t, "repo:acme/web"), Name: "deploy-check", Enabled: skills.Disabled}))
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: scope(t, "agent:coder"), Name: "release-notes", Enabled: skills.Disabled}))
	require.NoError(t, r.Set(ctx, skills.Setting{Scope: skills.Global, Name: "release-notes", Enabled: skills.Enabled}))

	cs, ok := r.ConfigSetting(scope(t, "org:acme"), "acme-tools")
	require.True(t, ok)
	require.Equal(t, "config.yaml:7", cs.Origin)
	_, ok = r.ConfigSetting(scope(t, "repo:acme/web"), "deploy-check")
	require.False(t, ok, "a setting the store holds is not the config's")
	_, ok = r.StoredSetting(scope(t, "org:acme"), "acme-tools")
	require.False(t, ok, "nor is the config's in the store")

	var got []string
	for _, sc := range r.Scopes() {
		got = append(got, sc.String())
	}
	require.Equal(t, []string{"global", "org:acme", "repo:acme/web", "agent:coder"}, got, "broadest first, each once")
}

func TestSettingValuesReadAsTyped(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"3", int64(3)},
		{"2.5", 2.5},
		{"true", true},
		{`"quoted"`, "quoted"},
		{"production", "production"},
		{"1 2", "1 2"},
		{"", ""},
		{`{"a":1,"b":[2,"x"]}`, map[string]any{"a": int64(1), "b": []any{int64(2), "x"}}},
		{"null", nil},
	} {
		require.Equal(t, tc.want, skills.ParseSettingValue(tc.in), tc.in)
	}
}

func FuzzParseSettingValue(f *testing.F) {
	for _, s := range []string{"3", "2.5", "1e999", "-0", "true", `"x"`, "production", `{"a":[1,{"b":null}]}`, "[1,", "  7 ", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v := skills.ParseSettingValue(text)
		b, err := json.Marshal(v)
		require.NoError(t, err, "a setting can always be stored")
		if s, ok := v.(string); ok && s == text {
			return
		}
		require.True(t, json.Valid([]byte(text)), "only JSON is read as JSON")
		var again any
		require.NoError(t, json.Unmarshal(b, &again))
		var orig any
		require.NoError(t, json.Unmarshal([]byte(text), &orig))
		require.Equal(t, orig, again, "read as the JSON it is")
	})
}

// Effective holds for thousands of generated cases against the rule as
// the documentation says it: from the most specific of the target's scopes
// (agent, repository, org — the repository's owner when no org is given —
// global), at each the skill's setting, then its package's; at one scope
// and name the config file's beats the store's; inherit is no setting; and
// with none, built-in packages are enabled and installed ones are not.
func TestEffectiveScopesGenerated(t *testing.T) {
	scopes := []string{"global", "org:acme", "org:other", "repo:acme/web", "repo:acme/api", "repo:other/web", "agent:coder", "agent:ops"}
	names := []string{"release-notes", "acme-tools", "deploy-check"}
	pkgOf := map[string]string{"release-notes": "release-notes", "deploy-check": "acme-tools"}
	targets := []skills.Target{
		{}, {Agent: "coder"}, {Repo: "acme/web", Agent: "coder"}, {Repo: "Acme/Web", Agent: "ops"}, {Repo: "acme/api"},
		{Org: "acme"}, {Org: "ACME", Agent: "coder"}, {Repo: "other/web", Agent: "docs"}, {Org: "other", Repo: "other/web"},
	}
	type key struct{ scope, name string }
	rng := rand.New(rand.NewPCG(17, 14))
	checked := 0
	for round := range 300 {
		store, config := map[key]string{}, map[key]string{}
		for range rng.IntN(7) {
			k := key{scopes[rng.IntN(len(scopes))], names[rng.IntN(len(names))]}
			store[k] = []string{"true", "false", "inherit"}[rng.IntN(3)]
		}
		for range rng.IntN(4) {
			k := key{scopes[rng.IntN(len(scopes))], names[rng.IntN(len(names))]}
			config[k] = []string{"true", "false"}[rng.IntN(2)]
		}
		r := newRegistry(t)
		addPackage(t, r, acmeTools)
		for k, v := range store {
			var e skills.Enablement
			require.NoError(t, e.UnmarshalText([]byte(v)))
			require.NoError(t, r.Set(context.Background(), skills.Setting{Scope: scope(t, k.scope), Name: k.name, Enabled: e}))
		}
		var list []skills.Setting
		for k, v := range config {
			var e skills.Enablement
			require.NoError(t, e.UnmarshalText([]byte(v)))
			list = append(list, skills.Setting{Scope: scope(t, k.scope), Name: k.name, Enabled: e, Origin: "config.yaml:1"})
		}
		require.NoError(t, r.SetConfig(list))
		for _, target := range targets {
			var chain []string
			if target.Agent != "" {
				chain = append(chain, "agent:"+target.Agent)
			}
			org := strings.ToLower(target.Org)
			if target.Repo != "" {
				chain = append(chain, "repo:"+strings.ToLower(target.Repo))
				if org == "" {
					org, _, _ = strings.Cut(strings.ToLower(target.Repo), "/")
				}
			}
			if org != "" {
				chain = append(chain, "org:"+org)
			}
			chain = append(chain, "global")
			for _, skill := range []string{"release-notes", "deploy-check"} {
				wantOn, wantScope := skill == "release-notes", "default"
			decide:
				for _, sc := range chain {
					for _, name := range []string{skill, pkgOf[skill]} {
						v, ok := config[key{sc, name}]
						if !ok {
							v, ok = store[key{sc, name}]
						}
						if ok && v != "inherit" {
							wantOn, wantScope = v == "true", sc
							break decide
						}
					}
				}
				got := r.Enabled(target, skill)
				require.Equal(t, wantOn, got.Enabled, "round %d, %s for %+v: store %v, config %v", round, skill, target, store, config)
				require.Equal(t, wantScope, got.Scope, "round %d, %s for %+v: store %v, config %v", round, skill, target, store, config)
				checked++
			}
		}
	}
	require.Equal(t, 300*9*2, checked)
}
