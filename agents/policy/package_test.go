package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPackageScriptsAreHeldToTheRules runs npm, yarn and pnpm in a
// workspace whose package.json the repository holds: the scripts a
// command runs, with their pre and post scripts and an install's
// lifecycle scripts, are held to the profile's deny and approval rules,
// and a script that runs no denied command stays allowed.
func TestPackageScriptsAreHeldToTheRules(t *testing.T) {
	f := newFixture(t, deployerConfig())
	pkg := `{"name":"app","scripts":{"clean":"rm -rf build","prebuild":"npm run clean","build":"tsc",` +
		`"test":"jest","deploy":"kubectl apply -f k8s/","postinstall":"rm -rf build/cache","lint":"eslint ."}}`
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "package.json"), []byte(pkg), 0o644))
	for _, tc := range []struct{ cmd, want string }{
		{"npm run clean", "DAAAD"},
		{"npm run-script clean", "DAAAD"},
		{"npm run build", "DAAAD"},
		{"npm run deploy", "DDDAN"},
		{"npm install", "DAAAD"},
		{"npm ci", "DAAAD"},
		{"yarn clean", "DAAAD"},
		{"yarn run deploy", "DDDAN"},
		{"yarn", "DAAAD"},
		{"pnpm clean", "DAAAD"},
		{"pnpm run deploy", "DDDAN"},
		{`npm run "$TASK"`, "DDDAD"},
		{"npm test", "DAAAA"},
		{"npm run lint", "DAAAA"},
		{"yarn lint", "DAAAA"},
		{"pnpm test", "DAAAA"},
		{"npm ls", "DAAAA"},
		{"yarn add left-pad", "DAAAD"},
		{"cd src && npm run clean", "DAAAA"},
	} {
		got := make([]byte, len(corpusProfiles))
		for i, p := range corpusProfiles {
			got[i] = letter(f.bash(t, p, tc.cmd).Verdict)
		}
		require.Equal(t, tc.want, string(got), tc.cmd)
	}
}

// TestTaskFilesAreHeldToTheRules runs task runners and build tools in a
// workspace whose files of tasks the repository holds: what those files
// name is held to the profile's deny and approval rules, and a runner whose
// file names nothing the rules hold stays allowed.
func TestTaskFilesAreHeldToTheRules(t *testing.T) {
	f := newFixture(t, deployerConfig())
	for name, content := range map[string]string{
		"justfile":     "deploy:\n\tkubectl delete pod x\n",
		"Taskfile.yml": "version: '3'\ntasks:\n  ship:\n    cmds:\n      - kubectl apply -f k8s/\n",
		"Rakefile":     "task :clean do\n  sh 'rm -rf build'\nend\n",
		"tasks.py":     "from invoke import task\n@task\ndef deploy(c):\n    c.run('kubectl delete pod x')\n",
		"noxfile.py":   "import nox\n@nox.session\ndef lint(s):\n    s.run('ruff', 'check')\n",
		"conftest.py":  "import os\nos.system('kubectl delete pod x')\n",
		"Procfile":     "web: helm upgrade web chart/\n",
		".envrc":       "layout python\n",
		"src/justfile": "build:\n\tgo build ./...\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(f.ws, name), []byte(content), 0o644))
	}
	for _, tc := range []struct{ cmd, want string }{
		{"just deploy", "DAAAD"},
		{"just --list", "DAAAD"},
		{"task ship", "DAAAN"},
		{"rake clean", "DAAAD"},
		{"invoke deploy", "DAAAD"},
		{"pytest", "DAAAD"},
		{"pytest tests/", "DAAAD"},
		{"python3 -m pytest", "DAAAD"},
		{"python3 -B -m pytest -x", "DAAAD"},
		{"python3 -minvoke deploy", "DAAAD"},
		{"python3 -m nox -s lint", "DAAAA"},
		{"python3 -c 'print(1)' -m pytest", "DAAAA"},
		{"foreman start", "DAAAN"},
		{"nox -s lint", "DAAAA"},
		{"direnv exec . true", "DAAAA"},
		{"cd src && just build", "DAAAA"},
		{"printf 'x:\\n\\tkubectl delete pod x\\n' > src/justfile; cd src && just x", "DAAAD"},
	} {
		got := make([]byte, len(corpusProfiles))
		for i, p := range corpusProfiles {
			got[i] = letter(f.bash(t, p, tc.cmd).Verdict)
		}
		require.Equal(t, tc.want, string(got), tc.cmd)
	}
}
