package slack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestAppManifest keeps the manifest a team pastes in step with what the
// adapter handles.
func TestAppManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "slack-app-manifest.yaml"))
	require.NoError(t, err)
	var m struct {
		Features struct {
			SlashCommands []struct {
				Command string `yaml:"command"`
			} `yaml:"slash_commands"`
		} `yaml:"features"`
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				BotEvents []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
			Interactivity struct {
				Enabled bool `yaml:"is_enabled"`
			} `yaml:"interactivity"`
			SocketMode bool `yaml:"socket_mode_enabled"`
		} `yaml:"settings"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &m))

	var commands []string
	for _, c := range m.Features.SlashCommands {
		commands = append(commands, c.Command)
	}
	require.ElementsMatch(t, []string{"/deploy", "/switchyard"}, commands)
	require.Subset(t, m.OAuth.Scopes.Bot, []string{"app_mentions:read", "chat:write", "reactions:write", "channels:history",
		"groups:history", "im:history", "im:read", "users:read", "commands", "usergroups:read"})
	require.Subset(t, m.Settings.Events.BotEvents, []string{"app_mention", "message.channels", "message.groups", "message.im"})
	require.True(t, m.Settings.Interactivity.Enabled)
	require.True(t, m.Settings.SocketMode)
}
