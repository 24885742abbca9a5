package skills

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Masterminds/semver/v3"
)

// RuntimePackage is the package of skills registered while the daemon
// runs (Register); they live until it stops.
const RuntimePackage = "runtime"

// InstalledPackage is the record of an installed package: its entry in the
// lock.
type InstalledPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Source is what was installed from, as given: a directory, git+<url>
	// [#ref], npm:<name>[@range] or an https URL.
	Source string `json:"source"`
	// Resolved is exactly what the source gave: the git commit, the npm
	// package version and its integrity, the archive's sha256.
	Resolved string `json:"resolved"`
	// Digest is "sha256:" and the hex SHA-256 of the package tree in its
	// canonical order (see Digest).
	Digest string `json:"digest"`
	// Dependencies are the manifest's, name → semver range.
	Dependencies map[string]string `json:"dependencies,omitempty"`
	// Dir is the package's directory.
	Dir         string    `json:"dir"`
	InstalledAt time.Time `json:"installed_at"`
}

// PackageStore keeps the installed packages: the lock.
type PackageStore interface {
	ListPackages(ctx context.Context) ([]InstalledPackage, error)
	// PutPackage records an installed package, replacing the record of the
	// same name, and the settings given, in one transaction.
	PutPackage(ctx context.Context, p InstalledPackage, settings ...Setting) error
	// DeletePackage forgets a package and every setting naming any of
	// names (the package and its skills), in one transaction. Deleting a
	// package that is not recorded is not an error.
	DeletePackage(ctx context.Context, name string, names []string) error
}

// SettingStore keeps the settings made with the CLI or the API.
type SettingStore interface {
	ListSettings(ctx context.Context) ([]Setting, error)
	// PutSetting records a setting, replacing the one of the same scope
	// and name.
	PutSetting(ctx context.Context, s Setting) error
	// DeleteSetting forgets the setting of that scope and name, if any.
	DeleteSetting(ctx context.Context, scope Scope, name string) error
}

// Store is everything the registry keeps.
type Store interface {
	PackageStore
	SettingStore
}

// Options configure a Registry.
type Options struct {
	// Store keeps installs and settings; nil keeps nothing (built-ins
	// only, as tools that work offline need).
	Store Store
	// Masker finds credentials, which packages never hold.
	Masker Masker
	// Permissions are the permission names command tools may declare.
	Permissions []string
	// KnownTools lists the tools that exist beside packages' command tools
	// (core and platform tools), for warnings about skills naming others.
	KnownTools func() []string
	// Version is the daemon's, for skills' compatibility rules; "" or a
	// version that is not semver skips that check.
	Version string
	// CheckEnable, when set, is asked before a setting that enables a
	// package (Enabled, naming a package) takes effect: from Set, from the
	// settings given to Add (install --enable) and from SetConfig and
	// CheckConfig. Its error refuses the change, nothing stored, and is
	// returned as it is: it says why (a command tool needs what the
	// profiles there lack).
	CheckEnable func(p *Package, at Scope) error
	// Stored, when set, is called after a change this registry wrote to
	// the store (a setting, an install, an uninstall) is in effect here,
	// for the processes sharing the store to be told: they put it in
	// effect with RefreshSettings.
	Stored func()
	Logger *slog.Logger
}

// Registry is the packages in effect and their skills, agents, command
// tools and entry points, with the settings that enable them per scope.
// Readers see one consistent catalog; a change (an install, a setting, a
// registration) replaces it whole and takes effect for the next run. It
// is safe for concurrent use.
type Registry struct {
	opts Options
	log  *slog.Logger

	mu  sync.Mutex // serialises changes
	cur atomic.Pointer[catalog]

	subMu sync.Mutex
	subs  []func()

	// unknown are the stored settings already reported as naming no
	// package or skill here; guarded by mu.
	unknown map[settingKey]bool
}

// catalog is one immutable state of the registry.
type catalog struct {
	packages map[string]*Package
	sorted   []*Package
	records  map[string]InstalledPackage // installed packages' lock entries
	broken   map[string]string           // stored packages that did not load: why
	skills   map[string]*entry
	names    []string // skill names, sorted
	runtime  map[string]*Skill
	settings settings
	tools    map[string]bool // every known tool name, for warnings
	// known lists every tool a skill may name (patterns such as agent_*
	// among them), the packages' command tools included; nil when the
	// registry was not told the tools, and a name is then never unknown.
	known []string
}

