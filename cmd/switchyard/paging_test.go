package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// The next page's command works pasted into a shell: the same flags, the
// same values, and the cursor, whatever characters they hold.
func TestPrintNextIsACommandAShellRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		args   []string
		cursor string
		want   []string
	}{
		{"no flags", nil, "abc", []string{"--cursor", "abc"}},
		{"flag values", []string{"--thread", "pages", "--limit", "2"}, "abc",
			[]string{"--limit", "2", "--thread", "pages", "--cursor", "abc"}},
		{"a value with spaces and quotes", []string{"--thread", "it's a $HOME `x`"}, "c",
			[]string{"--thread", "it's a $HOME `x`", "--cursor", "c"}},
		{"a cursor a shell would split or expand", nil, "a b;c&d|e$(f)'g\"*",
			[]string{"--cursor", "a b;c&d|e$(f)'g\"*"}},
		{"json asked for", []string{"--json"}, "c", []string{"--json", "--cursor", "c"}},
		{"json said not to", []string{"--json=false", "--limit", "1"}, "c",
			[]string{"--json=false", "--limit", "1", "--cursor", "c"}},
		{"the server's address", []string{"--server", "http://h:1/x y"}, "c",
			[]string{"--server", "http://h:1/x y", "--cursor", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var limit int
			var cursor, thread string
			var asJSON bool
			root := &cobra.Command{Use: "switchyard"}
			var server string
			root.PersistentFlags().StringVar(&server, "server", "", "")
			var stderr bytes.Buffer
			list := &cobra.Command{Use: "list", RunE: func(cmd *cobra.Command, _ []string) error {
				printNext(&stderr, cmd, tc.cursor)
				return nil
			}}
			list.Flags().StringVar(&thread, "thread", "", "")
			list.Flags().BoolVar(&asJSON, "json", false, "")
			addPagingFlags(list, &limit, &cursor, 1000)
			root.AddCommand(list)
			root.SetArgs(append([]string{"list"}, tc.args...))
			require.NoError(t, root.Execute())

			more, ok := strings.CutPrefix(stderr.String(), "More: ")
			require.True(t, ok, stderr.String())
			line, ok := strings.CutPrefix(strings.TrimSuffix(more, "\n"), "switchyard list ")
			require.True(t, ok, more)
			// The shell reads the line as it would pasted, and prints the
			// words it got, one a line.
			out, err := exec.Command(sh, "-c", `printf '%s\n' `+line).Output()
			require.NoError(t, err, line)
			require.Equal(t, tc.want, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"), line)
		})
	}
}
