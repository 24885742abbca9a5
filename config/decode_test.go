package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "B_2": "b"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in, want string
		expanded bool
		err      string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha", expanded: true},
		{in: "x-${A}-${B_2}", want: "x-alpha-b", expanded: true},
		{in: "${UNSET}", want: "", expanded: true},
		{in: "${UNSET:-dflt}", want: "dflt", expanded: true},
		{in: "${EMPTY:-dflt}", want: "dflt", expanded: true},
		{in: "${A:-dflt}", want: "alpha", expanded: true},
		{in: "${UNSET:-}", want: "", expanded: true},
		{in: "${UNSET:-a:-b}", want: "a:-b", expanded: true},
		{in: "$$", want: "$", expanded: true},
		{in: "$${A}", want: "${A}", expanded: true},
		{in: "cost: $5", want: "cost: $5"},
		{in: "end$", want: "end$"},
		{in: "$A", want: "$A"},
		{in: "${", err: `unterminated variable reference "${"`},
		{in: "${A", err: `unterminated variable reference "${A"`},
		{in: "${}", err: `bad variable reference "${}": want ${NAME} or ${NAME:-default}`},
		{in: "${A B}", err: `bad variable reference "${A B}": want ${NAME} or ${NAME:-default}`},
		{in: "${A-x}", err: `bad variable reference "${A-x}": want ${NAME} or ${NAME:-default}`},
	}
	for _, tt := range tests {
		got, expanded, err := expand(tt.in, lookup)
		if tt.err != "" {
			require.EqualError(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Equal(t, tt.expanded, expanded, tt.in)
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A}", "$$", "${A:-b}", "a$", "${", "$${A}", "${A:-${B}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, expanded, err := expand(s, func(string) (string, bool) { return "V", true })
		if err != nil {
			return
		}
		if !strings.Contains(s, "$") {
			require.Equal(t, s, got)
			require.False(t, expanded)
		}
		if !expanded {
			require.Equal(t, s, got)
		}
	})
}

func TestJoinPath(t *testing.T) {
	require.Equal(t, "server", joinPath("", "server"))
	require.Equal(t, "routing.commands.deploy", joinPath("routing.commands", "deploy"))
	require.Equal(t, `models["gpt-4.1"]`, joinPath("models", "gpt-4.1"))
	require.Equal(t, `["a b"]`, joinPath("", "a b"))
	require.Equal(t, "models", parentPath(`models["gpt-4.1"]`))
	require.Equal(t, "routing.rules", parentPath("routing.rules[2]"))
	require.Equal(t, "", parentPath("workers"))
}
