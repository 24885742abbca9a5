package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/skills"
)

// deployChecks is a package with a skill and settings, installed from a
// directory in the browser.
const deployChecks = `name: deploy-checks
version: 1.2.0
description: Checks a deploy before it goes out.
skills:
  - name: deploy-check
    description: Check a deploy plan before it goes out.
    instructions: Read the plan and say what could go wrong.
    allowed_tools: [read_file]
    execution_protocol: [Read the deploy plan with read_file.]
config:
  type: object
  properties:
    environment: {type: string, enum: [staging, production], description: where deploys go}
    retries: {type: integer, minimum: 0}
  additionalProperties: false
`

// browseSkillScopes installs a package from the skills library, turns a
// built-in skill off for one repository on the scopes page and sees the
// agent's cell inherit that, then looks at the agents page.
func browseSkillScopes(t *testing.T, b *browser) {
	tr := startTree(t, newFakeModel(t, func(context.Context, chatRequest) reply { return reply{Text: "done"} }), treeOptions{})
	// A short path, as a person would type one.
	src, err := os.MkdirTemp("", "deploy-checks-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(src) })
	require.NoError(t, os.WriteFile(filepath.Join(src, "manifest.yaml"), []byte(deployChecks), 0o644))
	tab := b.tab(t)
	b.signIn(t, tab, tr.base, tr.token)

	b.do(t, tab,
		chromedp.Navigate(tr.base+"/admin/skills"),
		chromedp.WaitVisible(chromedp.CSS("#install-source")),
		chromedp.SendKeys(chromedp.CSS("#install-source"), src),
		chromedp.SendKeys(chromedp.CSS("#install-enable"), "repo:acme/web"),
		chromedp.Click(chromedp.CSS("#install-submit")),
		chromedp.WaitVisible(chromedp.CSS("#installed")),
	)
	require.Contains(t, b.text(t, tab, "#installed"), "Installed deploy-checks 1.2.0 from "+src+". Enabled at repo:acme/web.")
	require.Contains(t, b.text(t, tab, `#packages tr[data-package="deploy-checks"]`), "deploy-check")
	shotView(t, b, tab, "skills")
	cell := func(scope string) string {
		return `#matrix td[data-name="release-notes"][data-scope="` + scope + `"]`
	}
	b.do(t, tab,
		chromedp.Navigate(tr.base+"/admin/scopes"),
		chromedp.WaitVisible(chromedp.CSS("#sel-repo")),
		chromedp.SendKeys(chromedp.CSS("#sel-repo"), "acme/web"),
		chromedp.SetValue(chromedp.CSS("#sel-agent"), "lead"),
		chromedp.Click(chromedp.CSS("#sel-show")),
		chromedp.WaitVisible(chromedp.CSS(cell("agent:lead"))),
	)
	require.Contains(t, b.text(t, tab, cell("repo:acme/web")), "default")
	require.Contains(t, b.text(t, tab, cell("agent:lead")), "default")

	b.do(t, tab,
		chromedp.Click(chromedp.CSS(cell("repo:acme/web")+` button[value="disable"]`)),
		chromedp.WaitVisible(chromedp.CSS(cell("repo:acme/web")+`[data-state="here"]`)),
	)
	repo := b.text(t, tab, cell("repo:acme/web"))
	require.Contains(t, repo, "off")
	require.Contains(t, repo, "set here")
	agent := b.text(t, tab, cell("agent:lead"))
	require.Contains(t, agent, "off")
	require.Contains(t, agent, "inherited from repo:acme/web")
	require.Contains(t, b.text(t, tab, cell("org:acme")), "default", "the org keeps it")
	deploy := `#matrix td[data-name="deploy-check"][data-scope="agent:lead"]`
	require.Contains(t, b.text(t, tab, deploy), "inherited from repo:acme/web", "the package installed enabled at the repository")
	shotView(t, b, tab, "scopes")

	// The package's settings at the repository, which the agent's scope
	// inherits.
	at := func(scope string) string {
		return `form.config-at[data-package="deploy-checks"][data-scope="` + scope + `"] `
	}
	b.do(t, tab,
		chromedp.SendKeys(chromedp.CSS(at("repo:acme/web")+`input[name="setting.environment"]`), "production"),
		chromedp.Click(chromedp.CSS(at("repo:acme/web")+`button`)),
		chromedp.WaitVisible(chromedp.CSS(at("agent:lead")+`input[name="setting.environment"][placeholder="inherited: production"]`)),
	)
	val, err := chromedp.Run(tab, chromedp.Value(chromedp.CSS(at("repo:acme/web")+`input[name="setting.environment"]`)))
	require.NoError(t, err)
	require.Equal(t, "production", val)
	b.do(t, tab,
		chromedp.Navigate(tr.base+"/admin/agents"),
		chromedp.WaitVisible(chromedp.CSS(`#agents tr[data-agent="lead"]`)),
	)
	require.Contains(t, b.text(t, tab, `#agents tr[data-agent="lead"]`), "contributor")
	shotView(t, b, tab, "agents")
}

// shotView saves what the window shows of the page as name.png: these pages
// are long, and the top of each is what docs/admin.md shows.
func shotView(t *testing.T, b *browser, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	require.NoError(t, err, "screenshot %s", name)
	require.NoError(t, os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644))
}

