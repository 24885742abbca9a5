package skills_test

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

func mapFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return fsys
}

func load(files map[string]string) (*skills.Package, error) {
	return skills.LoadPackage(mapFS(files), skills.LoadOptions{
		Masker: bot.NewRedactor(), Permissions: []string{"read", "write", "exec", "push"},
	})
}

// A package in each of the three manifest forms, with everything a manifest
// can contribute.
func TestLoadPackageEverything(t *testing.T) {
	agentFile := "---\nname: from-file\ndescription: From the file.\nmodel: small\ntemperature: 0.7\ntools: [read_file]\n---\nYou write release notes.\n"
	yamlManifest := `name: release-kit
version: 2.1.0
description: Release tooling.
author: Acme
dependencies:
  base-kit: ^1.2
permissions: [read, exec]
skills:
  - name: changelog
    description: Keep the changelog.
    instructions_file: skills/changelog.md
    allowed_tools: [read_file, changelog_lint]
    forbidden_tools: [write_file]
    execution_protocol:
      - Read CHANGELOG.md with read_file.
      - Lint it with changelog_lint.
    composability_rules: {requires: [release-notes]}
agents:
  - name: release-writer
    description: Writes releases.
    file: agents/writer.md
    temperature: 0.2
  - name: inline-agent
    description: An agent written inline.
    instructions: Be brief.
    profile: read-only
tools:
  - name: changelog_lint
    description: Lint the changelog.
    command: [bin/lint, --strict]
    input_schema: {type: object, properties: {file: {type: string}}}
    required_agent: release-writer
    permissions: [read]
    timeout: 30s
entrypoints:
  notes:
    description: Release notes on demand.
    handler: {agent: release-writer, skills: [changelog]}
    triggers: [github.release.published]
    commands: [/release-notes]
config:
  type: object
  properties: {channel: {type: string}}
`
	files := map[string]string{
		"skills/changelog.md": "# Changelog\nKeep it tidy.\n",
		"agents/writer.md":    agentFile,
		"bin/lint":            "#!/bin/sh\nexit 0\n",
	}
	for _, form := range []string{"manifest.yaml", "manifest.json", "plugin.json"} {
		t.Run(form, func(t *testing.T) {
			fs := map[string]string{}
			for k, v := range files {
				fs[k] = v
			}
			fs[form] = yamlManifest
			if strings.HasSuffix(form, ".json") {
				fs[form] = toJSON(t, yamlManifest)
			}
			p, err := load(fs)
			require.NoError(t, err)
			require.Equal(t, "release-kit", p.Name())
			require.Equal(t, form, p.ManifestFile)
			require.Equal(t, map[string]string{"base-kit": "^1.2"}, p.Manifest.Dependencies)

			require.Len(t, p.Skills, 1)
			s := p.Skills[0]
			require.Equal(t, "# Changelog\nKeep it tidy.", s.Instructions)
			require.Equal(t, "2.1.0", s.Version, "a skill's version defaults to its package's")
			require.Equal(t, "release-kit", s.Package)

			require.Len(t, p.Agents, 2)
			w := p.Agents[0]
			require.Equal(t, "release-writer", w.Name, "the manifest's name wins over the file's")
			require.Equal(t, "Writes releases.", w.Description)
			require.Equal(t, 0.2, *w.Temperature, "the manifest's value wins")
			require.Equal(t, "small", w.Model, "the file's value stands where the manifest says nothing")
			require.Equal(t, []string{"read_file"}, w.Tools)
			require.Equal(t, "You write release notes.", w.Instructions)
			require.Equal(t, "release-kit", w.Package)
			require.Equal(t, "Be brief.", p.Agents[1].Instructions)

			require.Len(t, p.Tools, 1)
			require.Equal(t, []string{"bin/lint", "--strict"}, p.Tools[0].Command)
			require.JSONEq(t, `{"type":"object","properties":{"file":{"type":"string"}}}`, string(p.Tools[0].InputSchema))

			require.Len(t, p.Entrypoints, 1)
			require.Equal(t, "notes", p.Entrypoints[0].Name)
			require.Equal(t, []string{"/release-notes"}, p.Entrypoints[0].Commands)

			require.NoError(t, p.CheckSettings(map[string]any{"channel": "#releases"}))
			require.ErrorContains(t, p.CheckSettings(map[string]any{"channel": 5}), "at /channel")
		})
	}
}

