package bot_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// TestContinuationTextCutsWholeCharacters: what a run carries over is cut
// at a character, never inside one, however long the earlier text.
func TestContinuationTextCutsWholeCharacters(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct{ name, text string }{
		{"ascii", strings.Repeat("a", 500)},
		{"two bytes", "a" + strings.Repeat("é", 300)},
		{"four bytes", "ab" + strings.Repeat("🚀", 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bot.Continuation{SessionKey: "local:t", At: at,
				Earlier: []bot.EarlierWork{{ID: "wi_1", Agent: "lead", Status: bot.StatusDone, Text: tc.text, Summary: tc.text, At: at}},
				Open:    []bot.OpenRecord{{ID: "run_1", Kind: "subagent", Status: "running", Summary: tc.text, Since: at.Add(-time.Minute)}},
			}
			text := c.Text()
			require.True(t, utf8.ValidString(text), "%q", text)
			require.Contains(t, text, "…")
			require.Contains(t, text, "- subagent run_1 [running, started 1m ago] ")
		})
	}
}
