package ui

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// User is someone who signs in with a password.
type User struct {
	Name string
	// PasswordHash is the bcrypt hash of the password.
	PasswordHash bot.Secret
}

// AuditLog is the audit log: the audit page reads it and every change made
// in the UI is written to it. *policy.Auditor has it.
type AuditLog interface {
	Record(ctx context.Context, rec policy.AuditRecord) error
	List(ctx context.Context, f policy.AuditFilter) ([]policy.AuditRecord, string, error)
}

// Records are what the pages read from the store beside what the API
// reads: budget counters, threads' messages, runs' transcripts,
// background tasks.
type Records interface {
	Spent(ctx context.Context, keys []string) ([]bot.Spend, error)
	ListOutbox(ctx context.Context, thread string) ([]bot.OutboxMessage, error)
	ListTranscripts(ctx context.Context, jobID string) ([][]byte, error)
	SpentUnder(ctx context.Context, prefix string, limit int) ([]bot.Spend, bool, error)
	ListTasks(ctx context.Context, f bot.TaskFilter) ([]bot.BackgroundTask, string, error)
}

// Rerouter hands a work item to another agent and wakes the workers.
type Rerouter interface {
	RerouteWorkItem(ctx context.Context, id string, hop bot.Hop) (*bot.WorkItem, error)
}

// Options configure the UI. Admin, Sessions, Redactor and Audit are required.
type Options struct {
	// Admin are the parts the admin API reads and changes, which the
	// pages share: the store, the intake, the router, the runs, skills.
	Admin admin.Options
	// Tokens are the API's named tokens; each signs in as its name.
	// SetCredentials replaces them and Users.
	Tokens []httpapi.Token
	// Users sign in with a password.
	Users []User
	// PublicURL is where people reach the daemon; under https, cookies
	// are only sent over https.
	PublicURL string
	// Roster is the configuration in effect as the agents page shows
	// it; nil: that page says no agents are loaded.
	Roster Roster
	// Redactor masks every page before it is sent.
	Redactor *bot.Redactor
	// Audit is where changes are recorded.
	Audit AuditLog
	// Records are the store's budget counters, messages and
	// transcripts; nil shows none of them.
	Records Records
	// Rerouter re-routes work items; nil offers no re-route.
	Rerouter Rerouter
	// Approvals are the tool calls waiting for a person; nil: the
	// approvals page says there are none to decide.
	Approvals ApprovalDesk
	// Caps are the budgets of the config in effect; nil: the budgets
	// page says there are none.
	Caps BudgetCaps
	// Sessions keep who is signed in, for every replica sharing the
	// store and across restarts.
	Sessions SessionStore
	// SessionTTL is how long a session lasts from sign-in; default 12h.
	SessionTTL time.Duration
	Logger     *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// DefaultSessionTTL is how long a session lasts when Options say nothing.
const DefaultSessionTTL = 12 * time.Hour

// UI is the admin web UI.
type UI struct {
	opts     Options
	log      *slog.Logger
	sessions *sessions
	guard    *signInGuard
	pages    []page
	tmpl     map[string]*template.Template // by file name under templates/
	handler  http.Handler
}

// page is one page of the UI: its entry in the navigation and its routes.
type page struct {
	// Nav is the page's name in the navigation; Path is where it leads
	// and the prefix of the paths that show it as current.
	Nav, Path string
	// Mount registers the page's routes, each under /admin/.
	Mount func(m *http.ServeMux)
}

// pageList is every page, in the navigation's order. A new page adds its
// line here.
func (u *UI) pageList() []page {
	return []page{
		u.workItemsPage(),
		u.rulesPage(),
		u.skillsPage(),
		u.scopesPage(),
		u.agentsPage(),
		u.approvalsPage(),
		u.budgetsPage(),
		u.auditPage(),
	}
}

// New returns the UI.
func New(opts Options) (*UI, error) {
	if opts.Admin.Store == nil || opts.Sessions == nil || opts.Redactor == nil || opts.Audit == nil {
		return nil, fmt.Errorf("admin ui: a store, a session store, a redactor and an audit log are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	u := &UI{
		opts: opts, log: opts.Logger,
		sessions: &sessions{store: opts.Sessions, ttl: opts.SessionTTL, now: opts.Now, log: opts.Logger},
		guard:    newSignInGuard(opts.Now),
	}
	u.SetCredentials(opts.Tokens, opts.Users)
	var err error
	if u.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	u.pages = u.pageList()
	u.handler = u.routes()
	return u, nil
}

// SetCredentials makes tokens and users what people sign in with, in place
// of Options' or those set before: from the next request on, the sessions
// started with a credential no longer among them are refused and
// forgotten, and it no longer signs in.
func (u *UI) SetCredentials(tokens []httpapi.Token, users []User) {
	u.sessions.in.Store(newSigners(tokens, users))
}

// Handler serves /admin/.
func (u *UI) Handler() http.Handler { return u.handler }

func (u *UI) routes() http.Handler {
	pages := http.NewServeMux()
	pages.HandleFunc("GET /admin/{$}", u.home)
	pages.HandleFunc("POST /admin/signout", u.signOut)
	for _, p := range u.pages {
		p.Mount(pages)
	}
	static, _ := fs.Sub(staticFS, "static") // the directory is embedded
	mux := http.NewServeMux()
	mux.Handle("GET /admin/static/", http.StripPrefix("/admin/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /admin/signin", u.signInForm)
	mux.HandleFunc("POST /admin/signin", u.signIn)
	mux.Handle("/admin/", u.requireSession(u.checkCSRF(pages)))
	return securityHeaders(mux)
}

// home leads to the first page.
func (u *UI) home(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, u.pages[0].Path, http.StatusSeeOther)
}

// parseTemplates parses each page's template with the layout.
func parseTemplates() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(funcs()).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("admin ui: parse the layout: %w", err)
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("admin ui: list the templates: %w", err)
	}
	out := map[string]*template.Template{}
	for _, f := range files {
		name := path.Base(f)
		if name == "layout.html" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, f)
		if err != nil {
			return nil, fmt.Errorf("admin ui: parse %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// funcs are the functions templates use.
func funcs() template.FuncMap {
	return template.FuncMap{
		"ago":  ago,
		"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"join": strings.Join,
		"count": func(n any, one, many string) (string, error) {
			switch n := n.(type) {
			case int:
				return bot.Count(n, one, many), nil
			case int64:
				return bot.Count(int(n), one, many), nil
			}
			return "", fmt.Errorf("count: %T is not a number of things", n)
		},
	}
}

// ago says how long ago t was, in the largest unit that fits.
func ago(t time.Time) string {
	return age(time.Since(t))
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