// toJSON converts a YAML manifest into JSON through the generic decoder.
func toJSON(t *testing.T, y string) string {
	t.Helper()
	var v struct {
		Doc json.RawMessage `yaml:"doc"`
	}
	indented := "doc:\n  " + strings.ReplaceAll(strings.TrimRight(y, "\n"), "\n", "\n  ") + "\n"
	d := yamldecodeNew(t, indented, &v)
	require.NoError(t, d)
	return string(v.Doc)
}

func TestDeclarativeAgent(t *testing.T) {
	p, err := load(map[string]string{
		"manifest.yaml": `name: code_reviewer
version: 1.0.0
description: Reviews code for style.
agent:
  integration_mode: tool
  model: small
  instructions: prompts/reviewer.md
  parameters: {temperature: 0.2}
  uses_tools: [read_file]
  limits: {max_turns: 10, max_tokens_per_invocation: 20000, time_budget_ms: 120000}
`,
		"prompts/reviewer.md": "You review code.\n",
	})
	require.NoError(t, err)
	require.Len(t, p.Agents, 1)
	a := p.Agents[0]
	require.Equal(t, "code_reviewer", a.Name)
	require.Equal(t, "Reviews code for style.", a.Description)
	require.Equal(t, "tool", a.Mode)
	require.Equal(t, "You review code.", a.Instructions)
	require.Equal(t, []string{"read_file"}, a.Tools)
	require.Equal(t, 10, a.MaxTurns)
	require.Equal(t, 20000, a.MaxTokens)
	require.Equal(t, "2m0s", a.TimeBudget.String())

	p, err = load(map[string]string{"manifest.json": `{"name": "inline", "version": "1.0.0", "description": "d",
		"agent": {"integration_mode": "handoff", "instructions": "You are inline."}}`})
	require.NoError(t, err)
	require.Equal(t, "You are inline.", p.Agents[0].Instructions)
}

