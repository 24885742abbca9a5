package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/config"
)

// xssPayloads are text a user, a webhook or a model could put in any field
// the admin UI shows, each carrying the marker xss, meant to break out of
// every context a template writes into: text, attributes quoted either
// way, URLs, and the script and style the pages have none of.
var xssPayloads = []string{
	`<script>alert("xss")</script>`,
	`"><img src=x onerror=alert(1) data-xss>`,
	`'><svg onload=alert(1) data-xss>`,
	`javascript:alert(1)//xss`,
	` JaVaScRiPt:alert(1)//xss`,
	`data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==#xss`,
	`</textarea><script>xss</script>`,
	`</title><script>xss</script>`,
	`<!--xss--><script>xss</script>`,
	`" autofocus onfocus=alert(1) x="xss`,
	`' onmouseover='alert(1)' x='xss`,
	"`-alert(1)-`xss",
	`{{.CSRF}}xss{{template "csrf" .}}`,
	`<a href="javascript:alert(1)">xss</a>`,
	`<iframe srcdoc="<script>xss</script>">`,
	`<style>@import 'http://evil.example/xss.css';</style>`,
	`<base href="http://evil.example/xss/">`,
	`<form action="http://evil.example/xss"><button>`,
	`<meta http-equiv="refresh" content="0;url=http://evil.example/xss">`,
	`&lt;script&gt;xss&lt;/script&gt;`,
	`%3Cscript%3Exss%3C%2Fscript%3E`,
	"\u2028\u2029<script>xss</script>",
	"<scr\x00ipt>xss</script>",
	`<img src="x" onerror="alert(1)" alt="xss">`,
	`xss" style="position:fixed;top:0;left:0;width:100%;height:100%`,
	`<object data="javascript:alert(1)">xss`,
	`<math><mi xlink:href="javascript:alert(1)">xss</mi></math>`,
	`]]><script>xss</script>`,
	`\"><script>xss</script>`,
	`xss</span><script>alert(1)</script><span>`,
}

