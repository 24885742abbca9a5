package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// quickModel is an OpenAI-compatible model that answers at once, without
// tools: the runs in the crash test are short, so kills land while the
// outbox is posting rather than while a model thinks.
type quickModel struct{}

func (quickModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	time.Sleep(20 * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"fake",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done, all checked."}}],
		"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
}

// metric reads one unlabelled value from the daemon's /metrics.
func metric(t *testing.T, addr, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// slackMention posts an app_mention event in channel.
func slackMention(t *testing.T, addr, channel, eventID, ts, text string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": eventID, "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "app_mention", "user": "UANA01", "text": text, "ts": ts, "channel": channel, "event_ts": ts},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, postSlack(t, addr, "/slack/events", "application/json", string(body)))
}

// slackCommand posts "/deploy text" in channel.
func slackCommand(t *testing.T, addr, channel, trigger, text string) {
	t.Helper()
	form := url.Values{"team_id": {"T1"}, "channel_id": {channel}, "user_id": {"UANA01"}, "command": {"/deploy"},
		"text": {text}, "trigger_id": {trigger}, "response_url": {"http://127.0.0.1:1/hooks"}}
	require.Equal(t, http.StatusOK, postSlack(t, addr, "/slack/commands", "application/x-www-form-urlencoded", form.Encode()))
}

// TestSlackMessagesSurviveCrashesExactlyOnce is the outbox's acceptance
// test: the daemon, with Slack over HTTP against a fake whose
// chat.postMessage is slow, is stopped 20 times right as a post reaches
// Slack, with kill -9 and, separately, with SIGTERM, and started again. In
// the end every work item shows exactly one status message, finished, and
// one reply in its thread, each command exactly one opener, and each work
// item's 👀, status, reply and ✅ arrived in that order.
func TestSlackMessagesSurviveCrashesExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"kill -9", syscall.SIGKILL}, {"SIGTERM", syscall.SIGTERM}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			crashTest(t, tc.sig)
		})
	}
}

