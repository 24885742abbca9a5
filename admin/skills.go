package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/yamldecode"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// Installer installs and uninstalls packages; *install.Installer is one.
type Installer interface {
	Install(ctx context.Context, req install.Request) (install.Result, error)
	Uninstall(ctx context.Context, name string) (skills.InstalledPackage, error)
}

// InstallTime bounds how long an install request may take to answer: a
// git clone or an npm download may take minutes, past the server's usual
// write timeout, so a handler that installs extends its write deadline.
const InstallTime = 11 * time.Minute

func (a *API) mountSkills(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/skills", a.listSkills)
	mux.HandleFunc("POST /api/v1/skills", a.registerSkill)
	mux.HandleFunc("GET /api/v1/skills/effective", a.effectiveSkills)
	mux.HandleFunc("POST /api/v1/skills/validate", a.validateSkills)
	mux.HandleFunc("POST /api/v1/skills/compose", a.composeSkills)
	mux.HandleFunc("POST /api/v1/skills/select", a.selectSkills)
	mux.HandleFunc("GET /api/v1/skills/{name}", a.showSkill)
	mux.HandleFunc("POST /api/v1/skills/{name}/override_version", a.overrideSkill)
	mux.HandleFunc("POST /api/v1/skills/{name}/{setting}", a.setSkill)
	mux.HandleFunc("GET /api/v1/packages", a.listPackages)
	mux.HandleFunc("POST /api/v1/packages", a.installPackage)
	mux.HandleFunc("GET /api/v1/packages/{name}", a.showPackage)
	mux.HandleFunc("DELETE /api/v1/packages/{name}", a.uninstallPackage)
	mux.HandleFunc("POST /api/v1/packages/{name}/{setting}", a.setSkill)
}

// skillsError gives the skills package's refusals their codes.
func skillsError(err error) error {
	var es yamldecode.Errors
	var ses skills.SettingErrors
	switch {
	case err == nil:
		return nil
	case errors.Is(err, skills.ErrNotFound):
		return bot.Errorf(bot.ENOTFOUND, "%v", err)
	case errors.Is(err, skills.ErrConflict):
		return bot.Errorf(bot.ECONFLICT, "%v", err)
	case errors.Is(err, skills.ErrInvalid), errors.As(err, &es), errors.As(err, &ses):
		return bot.Errorf(bot.EINVALID, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return bot.Errorf(bot.EUNAVAILABLE, "gave up after %s: %v", InstallTime, err)
	}
	return err
}

func (a *API) registry(w http.ResponseWriter, r *http.Request) (*skills.Registry, bool) {
	if a.opts.Skills == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no package registry"))
		return nil, false
	}
	return a.opts.Skills, true
}

