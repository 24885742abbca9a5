package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/integrations/local"
)

// A thread keeps its agent across messages, but not past a reload that
// took the agent out of the config, nor past a reset: the next message
// there routes afresh and runs, where it used to go to an agent no run
// could start (its reply "agent is not defined"), or carried the agent of
// before the reset over.
func TestAThreadForgetsAnAgentTheReloadRemovedAndWorkBeforeAReset(t *testing.T) {
	dir := t.TempDir()
	agentsDir := filepath.Join(dir, "agents")
	require.NoError(t, os.Mkdir(agentsDir, 0o700))
	helper := filepath.Join(agentsDir, "helper.md")
	require.NoError(t, os.WriteFile(helper, []byte("---\nname: helper\ndescription: Helps.\n---\nHelp.\n"), 0o600))
	f := newConfigFile(t, "agents_dir: "+agentsDir+"\n")
	load := func(ctx context.Context) (*daemon.Setup, error) {
		return daemon.Load(ctx, daemon.LoadOptions{Path: f.path, Getenv: noModelEnv, Override: func(c *config.Config) {
			c.DataDir, c.Server.Listen = filepath.Join(dir, "data"), "127.0.0.1:0"
		}})
	}
	r := start(t, func(o *daemon.Options) {
		s, err := load(context.Background())
		require.NoError(t, err)
		o.Setup, o.Reload = s, load
		o.NewRunner = func(daemon.RunnerDeps) (bot.Runner, error) {
			return runnerFunc(func(_ context.Context, req bot.RunRequest, _ bot.Progress) (bot.RunResult, error) {
				return bot.RunResult{Status: bot.ResultSuccess, Reply: req.Agent + " answered"}, nil
			}), nil
		}
	})
	send := func(thread, text string) local.MessageResponse {
		t.Helper()
		code, body := r.do(t, "POST", "/api/v1/messages", fmt.Sprintf(`{"thread":%q,"text":%q}`, thread, text))
		require.Equal(t, http.StatusAccepted, code, string(body))
		var res local.MessageResponse
		require.NoError(t, json.Unmarshal(body, &res))
		return res
	}
	replies := func(thread string, n int) []string {
		t.Helper()
		var out []string
		require.Eventually(t, func() bool {
			code, body := r.do(t, "GET", "/api/v1/threads/"+thread+"/messages", "")
			require.Equal(t, 200, code)
			var msgs []local.ThreadMessage
			require.NoError(t, json.Unmarshal(body, &msgs))
			out = out[:0]
			for _, m := range msgs {
				if m.Kind == "reply" {
					out = append(out, m.Text)
				}
			}
			return len(out) >= n
		}, 10*time.Second, 20*time.Millisecond)
		return out
	}

	require.Equal(t, "helper", send("t", "@helper look at the login test").Route.Agent)
	require.Equal(t, []string{"helper answered"}, replies("t", 1))
	require.Equal(t, bot.RouteThread, send("t", "and the signup test").Route.Kind)
	require.Equal(t, []string{"helper answered", "helper answered"}, replies("t", 2))

	// The helper leaves the config.
	require.NoError(t, os.Remove(helper))
	code, body := r.do(t, "POST", "/api/v1/config/reload", "")
	require.Equal(t, 200, code, string(body))
	next := send("t", "any news?")
	require.NotEqual(t, "helper", next.Route.Agent)
	require.Equal(t, bot.RouteDefault, next.Route.Kind)
	require.True(t, strings.HasSuffix(next.Route.Reason, "; @helper, who had work in this thread, is no agent now"), next.Route.Reason)
	got := replies("t", 3)
	require.Equal(t, next.Route.Agent+" answered", got[2], "the reply runs, with an agent that is there")

	// A reset thread starts afresh.
	ops := send("r", "@ops roll back the release")
	require.Equal(t, "ops", ops.Route.Agent)
	replies("r", 1)
	require.Equal(t, bot.RouteThread, send("r", "thanks").Route.Kind)
	replies("r", 2)
	code, body = r.do(t, "POST", "/api/v1/threads/local:r/reset", "")
	require.Equal(t, 200, code, string(body))
	fresh := send("r", "let's start over")
	require.Equal(t, bot.RouteDefault, fresh.Route.Kind, "nothing from before the reset carries over, its agent neither")
}