// entry is a skill as the rules use it.
type entry struct {
	skill        *Skill
	requires     []string
	incompatible []string
	warnings     []string
	// steps are the tools its protocol names that it allows, each with
	// its step: a member of a set that forbids one stops that step.
	steps []stepTool
}

// NewRegistry builds the registry: the built-in packages, the packages the
// store records (a package that no longer loads is reported and left
// out, its record kept so it can be uninstalled), and the store's
// settings.
func NewRegistry(ctx context.Context, opts Options) (*Registry, error) {
	r := &Registry{opts: opts, log: opts.Logger, unknown: map[settingKey]bool{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	builtins, err := Builtins(LoadOptions{Masker: opts.Masker, Permissions: opts.Permissions})
	if err != nil {
		return nil, err
	}
	c := &catalog{packages: map[string]*Package{}, records: map[string]InstalledPackage{}, broken: map[string]string{}}
	for _, p := range builtins {
		c.packages[p.Name()] = p
	}
	if opts.Store != nil {
		recs, err := opts.Store.ListPackages(ctx)
		if err != nil {
			return nil, fmt.Errorf("installed packages: %w", err)
		}
		for _, rec := range recs {
			c.records[rec.Name] = rec
			p, err := LoadInstalled(rec, LoadOptions{Masker: opts.Masker, Permissions: opts.Permissions})
			if err != nil {
				c.broken[rec.Name] = err.Error()
				r.log.LogAttrs(ctx, slog.LevelError, "installed package does not load; reinstall or uninstall it",
					slog.String("package", rec.Name), slog.String("error", err.Error()))
				continue
			}
			if _, dup := c.packages[p.Name()]; dup {
				c.broken[rec.Name] = "a built-in package has that name"
				continue
			}
			c.packages[p.Name()] = p
		}
		stored, err := opts.Store.ListSettings(ctx)
		if err != nil {
			return nil, fmt.Errorf("skill settings: %w", err)
		}
		c.settings.store = indexSettings(stored)
	}
	if err := c.index(r.knownTools()); err != nil {
		return nil, err
	}
	r.reportUnknown(ctx, c)
	r.cur.Store(c)
	return r, nil
}

func (r *Registry) knownTools() []string {
	if r.opts.KnownTools == nil {
		return nil
	}
	return r.opts.KnownTools()
}

// index rebuilds the catalog's derived views after packages changed, and
// checks that skill names are unique across packages.
func (c *catalog) index(known []string) error {
	c.sorted = c.sorted[:0:0]
	for _, name := range sortedKeys(c.packages) {
		c.sorted = append(c.sorted, c.packages[name])
	}
	c.tools = map[string]bool{}
	for _, t := range known {
		c.tools[t] = true
	}
	c.known = nil
	if known != nil {
		c.known = slices.Clone(known)
	}
	var all []*Skill
	for _, p := range c.sorted {
		for _, t := range p.Tools {
			c.tools[t.Name] = true
			if c.known != nil {
				c.known = append(c.known, t.Name)
			}
		}
		all = append(all, p.Skills...)
	}
	c.skills = map[string]*entry{}
	for _, s := range all {
		if prev, dup := c.skills[s.Name]; dup {
			return fmt.Errorf("skill %q is contributed by packages %s and %s", s.Name, prev.skill.Package, s.Package)
		}
		c.skills[s.Name] = newEntry(s)
	}
	for _, name := range sortedKeys(c.runtime) {
		c.skills[name] = newEntry(c.runtime[name])
	}
	for name, e := range c.skills {
		// Tool names are checked in the skills of installed packages: the
		// built-in ones ship with the tools they name, and one registered
		// at run time lives with the session that gave it.
		known := c.known
		if p, ok := c.packages[e.skill.Package]; !ok || p.Builtin || c.runtime[name] != nil {
			known = nil
		}
		e.warnings = skillWarnings(e.skill, c.tools, known)
		e.steps = protocolTools(e.skill, c.tools)
	}
	c.names = sortedKeys(c.skills)
	return nil
}

func newEntry(s *Skill) *entry {
	e := &entry{skill: s}
	if cr := s.ComposabilityRules; cr != nil {
		e.requires, e.incompatible = cr.Requires, cr.IncompatibleWith
	}
	return e
}

// clone returns a copy of c whose maps may be changed.
func (c *catalog) clone() *catalog {
	n := *c
	n.packages = cloneMap(c.packages)
	n.records = cloneMap(c.records)
	n.broken = cloneMap(c.broken)
	n.runtime = cloneMap(c.runtime)
	n.settings.store = cloneMap(c.settings.store)
	return &n
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Subscribe calls f after every change: an install, an uninstall, a
// setting, a registration. The runtime rebuilds what depends on the
// registry (routing rules, command tools) there.
func (r *Registry) Subscribe(f func()) {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	r.subs = append(r.subs, f)
}

func (r *Registry) changed() {
	r.subMu.Lock()
	subs := slices.Clone(r.subs)
	r.subMu.Unlock()
	for _, f := range subs {
		f()
	}
}

// update applies change to a copy of the catalog and swaps it in when it
// succeeds.
func (r *Registry) update(change func(c *catalog) error) error {
	r.mu.Lock()
	c := r.cur.Load().clone()
	if err := change(c); err != nil {
		r.mu.Unlock()
		return err
	}
	if err := c.index(r.knownTools()); err != nil {
		r.mu.Unlock()
		return err
	}
	r.cur.Store(c)
	r.mu.Unlock()
	r.changed()
	return nil
}

// Packages returns the packages in effect, sorted by name.
func (r *Registry) Packages() []*Package { return r.cur.Load().sorted }

// Package returns the package of that name.
func (r *Registry) Package(name string) (*Package, bool) {
	p, ok := r.cur.Load().packages[name]
	return p, ok
}

// Installed returns the lock: every installed package's record, sorted by
// name, with why it does not load for those that do not.
func (r *Registry) Installed() []LockEntry {
	c := r.cur.Load()
	out := make([]LockEntry, 0, len(c.records))
	for _, name := range sortedKeys(c.records) {
		out = append(out, LockEntry{InstalledPackage: c.records[name], Broken: c.broken[name]})
	}
	return out
}

// LockEntry is an installed package's record and, when it does not load,
// why.
type LockEntry struct {
	InstalledPackage
	Broken string `json:"broken,omitempty"`
}

// Record returns the lock entry of an installed package.
func (r *Registry) Record(name string) (InstalledPackage, bool) {
	rec, ok := r.cur.Load().records[name]
	return rec, ok
}

// Skill returns the skill of that name.
func (r *Registry) Skill(name string) (*Skill, bool) {
	e, ok := r.cur.Load().skills[name]
	if !ok {
		return nil, false
	}
	return e.skill, true
}

// Skills returns every skill, sorted by name.
func (r *Registry) Skills() []*Skill {
	c := r.cur.Load()
	out := make([]*Skill, len(c.names))
	for i, n := range c.names {
		out[i] = c.skills[n].skill
	}
	return out
}

// Warnings returns what registering the skill found worth saying.
func (r *Registry) Warnings(skill string) []string {
	if e, ok := r.cur.Load().skills[skill]; ok {
		return e.warnings
	}
	return nil
}

// Agents returns the agents packages contribute, by package then as
// listed.
func (r *Registry) Agents() []Agent {
	var out []Agent
	for _, p := range r.cur.Load().sorted {
		out = append(out, p.Agents...)
	}
	return out
}

// Tools returns the command tools packages contribute.
func (r *Registry) Tools() []Tool {
	var out []Tool
	for _, p := range r.cur.Load().sorted {
		out = append(out, p.Tools...)
	}
	return out
}

// Entrypoints returns the entry points packages contribute.
func (r *Registry) Entrypoints() []Entrypoint {
	var out []Entrypoint
	for _, p := range r.cur.Load().sorted {
		out = append(out, p.Entrypoints...)
	}
	return out
}

// Search returns the skills whose name, description or keywords contain
// every word of q, case-insensitively, sorted by name.
func (r *Registry) Search(q string) []*Skill {
	words := strings.Fields(strings.ToLower(q))
	var out []*Skill
	for _, s := range r.Skills() {
		text := strings.ToLower(s.Name + " " + s.Description + " " + strings.Join(s.Keywords, " ") + " " + s.Package)
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(text, w) }) {
			out = append(out, s)
		}
	}
	return out
}

// ErrNotFound is returned for a package or skill the registry does not
// know; ErrConflict for a change that contradicts what is in effect.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
)

