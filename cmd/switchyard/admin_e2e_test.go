package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// runIn runs the binary with stdin.
func runIn(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{out.String(), errb.String(), code}
}

func TestHashPasswordMakesAHashTheConfigTakes(t *testing.T) {
	dir := t.TempDir()
	r := runIn(t, dir, "correct horse battery\n", "admin", "hash-password")
	require.Equal(t, 0, r.code, r.stderr)
	hash := strings.TrimSpace(r.stdout)
	require.True(t, strings.HasPrefix(hash, "$2a$12$"), hash)
	require.NoError(t, bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse battery")))
	require.NotContains(t, r.stdout+r.stderr, "correct horse")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"),
		[]byte("admin:\n  users:\n    - name: ana\n      password_hash: "+hash+"\n"), 0o600))
	r = run(t, dir, nil, "config", "check", "--config", "config.yaml")
	require.Equal(t, 0, r.code, r.stderr)

	for _, tc := range []struct{ stdin, want string }{
		{"", "no password on standard input: write it as its first line"},
		{"\n", "no password on standard input: write it as its first line"},
		{strings.Repeat("x", 73) + "\n", "password too long: bcrypt reads at most 72 bytes"},
	} {
		r = runIn(t, dir, tc.stdin, "admin", "hash-password")
		require.Equal(t, 2, r.code)
		require.Contains(t, r.stderr, tc.want)
		require.Empty(t, r.stdout)
	}
}