// pageTags are the tags the admin UI's templates write; a page holding any
// other wrote a payload unescaped. Text never holds a raw "<", so every
// one found opens a tag.
var (
	pageTags = func() map[string]bool {
		tags := map[string]bool{}
		for _, t := range strings.Fields("a b body br button code datalist dd div dl dt fieldset form h1 h2 h3 head header html input " +
			"label legend li link main meta nav option p pre script section select span strong table tbody td textarea th thead title tr ul") {
			tags[t] = true
		}
		return tags
	}()
	tagRE  = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9]*)([^>]*)>`)
	attrRE = regexp.MustCompile(`\s([^\s="'>/]+)(?:="([^"]*)")?`)
)

// unescaped returns what of body a payload made markup of: a tag the
// templates do not write, an attribute that runs script or styles, an
// address that is a script, a second script.
func unescaped(body string) []string {
	var found []string
	scripts := 0
	for _, m := range tagRE.FindAllStringSubmatch(body, -1) {
		name := strings.ToLower(m[2])
		if !pageTags[name] {
			found = append(found, m[0])
			continue
		}
		if name == "script" && m[1] == "" {
			if scripts++; scripts > 1 || !strings.Contains(m[3], `src="/admin/static/live.js"`) {
				found = append(found, m[0])
			}
		}
		for _, a := range attrRE.FindAllStringSubmatch(m[3], -1) {
			attr, value := strings.ToLower(a[1]), strings.ToLower(strings.TrimSpace(a[2]))
			switch {
			case strings.HasPrefix(attr, "on"), attr == "style", attr == "srcdoc", attr == "autofocus", attr == "http-equiv":
				found = append(found, m[0])
			case attr == "href" || attr == "src" || attr == "action" || attr == "formaction":
				if strings.HasPrefix(value, "javascript:") || strings.HasPrefix(value, "data:") || strings.HasPrefix(value, "http://evil.example") || strings.HasPrefix(value, "//") {
					found = append(found, m[0])
				}
			}
		}
	}
	return found
}

// The admin UI writes what others control only escaped, in every page,
// attribute and live fragment; and refuses a form that changes something
// without its CSRF token, with another session's or in its address, from
// another site or another host, changing nothing.
func TestAdminUIEscapesWhatOthersWriteAndRefusesForgedForms(t *testing.T) {
	for _, p := range xssPayloads {
		if !strings.HasPrefix(p, "&lt;") && !strings.HasPrefix(p, "%3C") && !strings.HasPrefix(p, "{{") && !strings.HasPrefix(p, "`") {
			raw := `<p><a href="` + p + `">` + p + `</a><input value='` + p + `'></p>`
			require.NotEmpty(t, unescaped(raw), "the check finds %q written raw", p)
		}
	}
	r := start(t, nil)
	c := newAdminClient(t, r.base)
	resp, _ := c.signIn(url.Values{"token": {r.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page := c.do("GET", "/admin/workitems", nil, nil)
	csrf := c.csrf(page)

	// Work items whose thread, text and requester are payloads; each
	// cancelled with a payload as the reason, which the audit log keeps.
	var ids []string
	for i, p := range xssPayloads {
		msg := map[string]string{"thread": fmt.Sprintf("local:t%d %s", i, p), "text": p, "user": p, "id": fmt.Sprintf("m%d", i)}
		body, err := json.Marshal(msg)
		require.NoError(t, err)
		code, out := r.do(t, "POST", "/api/v1/messages", string(body))
		if code == http.StatusBadRequest {
			// A thread name takes no control characters: the payload
			// goes in the text and the requester alone.
			msg["thread"] = fmt.Sprintf("local:t%d", i)
			body, err = json.Marshal(msg)
			require.NoError(t, err)
			code, out = r.do(t, "POST", "/api/v1/messages", string(body))
		}
		require.Equal(t, http.StatusAccepted, code, "%s", out)
		var made struct {
			ID string `json:"work_item_id"`
		}
		require.NoError(t, json.Unmarshal(out, &made))
		ids = append(ids, made.ID)
		reason, err := json.Marshal(map[string]string{"reason": p})
		require.NoError(t, err)
		code, out = r.do(t, "POST", "/api/v1/workitems/"+made.ID+"/cancel", string(reason))
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, code, "%s", out)
	}

	pages := []string{"/admin/workitems", "/admin/workitems?status=cancelled", "/admin/audit", "/admin/audit?decision=change",
		"/admin/approvals?all=true", "/admin/rules", "/admin/budgets", "/admin/agents", "/admin/skills"}
	live := []string{"/admin/workitems/rows", "/admin/approvals/rows"}
	for _, id := range ids {
		pages = append(pages, "/admin/workitems/"+id)
		live = append(live, "/admin/workitems/"+id+"/live")
	}
	for _, p := range xssPayloads {
		q := url.QueryEscape(p)
		pages = append(pages, "/admin/workitems?thread="+q, "/admin/audit?requester="+q+"&agent="+q+"&tool="+q,
			"/admin/scopes?org="+q+"&repo="+q+"&agent="+q, "/admin/rules?edit="+q, "/admin/budgets?day="+q,
			"/admin/workitems?cursor="+q, "/admin/audit?cursor="+q, "/admin/approvals?done="+q)
	}
	checked := 0
	check := func(what, body string) {
		t.Helper()
		checked++
		require.Empty(t, unescaped(body), "%s writes markup unescaped", what)
	}
	for _, p := range pages {
		resp, body := c.do("GET", p, nil, nil)
		require.Less(t, resp.StatusCode, 500, "%s: %s", p, body)
		check(p, body)
	}
	for _, p := range live {
		resp, body := c.do("GET", p, nil, map[string]string{"X-Live": "1"})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", p, body)
		require.Empty(t, unescaped(body), "%s writes markup unescaped", p)
		require.NotContains(t, strings.ToLower(body), "<script", p)
		checked++
	}
	// Forms that are refused show what was typed again, and why.
	for _, p := range xssPayloads {
		for _, f := range []struct {
			path string
			form url.Values
		}{
			{"/admin/rules", url.Values{"name": {p}, "agent": {p}, "priority": {p}, "match.text": {p}}},
			{"/admin/rules/test", url.Values{"text": {p}, "thread": {p}, "user": {p}, "event": {p}, "delivery_id": {p}}},
			{"/admin/scopes/set", url.Values{"name": {p}, "scope": {p}, "set": {p}, "org": {p}, "repo": {p}}},
			{"/admin/scopes/config", url.Values{"package": {p}, "scope": {p}, "setting." + p: {p}}},
			{"/admin/skills/install", url.Values{"source": {p}, "sha256": {p}, "enable": {p}}},
			{"/admin/skills/uninstall", url.Values{"package": {p}}},
			{"/admin/workitems/" + ids[0] + "/reroute", url.Values{"agent": {p}, "reason": {p}}},
			{"/admin/approvals/" + url.PathEscape(p) + "/approve", url.Values{}},
		} {
			f.form.Set("csrf_token", csrf)
			resp, body := c.do("POST", f.path, f.form, nil)
			require.Less(t, resp.StatusCode, 500, "%s: %s", f.path, body)
			check("POST "+f.path, body)
		}
	}
	t.Logf("%d pages and fragments checked against %d payloads", checked, len(xssPayloads))

	// Forged forms: every form that changes something, sent as another
	// site, another session or a script without the token would send it.
	other := newAdminClient(t, r.base)
	resp, _ = other.signIn(url.Values{"token": {r.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, otherPage := other.do("GET", "/admin/workitems", nil, nil)
	otherCSRF := other.csrf(otherPage)
	forms := []string{"/admin/signout", "/admin/rules", "/admin/rules/test", "/admin/rules/rule_1", "/admin/rules/rule_1/priority",
		"/admin/rules/rule_1/delete", "/admin/scopes/set", "/admin/scopes/config", "/admin/skills/install", "/admin/skills/uninstall",
		"/admin/workitems/" + ids[1] + "/cancel", "/admin/workitems/" + ids[1] + "/reroute", "/admin/approvals/ap_1/approve", "/admin/approvals/ap_1/deny"}
	host := strings.TrimPrefix(r.base, "http://")
	forgeries := []struct {
		name   string
		query  string
		form   url.Values
		header map[string]string
		status int
	}{
		{"no token", "", url.Values{"name": {"x"}}, nil, http.StatusForbidden},
		{"an empty token", "", url.Values{"csrf_token": {""}}, nil, http.StatusForbidden},
		{"a wrong token", "", url.Values{"csrf_token": {"AAAA" + csrf[4:]}}, nil, http.StatusForbidden},
		{"another session's token", "", url.Values{"csrf_token": {otherCSRF}}, nil, http.StatusForbidden},
		{"the token in the address", "?csrf_token=" + csrf, url.Values{"name": {"x"}}, nil, http.StatusForbidden},
		{"the token twice, the first wrong", "", url.Values{"csrf_token": {"wrong", csrf}}, nil, http.StatusForbidden},
		{"the token as JSON", "", nil, map[string]string{"Content-Type": "application/json"}, http.StatusForbidden},
		{"another site", "", url.Values{"csrf_token": {csrf}}, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"no origin, sent from a page elsewhere", "", url.Values{"csrf_token": {csrf}}, map[string]string{"Referer": "http://evil.example/page"}, http.StatusForbidden},
		{"a null origin", "", url.Values{"csrf_token": {csrf}}, map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"a sibling site", "", url.Values{"csrf_token": {csrf}}, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"a cross-site fetch", "", url.Values{"csrf_token": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a rebound host", "", url.Values{"csrf_token": {csrf}}, map[string]string{"Host": "evil.example:" + host[strings.LastIndex(host, ":")+1:]}, http.StatusForbidden},
	}
	tried := 0
	for _, path := range forms {
		for _, f := range forgeries {
			resp, body := c.do("POST", path+f.query, f.form, f.header)
			require.Equal(t, f.status, resp.StatusCode, "%s %s: %s", f.name, path, body)
			tried++
		}
		// A GET, with any override, changes nothing.
		for _, h := range []map[string]string{nil, {"X-HTTP-Method-Override": "POST"}, {"X-Method-Override": "DELETE"}} {
			_, _ = c.do("GET", path+"?_method=POST&csrf_token="+csrf, nil, h)
			tried++
		}
	}
	t.Logf("%d forged requests refused", tried)
	resp, _ = c.do("GET", "/admin/workitems", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "still signed in: no forged sign-out went through")
	code, out := r.do(t, "GET", "/api/v1/audit?decision=change", "")
	require.Equal(t, http.StatusOK, code)
	var audit struct {
		Items []struct {
			Tool string `json:"tool"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(out, &audit))
	for _, rec := range audit.Items {
		require.Equal(t, "workitem.cancel", rec.Tool, "only the API's cancels changed anything")
	}
	// The forged cancel and reroute of ids[1] changed nothing: it keeps
	// its route, and it ended as the API's cancel left it (cancelled, or
	// failed when its run, which has no model, failed before the cancel
	// reached it).
	code, out = r.do(t, "GET", "/api/v1/workitems/"+ids[1], "")
	require.Equal(t, http.StatusOK, code)
	var wi struct {
		Status string `json:"status"`
		Route  struct {
			Agent string `json:"agent"`
		} `json:"route"`
	}
	require.NoError(t, json.Unmarshal(out, &wi))
	require.Equal(t, "triage", wi.Route.Agent, "%s", out)
	require.Contains(t, []string{"cancelled", "failed"}, wi.Status, "%s", out)
}

// hostile is markup that would run script or add to the page wherever it
// was written unescaped: in text, in an attribute, as a link.
const hostile = `<script>window.__xss=1</script><img src=x class=xss onerror="window.__xss=2">` +
	`"><svg class=xss onload="window.__xss=3"></svg>'><a class=xss href="javascript:window.__xss=4">x</a>`

// browseHostileText plants markup in what others write and the UI shows
// (a message's text and thread, the model's reply and the transcript, a
// tool call waiting for approval, a rule's name, a cancel's reason in the
// audit log) and opens every page while its live parts update: each shows
// it as text, nothing is added to the page, no script runs, and the browser
// reports no script it had to block.
func browseHostileText(t *testing.T, b *browser) {
	release := make(chan struct{})
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		switch {
		case req.Agent == "scribe" && req.turns() == 0:
			args, err := json.Marshal(map[string]string{"path": "notes.txt", "content": hostile})
			require.NoError(t, err)
			return reply{Calls: []fakeCall{{Name: "write_file", Args: string(args)}}}
		case req.Agent == "scribe":
			return reply{Text: "written"}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return reply{Text: "my answer: " + hostile}
	})
	tr := startTree(t, model, treeOptions{
		agents: map[string]string{
			"scribe": "---\nname: scribe\ndescription: Writes files, carefully.\nprofile: careful\n---\nYou write files.\n",
			"herald": "---\nname: herald\ndescription: |-\n  " + hostile + "\nmode: tool\n---\nYou announce.\n",
		},
		config: func(c *config.Config) {
			c.Profiles = map[string]policy.ProfileConfig{"careful": {Extends: "contributor", Approval: []string{"write_file"}, Approvers: []string{"admin"}}}
		},
	})
	post := func(path string, v any, want int) []byte {
		t.Helper()
		body, err := json.Marshal(v)
		require.NoError(t, err)
		code, out := tr.do(t, "POST", path, string(body))
		require.Equal(t, want, code, "%s", out)
		return out
	}
	running := tr.send(t, "hostile", "@lead "+hostile)
	var made struct {
		ID string `json:"work_item_id"`
	}
	require.NoError(t, json.Unmarshal(post("/api/v1/messages", map[string]string{"thread": `hostile-2 "><img src=x class=xss onerror="window.__xss=5">`, "text": hostile, "user": hostile, "id": "h-2"}, http.StatusAccepted), &made))
	post("/api/v1/workitems/"+made.ID+"/cancel", map[string]string{"reason": hostile}, http.StatusOK)
	post("/api/v1/rules", map[string]any{"name": hostile, "agent": "lead", "match": map[string]any{"text": "never-said-zq"}}, http.StatusCreated)
	pkg := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte("name: hostile-pkg\nversion: 1.0.0\ndescription: |-\n  "+hostile+
		"\nskills:\n  - name: hostile-skill\n    description: |-\n      "+hostile+"\n    instructions: Say hello.\n    allowed_tools: []\n    execution_protocol: [Say hello.]\n"), 0o644))
	post("/api/v1/packages", map[string]string{"source": pkg}, http.StatusCreated)
	tr.send(t, "notes", "@scribe write the notes")
	require.Eventually(t, func() bool {
		code, body := tr.do(t, "GET", "/api/v1/approvals", "")
		return code == http.StatusOK && strings.Contains(string(body), "notes.txt")
	}, 30*time.Second, 20*time.Millisecond, "the scribe's call never waited for approval")

	tab := b.tab(t)
	var (
		mu      sync.Mutex
		console []string
	)
	// Subscribed here, before the tab's first action: Console starts the
	// tab when it has not started, which must not race the sign-in.
	messages := chromedp.Console(tab)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			console = append(console, m.String())
			mu.Unlock()
		}
	}()
	b.signIn(t, tab, tr.base, tr.token)
	// clean says what a payload made of the page: a script that ran, an
	// element it added; "" when nothing.
	const clean = `(() => {
		if (window.__xss) return "a script ran: " + window.__xss;
		const added = document.querySelector(".xss, img, svg, iframe, object, embed, script:not([src]), [onerror], [onload], a[href^='javascript' i]");
		return added ? "markup was added: " + added.outerHTML : "";
	})()`
	// open shows path and waits for each of its live parts to be
	// replaced once by what the server answers now.
	open := func(path string, ready string) {
		t.Helper()
		b.do(t, tab,
			chromedp.Navigate(tr.base+path),
			chromedp.WaitVisible(chromedp.CSS(ready)),
		)
		_, err := chromedp.Run(tab, chromedp.Evaluate[bool](`window.__updated = 0;
			document.addEventListener("live-updated", () => window.__updated++); true`))
		require.NoError(t, err)
		parts, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("[data-live]").length`))
		require.NoError(t, err)
		if parts > 0 {
			_, err = chromedp.Run(tab, chromedp.Poll[bool](fmt.Sprintf(`window.__updated >= %d`, parts)))
			require.NoError(t, err, "%s: its live parts never updated", path)
		}
		found, err := chromedp.Run(tab, chromedp.Evaluate[string](clean))
		require.NoError(t, err)
		require.Empty(t, found, path)
	}
	shows := func(sel string) {
		t.Helper()
		require.Contains(t, b.text(t, tab, sel), "window.__xss=", "%s shows the markup as text", sel)
	}

	open("/admin/workitems", "#identity")
	shows("main")
	open("/admin/workitems/"+running, "#status")
	shows("main")
	forms := func() int {
		t.Helper()
		n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("#cancel-form, #actions").length`))
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 2, forms(), "a running work item can be cancelled")
	// The run ends while the page is open: its reply comes in live, and
	// the cancel it can no longer take goes.
	close(release)
	tr.finished(t, running, time.Minute)
	b.do(t, tab, chromedp.WaitVisible(chromedp.CSS(`#status.status-done`)))
	require.Zero(t, forms(), "a finished work item offers no cancel")
	found, err := chromedp.Run(tab, chromedp.Evaluate[string](clean))
	require.NoError(t, err)
	require.Empty(t, found, "the work item after its live update")
	require.Contains(t, b.text(t, tab, "#live"), "my answer: <script>", "the reply is in the live part, as text")
	open("/admin/workitems/"+made.ID, "#status")
	shows("main")
	open("/admin/rules", "#rules")
	shows("#rules")
	open("/admin/approvals", "#approvals")
	shows("#approvals")
	open("/admin/audit", "#audit")
	shows("#audit")
	open("/admin/skills", "#packages")
	shows("#packages")
	open("/admin/agents", "#identity")
	shows("main")
	for _, path := range []string{"/admin/budgets", "/admin/scopes"} {
		open(path, "#identity")
	}

	mu.Lock()
	defer mu.Unlock()
	for _, m := range console {
		require.NotContains(t, m, "Content Security Policy", "the browser blocked a script a payload made")
		require.False(t, strings.HasPrefix(m, "exception"), "a script failed: %s", m)
	}
}