func TestManifestErrors(t *testing.T) {
	base := "name: kit\nversion: 1.0.0\ndescription: d\n"
	skillWith := func(extra string) string {
		return base + "skills:\n  - name: s\n    description: d\n    instructions: i\n    execution_protocol: [step]\n" + extra
	}
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no manifest", map[string]string{"README.md": "x"}, "no manifest: a package has one of manifest.json, manifest.yaml, plugin.json at its top"},
		{"two manifests", map[string]string{"manifest.yaml": base, "plugin.json": "{}"}, "manifest.yaml and plugin.json: a package has one manifest; keep one"},
		{"unknown key suggests", map[string]string{"manifest.yaml": base + "dependancies: {}\n"}, `manifest.yaml:4: dependancies: unknown key; did you mean "dependencies"?`},
		{"duplicate key", map[string]string{"manifest.yaml": base + "name: again\n"}, "manifest.yaml:4: name: duplicate key (first on line 1)"},
		{"JSON position", map[string]string{"manifest.json": "{\n  \"name\": \"kit\",\n  \"version\": 1\n}"}, `manifest.json:3: version: "1" is not a semantic version`},
		{"JSON syntax", map[string]string{"plugin.json": "{\n  \"name\": \"kit\",\n}"}, "plugin.json:3: invalid character '}' looking for beginning of object key string (column 1)"},
		{"name", map[string]string{"manifest.yaml": "name: Kit\nversion: 1.0.0\ndescription: d\n"}, `manifest.yaml:1: name: "Kit" is not a valid package name`},
		{"version", map[string]string{"manifest.yaml": "name: kit\nversion: one\ndescription: d\n"}, `manifest.yaml:2: version: "one" is not a semantic version`},
		{"missing description", map[string]string{"manifest.yaml": "name: kit\nversion: 1.0.0\n"}, "manifest.yaml:1: description: required"},
		{"dependency range", map[string]string{"manifest.yaml": base + "dependencies: {other: banana}\n"}, `manifest.yaml:4: dependencies.other: "banana" is not a version range`},
		{"allowed_tools required", map[string]string{"manifest.yaml": skillWith("")}, "manifest.yaml:5: skills[0].allowed_tools: required"},
		{"skill file outside", map[string]string{"manifest.yaml": base + "skills:\n  - name: s\n    description: d\n    instructions_file: ../etc/passwd\n    allowed_tools: []\n    execution_protocol: [x]\n"}, `manifest.yaml:7: skills[0].instructions_file: "../etc/passwd" is outside the package`},
		{"skill file absolute", map[string]string{"manifest.yaml": base + "skills:\n  - name: s\n    description: d\n    instructions_file: /etc/passwd\n    allowed_tools: []\n    execution_protocol: [x]\n"}, `manifest.yaml:7: skills[0].instructions_file: "/etc/passwd" is outside the package`},
		{"skill file missing", map[string]string{"manifest.yaml": base + "skills:\n  - name: s\n    description: d\n    instructions_file: s.md\n    allowed_tools: []\n    execution_protocol: [x]\n"}, "manifest.yaml:7: skills[0].instructions_file: s.md is not in the package"},
		{"duplicate skill", map[string]string{"manifest.yaml": skillWith("    allowed_tools: []\n  - name: s\n    description: d\n    instructions: i\n    allowed_tools: []\n    execution_protocol: [x]\n")}, `manifest.yaml:10: skills[1].name: skill "s" is defined twice (first at skills[0].name)`},
		{"bad tool name", map[string]string{"manifest.yaml": skillWith("    allowed_tools: [rm -rf]\n")}, `manifest.yaml:9: skills[0].allowed_tools: "rm -rf" is not a valid tool name`},
		{"a skill requiring itself", map[string]string{"manifest.yaml": skillWith("    allowed_tools: []\n    composability_rules: {requires: [s]}\n")}, "manifest.yaml:10: skills[0].composability_rules.requires: a skill cannot name itself"},
		{"tool without permissions", map[string]string{"manifest.yaml": base + "tools:\n  - name: t\n    description: d\n    command: [true]\n"}, "manifest.yaml:5: tools[0].permissions: required"},
		{"tool permission the package lacks", map[string]string{"manifest.yaml": base + "permissions: [read]\ntools:\n  - name: t\n    description: d\n    command: [true]\n    permissions: [exec]\n"}, `manifest.yaml:9: tools[0].permissions: "exec" is not among the package's permissions (read)`},
		{"unknown permission", map[string]string{"manifest.yaml": base + "permissions: [root]\n"}, `manifest.yaml:4: permissions: unknown permission "root"`},
		{"tool program outside", map[string]string{"manifest.yaml": base + "permissions: [exec]\ntools:\n  - name: t\n    description: d\n    command: [../bin/x]\n    permissions: [exec]\n"}, `manifest.yaml:8: tools[0].command: "../bin/x" is outside the package`},
		{"tool program absolute", map[string]string{"manifest.yaml": base + "permissions: [exec]\ntools:\n  - name: t\n    description: d\n    command: [/usr/bin/python3]\n    permissions: [exec]\n"}, `manifest.yaml:8: tools[0].command: "/usr/bin/python3" is an absolute path`},
		{"tool program missing", map[string]string{"manifest.yaml": base + "permissions: [exec]\ntools:\n  - name: t\n    description: d\n    command: [bin/x]\n    permissions: [exec]\n"}, "manifest.yaml:8: tools[0].command: bin/x is not in the package"},
		{"tool schema not an object", map[string]string{"manifest.yaml": base + "permissions: [read]\ntools:\n  - name: t\n    description: d\n    command: [cat]\n    permissions: [read]\n    input_schema: {type: string}\n"}, "manifest.yaml:10: tools[0].input_schema: must be the schema of an object"},
		{"agent_ prefix", map[string]string{"manifest.yaml": base + "permissions: [read]\ntools:\n  - name: agent_x\n    description: d\n    command: [cat]\n    permissions: [read]\n"}, "manifest.yaml:6: tools[0].name: the agent_ prefix is reserved"},
		{"agent needs instructions", map[string]string{"manifest.yaml": base + "agents:\n  - name: a\n    description: d\n"}, "manifest.yaml:5: agents[0]: say what the agent does"},
		{"agent file outside", map[string]string{"manifest.yaml": base + "agents:\n  - name: a\n    description: d\n    system_prompt_file: ../../x.md\n"}, `manifest.yaml:7: agents[0].system_prompt_file: "../../x.md" is outside the package`},
		{"agent file's own error at its line", map[string]string{"manifest.yaml": base + "agents:\n  - name: a\n    file: a.md\n", "a.md": "---\ndescription: d\ncolour: red\n---\nx"}, "a.md:3: colour: unknown key"},
		{"bad entry point command", map[string]string{"manifest.yaml": base + "entrypoints:\n  e:\n    handler: {agent: coder}\n    commands: [release-notes]\n"}, `manifest.yaml:7: entrypoints.e.commands: "release-notes" is not a chat command`},
		{"bad trigger", map[string]string{"manifest.yaml": base + "entrypoints:\n  e:\n    handler: {agent: coder}\n    triggers: [pr_created]\n"}, `manifest.yaml:7: entrypoints.e.triggers: "pr_created" is not an event kind`},
		{"entry point with nothing", map[string]string{"manifest.yaml": base + "entrypoints:\n  e:\n    handler: {agent: coder}\n"}, "manifest.yaml:5: entrypoints.e: give triggers"},
		{"config not a schema", map[string]string{"manifest.yaml": base + "config: {type: 12}\n"}, "manifest.yaml:4: config: not a JSON schema"},
		{"config referring elsewhere", map[string]string{"manifest.yaml": base + "config: {$ref: 'file:///etc/passwd'}\n"}, "manifest.yaml:4: config: not a JSON schema"},
		{"a secret in the manifest", map[string]string{"manifest.yaml": base + "config: {type: object, default: {token: ghp_0123456789abcdefghijklmnopqrstuvwxyzAB}}\n"}, "manifest.yaml:4: looks like a credential; a package never holds secrets"},
		{"a secret in an instructions file", map[string]string{"manifest.yaml": skillWith("    allowed_tools: []\n")[:0] + base + "skills:\n  - name: s\n    description: d\n    instructions_file: s.md\n    allowed_tools: []\n    execution_protocol: [x]\n", "s.md": "Use this:\n\nxoxb-1234567890-1234567890123-abcdefghijklmnopqrstuvwx\n"}, "s.md:3: looks like a credential"},
		{"aliases", map[string]string{"manifest.yaml": "name: &n kit\nversion: 1.0.0\ndescription: *n\n"}, "manifest.yaml:3: description: YAML aliases are not supported here"},
		{"declarative agent without mode", map[string]string{"manifest.yaml": base + "agent:\n  instructions: x\n"}, "manifest.yaml:4: agent.integration_mode: required"},
		{"declarative agent turns past the cap", map[string]string{"manifest.yaml": base + "agent:\n  integration_mode: tool\n  instructions: x\n  limits: {max_turns: 5000}\n"}, "manifest.yaml:7: agent.limits.max_turns: want 1 to 1000, got 5000"},
		{"declarative agent turns below one", map[string]string{"manifest.yaml": base + "agent:\n  integration_mode: tool\n  instructions: x\n  limits:\n    max_turns: -1\n"}, "manifest.yaml:8: agent.limits.max_turns: want 1 to 1000, got -1"},
		{"declarative agent tokens below one", map[string]string{"manifest.yaml": base + "agent:\n  integration_mode: tool\n  instructions: x\n  limits: {max_tokens_per_invocation: -5}\n"}, "manifest.yaml:7: agent.limits.max_tokens_per_invocation: want 1 to 2147483647, got -5"},
		{"declarative agent tokens past the cap", map[string]string{"manifest.yaml": base + "agent:\n  integration_mode: tool\n  instructions: x\n  limits: {max_tokens_per_invocation: 3000000000}\n"}, "manifest.yaml:7: agent.limits.max_tokens_per_invocation: want 1 to 2147483647, got 3000000000"},
		{"declarative agent prompt missing", map[string]string{"manifest.yaml": base + "agent:\n  integration_mode: tool\n  instructions: prompts/x.md\n"}, "manifest.yaml:6: agent.instructions: prompts/x.md is not in the package"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.files)
			require.Error(t, err)
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				found = found || strings.HasPrefix(line, tc.want)
			}
			require.True(t, found, "got  %s\nwant %s", err, tc.want)
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	for _, s := range []string{
		"name: kit\nversion: 1.0.0\ndescription: d\n",
		"{\"name\": \"kit\", \"version\": \"1.0.0\", \"description\": \"d\", \"skills\": [{\"name\": \"s\"}]}",
		"name: kit\nversion: 1.0.0\ndescription: d\nskills:\n  - name: s\n    description: d\n    instructions: i\n    allowed_tools: [a]\n    execution_protocol: [x]\n",
		"name: kit\nversion: 1.0.0\ndescription: d\nagent: {integration_mode: tool, instructions: x}\n",
		"entrypoints: {e: {handler: {agent: a}, commands: [/x]}}\n",
		"config: {type: object, properties: {a: {type: string}}}\n",
		"tools: [{name: t, command: [x], permissions: [read], input_schema: {type: object}}]\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		file := "manifest.yaml"
		if isJSON {
			file = "manifest.json"
		}
		m, err := skills.ParseManifest(file, data)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				require.True(t, strings.HasPrefix(line, file), line)
			}
			return
		}
		require.True(t, skills.ValidName(m.Name))
		require.NotEmpty(t, m.Description)
		for _, s := range m.Skills {
			require.True(t, skills.ValidName(s.Name))
			require.NotNil(t, s.AllowedTools, "a valid skill always has its allow list")
		}
		_, err = json.Marshal(m)
		require.NoError(t, err)
	})
}