func crashTest(t *testing.T, sig syscall.Signal) {
	const rounds = 20
	model := httptest.NewServer(quickModel{})
	t.Cleanup(model.Close)
	web := &slackWeb{postDelay: 150 * time.Millisecond, posted: make(chan struct{}, 1)}
	slackSrv := httptest.NewServer(web)
	t.Cleanup(slackSrv.Close)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`models:
  default: {provider: openai, base_url: %s/v1, model: fake}
slack:
  mode: http
  bot_token: xoxb-e2e
  signing_secret: %s
  api_url: %s/api/
`, model.URL, e2eSigningSecret, slackSrv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))

	var mentions, triggers []string
	start := time.Now()
	for i := range rounds {
		// A fresh port each time: another test may take the last one
		// between a kill and the next start.
		p := serve(t, dir, freeAddr(t))
		select {
		case <-web.posted: // a post of the previous process, answered or not
		default:
		}
		// Several channels, as a team has: Slack takes about a message a
		// second per channel, and the sink keeps to that.
		// Each round brings a mention or a command.
		channel := fmt.Sprintf("C%d", i%5+1)
		if i%2 == 0 {
			ts := fmt.Sprintf("1799000000.%06d", i+1)
			slackMention(t, p.addr, channel, fmt.Sprintf("EvCrash%d", i), ts, fmt.Sprintf("<@UBOT> @triage check %d", i))
			mentions = append(mentions, ts)
		} else {
			trigger := fmt.Sprintf("trig-crash-%d", i)
			slackCommand(t, p.addr, channel, trigger, fmt.Sprintf("staging-%d", i))
			triggers = append(triggers, trigger)
		}

		select {
		case <-web.posted:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: nothing was posted\n%s", i, p.log)
		}
		require.NoError(t, p.cmd.Process.Signal(sig))
		err := p.wait()
		if sig == syscall.SIGTERM {
			require.NoError(t, err, "exit status 0 after SIGTERM\n%s", p.log)
		}
	}

	crashed := time.Now()
	t.Logf("%s: %d rounds in %s", sig, rounds, crashed.Sub(start).Round(time.Millisecond))

	// The last start delivers whatever is left.
	p := serve(t, dir, freeAddr(t))
	type item struct {
		ID     string `json:"id"`
		Thread string `json:"thread"`
		Status string `json:"status"`
	}
	var (
		items   []item
		pending float64
		last    result
	)
	settled := func() bool {
		r := run(t, dir, p.env(), "workitems", "list", "--json")
		last = r
		var page []item
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil || len(page) != rounds {
			return false
		}
		items = page
		for _, wi := range items {
			if wi.Status != "done" && wi.Status != "failed" {
				return false
			}
		}
		var ok bool
		pending, ok = metric(t, p.addr, "switchyard_outbox_pending")
		return ok && pending == 0
	}
	// Polled here, not in require.Eventually: run fails the test from the
	// test's goroutine only.
	for deadline := time.Now().Add(60 * time.Second); !settled(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not every work item finished and every message delivered: %d work items %v, %v messages pending\n%+v\n%s\n%s",
				len(items), items, pending, last, p.log, web)
		}
	}
	t.Logf("%s: settled in %s", sig, time.Since(crashed).Round(time.Millisecond))
	dead, ok := metric(t, p.addr, "switchyard_outbox_dead")
	require.True(t, ok)
	require.Zero(t, dead, "no message given up\n%s", web)

	byKey := map[string][]slackMessage{}
	for _, m := range web.shown() {
		byKey[m.key()] = append(byKey[m.key()], m)
	}
	// Each command has one opener, and its thread is a work item's.
	threads := map[string]string{} // thread ts -> work item
	for _, wi := range items {
		ts := wi.Thread[strings.LastIndex(wi.Thread, "/")+1:]
		require.Empty(t, threads[ts], "two work items in thread %s", ts)
		threads[ts] = wi.ID
	}
	for _, trigger := range triggers {
		openers := byKey["slack/command/"+trigger]
		require.Len(t, openers, 1, "one opener for %s\n%s", trigger, web)
		require.Empty(t, openers[0].ThreadTS)
		require.NotEmpty(t, threads[openers[0].TS], "the opener of %s has its work item", trigger)
	}
	for _, ts := range mentions {
		require.NotEmpty(t, threads[ts], "the mention %s has its work item", ts)
	}

	// Each work item: one status, finished, and one reply, in its thread.
	for _, wi := range items {
		thread := wi.Thread[strings.LastIndex(wi.Thread, "/")+1:]
		status, reply := byKey[wi.ID+"/status"], byKey[wi.ID+"/reply"]
		require.Len(t, status, 1, "%s: one status message\n%s", wi.ID, web)
		require.Len(t, reply, 1, "%s: one reply\n%s", wi.ID, web)
		require.Equal(t, thread, status[0].ThreadTS)
		require.Equal(t, thread, reply[0].ThreadTS)
		require.Regexp(t, `^(✅ \S+ finished|❌ \S+ failed) `+wi.ID, status[0].Text, "%s: the status is not left working", wi.ID)
	}

	// Each work item's messages reached Slack in order: 👀, the status, the
	// reply, then ✅ or ❌.
	first := map[string]int{} // what happened first, by position in the calls
	web.mu.Lock()
	for i, c := range web.calls {
		var what string
		switch c.Method {
		case "reactions.add":
			what = c.Form.Get("timestamp") + " " + c.Form.Get("name")
		case "chat.postMessage":
			var meta struct {
				Payload struct{ Key string } `json:"event_payload"`
			}
			_ = json.Unmarshal([]byte(c.Form.Get("metadata")), &meta)
			what = meta.Payload.Key
		default:
			continue
		}
		if _, seen := first[what]; !seen {
			first[what] = i
		}
	}
	web.mu.Unlock()
	for _, wi := range items {
		thread := wi.Thread[strings.LastIndex(wi.Thread, "/")+1:]
		var order []int
		for _, what := range []string{thread + " eyes", wi.ID + "/status", wi.ID + "/reply"} {
			at, ok := first[what]
			require.True(t, ok, "%s: %s never reached Slack", wi.ID, what)
			order = append(order, at)
		}
		done, ok := first[thread+" white_check_mark"]
		if !ok {
			done, ok = first[thread+" x"]
		}
		require.True(t, ok, "%s: no ✅ or ❌", wi.ID)
		order = append(order, done)
		require.True(t, slices.IsSorted(order), "%s: 👀, status, reply, ✅ out of order: %v", wi.ID, order)
	}
	found, _ := metric(t, p.addr, `switchyard_outbox_found_total{sink="slack"}`)
	t.Logf("%s: %d work items, %d Slack calls; the last start found %v interrupted posts", sig, len(items), len(web.calls), found)
}
