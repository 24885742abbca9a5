package ui

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// The scope matrix: every package and skill against the scopes of one
// place (global → org → repo → agent), each cell saying whether it is on
// there, and whether that is set at that scope or inherited and from
// where. Each column is the registry's own answer (Effective,
// PackageEnabled) for the chain up to it, so the matrix and `switchyard
// skills effective` cannot disagree. A toggle sets or clears the setting
// at its scope through the registry, as the API and the CLI do.

func (u *UI) scopesPage() page {
	return page{Nav: "Scopes", Path: "/admin/scopes", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/scopes", u.scopes)
		m.HandleFunc("POST /admin/scopes/set", u.setScope)
		m.HandleFunc("POST /admin/scopes/config", u.configScope)
	}}
}

// selection is the place the matrix is of: any of an org, a repository
// (owner/name) and an agent.
type selection struct {
	Org, Repo, Agent string
}

// readSelection reads the selection from a query or a form, checked as
// the API checks a target. A repository's org is its owner.
func readSelection(get func(string) string) (selection, error) {
	sel := selection{
		Org:   strings.ToLower(strings.TrimSpace(get("org"))),
		Repo:  strings.ToLower(strings.TrimSpace(get("repo"))),
		Agent: strings.TrimSpace(get("agent")),
	}
	if sel.Repo != "" {
		if _, err := skills.ParseScope("repo:" + sel.Repo); err != nil {
			return sel, bot.Errorf(bot.EINVALID, "repository %q: want owner/name", sel.Repo)
		}
		owner, _, _ := strings.Cut(sel.Repo, "/")
		if sel.Org != "" && sel.Org != owner {
			return sel, bot.Errorf(bot.EINVALID, "repository %s is not in org %s: its org is %s", sel.Repo, sel.Org, owner)
		}
		sel.Org = owner
	}
	if sel.Org != "" {
		if _, err := skills.ParseScope("org:" + sel.Org); err != nil {
			return sel, bot.Errorf(bot.EINVALID, "org %q: not an org name", sel.Org)
		}
	}
	if sel.Agent != "" && !skills.ValidAgentName(sel.Agent) {
		return sel, bot.Errorf(bot.EINVALID, "agent %q: not an agent name", sel.Agent)
	}
	return sel, nil
}