// SkillSummary is one entry of GET /api/v1/skills and `skills list --json`.
type SkillSummary struct {
	Name        string `json:"name"`
	Package     string `json:"package"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

func (a *API) listSkills(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	list := reg.Skills()
	if q := r.URL.Query().Get("q"); q != "" {
		list = reg.Search(q)
	}
	out := make([]SkillSummary, 0, len(list))
	for _, s := range list {
		out = append(out, SkillSummary{Name: s.Name, Package: s.Package, Version: s.Version, Description: s.Description})
	}
	httpapi.JSON(w, http.StatusOK, out)
}

// SkillDetail is GET /api/v1/skills/{name}: the skill and what
// registration found worth saying.
type SkillDetail struct {
	*skills.Skill
	Warnings []string `json:"warnings"`
}

func (a *API) showSkill(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	s, ok := reg.Skill(name)
	if !ok {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.ENOTFOUND, "no skill %q", name))
		return
	}
	httpapi.JSON(w, http.StatusOK, SkillDetail{Skill: s, Warnings: nonNilStrings(reg.Warnings(name))})
}

// SkillsRequest names skills: the body of validate and compose.
type SkillsRequest struct {
	Skills []string `json:"skills"`
}

func (a *API) validateSkills(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	var req SkillsRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, reg.Validate(req.Skills))
}

func (a *API) composeSkills(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	var req SkillsRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	c, err := reg.Compose(req.Skills)
	if err != nil {
		httpapi.Error(w, r, a.logger, skillsError(err))
		return
	}
	httpapi.JSON(w, http.StatusOK, c)
}

func (a *API) selectSkills(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	var req skills.SelectRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	sel, err := reg.Select(req)
	if err != nil {
		httpapi.Error(w, r, a.logger, skillsError(err))
		return
	}
	httpapi.JSON(w, http.StatusOK, sel)
}

func (a *API) effectiveSkills(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	t := skills.Target{Org: q.Get("org"), Repo: q.Get("repo"), Agent: q.Get("agent")}
	if t.Repo != "" {
		if _, err := skills.ParseScope("repo:" + t.Repo); err != nil {
			httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "repo %q: want owner/name", t.Repo))
			return
		}
	}
	if t.Org != "" {
		if _, err := skills.ParseScope("org:" + t.Org); err != nil {
			httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "org %q: not an org name", t.Org))
			return
		}
	}
	if t.Agent != "" && !skills.ValidAgentName(t.Agent) {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "agent %q: not an agent name", t.Agent))
		return
	}
	httpapi.JSON(w, http.StatusOK, reg.Effective(t))
}

// readSkill reads a skill definition from the body, as strictly as a
// manifest's.
func (a *API) readSkill(w http.ResponseWriter, r *http.Request) (*skills.Skill, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, bot.Errorf(bot.ETOOLARGE, "request body over %d bytes", tooBig.Limit)
		}
		return nil, err
	}
	s, err := skills.ParseSkill("request.json", data)
	if err != nil {
		return nil, bot.Errorf(bot.EINVALID, "%v", err)
	}
	return s, nil
}

// RegisterResult is the answer of registering or overriding a skill.
type RegisterResult struct {
	Skill    *skills.Skill `json:"skill"`
	Warnings []string      `json:"warnings"`
}

func (a *API) registerSkill(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	s, err := a.readSkill(w, r)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	warnings, err := reg.Register(*s)
	if err != nil {
		httpapi.Error(w, r, a.logger, skillsError(err))
		return
	}
	got, _ := reg.Skill(s.Name)
	httpapi.JSON(w, http.StatusCreated, RegisterResult{Skill: got, Warnings: nonNilStrings(warnings)})
}

func (a *API) overrideSkill(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	s, err := a.readSkill(w, r)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if s.Name != r.PathValue("name") {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "the body defines skill %q, the path names %q", s.Name, r.PathValue("name")))
		return
	}
	warnings, err := reg.OverrideVersion(*s)
	if err != nil {
		httpapi.Error(w, r, a.logger, skillsError(err))
		return
	}
	got, _ := reg.Skill(s.Name)
	httpapi.JSON(w, http.StatusOK, RegisterResult{Skill: got, Warnings: nonNilStrings(warnings)})
}

// SettingRequest is the body of POST .../{name}/enable, disable and
// inherit: the scope, and for enable optionally the package's settings
// there, which replace those stored at that scope. Enable without
// settings and disable keep the scope's settings: only the enablement
// changes. Inherit forgets the scope's setting, settings included.
type SettingRequest struct {
	Scope    string         `json:"scope"`
	Settings map[string]any `json:"settings,omitempty"`
}

// SettingResult is the answer of enable, disable and inherit.
type SettingResult struct {
	Name    string `json:"name"`
	Scope   string `json:"scope"`
	Enabled string `json:"enabled"` // true, false or inherit
}

func (a *API) setSkill(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	en, err := skills.EnablementOfVerb(r.PathValue("setting"))
	if err != nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.ENOTFOUND, "want /enable, /disable or /inherit"))
		return
	}
	var req SettingRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	if req.Scope == "" {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "scope is required: global, org:<org>, repo:<owner>/<repo> or agent:<agent>"))
		return
	}
	sc, err := skills.ParseScope(req.Scope)
	if err != nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "%v", err))
		return
	}
	name := r.PathValue("name")
	if strings.HasPrefix(r.URL.Path, "/api/v1/packages/") {
		if _, ok := reg.Package(name); !ok {
			httpapi.Error(w, r, a.logger, bot.Errorf(bot.ENOTFOUND, "no package %q", name))
			return
		}
	}
	if en != skills.Enabled && len(req.Settings) > 0 {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EINVALID, "settings go with enable"))
		return
	}
	switch {
	case len(req.Settings) > 0, en == skills.Inherit:
		// Inherit forgets the scope's setting whole, its settings with
		// it: the CLI's way to clear them.
		err = Set(r.Context(), reg, skills.Setting{Scope: sc, Name: name, Enabled: en, Settings: normalizeNumbers(req.Settings)})
	default:
		err = Toggle(r.Context(), reg, sc, name, en)
	}
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, SettingResult{Name: name, Scope: sc.String(), Enabled: en.String()})
}

// Set makes a setting through the registry, which stores it and puts it
// in effect for the next run, as POST /api/v1/skills/{name}/{setting}
// does: for the API and the admin UI, its refusals given their codes.
func Set(ctx context.Context, reg *skills.Registry, s skills.Setting) error {
	return skillsError(reg.Set(ctx, s))
}

// Toggle changes only the enablement of a package or skill at a scope
// (enable, disable, inherit), keeping the package settings stored there:
// POST .../enable without settings and .../disable (`skills enable`
// without --set, `skills disable`) and the admin UI's toggles.
func Toggle(ctx context.Context, reg *skills.Registry, sc skills.Scope, name string, en skills.Enablement) error {
	s := skills.Setting{Scope: sc, Name: name, Enabled: en}
	if st, ok := reg.StoredSetting(sc, name); ok {
		s.Settings = st.Settings
	}
	return Set(ctx, reg, s)
}

// normalizeNumbers gives settings' whole numbers as int64, as the config
// file and the store give them.
func normalizeNumbers(m map[string]any) map[string]any {
	for k, v := range m {
		switch x := v.(type) {
		case float64:
			if x == float64(int64(x)) {
				m[k] = int64(x)
			}
		case map[string]any:
			m[k] = normalizeNumbers(x)
		}
	}
	return m
}

// PackageSummary is one entry of GET /api/v1/packages: a package in
// effect (built in or installed) with its lock entry, or an installed one
// that does not load, with why.
type PackageSummary struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	Builtin     bool   `json:"builtin"`
	// Lock entry fields, for installed packages.
	Source       string            `json:"source,omitempty"`
	Resolved     string            `json:"resolved,omitempty"`
	Digest       string            `json:"digest,omitempty"`
	Dependencies map[string]string `json:"dependencies,omitempty"`
	InstalledAt  *time.Time        `json:"installed_at,omitempty"`
	Broken       string            `json:"broken,omitempty"`
	Skills       []string          `json:"skills"`
	Agents       []string          `json:"agents"`
	Tools        []string          `json:"tools"`
	Commands     []string          `json:"commands"`
	Triggers     []string          `json:"triggers"`
}

func summarizePackage(reg *skills.Registry, p *skills.Package) PackageSummary {
	out := PackageSummary{
		Name: p.Name(), Version: p.Version(), Description: p.Manifest.Description, Builtin: p.Builtin,
		Skills: []string{}, Agents: []string{}, Tools: []string{}, Commands: []string{}, Triggers: []string{},
	}
	if rec, ok := reg.Record(p.Name()); ok {
		at := rec.InstalledAt
		out.Source, out.Resolved, out.Digest, out.Dependencies, out.InstalledAt = rec.Source, rec.Resolved, rec.Digest, rec.Dependencies, &at
	}
	for _, s := range p.Skills {
		out.Skills = append(out.Skills, s.Name)
	}
	for _, ag := range p.Agents {
		out.Agents = append(out.Agents, ag.Name)
	}
	for _, t := range p.Tools {
		out.Tools = append(out.Tools, t.Name)
	}
	for _, e := range p.Entrypoints {
		out.Commands = append(out.Commands, e.Commands...)
		out.Triggers = append(out.Triggers, e.Triggers...)
	}
	return out
}

// Packages lists the packages of reg as GET /api/v1/packages and the admin
// UI's library show them: those in effect, by name, then the installed
// ones that do not load, with why.
func Packages(reg *skills.Registry) []PackageSummary {
	out := []PackageSummary{}
	for _, p := range reg.Packages() {
		out = append(out, summarizePackage(reg, p))
	}
	for _, e := range reg.Installed() {
		if e.Broken != "" {
			at := e.InstalledAt
			out = append(out, PackageSummary{
				Name: e.Name, Version: e.Version, Source: e.Source, Resolved: e.Resolved, Digest: e.Digest,
				Dependencies: e.Dependencies, InstalledAt: &at, Broken: e.Broken,
				Skills: []string{}, Agents: []string{}, Tools: []string{}, Commands: []string{}, Triggers: []string{},
			})
		}
	}
	return out
}

func (a *API) listPackages(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	httpapi.JSON(w, http.StatusOK, Packages(reg))
}

// PackageDetail is GET /api/v1/packages/{name}: the summary, the manifest
// and what registration found worth saying.
type PackageDetail struct {
	PackageSummary
	Manifest *skills.Manifest `json:"manifest"`
	Warnings []string         `json:"warnings"`
}

func (a *API) showPackage(w http.ResponseWriter, r *http.Request) {
	reg, ok := a.registry(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	p, ok := reg.Package(name)
	if !ok {
		for _, e := range reg.Installed() {
			if e.Name == name && e.Broken != "" {
				httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "package %s is installed but does not load: %s", name, e.Broken))
				return
			}
		}
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.ENOTFOUND, "no package %q", name))
		return
	}
	httpapi.JSON(w, http.StatusOK, PackageDetail{PackageSummary: summarizePackage(reg, p), Manifest: p.Manifest, Warnings: nonNilStrings(reg.PackageWarnings(p))})
}

// InstallRequest is the body of POST /api/v1/packages.
type InstallRequest struct {
	Source string `json:"source"`
	SHA256 string `json:"sha256,omitempty"`
	// Enable are scopes to enable the package at, in the same step.
	Enable []string `json:"enable,omitempty"`
}

// Install installs a package as POST /api/v1/packages does, for the API
// and the admin UI: its scopes read, the installer's refusals given their
// codes. Fetching may take minutes (InstallTime).
func Install(ctx context.Context, in Installer, req InstallRequest) (install.Result, error) {
	if in == nil {
		return install.Result{}, bot.Errorf(bot.EUNAVAILABLE, "no package installer")
	}
	ir := install.Request{Source: req.Source, SHA256: req.SHA256}
	for _, e := range req.Enable {
		sc, err := skills.ParseScope(e)
		if err != nil {
			return install.Result{}, bot.Errorf(bot.EINVALID, "enable: %v", err)
		}
		ir.Enable = append(ir.Enable, sc)
	}
	res, err := in.Install(ctx, ir)
	return res, skillsError(err)
}

// Uninstall uninstalls a package as DELETE /api/v1/packages/{name} does,
// its refusals given their codes.
func Uninstall(ctx context.Context, in Installer, name string) (skills.InstalledPackage, error) {
	if in == nil {
		return skills.InstalledPackage{}, bot.Errorf(bot.EUNAVAILABLE, "no package installer")
	}
	rec, err := in.Uninstall(ctx, name)
	return rec, skillsError(err)
}

func (a *API) installPackage(w http.ResponseWriter, r *http.Request) {
	if a.opts.Installer == nil {
		httpapi.Error(w, r, a.logger, bot.Errorf(bot.EUNAVAILABLE, "no package installer"))
		return
	}
	var req InstallRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	// Fetching may take longer than the server's usual write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(InstallTime))
	res, err := Install(r.Context(), a.opts.Installer, req)
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	status := http.StatusCreated
	if res.Unchanged {
		status = http.StatusOK
	}
	httpapi.JSON(w, status, res)
}

func (a *API) uninstallPackage(w http.ResponseWriter, r *http.Request) {
	rec, err := Uninstall(r.Context(), a.opts.Installer, r.PathValue("name"))
	if err != nil {
		httpapi.Error(w, r, a.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, rec)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
