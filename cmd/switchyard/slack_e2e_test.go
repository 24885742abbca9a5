package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// slackWeb is a fake of the Slack Web API methods the daemon calls, spoken
// at the wire: form-encoded requests, {"ok":true,…} answers. It keeps the
// messages it shows, with their metadata, edits and deletions, and reads
// them back through conversations.replies and .history as Slack does.
type slackWeb struct {
	mu       sync.Mutex
	calls    []slackCall
	ts       int
	messages []*slackMessage
	reacted  map[string]bool // channel/ts/name
	// postDelay makes chat.postMessage slow: the message is shown as soon
	// as the request arrives and answered after the delay, so a client
	// that dies meanwhile has posted without learning the message's ts.
	postDelay time.Duration
	// posted, when set, is told (without blocking) of each post's arrival.
	posted chan struct{}
}

// slackMessage is a message the fake shows.
type slackMessage struct {
	Channel, TS, ThreadTS string
	Text, Blocks          string
	Metadata              map[string]any
	Deleted               bool
}

// key is the outbox key in the message's metadata.
func (m *slackMessage) key() string {
	payload, _ := m.Metadata["event_payload"].(map[string]any)
	key, _ := payload["key"].(string)
	return key
}

type slackCall struct {
	Method string
	Form   url.Values
	TS     string // what chat.postMessage answered
}

func (s *slackWeb) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form := r.PostForm
	s.mu.Lock()
	s.ts++
	ts := fmt.Sprintf("1800000000.%06d", s.ts)
	s.calls = append(s.calls, slackCall{Method: method, Form: form, TS: ts})
	out := map[string]any{"ok": true}
	var delay time.Duration
	switch method {
	case "auth.test":
		out = map[string]any{"ok": true, "team_id": "T1", "user_id": "UBOT", "bot_id": "BBOT", "user": "switchyard"}
	case "chat.postMessage":
		m := &slackMessage{Channel: form.Get("channel"), TS: ts, ThreadTS: form.Get("thread_ts"), Text: form.Get("text"), Blocks: form.Get("blocks")}
		if meta := form.Get("metadata"); meta != "" && json.Unmarshal([]byte(meta), &m.Metadata) != nil {
			out = map[string]any{"ok": false, "error": "invalid_metadata_format"}
			break
		}
		s.messages = append(s.messages, m)
		out = map[string]any{"ok": true, "channel": m.Channel, "ts": ts}
		delay = s.postDelay
		if s.posted != nil {
			select {
			case s.posted <- struct{}{}:
			default:
			}
		}
	case "chat.update", "chat.delete":
		out = map[string]any{"ok": false, "error": "message_not_found"}
		for _, m := range s.messages {
			if m.Channel == form.Get("channel") && m.TS == form.Get("ts") && !m.Deleted {
				m.Text, m.Blocks, m.Deleted = form.Get("text"), form.Get("blocks"), method == "chat.delete"
				out = map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS}
			}
		}
	case "chat.postEphemeral":
		out = map[string]any{"ok": true, "message_ts": ts}
	case "reactions.add":
		if s.reacted == nil {
			s.reacted = map[string]bool{}
		}
		k := form.Get("channel") + "/" + form.Get("timestamp") + "/" + form.Get("name")
		if s.reacted[k] {
			out = map[string]any{"ok": false, "error": "already_reacted"}
		}
		s.reacted[k] = true
	case "conversations.replies", "conversations.history":
		out = map[string]any{"ok": true, "has_more": false, "messages": s.list(method, form)}
	default:
		out = map[string]any{"ok": false, "error": "unknown_method"}
	}
	s.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// list answers conversations.replies (a thread's root and replies) and
// .history (top-level messages), oldest first, with metadata only when
// include_all_metadata asks for it, as Slack does. Called with s.mu held.
func (s *slackWeb) list(method string, form url.Values) []map[string]any {
	out := []map[string]any{}
	for _, m := range s.messages {
		if m.Deleted || m.Channel != form.Get("channel") || m.TS < form.Get("oldest") {
			continue
		}
		inThread := m.TS == form.Get("ts") || m.ThreadTS == form.Get("ts")
		if method == "conversations.replies" && !inThread || method == "conversations.history" && m.ThreadTS != "" {
			continue
		}
		msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "bot_id": "BBOT"}
		if m.ThreadTS != "" {
			msg["thread_ts"] = m.ThreadTS
		}
		if form.Get("include_all_metadata") == "1" && m.Metadata != nil {
			msg["metadata"] = m.Metadata
		}
		out = append(out, msg)
	}
	return out
}

// shown returns copies of the messages the fake shows.
func (s *slackWeb) shown() []slackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []slackMessage
	for _, m := range s.messages {
		if !m.Deleted {
			out = append(out, *m)
		}
	}
	return out
}

// String lists the calls, for failure messages.
func (s *slackWeb) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.calls {
		fmt.Fprintf(&b, "\n%s ts=%s thread_ts=%s → %s: %.80q", c.Method, c.Form.Get("ts"), c.Form.Get("thread_ts"), c.TS, c.Form.Get("text"))
	}
	return b.String()
}