// query is the selection as the matrix page's query.
func (s selection) query() string {
	v := url.Values{}
	for k, x := range map[string]string{"org": s.Org, "repo": s.Repo, "agent": s.Agent} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// column is one scope of the selection's chain, with the target whose
// chain ends at it.
type column struct {
	Scope  string // as ParseScope reads it: global, org:acme …
	Kind   string // global, org, repo or agent
	Name   string // the org, owner/name or agent; "" for global
	target skills.Target
}

func (s selection) columns() []column {
	out := []column{{Scope: "global", Kind: "global"}}
	var t skills.Target
	if s.Org != "" {
		t.Org = s.Org
		out = append(out, column{Scope: "org:" + s.Org, Kind: "org", Name: s.Org, target: t})
	}
	if s.Repo != "" {
		t.Repo = s.Repo
		out = append(out, column{Scope: "repo:" + s.Repo, Kind: "repo", Name: s.Repo, target: t})
	}
	if s.Agent != "" {
		t.Agent = s.Agent
		out = append(out, column{Scope: "agent:" + s.Agent, Kind: "agent", Name: s.Agent, target: t})
	}
	return out
}

// matrix is what the scopes page shows.
type matrix struct {
	Sel     selection
	Columns []column
	Groups  []matrixGroup
	// Orgs and Repos are those settings are made at, to choose from.
	Orgs, Repos []string
	// Agents are the agents in effect, to choose from.
	Agents []string
}

// matrixGroup is a package's row, its skills' rows beneath it, and the
// form of its settings. A skill named as its package (each built-in
// package is one skill) has the package's row: settings are made by name,
// so one setting is both's. Skills registered while the daemon runs belong to
// no package that can be set: their group has no row of the package.
type matrixGroup struct {
	Rows   []matrixRow
	Config *packageConfig
}

// matrixRow is a package or a skill across the columns.
type matrixRow struct {
	Name, Kind, Version, Description string
	Cells                            []matrixCell
}

// matrixCell is one package or skill at one scope.
type matrixCell struct {
	Scope   string
	Enabled bool
	// Here is set when the value is set at this scope: by the row's own
	// setting, or for a skill by its package's (Via).
	Here bool
	Via  string
	// Own is set when the row's own setting is here, so it can be
	// cleared (set to inherit).
	Own bool
	// From is where an inherited value is decided: a broader scope, or
	// "default" (built-in packages are on, installed ones off).
	From string
	// Origin is where the deciding setting was made: the config file's
	// line, or "store" (the CLI, the API or this page).
	Origin string
	// Locked names the config file's line that sets the row here: the
	// file decides, and a change is made there.
	Locked string
}

// Next is what toggling the cell sets at its scope.
func (c matrixCell) Next() string {
	if c.Enabled {
		return "disable"
	}
	return "enable"
}

// buildMatrix reads the registry for the selection.
func buildMatrix(reg *skills.Registry, sel selection) matrix {
	m := matrix{Sel: sel, Columns: sel.columns()}
	for _, sc := range reg.Scopes() {
		switch sc.Kind {
		case skills.ScopeOrg:
			m.Orgs = append(m.Orgs, sc.Name)
		case skills.ScopeRepo:
			m.Repos = append(m.Repos, sc.Name)
		}
	}
	scopes := make([]skills.Scope, len(m.Columns))
	effective := make([]map[string]skills.Effective, len(m.Columns))
	for i, c := range m.Columns {
		scopes[i], _ = skills.ParseScope(c.Scope) // built from checked names
		effective[i] = map[string]skills.Effective{}
		for _, e := range reg.Effective(c.target) {
			effective[i][e.Name] = e
		}
	}
	groups := map[string]*matrixGroup{}
	var order []string
	group := func(name string) *matrixGroup {
		g, ok := groups[name]
		if !ok {
			g = &matrixGroup{}
			groups[name] = g
			order = append(order, name)
		}
		return g
	}
	for _, p := range reg.Packages() {
		g := group(p.Name())
		row := matrixRow{Name: p.Name(), Kind: "package", Version: p.Version(), Description: p.Manifest.Description}
		for i, c := range m.Columns {
			e := reg.PackageEnabled(c.target, p.Name())
			row.Cells = append(row.Cells, cellOf(reg, scopes[i], p.Name(), e, true))
		}
		g.Rows = append(g.Rows, row)
		g.Config = configOf(reg, p, m.Columns)
	}
	for _, s := range reg.Skills() {
		if s.Name == s.Package {
			// Settings are by name: the package's row is the skill's.
			continue
		}
		g := group(s.Package)
		row := matrixRow{Name: s.Name, Kind: "skill", Version: s.Version, Description: s.Description}
		for i := range m.Columns {
			row.Cells = append(row.Cells, cellOf(reg, scopes[i], s.Name, effective[i][s.Name], false))
		}
		g.Rows = append(g.Rows, row)
	}
	for _, name := range order {
		m.Groups = append(m.Groups, *groups[name])
	}
	return m
}

// cellOf is the cell of name at scope sc, given what the registry decided
// for the chain ending there.
func cellOf(reg *skills.Registry, sc skills.Scope, name string, e skills.Effective, isPackage bool) matrixCell {
	c := matrixCell{Scope: sc.String(), Enabled: e.Enabled, Origin: e.Origin}
	cs, inConfig := reg.ConfigSetting(sc, name)
	if inConfig {
		c.Locked = cs.Origin
	}
	st, stored := reg.StoredSetting(sc, name)
	c.Own = inConfig && cs.Enabled != skills.Inherit || stored && st.Enabled != skills.Inherit
	if e.Scope != sc.String() {
		c.From = e.Scope
		return c
	}
	c.Here = true
	if !c.Own && !isPackage {
		c.Via = e.Package
	}
	return c
}

// packageConfig is the form of a package's settings at each scope of the
// chain: a field per property of its config schema.
type packageConfig struct {
	Package string
	Fields  []configField
	// At are the values per column, in the columns' order.
	At []configAt
}

// configField is a property of the schema.
type configField struct {
	Key, Type, Description string
	Enum                   []string
}

// configAt is the package's settings at one scope.
type configAt struct {
	Scope string
	// Values are those set at this scope, by key, written as they are
	// typed; Inherited those of the broader scopes merged.
	Values    map[string]string
	Inherited map[string]string
	// Locked names the config file's line that sets them here.
	Locked string
}

// schemaProps is as much of a JSON schema as the form shows: its
// properties' types, descriptions and choices. The registry validates.
type schemaProps struct {
	Properties map[string]struct {
		Type        any    `json:"type"`
		Description string `json:"description"`
		Enum        []any  `json:"enum"`
	} `json:"properties"`
}

// configOf is the settings form of p, or nil when p has no config schema
// with properties.
func configOf(reg *skills.Registry, p *skills.Package, cols []column) *packageConfig {
	if len(p.Manifest.Config) == 0 {
		return nil
	}
	var sp schemaProps
	if err := json.Unmarshal(p.Manifest.Config, &sp); err != nil || len(sp.Properties) == 0 {
		return nil
	}
	pc := &packageConfig{Package: p.Name()}
	for _, k := range sortedKeys(sp.Properties) {
		prop := sp.Properties[k]
		f := configField{Key: k, Description: prop.Description, Type: typeName(prop.Type)}
		for _, e := range prop.Enum {
			f.Enum = append(f.Enum, settingText(e))
		}
		pc.Fields = append(pc.Fields, f)
	}
	var parent skills.Target
	for i, c := range cols {
		sc, _ := skills.ParseScope(c.Scope)
		at := configAt{Scope: c.Scope, Values: map[string]string{}, Inherited: map[string]string{}}
		if i > 0 {
			for k, v := range reg.Settings(parent, p.Name()) {
				at.Inherited[k] = settingText(v)
			}
		}
		if st, ok := reg.StoredSetting(sc, p.Name()); ok {
			for k, v := range st.Settings {
				at.Values[k] = settingText(v)
			}
		}
		if cs, ok := reg.ConfigSetting(sc, p.Name()); ok {
			at.Locked = cs.Origin
			for k, v := range cs.Settings {
				at.Values[k] = settingText(v)
			}
		}
		pc.At = append(pc.At, at)
		parent = c.target
	}
	return pc
}

// typeName is a schema's type as a word: "string", "integer or null".
func typeName(t any) string {
	switch x := t.(type) {
	case string:
		return x
	case []any:
		var words []string
		for _, w := range x {
			if s, ok := w.(string); ok {
				words = append(words, s)
			}
		}
		return strings.Join(words, " or ")
	}
	return ""
}

// settingText writes a setting's value as it is typed in the form: a
// string as it is, anything else as JSON.
func settingText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// readSettings reads the form's fields of pc: an empty field is not set at
// this scope (the broader scopes' value holds); a field of a string
// property is its text, any other is read as the CLI's --set reads it.
func readSettings(form url.Values, fields []configField) map[string]any {
	out := map[string]any{}
	for _, f := range fields {
		text := form.Get("setting." + f.Key)
		if text == "" {
			continue
		}
		if f.Type == "string" {
			out[f.Key] = text
			continue
		}
		out[f.Key] = skills.ParseSettingValue(text)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// scopesView is the template's data.
type scopesView struct {
	matrix
	// Error is a refused change or selection, said as it is.
	Error string
}

func (u *UI) scopes(w http.ResponseWriter, r *http.Request) {
	u.showScopes(w, r, nil)
}

// showScopes renders the matrix for the request's selection, with err (a
// refused change) above it and the status of its code.
func (u *UI) showScopes(w http.ResponseWriter, r *http.Request, err error) {
	reg := u.opts.Admin.Skills
	if reg == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no package registry"))
		return
	}
	get := r.URL.Query().Get
	if r.Method == http.MethodPost {
		get = r.PostFormValue
	}
	sel, selErr := readSelection(get)
	if selErr != nil {
		sel = selection{}
		err = cmp.Or(err, selErr)
	}
	view := scopesView{matrix: buildMatrix(reg, sel)}
	if err != nil && r.Method == http.MethodPost {
		keepTyped(&view.matrix, r)
	}
	status := http.StatusOK
	view.Agents = u.agentNames()
	if sel.Agent != "" && len(view.Agents) > 0 && !slices.Contains(view.Agents, sel.Agent) {
		// An agent no longer in effect may still have settings.
		view.Agents = append(view.Agents, sel.Agent)
	}
	if err != nil {
		status, view.Error = u.refusal(r, err)
	}
	u.renderStatus(w, r, status, "scopes.html", view)
}

// keepTyped puts what a refused settings form held back in its fields.
func keepTyped(m *matrix, r *http.Request) {
	pkg, scope := r.PostFormValue("package"), r.PostFormValue("scope")
	for _, g := range m.Groups {
		if g.Config == nil || g.Config.Package != pkg {
			continue
		}
		for i, at := range g.Config.At {
			if at.Scope != scope {
				continue
			}
			typed := map[string]string{}
			for _, f := range g.Config.Fields {
				typed[f.Key] = r.PostFormValue("setting." + f.Key)
			}
			g.Config.At[i].Values = typed
		}
	}
}

// setScope sets or clears a package's or a skill's enablement at a scope.
// A package's settings there are kept.
func (u *UI) setScope(w http.ResponseWriter, r *http.Request) {
	reg := u.opts.Admin.Skills
	if reg == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no package registry"))
		return
	}
	sel, err := readSelection(r.PostFormValue)
	if err != nil {
		u.showScopes(w, r, err)
		return
	}
	name := r.PostFormValue("name")
	sc, err := skills.ParseScope(r.PostFormValue("scope"))
	if err != nil {
		u.showScopes(w, r, bot.Errorf(bot.EINVALID, "%v", err))
		return
	}
	en, err := skills.EnablementOfVerb(r.PostFormValue("set"))
	if err != nil {
		u.showScopes(w, r, bot.Errorf(bot.EINVALID, "set %v", err))
		return
	}
	if err := admin.Toggle(r.Context(), reg, sc, name, en); err != nil {
		u.showScopes(w, r, err)
		return
	}
	u.record(r, Change{Action: "skills." + r.PostFormValue("set"), Detail: map[string]string{"name": name, "scope": sc.String()}})
	http.Redirect(w, r, "/admin/scopes"+sel.query(), http.StatusSeeOther)
}

// configScope sets a package's settings at a scope, validated by the
// registry against its schema with the broader scopes' settings, as the
// API and the CLI are. Its enablement there is kept.
func (u *UI) configScope(w http.ResponseWriter, r *http.Request) {
	reg := u.opts.Admin.Skills
	if reg == nil {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no package registry"))
		return
	}
	sel, err := readSelection(r.PostFormValue)
	if err != nil {
		u.showScopes(w, r, err)
		return
	}
	name := r.PostFormValue("package")
	p, ok := reg.Package(name)
	if !ok {
		u.showScopes(w, r, bot.Errorf(bot.ENOTFOUND, "no package %q", name))
		return
	}
	sc, err := skills.ParseScope(r.PostFormValue("scope"))
	if err != nil {
		u.showScopes(w, r, bot.Errorf(bot.EINVALID, "%v", err))
		return
	}
	pc := configOf(reg, p, sel.columns())
	if pc == nil {
		u.showScopes(w, r, bot.Errorf(bot.EINVALID, "package %s has no settings", name))
		return
	}
	s := skills.Setting{Scope: sc, Name: name, Settings: readSettings(r.PostForm, pc.Fields)}
	if st, ok := reg.StoredSetting(sc, name); ok {
		s.Enabled = st.Enabled
	}
	if err := admin.Set(r.Context(), reg, s); err != nil {
		u.showScopes(w, r, err)
		return
	}
	u.record(r, Change{Action: "skills.settings", Detail: map[string]any{"package": name, "scope": sc.String(), "settings": s.Settings}})
	http.Redirect(w, r, "/admin/scopes"+sel.query(), http.StatusSeeOther)
}
