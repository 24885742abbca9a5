package bot

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The literal prefilter must never reject a text the expression matches.
func TestTextPrefilterOfAlternations(t *testing.T) {
	tests := []struct {
		expr, text string
		want       bool
	}{
		{`(?i)\bincident-1\b|\bpage-1\b`, "PAGE-1 now", true},
		{`(?i)\bincident-1\b|\bpage-1\b`, "incident-12", false},
		{`(?i)\bincident-1\b|\bpage-1\b`, "nothing here", false},
		{`deploy (staging|prod)`, "please deploy prod", true},
		{`deploy (staging|prod)`, "deploy dev", false},
		{`(ab)+c`, "xxababc", true},
		{`a?b|c*`, "", true}, // c* matches the empty text: no literal is required
		{`(?i)straße`, "STRASSE", false},
		{`(?i)ſ`, "S", true}, // Unicode folding is left to the engine
	}
	for _, tt := range tests {
		tm, err := compileText(tt.expr)
		require.NoError(t, err)
		ev := &Event{Text: tt.text}
		in := &routeInput{ev: ev}
		require.Equal(t, tt.want, tm.match(in), "%s on %q", tt.expr, tt.text)
		require.Equal(t, tm.re.MatchString(tt.text), tm.match(in), "%s on %q agrees with the engine", tt.expr, tt.text)
	}
}