// TestAdminUISkillPagesAgreeWithTheAPI drives the skills pages of a real
// daemon as a browser would: a toggle on the scopes page is what `skills
// effective` then answers, audited as who signed in, and the agents page
// shows what a model is without its key.
func TestAdminUISkillPagesAgreeWithTheAPI(t *testing.T) {
	const key = "sk-proj-0123456789abcdefghijklmnopqrstuvwxyzABCD"
	r := start(t, func(o *daemon.Options) {
		o.Setup.Config.Models = map[string]config.Model{"default": {Provider: config.ProviderOpenAI, Model: "gpt-4.1-mini", APIKey: bot.Secret(key)}}
	})
	c := newAdminClient(t, r.base)
	resp, _ := c.signIn(url.Values{"token": {r.token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	_, page := c.do("GET", "/admin/scopes?repo=acme/web&agent=coder", nil, nil)
	form := url.Values{"csrf_token": {c.csrf(page)}, "repo": {"acme/web"}, "agent": {"coder"},
		"name": {"incident-triage"}, "scope": {"repo:acme/web"}, "set": {"disable"}}
	noToken := url.Values{}
	for k, v := range form {
		if k != "csrf_token" {
			noToken[k] = v
		}
	}
	resp, _ = c.do("POST", "/admin/scopes/set", noToken, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a form without its CSRF token changes nothing")
	resp, _ = c.do("POST", "/admin/scopes/set", form, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	var eff []skills.Effective
	code, body := r.do(t, "GET", "/api/v1/skills/effective?repo=acme/web&agent=coder", "")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &eff))
	for _, e := range eff {
		if e.Name == "incident-triage" {
			require.Equal(t, skills.Effective{Name: "incident-triage", Package: "incident-triage", Scope: "repo:acme/web", Origin: "store"}, e)
		}
	}
	_, page = c.do("GET", "/admin/scopes?repo=acme/web&agent=coder", nil, nil)
	require.Contains(t, page, `data-name="incident-triage" data-scope="agent:coder" data-state="inherited" data-enabled="false">`)

	var audit struct {
		Items []policy.AuditRecord `json:"items"`
	}
	code, body = r.do(t, "GET", "/api/v1/audit?decision=change", "")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &audit))
	require.Len(t, audit.Items, 1)
	require.Equal(t, "skills.disable", audit.Items[0].Tool)
	require.Equal(t, "admin", audit.Items[0].By)

	resp, page = c.do("GET", "/admin/agents", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `<td>default<br><span class="muted">openai gpt-4.1-mini</span></td>`)
	require.Contains(t, page, `data-profile="maintainer"`)
	require.Contains(t, page, "<code>access.github.maintain</code>")
	require.NotContains(t, page, key)
	require.NotContains(t, page, bot.Redacted, "the key is not even there to be masked")
}