func (s *slackWeb) callsOf(method string) []slackCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []slackCall
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// prompt finds the approval prompt posted in a thread: the id on its
// buttons and the message's ts.
func (s *slackWeb) prompt(threadTS string) (id, ts string, ok bool) {
	for _, c := range s.callsOf("chat.postMessage") {
		if c.Form.Get("thread_ts") != threadTS || !strings.Contains(c.Form.Get("blocks"), "switchyard_approve") {
			continue
		}
		var blocks []struct {
			Type     string `json:"type"`
			Elements []struct {
				ActionID string `json:"action_id"`
				Value    string `json:"value"`
			} `json:"elements"`
		}
		if json.Unmarshal([]byte(c.Form.Get("blocks")), &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			for _, e := range b.Elements {
				if e.ActionID == "switchyard_approve" {
					return e.Value, c.TS, true
				}
			}
		}
	}
	return "", "", false
}

// lastUpdate is the latest chat.update of the message ts.
func (s *slackWeb) lastUpdate(ts string) string {
	var blocks string
	for _, c := range s.callsOf("chat.update") {
		if c.Form.Get("ts") == ts {
			blocks = c.Form.Get("blocks")
		}
	}
	return blocks
}

const e2eSigningSecret = "e2e-signing-secret"

// postSlack sends a request signed as Slack signs them.
func postSlack(t *testing.T, addr, path, contentType, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	require.NoError(t, err)
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(e2eSigningSecret))
	fmt.Fprintf(mac, "v0:%s:%s", stamp, body)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func mention(t *testing.T, addr, eventID, ts, text string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": eventID, "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "app_mention", "user": "UANA01", "text": text, "ts": ts, "channel": "C1", "event_ts": ts},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, postSlack(t, addr, "/slack/events", "application/json", string(body)))
}

func click(t *testing.T, addr, user, approvalID, promptTS, threadTS string) {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user, "team_id": "T1"}, "team": map[string]any{"id": "T1"},
		"channel":   map[string]any{"id": "C1"},
		"container": map[string]any{"type": "message", "channel_id": "C1", "message_ts": promptTS, "thread_ts": threadTS},
		"actions":   []map[string]any{{"type": "button", "action_id": "switchyard_approve", "value": approvalID}},
	})
	require.NoError(t, err)
	body := url.Values{"payload": {string(payload)}}.Encode()
	require.Equal(t, http.StatusOK, postSlack(t, addr, "/slack/interactions", "application/x-www-form-urlencoded", body))
}

// TestApprovalInSlack runs the daemon with Slack over HTTP and one worker.
// Two scribe runs in two threads ask for approval of write_file; both wait
// at once, and a console message is answered meanwhile, so waiting runs
// hold no worker. In the first thread a stranger's click changes nothing
// and the approver's lets the file be written; the second times out and is
// denied. All three are in the audit log.
// slackDaemon starts the daemon with Slack over HTTP against a fake Web
// API, one worker, and a scribe agent whose write_file calls need UANA01's
// approval.
func slackDaemon(t *testing.T, approvalTimeout time.Duration) (*daemonProc, *slackWeb, string) {
	t.Helper()
	model := httptest.NewServer(&fakeOpenAI{call: "write_file", args: `{"path":"approved.txt","content":"ok"}`})
	t.Cleanup(model.Close)
	web := &slackWeb{}
	slackSrv := httptest.NewServer(web)
	t.Cleanup(slackSrv.Close)

	dir := t.TempDir()
	cfg := fmt.Sprintf(`workers: 1
approval_timeout: %s
models:
  default: {provider: openai, base_url: %s/v1, model: fake}
slack:
  mode: http
  bot_token: xoxb-e2e
  signing_secret: %s
  api_url: %s/api/
profiles:
  careful:
    extends: contributor
    approval: [write_file]
    approvers: [UANA01]
`, approvalTimeout, model.URL, e2eSigningSecret, slackSrv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agents", "scribe.md"), []byte(
		"---\nname: scribe\ndescription: Writes files, carefully.\nprofile: careful\n---\nYou write files.\n"), 0o600))
	return serve(t, dir, freeAddr(t)), web, dir
}

