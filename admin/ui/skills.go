package ui

import (
	"net/http"
	"strings"
	"time"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// The skills library: the packages in effect with what each contributes,
// as GET /api/v1/packages lists them; every skill with its version; a form
// that installs from a source through the API's install path; uninstall.

func (u *UI) skillsPage() page {
	return page{Nav: "Skills", Path: "/admin/skills", Mount: func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/skills", u.library)
		m.HandleFunc("POST /admin/skills/install", u.installPackage)
		m.HandleFunc("POST /admin/skills/uninstall", u.uninstallPackage)
	}}
}

// libraryView is the template's data.
type libraryView struct {
	Packages []admin.PackageSummary
	Skills   []librarySkill
	// CanInstall is false when the daemon has no installer.
	CanInstall bool
	// Installed is what an install just did; Uninstalled what an
	// uninstall removed.
	Installed   *install.Result
	Uninstalled *skills.InstalledPackage
	// Form is what was typed in the install form, kept when it is refused.
	Form installForm
	// Error is a refused install or uninstall, said as it is.
	Error string
}

// librarySkill is a skill as the library lists it.
type librarySkill struct {
	Name, Package, Version, Description string
	Warnings                            []string
}

// installForm is the install form's fields.
type installForm struct {
	Source, SHA256, Enable string
}

func (u *UI) libraryView() (libraryView, bool) {
	reg := u.opts.Admin.Skills
	if reg == nil {
		return libraryView{}, false
	}
	v := libraryView{Packages: admin.Packages(reg), CanInstall: u.opts.Admin.Installer != nil}
	for _, s := range reg.Skills() {
		v.Skills = append(v.Skills, librarySkill{Name: s.Name, Package: s.Package, Version: s.Version, Description: s.Description, Warnings: reg.Warnings(s.Name)})
	}
	return v, true
}

func (u *UI) library(w http.ResponseWriter, r *http.Request) {
	v, ok := u.libraryView()
	if !ok {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no package registry"))
		return
	}
	u.render(w, r, "skills.html", v)
}

// installPackage installs from the form's source through the API's install
// path. It answers with the library and what the install did, or with the
// refusal and the form as it was typed.
func (u *UI) installPackage(w http.ResponseWriter, r *http.Request) {
	v, ok := u.libraryView()
	if !ok {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no package registry"))
		return
	}
	v.Form = installForm{
		Source: strings.TrimSpace(r.PostFormValue("source")), SHA256: strings.TrimSpace(r.PostFormValue("sha256")),
		Enable: strings.TrimSpace(r.PostFormValue("enable")),
	}
	req := admin.InstallRequest{Source: v.Form.Source, SHA256: v.Form.SHA256, Enable: strings.FieldsFunc(v.Form.Enable, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t'
	})}
	if req.Source == "" {
		v.Error = "source is required: a directory on the daemon's machine, git+<url>[#ref], npm:<name>[@range] or an https:// archive with its sha256"
		u.renderStatus(w, r, http.StatusBadRequest, "skills.html", v)
		return
	}
	// Fetching may take longer than the server's usual write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(admin.InstallTime))
	res, err := admin.Install(r.Context(), u.opts.Admin.Installer, req)
	if err != nil {
		var status int
		status, v.Error = u.refusal(r, err)
		u.renderStatus(w, r, status, "skills.html", v)
		return
	}
	u.record(r, Change{Action: "package.install", Detail: map[string]any{"source": req.Source, "package": res.Package, "version": res.Version, "enable": req.Enable}})
	v, _ = u.libraryView()
	v.Installed = &res
	u.render(w, r, "skills.html", v)
}

// uninstallPackage uninstalls the form's package.
func (u *UI) uninstallPackage(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("package")
	rec, err := admin.Uninstall(r.Context(), u.opts.Admin.Installer, name)
	v, ok := u.libraryView()
	if !ok {
		u.fail(w, r, bot.Errorf(bot.EUNAVAILABLE, "no package registry"))
		return
	}
	if err != nil {
		var status int
		status, v.Error = u.refusal(r, err)
		u.renderStatus(w, r, status, "skills.html", v)
		return
	}
	u.record(r, Change{Action: "package.uninstall", Detail: map[string]string{"package": rec.Name, "version": rec.Version}})
	v.Uninstalled = &rec
	u.render(w, r, "skills.html", v)
}