// Error is a refused change or an unknown name, with the kind of problem
// (ErrNotFound, ErrConflict, ErrInvalid) for errors.Is.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return e.Kind == target }

func errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// CheckDependencies checks that installing p (replacing any installed
// package of its name) leaves every dependency satisfied: p's own, and
// those of the packages that depend on p. A conflict names both
// constraints.
func (r *Registry) CheckDependencies(p *Package) error {
	c := r.cur.Load()
	if prev, ok := c.packages[p.Name()]; ok && prev.Builtin {
		return errorf(ErrConflict, "package %s is built in and cannot be replaced", p.Name())
	}
	var errs []error
	for _, dep := range sortedKeys(p.Manifest.Dependencies) {
		want := p.Manifest.Dependencies[dep]
		have, ok := c.packages[dep]
		if !ok {
			errs = append(errs, errorf(ErrConflict, "%s requires %s %s, which is not installed; install it first", p.Name(), dep, want))
			continue
		}
		if ok, why := satisfies(have.Version(), want); !ok {
			msg := fmt.Sprintf("%s requires %s %s, but %s %s is installed%s", p.Name(), dep, want, dep, have.Version(), why)
			for _, other := range c.sorted {
				if r, ok := other.Manifest.Dependencies[dep]; ok && other.Name() != p.Name() {
					msg += fmt.Sprintf(" (%s requires %s %s)", other.Name(), dep, r)
				}
			}
			errs = append(errs, errorf(ErrConflict, "%s", msg))
		}
	}
	for _, other := range c.sorted {
		want, ok := other.Manifest.Dependencies[p.Name()]
		if !ok || other.Name() == p.Name() {
			continue
		}
		if ok, why := satisfies(p.Version(), want); !ok {
			errs = append(errs, errorf(ErrConflict, "%s %s does not satisfy %s %s that %s requires%s",
				p.Name(), p.Version(), p.Name(), want, other.Name(), why))
		}
	}
	errs = append(errs, r.toolCollisions(c, p)...)
	if cycle := dependencyCycle(c, p); cycle != nil {
		errs = append(errs, errorf(ErrConflict, "%s %s would close a dependency cycle: %s", p.Name(), p.Version(), strings.Join(cycle, " → ")))
	}
	for _, s := range p.Skills {
		if e, ok := c.skills[s.Name]; ok && e.skill.Package != p.Name() && e.skill.Package != RuntimePackage {
			errs = append(errs, errorf(ErrConflict, "skill %s is already contributed by package %s", s.Name, e.skill.Package))
		}
	}
	if err := r.checkCompatibility(p); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// toolCollisions refuses p's command tools that take the name of a tool
// Switchyard has (Options.KnownTools, a built-in package's) or of another
// installed package's: in every run where p is enabled, its tool would
// stand in for that one.
func (r *Registry) toolCollisions(c *catalog, p *Package) []error {
	known := r.knownTools()
	var errs []error
	for _, t := range p.Tools {
		owner := ""
		for _, q := range c.sorted {
			if q.Name() != p.Name() && slices.ContainsFunc(q.Tools, func(qt Tool) bool { return qt.Name == t.Name }) {
				owner = q.Name()
				if q.Builtin {
					owner = ""
					known = append(known, t.Name)
				}
			}
		}
		switch {
		case slices.Contains(known, t.Name):
			errs = append(errs, errorf(ErrConflict, "tool %s of package %s has the name of a tool Switchyard has; name it otherwise", t.Name, p.Name()))
		case owner != "":
			errs = append(errs, errorf(ErrConflict, "tool %s is already contributed by package %s", t.Name, owner))
		}
	}
	return errs
}

// dependencyCycle returns the first path by which p, installed in place of
// any package of its name, would come to depend on itself (p, …, p), or
// nil. Packages in a cycle could never be uninstalled, each needed by
// another.
func dependencyCycle(c *catalog, p *Package) []string {
	deps := func(name string) map[string]string {
		if name == p.Name() {
			return p.Manifest.Dependencies
		}
		if q, ok := c.packages[name]; ok {
			return q.Manifest.Dependencies
		}
		return nil
	}
	done := map[string]bool{}
	var path []string
	var visit func(name string) bool
	visit = func(name string) bool {
		path = append(path, name)
		for _, dep := range sortedKeys(deps(name)) {
			if dep == p.Name() {
				path = append(path, dep)
				return true
			}
			if !done[dep] {
				done[dep] = true
				if visit(dep) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if visit(p.Name()) {
		return path
	}
	return nil
}

// checkCompatibility checks the skills' switchyard version ranges.
func (r *Registry) checkCompatibility(p *Package) error {
	v, err := semver.NewVersion(r.opts.Version)
	if err != nil {
		return nil // a development build: nothing to compare
	}
	for _, s := range p.Skills {
		if cr := s.CompatibilityRules; cr != nil && cr.Switchyard != "" {
			if ok, _ := satisfies(v.String(), cr.Switchyard); !ok {
				return errorf(ErrConflict, "skill %s needs switchyard %s; this is %s", s.Name, cr.Switchyard, r.opts.Version)
			}
		}
	}
	return nil
}

// satisfies reports whether version meets constraint, and why not.
func satisfies(version, constraint string) (bool, string) {
	v, err := semver.NewVersion(version)
	if err != nil {
		return false, fmt.Sprintf(": %q is not a semantic version", version)
	}
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return false, fmt.Sprintf(": %q is not a version range", constraint)
	}
	return c.Check(v), ""
}

// Dependents returns the packages that depend on name, sorted.
func (r *Registry) Dependents(name string) []string {
	var out []string
	for _, p := range r.cur.Load().sorted {
		if _, ok := p.Manifest.Dependencies[name]; ok && p.Name() != name {
			out = append(out, p.Name())
		}
	}
	return out
}

// Add puts an installed package into effect: its record (and any settings
// given, such as the enablement of install --enable) is stored, then the
// catalog swapped. The caller has placed its files and checked its
// dependencies.
func (r *Registry) Add(ctx context.Context, p *Package, rec InstalledPackage, settings ...Setting) error {
	if err := r.CheckDependencies(p); err != nil {
		return err
	}
	for _, s := range settings {
		if err := r.checkSetting(s, p); err != nil {
			return err
		}
	}
	err := r.update(func(c *catalog) error {
		if r.opts.Store != nil {
			if err := r.opts.Store.PutPackage(ctx, rec, settings...); err != nil {
				return fmt.Errorf("record package %s: %w", p.Name(), err)
			}
		}
		c.packages[p.Name()] = p
		c.records[p.Name()] = rec
		delete(c.broken, p.Name())
		// An installed skill replaces one registered at run time, and
		// overrides of the package's previous version end.
		for name, s := range c.runtime {
			if s.Package == p.Name() || s.Package == RuntimePackage && slices.ContainsFunc(p.Skills, func(ps *Skill) bool { return ps.Name == name }) {
				delete(c.runtime, name)
			}
		}
		for _, s := range settings {
			c.settings.store[settingKey{s.Scope, s.Name}] = s
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.stored()
	return nil
}

// Remove takes an installed package out of effect and forgets it and its
// stored settings. It refuses while another package depends on it, and
// for built-in packages. It returns the record, whose files the caller
// removes.
func (r *Registry) Remove(ctx context.Context, name string) (InstalledPackage, error) {
	var rec InstalledPackage
	err := r.update(func(c *catalog) error {
		p, loaded := c.packages[name]
		var ok bool
		rec, ok = c.records[name]
		switch {
		case loaded && p.Builtin:
			return errorf(ErrConflict, "package %s is built in and cannot be uninstalled; disable it instead", name)
		case !ok:
			return errorf(ErrNotFound, "package %s is not installed", name)
		}
		if deps := r.Dependents(name); len(deps) > 0 {
			return errorf(ErrConflict, "%s cannot be uninstalled: %s depend%s on it", name, strings.Join(deps, ", "), plural(len(deps), "s", ""))
		}
		names := []string{name}
		if loaded {
			for _, s := range p.Skills {
				names = append(names, s.Name)
			}
		}
		for k, s := range c.settings.config {
			if slices.Contains(names, k.name) {
				return errorf(ErrConflict, "%s cannot be uninstalled: %s sets %s at %s; remove that first", name, s.Origin, k.name, k.scope)
			}
		}
		if r.opts.Store != nil {
			if err := r.opts.Store.DeletePackage(ctx, name, names); err != nil {
				return fmt.Errorf("forget package %s: %w", name, err)
			}
		}
		delete(c.packages, name)
		delete(c.records, name)
		delete(c.broken, name)
		for n, s := range c.runtime {
			if s.Package == name {
				delete(c.runtime, n)
			}
		}
		for k := range c.settings.store {
			if slices.Contains(names, k.name) {
				delete(c.settings.store, k)
			}
		}
		return nil
	})
	if err != nil {
		return rec, err
	}
	r.stored()
	return rec, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
