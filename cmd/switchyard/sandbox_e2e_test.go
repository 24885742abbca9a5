package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// withoutBwrap is the daemon's environment with a PATH that holds
// everything the machine has except bubblewrap.
func withoutBwrap(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() == "bwrap" {
				continue
			}
			if _, err := os.Lstat(filepath.Join(bin, e.Name())); err == nil {
				continue // an earlier PATH entry wins
			}
			_ = os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(bin, e.Name()))
		}
	}
	var env []string
	for _, kv := range hermeticEnv() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+bin)
}

func TestWithoutBubblewrapBashIsRefusedAndEverythingElseWorks(t *testing.T) {
	fake := &fakeOpenAI{steps: []toolStep{
		{"bash", `{"command":"echo ran > ran.txt"}`},
		{"write_file", `{"path":"notes.txt","content":"written"}`},
		{"read_file", `{"path":"notes.txt"}`},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("models:\n  default:\n    provider: openai\n    base_url: %s/v1\n    model: fake\n", srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	p := serveEnv(t, dir, freeAddr(t), withoutBwrap(t))

	resp, err := http.Get("http://" + p.addr + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Regexp(t, regexp.MustCompile(`(?m)^switchyard_sandbox_available 0$`), string(metrics))

	r := run(t, dir, p.env(), "send", "--wait", "--thread", "nobwrap", "@coder run it")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "refused: bash cannot run: commands run only inside the sandbox (sandbox.mode: required), "+
		"and bubblewrap cannot run here: bwrap was not found in PATH. Install bubblewrap")
	require.Contains(t, r.stdout, "or set sandbox.mode: none in the config to run commands without a sandbox and accept the risk")
	require.Contains(t, r.stdout, "wrote 7 bytes to notes.txt", "other tools work")
	require.Contains(t, r.stdout, "\nwritten", "and read back")
	ran, _ := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "ran.txt"))
	require.Empty(t, ran, "bash did not run")

	resp, err = http.Get("http://" + p.addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the daemon is ready")

	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	<-p.done
	require.Regexp(t, `level=ERROR msg="sandbox unavailable: bash and command tools are refused until bubblewrap works`, p.log.String())
}
