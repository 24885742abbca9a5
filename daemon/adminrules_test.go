package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
)

// rulesForm is a rule as the rules page's form sends it, with the
// session's CSRF token.
func rulesForm(csrf string, fields ...string) url.Values {
	v := url.Values{"csrf_token": {csrf}}
	for i := 0; i+1 < len(fields); i += 2 {
		v.Set(fields[i], fields[i+1])
	}
	return v
}

var ruleRow = regexp.MustCompile(`(?s)<tr data-name="([^"]+)" data-origin="([^"]+)"`)

// ruleOrder is the rules the page lists, in order, as name@origin.
func ruleOrder(page string) []string {
	var out []string
	for _, m := range ruleRow.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1]+"@"+m[2])
	}
	return out
}

// The rules page's forms: config rules read-only with their origin; rules
// made, edited, moved and deleted as who is signed in, checked as config
// rules are; forms without their token refused; the test form answering
// which rule wins now and with the rule in the form.
func TestAdminRulesPageForms(t *testing.T) {
	r, f := rulesDaemon(t, func(o *daemon.Options) {
		o.Setup.Config.Admin.Users = []config.AdminUser{adminUser(t, "ana", "correct horse battery")}
	})
	c := newAdminClient(t, r.base)
	resp, _ := c.signIn(url.Values{"name": {"ana"}, "password": {"correct horse battery"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	resp, page := c.do("GET", "/admin/rules", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, []string{"deploys@" + f.path + ":3"}, ruleOrder(page))
	require.Contains(t, page, "read-only")
	require.NotContains(t, page, `/admin/rules?edit=`, "the config's rules are not changed here")
	csrf := c.csrf(page)

	// Without its token a form changes nothing.
	resp, _ = c.do("POST", "/admin/rules", rulesForm("", "name", "x", "agent", "coder"), nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Refused with the config's words, what was typed kept.
	resp, page = c.do("POST", "/admin/rules", rulesForm(csrf, "name", "mine", "agent", "nobody", "text", "(deploy"), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `<p class="error" id="rule-error">agent: unknown agent &#34;nobody&#34;; match.text: bad regular expression &#34;(deploy&#34;: missing closing )</p>`)
	require.Contains(t, page, `value="mine"`)
	resp, page = c.do("POST", "/admin/rules", rulesForm(csrf, "name", "deploys", "agent", "coder"), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `name: duplicate rule name &#34;deploys&#34; (also `+f.path+`:3)`)
	resp, page = c.do("POST", "/admin/rules", rulesForm(csrf, "name", "x", "agent", "coder", "priority", "high"), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `priority &#34;high&#34;: want a whole number`)

	// Made: listed above the config's rule, and routing at once.
	resp, _ = c.do("POST", "/admin/rules", rulesForm(csrf, "name", "deploys-to-coder", "priority", "5", "agent", "coder",
		"text", `(?i)\bdeploy\b`, "sources", "local, slack"), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/rules?saved=rule_1", resp.Header.Get("Location"))
	_, page = c.do("GET", "/admin/rules?saved=rule_1", nil, nil)
	require.Contains(t, page, `id="saved"`)
	require.Equal(t, []string{"deploys-to-coder@stored:rule_1", "deploys@" + f.path + ":3"}, ruleOrder(page))
	require.Equal(t, "coder", r.explain(t, "deploy it").Agent)
	var got bot.StoredRule
	r.json(t, "GET", "/api/v1/rules/rule_1", "", 200, &got)
	require.Equal(t, "ana", got.CreatedBy, "made as who is signed in")
	require.Equal(t, []string{"local", "slack"}, got.Match.Sources)

	// The test form: fields, with no rule in the form, then with one.
	test := func(fields ...string) string {
		t.Helper()
		resp, page := c.do("POST", "/admin/rules/test", rulesForm(csrf, fields...), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, page)
		return page
	}
	page = test("ev_mode", "fields", "ev_source", "local", "ev_text", "deploy it")
	require.Contains(t, page, `<dd id="result-current">coder (rule &#34;deploys-to-coder&#34; (priority 5, stored:rule_1))`)
	require.NotContains(t, page, `id="result-proposed"`)
	page = test("ev_mode", "fields", "ev_source", "local", "ev_text", "deploy it",
		"rule_id", "rule_1", "name", "deploys-to-coder", "priority", "-1", "agent", "coder", "text", `(?i)\bdeploy\b`)
	require.Contains(t, page, `<dd id="result-proposed">ops (rule &#34;deploys&#34; (priority 0))`)
	require.Contains(t, page, "The change decides otherwise.")
	page = test("ev_mode", "payload", "ev_payload", `{"source":"local","kind":"local.message","text":"deploy it"}`)
	require.Contains(t, page, `<dd id="result-current">coder (rule`)
	// A pasted event is read as POST /api/v1/explain reads one, with its
	// words.
	for payload, want := range map[string]string{
		`{"text":"x","colour":"red"}`:     `payload: malformed JSON: unknown field &#34;colour&#34;`,
		`{"text":"deploy","TEXT":"docs"}`: `payload: malformed JSON: field &#34;TEXT&#34; is given twice`,
		`{"text":"x"} {"text":"y"}`:       `payload: malformed JSON: unexpected data after the object`,
	} {
		resp, page = c.do("POST", "/admin/rules/test", rulesForm(csrf, "ev_mode", "payload", "ev_payload", payload), nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, payload)
		require.Contains(t, page, want, payload)
	}
	code, body := r.do(t, "POST", "/api/v1/messages", `{"thread":"room","text":"please deploy","id":"m-7"}`)
	require.Equal(t, http.StatusAccepted, code, string(body))
	page = test("ev_mode", "delivery", "ev_delivery", "m-7", "name", "other", "agent", "docs", "priority", "9", "text", "deploy")
	require.Contains(t, page, `<dd id="result-then">coder (rule &#34;deploys-to-coder&#34;`)
	require.Contains(t, page, `<dd id="result-proposed">docs (rule &#34;other&#34; (priority 9, stored:new))`)

	// Edited, moved below the config's rule, deleted.
	_, page = c.do("GET", "/admin/rules?edit=rule_1", nil, nil)
	require.Contains(t, page, `action="/admin/rules/rule_1"`)
	require.Contains(t, page, `value="deploys-to-coder"`)
	resp, _ = c.do("POST", "/admin/rules/rule_1", rulesForm(csrf, "name", "deploys-to-coder", "priority", "5", "agent", "reviewer", "text", `(?i)\bdeploy\b`), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "reviewer", r.explain(t, "deploy it").Agent)
	resp, _ = c.do("POST", "/admin/rules/rule_1/priority", rulesForm(csrf, "priority", "-1"), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = c.do("GET", "/admin/rules", nil, nil)
	require.Equal(t, []string{"deploys@" + f.path + ":3", "deploys-to-coder@stored:rule_1"}, ruleOrder(page))
	require.Equal(t, "ops", r.explain(t, "deploy it").Agent)
	resp, page = c.do("POST", "/admin/rules/rule_9/priority", rulesForm(csrf, "priority", "1"), nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, page, `no rule &#34;rule_9&#34;`)
	resp, _ = c.do("POST", "/admin/rules/rule_1/delete", rulesForm(csrf), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = c.do("GET", "/admin/rules?deleted=deploys-to-coder", nil, nil)
	require.Equal(t, []string{"deploys@" + f.path + ":3"}, ruleOrder(page))

	// Each change is audited once, as ana.
	var audit struct {
		Items []policy.AuditRecord `json:"items"`
	}
	r.json(t, "GET", "/api/v1/audit?decision=change", "", 200, &audit)
	var actions []string
	for _, rec := range audit.Items {
		require.Equal(t, "ana", rec.By)
		actions = append(actions, rec.Tool)
	}
	require.Equal(t, []string{"rule.delete", "rule.move", "rule.update", "rule.create"}, actions)
	var rules admin.Rules
	r.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Len(t, rules.Rules, 1)
}

// browseRules, in the browser: a rule made on the page, explain picking
// it, the decision a change being edited would make, the rule moved below
// another and the decision changing, the rule deleted.
func browseRules(t *testing.T, b *browser) {
	r, f := rulesDaemon(t, nil)
	tab := b.tab(t)
	b.signIn(t, tab, r.base, r.token)
	b.do(t, tab,
		chromedp.Navigate(r.base+"/admin/rules"),
		chromedp.WaitVisible(chromedp.CSS(`#rules tr[data-name="deploys"]`)),
	)
	require.Contains(t, b.text(t, tab, `#rules tr[data-name="deploys"]`), f.path+":3")

	// Made through the form.
	b.do(t, tab,
		chromedp.SendKeys(chromedp.CSS("#rule-name"), "deploys-to-coder"),
		chromedp.SetValue(chromedp.CSS("#rule-priority"), "5"),
		chromedp.SetValue(chromedp.CSS("#rule-agent"), "coder"),
		chromedp.SendKeys(chromedp.CSS("#rule-text"), `(?i)\bdeploy\b`),
		chromedp.Click(chromedp.CSS("#save-rule")),
		chromedp.WaitVisible(chromedp.CSS("#saved")),
		chromedp.WaitVisible(chromedp.CSS(`#rules tr[data-name="deploys-to-coder"]`)),
	)
	require.Contains(t, b.text(t, tab, `#rules tr[data-name="deploys-to-coder"]`), "stored:rule_1")

	// Explain picks it.
	testEvent := func() {
		t.Helper()
		// The answer of a test before is taken away first, so the wait is
		// for the new one.
		_, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("result")?.remove(); true`))
		require.NoError(t, err)
		b.do(t, tab,
			chromedp.Click(chromedp.CSS("#ev-mode-fields")),
			chromedp.SetValue(chromedp.CSS("#ev-text"), "please deploy the api"),
			chromedp.Click(chromedp.CSS("#test-event")),
			chromedp.WaitVisible(chromedp.CSS("#result-current")),
		)
	}
	testEvent()
	require.Equal(t, `coder (rule "deploys-to-coder" (priority 5, stored:rule_1))`, b.text(t, tab, "#result-current"))

	// Edited but not saved: the test says what the change would decide.
	b.do(t, tab,
		chromedp.Click(chromedp.CSS(`#rules tr[data-name="deploys-to-coder"] a.edit`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules tr.editing`)),
		chromedp.SetValue(chromedp.CSS("#rule-priority"), "-1"),
	)
	testEvent()
	require.Contains(t, b.text(t, tab, "#result-current"), `coder (rule "deploys-to-coder"`)
	require.Equal(t, `ops (rule "deploys" (priority 0))`, b.text(t, tab, "#result-proposed"))
	require.Equal(t, "The change decides otherwise.", b.text(t, tab, "#result-differs"))
	b.shot(t, tab, "rules")

	// Moved below the config's rule: the decision changes.
	move := `#rules tr[data-name="deploys-to-coder"] form.move `
	b.do(t, tab,
		chromedp.Navigate(r.base+"/admin/rules"),
		chromedp.WaitVisible(chromedp.CSS(move+`input[name="priority"]`)),
		chromedp.SetValue(chromedp.CSS(move+`input[name="priority"]`), "-1"),
		chromedp.Click(chromedp.CSS(move+`button`)),
		chromedp.WaitVisible(chromedp.CSS("#saved")),
	)
	require.Equal(t, []string{"deploys", "deploys-to-coder"}, listedRules(t, tab))
	testEvent()
	require.Equal(t, `ops (rule "deploys" (priority 0))`, b.text(t, tab, "#result-current"))

	// Deleted.
	b.do(t, tab,
		chromedp.Click(chromedp.CSS(`#rules tr[data-name="deploys-to-coder"] form.delete button`)),
		chromedp.WaitVisible(chromedp.CSS("#deleted")),
	)
	require.Equal(t, []string{"deploys"}, listedRules(t, tab))

	_, body := r.do(t, "GET", "/api/v1/rules", "")
	var rules admin.Rules
	require.NoError(t, json.Unmarshal(body, &rules))
	require.Len(t, rules.Rules, 1)

	require.False(t, strings.Contains(string(body), "deploys-to-coder"))

}

// listedRules are the names of the rules the page in tab lists, in order.
func listedRules(t *testing.T, tab context.Context) []string {
	t.Helper()
	names, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#rules tbody tr")].map(tr => tr.dataset.name)`))
	require.NoError(t, err)
	return names
}

// Each way a rule typed into the rules page can be wrong is refused with
// the config's words and stores nothing; what is right, unicode included,
// is made; a rule moves to either end of the order, and a config rule can
// be neither moved nor deleted here, nor through the API.
func TestAdminRulesFormInputTable(t *testing.T) {
	r, f := rulesDaemon(t, nil)
	c := newAdminClient(t, r.base)
	resp, _ := c.signIn(url.Values{"token": {r.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page := c.do("GET", "/admin/rules", nil, nil)
	csrf := c.csrf(page)
	resp, _ = c.do("POST", "/admin/rules", rulesForm(csrf, "name", "mine", "agent", "coder", "labels", "bug"), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	for _, tc := range []struct {
		name   string
		fields []string
		status int
		want   string // in the page's error, HTML-escaped
	}{
		{"no name", []string{"agent", "coder"}, 400, "name: a rule needs a name"},
		{"a blank name", []string{"name", " \t ", "agent", "coder"}, 400, "name: a rule needs a name"},
		{"the config rule's name", []string{"name", "deploys", "agent", "coder"}, 400, `name: duplicate rule name &#34;deploys&#34; (also ` + f.path + `:3)`},
		{"a stored rule's name", []string{"name", "mine", "agent", "ops"}, 400, `name: duplicate rule name &#34;mine&#34; (also stored:rule_1)`},
		{"no agent", []string{"name", "x"}, 400, "agent: a rule needs an agent"},
		{"an unknown agent", []string{"name", "x", "agent", "nobody"}, 400, `agent: unknown agent &#34;nobody&#34;`},
		{"a bad regular expression", []string{"name", "x", "agent", "coder", "text", "(deploy"}, 400, `match.text: bad regular expression &#34;(deploy&#34;: missing closing )`},
		{"a repetition too large", []string{"name", "x", "agent", "coder", "text", "a{1001}"}, 400, `match.text: bad regular expression &#34;a{1001}&#34;: invalid repeat count`},
		{"a bad glob", []string{"name", "x", "agent", "coder", "paths", "src/[a"}, 400, `match.paths[0]: bad glob &#34;src/[a&#34;: syntax error in pattern`},
		{"an unknown source", []string{"name", "x", "agent", "coder", "sources", "jira"}, 400, `match.sources[0]: unknown source &#34;jira&#34;`},
		{"a priority in words", []string{"name", "x", "agent", "coder", "priority", "high"}, 400, `priority &#34;high&#34;: want a whole number`},
		{"a priority in exponent", []string{"name", "x", "agent", "coder", "priority", "1e3"}, 400, `priority &#34;1e3&#34;: want a whole number`},
		{"a priority past int64", []string{"name", "x", "agent", "coder", "priority", "9223372036854775808"}, 400, `want a whole number`},
		{"a name too long", []string{"name", strings.Repeat("n", 201), "agent", "coder"}, 400, "name: 201 characters, over the 200 a rule&#39;s name may have"},
		{"a name of two lines", []string{"name", "deploys\nrule", "agent", "coder"}, 400, "name: holds the control character U&#43;000A"},
		{"a name written backwards", []string{"name", "x\u202ey", "agent", "coder"}, 400, "name: holds the control character U&#43;202E"},
		{"a label with an escape", []string{"name", "x", "agent", "coder", "labels", "bug\x1b[31m"}, 400, "match.labels[0]: holds the control character U&#43;001B"},
		{"a huge expression", []string{"name", "x", "agent", "coder", "text", strings.Repeat("(a*)*", 2000)}, 400, "match.text: 10000 bytes, over the 4096"},
		{"a form over 1 MiB", []string{"name", "x", "agent", "coder", "text", strings.Repeat("a", 1<<20)}, 413, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, page := c.do("POST", "/admin/rules", rulesForm(csrf, tc.fields...), nil)
			require.Equal(t, tc.status, resp.StatusCode, page)
			if tc.want != "" {
				require.Contains(t, page, tc.want)
			}
		})
	}
	var rules admin.Rules
	r.json(t, "GET", "/api/v1/rules", "", 200, &rules)
	require.Equal(t, []string{"deploys", "mine"}, names(rules.Rules), "nothing refused was stored")

	// Unicode is a name like any other, shown as written.
	resp, _ = c.do("POST", "/admin/rules", rulesForm(csrf, "name", "déploiements ✓ 部署", "agent", "docs", "text", "(?i)déployer|部署"), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = c.do("GET", "/admin/rules", nil, nil)
	require.Contains(t, page, `data-name="déploiements ✓ 部署"`)
	require.Equal(t, "docs", r.explain(t, "on va 部署 demain").Agent)

	// Moved past either end of the order: first, then last.
	order := func() []string {
		t.Helper()
		_, page := c.do("GET", "/admin/rules", nil, nil)
		return ruleOrder(page)
	}
	move := func(id, priority string, status int) string {
		t.Helper()
		resp, page := c.do("POST", "/admin/rules/"+id+"/priority", rulesForm(csrf, "priority", priority), nil)
		require.Equal(t, status, resp.StatusCode, page)
		return page
	}
	move("rule_1", "9223372036854775807", http.StatusSeeOther)
	require.Equal(t, "mine@stored:rule_1", order()[0])
	move("rule_1", "-9223372036854775808", http.StatusSeeOther)
	require.Equal(t, "mine@stored:rule_1", order()[len(order())-1])
	require.Contains(t, move("rule_1", "-9223372036854775809", http.StatusBadRequest), "want a whole number")
	require.Contains(t, move("rule_9", "1", http.StatusNotFound), `no rule &#34;rule_9&#34;`)

	// The config's rule is changed only in its file.
	configs := fmt.Sprintf(`no stored rule &#34;deploys&#34;: rule &#34;deploys&#34; is the config&#39;s (%s:3), changed only there`, f.path)
	require.Contains(t, move("deploys", "100", http.StatusNotFound), configs)
	resp, page = c.do("POST", "/admin/rules/deploys/delete", rulesForm(csrf), nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, page, configs)
	resp, page = c.do("POST", "/admin/rules/deploys", rulesForm(csrf, "name", "deploys", "agent", "docs"), nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, page, configs)
	var body struct{ Error string }
	r.json(t, "DELETE", "/api/v1/rules/deploys", "", http.StatusNotFound, &body)
	require.Equal(t, fmt.Sprintf(`no stored rule "deploys": rule "deploys" is the config's (%s:3), changed only there`, f.path), body.Error)
	r.json(t, "PUT", "/api/v1/rules/deploys/priority", `{"priority":1}`, http.StatusNotFound, nil)
	r.json(t, "DELETE", "/api/v1/rules/rule_9", "", http.StatusNotFound, &body)
	require.Equal(t, `no rule "rule_9"`, body.Error)
	require.Contains(t, order(), "deploys@"+f.path+":3", "the config's rule is still in effect")
}
