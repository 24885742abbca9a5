package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// fixtureDir holds real payload shapes (testdata/slack at the top of the
// repository).
var fixtureDir = filepath.Join("..", "..", "testdata", "slack")

// offlineAdapter is an Adapter that knows who it is without auth.test, for
// tests and fuzzing that call the core directly.
func offlineAdapter(t testing.TB, apiURL string) (*Adapter, *testStore) {
	store := newTestStore(t)
	gates := map[string]bot.Gate{}
	a, err := New(Options{Mode: ModeHTTP, BotToken: "xoxb-test", SigningSecret: testSecret, APIURL: apiURL,
		Intake: bot.NewIntake(bot.IntakeOptions{Store: store, Router: mentionDecider{}, Gates: gates}), WorkItems: store,
		AllowedUsers: []string{"U1"}})
	require.NoError(t, err)
	gates[bot.SourceSlack] = a.Gate()
	a.self.Store(&identity{UserID: testBotUser, BotID: testBotID, TeamID: testTeam, Name: "switchyard"})
	return a, store
}

func TestFixturesParse(t *testing.T) {
	fs := newFakeSlack(t)
	a, _ := offlineAdapter(t, fs.apiURL())
	ctx := context.Background()
	var seen int
	err := filepath.WalkDir(fixtureDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		seen++
		rel, _ := filepath.Rel(fixtureDir, path)
		t.Run(rel, func(t *testing.T) {
			switch filepath.Base(filepath.Dir(path)) {
			case "events":
				// As shipped (some have an empty outer type) ...
				_, err := a.handleEventsPayload(ctx, raw, requestSig{})
				require.NoError(t, err)
				// ... and as Slack sends them, inside an event_callback.
				var env map[string]any
				require.NoError(t, json.Unmarshal(raw, &env))
				if _, ok := env["event"]; ok {
					env["type"] = "event_callback"
					cb, _ := json.Marshal(env)
					_, err = a.handleEventsPayload(ctx, cb, requestSig{})
					require.NoError(t, err)
				}
			case "slash-commands":
				var cmd slack.SlashCommand
				require.NoError(t, json.Unmarshal(raw, &cmd))
				// The placeholders leave command, channel and user empty:
				// refused as malformed, not a panic.
				_, err := a.handleCommand(ctx, cmd, raw, requestSig{})
				require.True(t, err == nil || errors.Is(err, errBadPayload), "%v", err)
			default:
				require.NoError(t, a.handleInteraction(ctx, raw))
			}
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, seen, 100, "fixtures missing from %s", fixtureDir)
}

func fixtureSeeds(f *testing.F, sub string) [][]byte {
	var out [][]byte
	_ = filepath.WalkDir(filepath.Join(fixtureDir, sub), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") && len(out) < 40 {
			if raw, err := os.ReadFile(path); err == nil {
				out = append(out, raw)
			}
		}
		return nil
	})
	return out
}

func FuzzEventsPayload(f *testing.F) {
	f.Add(eventBody("Ev1", mentionEvent("U1", "<@UBOT> @coder fix the flaky test", "1700000001.000100", "")))
	f.Add(eventBody("Ev2", msg(map[string]any{"channel": "D1", "channel_type": "im", "text": "coder: hi"})))
	f.Add(eventBody("Ev3", msg(map[string]any{"subtype": "message_changed", "message": map[string]any{"text": "x"}})))
	f.Add(eventBody("Ev4", msg(map[string]any{"subtype": "message_deleted", "previous_message": nil})))
	f.Add([]byte(`{"type":"url_verification","challenge":"c"}`))
	f.Add([]byte(`{"type":"event_callback","event":null}`))
	for _, raw := range fixtureSeeds(f, "events") {
		f.Add(raw)
	}
	a, store := offlineAdapter(f, "http://127.0.0.1:0/api/")
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, err := a.handleEventsPayload(context.Background(), raw, requestSig{})
		if err != nil {
			require.ErrorIs(t, err, errBadPayload)
			return
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		for _, ev := range store.events {
			require.Equal(t, bot.SourceSlack, ev.Source)
			require.NotNil(t, ev.Mentions)
			require.NotEmpty(t, ev.Thread.Channel)
			require.NotEmpty(t, ev.Thread.ThreadTS)
		}
		store.events = store.events[:0]
	})
}

func FuzzSlashCommand(f *testing.F) {
	f.Add(deployForm("trig-1", "https://hooks.example/commands/1").Encode())
	f.Add(url.Values{"command": {"/switchyard"}, "text": {"reset <https://a.slack.com/archives/C1/p1700000000000100>"},
		"channel_id": {"C1"}, "user_id": {"U1"}}.Encode())
	f.Add(url.Values{"command": {"/switchyard"}, "text": {"cancel wi_1"}, "channel_id": {"D1"}, "user_id": {"U9"}}.Encode())
	f.Add("command=%2F&text=%ZZ")
	fake := newFakeSlack(f)
	a, _ := offlineAdapter(f, fake.apiURL())
	h := a.Handler()
	f.Fuzz(func(t *testing.T, form string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, "/slack/commands", formType, form, time.Now(), testSecret))
		require.Contains(t, []int{http.StatusOK, http.StatusBadRequest}, w.Code)
		if w.Code == http.StatusOK {
			var resp commandResponse
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
			require.NotEmpty(t, resp.Text)
		}
	})
}
