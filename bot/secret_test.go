package bot_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/switchyard/switchyard/bot"
)

// TestSecretNeverLeaks prints a secret every way the code base might and
// checks the value appears in none of them.
func TestSecretNeverLeaks(t *testing.T) {
	const raw = "xoxb-very-secret-value"
	type holder struct {
		Token bot.Secret `json:"token" yaml:"token"`
		Ptr   *bot.Secret
	}
	s := bot.Secret(raw)
	h := holder{Token: s, Ptr: &s}

	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%T"} {
		outputs = append(outputs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h))
	}
	j, err := json.Marshal(h)
	require.NoError(t, err)
	y, err := yaml.Marshal(h)
	require.NoError(t, err)
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("x", slog.Any("secret", s), slog.Any("holder", h), "plain", s)
	logger2 := slog.New(slog.NewTextHandler(&logs, nil))
	logger2.Info("x", "secret", s)
	wrapped := fmt.Errorf("call failed with %v: %w", s, errors.New("boom"))
	outputs = append(outputs, string(j), string(y), logs.String(), wrapped.Error())

	for _, out := range outputs {
		require.NotContains(t, out, raw)
		require.NotContains(t, out, fmt.Sprintf("%x", raw))
	}
	require.Contains(t, string(j), `"[REDACTED]"`)
	require.Equal(t, raw, s.Reveal())
}

func TestSecretDecodesRawValue(t *testing.T) {
	var h struct {
		Token bot.Secret `yaml:"token" json:"token"`
	}
	require.NoError(t, yaml.Unmarshal([]byte("token: abc"), &h))
	require.Equal(t, "abc", h.Token.Reveal())
	require.NoError(t, json.Unmarshal([]byte(`{"token":"def"}`), &h))
	require.Equal(t, "def", h.Token.Reveal())
}