func TestApprovalInSlack(t *testing.T) {
	// Long enough for the steps before the approver's click on a loaded
	// machine; the other thread's approval runs out after it.
	const timeout = 30 * time.Second
	p, web, dir := slackDaemon(t, timeout)

	const granted, expiring = "1800000001.000100", "1800000002.000100"
	mention(t, p.addr, "Ev1", granted, "<@UBOT> @scribe write it")
	mention(t, p.addr, "Ev2", expiring, "<@UBOT> @scribe write it too")

	var grantedID, promptTS, expiringID, expiringTS string
	require.Eventually(t, func() bool {
		var ok1, ok2 bool
		grantedID, promptTS, ok1 = web.prompt(granted)
		expiringID, expiringTS, ok2 = web.prompt(expiring)
		return ok1 && ok2
	}, 20*time.Second, 50*time.Millisecond, "both threads get Approve / Deny buttons, with one worker")

	// Both runs wait for a person; the one worker still answers others.
	r := run(t, dir, p.env(), "send", "--wait", "--thread", "meanwhile", "@triage anything new?")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	r = run(t, dir, p.env(), "approvals", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, grantedID)
	require.Contains(t, r.stdout, expiringID)

	// A stranger's click changes nothing; they alone are told why.
	click(t, p.addr, "UBOB02", grantedID, promptTS, granted)
	require.Eventually(t, func() bool { return len(web.callsOf("chat.postEphemeral")) == 1 }, 10*time.Second, 50*time.Millisecond)
	eph := web.callsOf("chat.postEphemeral")[0].Form
	require.Equal(t, "UBOB02", eph.Get("user"))
	require.Contains(t, eph.Get("text"), "UBOB02 may not decide approval")
	r = run(t, dir, p.env(), "approvals", "list", "--json")
	require.Contains(t, r.stdout, grantedID, "still pending after the stranger's click")

	// The approver's click lets the tool run.
	click(t, p.addr, "UANA01", grantedID, promptTS, granted)
	require.Eventually(t, func() bool {
		b := web.lastUpdate(promptTS)
		return strings.Contains(b, "Approved by") && strings.Contains(b, "@UANA01") && !strings.Contains(b, "switchyard_approve")
	}, 15*time.Second, 50*time.Millisecond, "the prompt is edited into the decision, without buttons: %s", web)
	require.Eventually(t, func() bool {
		matches, _ := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "approved.txt"))
		return len(matches) == 1
	}, 15*time.Second, 100*time.Millisecond, "the approved call ran")

	// Nobody decides in the other thread: denied when the time is up.
	require.Eventually(t, func() bool {
		return strings.Contains(web.lastUpdate(expiringTS), "Nobody decided in time")
	}, timeout+20*time.Second, 100*time.Millisecond)

	r = run(t, dir, p.env(), "audit", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []struct {
			Decision   string `json:"decision"`
			By         string `json:"by"`
			ApprovalID string `json:"approval_id"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	recs := page.Items
	seen := map[string]string{}
	for _, rec := range recs {
		if rec.ApprovalID != "" && rec.Decision != "needs_approval" {
			seen[rec.Decision] = rec.ApprovalID + " by " + rec.By
		}
	}
	require.Equal(t, map[string]string{
		"not_approver": grantedID + " by UBOB02",
		"approved":     grantedID + " by UANA01",
		"expired":      expiringID + " by ",
	}, seen)
	require.NotContains(t, r.stdout, "xoxb-e2e", "no token in the audit log")
}

// TestPendingApprovalSurvivesARestart stops the daemon while a run waits
// for a person, with SIGTERM and with kill -9. SIGTERM stops it at once,
// not after the grace period, and the prompt keeps its buttons. After the
// restart the resumed run waits on the same approval instead of asking
// again (after kill -9 too, rather than report the call interrupted), and
// a click on the old buttons lets it go on: the call runs once.
func TestPendingApprovalSurvivesARestart(t *testing.T) {
	for _, how := range []string{"SIGTERM", "kill -9"} {
		t.Run(how, func(t *testing.T) {
			p, web, dir := slackDaemon(t, 10*time.Minute)
			const waiting = "1800000003.000100"
			mention(t, p.addr, "Ev3", waiting, "<@UBOT> @scribe write it")
			var id, promptTS string
			require.Eventually(t, func() bool {
				var ok bool
				id, promptTS, ok = web.prompt(waiting)
				return ok
			}, 20*time.Second, 50*time.Millisecond)

			if how == "kill -9" {
				require.NoError(t, p.cmd.Process.Kill())
				<-p.done
			} else {
				require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
				select {
				case <-p.done:
					require.NoError(t, p.err)
				case <-time.After(25 * time.Second):
					t.Fatal("a run waiting for a person held shutdown up to the grace period")
				}
				if b := web.lastUpdate(promptTS); b != "" {
					require.Contains(t, b, "switchyard_approve", "the prompt keeps its buttons")
				}
			}

			q := serve(t, dir, freeAddr(t))
			click(t, q.addr, "UANA01", id, promptTS, waiting)
			require.Eventually(t, func() bool {
				matches, _ := filepath.Glob(filepath.Join(dir, "data", "workspaces", "*", "approved.txt"))
				return len(matches) == 1
			}, 20*time.Second, 100*time.Millisecond, "the resumed run went on after the click: %s", web)
			require.Eventually(t, func() bool {
				b := web.lastUpdate(promptTS)
				return strings.Contains(b, "Approved by") && !strings.Contains(b, "switchyard_approve")
			}, 15*time.Second, 50*time.Millisecond)
			prompts := 0
			for _, c := range web.callsOf("chat.postMessage") {
				if c.Form.Get("thread_ts") == waiting && strings.Contains(c.Form.Get("blocks"), "switchyard_approve") {
					prompts++
				}
			}
			require.Equal(t, 1, prompts, "the thread was asked once")
		})
	}
}
