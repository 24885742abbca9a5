package slack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// Another workspace can send requests this app's secret signs only where
// someone installed the app there; its people are not the ones the allow
// lists and access rules speak of. Over every combination of the
// workspace and organisation an event's envelope and its authorization
// name, and a command's form, for a bot installed in a workspace and in an
// Enterprise Grid organisation: only requests of the bot's own
// installation make anything; the others store nothing and run nothing.
func TestRequestsOfAnotherInstallationDoNothing(t *testing.T) {
	const ourEnterprise = "E1"
	teams := []string{"", testTeam, "T9"}
	enterprises := []string{"", ourEnterprise, "E9"}
	events, commands := 0, 0
	for _, grid := range []bool{false, true} {
		t.Run(fmt.Sprintf("grid %v", grid), func(t *testing.T) {
			fs := newFakeSlack(t)
			self := ""
			if grid {
				fs.enterprise, self = ourEnterprise, ourEnterprise
			}
			resetter := &countingResetter{}
			h := newHarnessWith(t, ModeHTTP, fs, newTestStore(t), func(o *Options) { o.Resetter = resetter })
			ours := func(team, enterprise string) bool {
				return team == testTeam || team == "" && enterprise == "" || self != "" && enterprise == self
			}

			wantItems, n := 0, 0
			for _, team := range teams {
				for _, ent := range enterprises {
					for _, auth := range [][2]string{{}, {testTeam, self}, {"T9", "E9"}} {
						n++
						events++
						env := map[string]any{"token": "x", "team_id": team, "enterprise_id": ent, "api_app_id": "A1", "type": "event_callback",
							"event_id": fmt.Sprintf("Ev%d", n), "event": mentionEvent("U1", "<@UBOT> @coder fix it", fmt.Sprintf("1700000001.%06d", n), "")}
						if auth != [2]string{} {
							env["authorizations"] = []map[string]any{{"team_id": auth[0], "enterprise_id": auth[1], "user_id": testBotUser, "is_bot": true}}
						}
						body, err := json.Marshal(env)
						require.NoError(t, err)
						w := h.serve(t, "/slack/events", jsonType, string(body), nil)
						require.Equal(t, http.StatusOK, w.Code)
						accepted := ours(team, ent) || auth != [2]string{} && ours(auth[0], auth[1])
						if accepted {
							wantItems++
						}
						items, ingress, _, _ := h.store.snapshot()
						require.Len(t, items, wantItems, "team %q enterprise %q authorization %v", team, ent, auth)
						require.Empty(t, ingress)
					}
				}
			}

			resets, deploys := 0, 0
			for _, team := range teams {
				for _, ent := range enterprises {
					for _, sub := range []string{"reset slack:T1/C1/1700000000.000001", "deploy"} {
						n++
						commands++
						form := url.Values{"team_id": {team}, "enterprise_id": {ent}, "channel_id": {"C1"}, "user_id": {"U1"},
							"command": {"/switchyard"}, "text": {sub}, "trigger_id": {fmt.Sprintf("trig-%d", n)}}
						if sub == "deploy" {
							form.Set("command", "/deploy")
							form.Set("text", "prod")
						}
						w := h.serve(t, "/slack/commands", formType, form.Encode(), nil)
						require.Equal(t, http.StatusOK, w.Code)
						var resp commandResponse
						require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
						if !ours(team, ent) {
							require.Equal(t, "This Switchyard works for another Slack workspace, so `"+form.Get("command")+"` does nothing here.", resp.Text)
							continue
						}
						require.NotContains(t, resp.Text, "another Slack workspace")
						if sub == "deploy" {
							deploys++
						} else {
							resets++
						}
					}
				}
			}
			require.Equal(t, resets, resetter.calls())
			openers := 0
			for _, team := range []string{testTeam, "T9"} {
				msgs, err := h.store.ListOutbox(t.Context(), bot.SlackThread(team, "C1", "").Key())
				require.NoError(t, err)
				openers += len(msgs)
			}
			require.Equal(t, deploys, openers, "a thread is opened for each /deploy of the bot's own installation only")
		})
	}
	t.Logf("%d events and %d commands", events, commands)
}
