package config_test

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/switchyard/switchyard/config"
)

func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../config.example.yaml")
	require.NoError(f, err)
	f.Add(example)
	f.Add([]byte(compileYAML))
	f.Add([]byte("workers: ${W:-3}\nserver: {listen: \"${L}\", console: false}\n"))
	f.Add([]byte("models:\n  a: &a {provider: openai, model: m}\n  b: {<<: *a, timeout: 1m}\n"))
	f.Add([]byte("github:\n  app_id: 1\n  private_key: k\n  webhook_secret: s\n"))
	f.Add([]byte("slack: {mode: http, bot_token: xoxb-1, signing_secret: s, allowed_users: [U1]}\n"))
	f.Add([]byte("schedules:\n  - {name: a, cron: '@every 1h', agent: triage, text: t, thread: 'github:a/b#1'}\n"))
	f.Add([]byte("routing:\n  rules:\n    - name: x\n      agent: coder\n      match: {text: '(', kinds: ['[']}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("- 1\n---\n- 2\n"))
	f.Add([]byte("server:\n  <<: [1, {listen: 'x:1'}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse("f.yaml", data)
		if err != nil {
			require.True(t, config.IsInvalid(err), "%v", err)
			var errs config.Errors
			require.True(t, errors.As(err, &errs))
			for _, e := range errs {
				require.Equal(t, "f.yaml", e.File)
				require.NotEmpty(t, e.Msg)
			}
			return
		}
		require.Equal(t, "f.yaml", c.Source)
		_, _ = c.Compile(builtinAgents())
		_, err = yaml.Marshal(c)
		require.NoError(t, err)
	})
}
