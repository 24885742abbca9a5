package skills

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

// checkSetting checks a setting against what it names: a package or a
// skill that exists (p, when given, is a package about to be added), and
// settings only for a package, valid against its schema at that scope
// with the settings in effect, s among them.
func (r *Registry) checkSetting(s Setting, p *Package) error {
	ss := r.cur.Load().settings
	if s.Origin == "" {
		ss.store = cloneMap(ss.store)
		ss.store[settingKey{s.Scope, s.Name}] = s
	} else {
		ss.config = cloneMap(ss.config)
		ss.config[settingKey{s.Scope, s.Name}] = s
	}
	return r.checkSettingWith(s, p, ss)
}

// checkSettingWith is checkSetting against the settings ss.
func (r *Registry) checkSettingWith(s Setting, p *Package, ss settings) error {
	c := r.cur.Load()
	pkg, isPackage := c.packages[s.Name]
	if p != nil && s.Name == p.Name() {
		pkg, isPackage = p, true
	}
	_, isSkill := c.skills[s.Name]
	if p != nil && !isSkill {
		for _, sk := range p.Skills {
			isSkill = isSkill || sk.Name == s.Name
		}
	}
	if isPackage && s.Enabled == Enabled && r.opts.CheckEnable != nil {
		if err := r.opts.CheckEnable(pkg, s.Scope); err != nil {
			return &enableRefused{err}
		}
	}
	switch {
	case !isPackage && !isSkill:
		msg := fmt.Sprintf("no package or skill %q", s.Name)
		if best := closestName(s.Name, c); best != "" {
			msg += fmt.Sprintf("; did you mean %q?", best)
		}
		return errorf(ErrNotFound, "%s", msg)
	case len(s.Settings) > 0 && !isPackage:
		return errorf(ErrInvalid, "%s is a skill; settings belong to its package", s.Name)
	}
	if isPackage && len(s.Settings) > 0 {
		for k, v := range s.Settings {
			if r.opts.Masker != nil && s.Origin == "" && holdsCredential(r.opts.Masker, v) {
				return errorf(ErrInvalid, "setting %s of %s looks like a credential; give secrets as ${ENV} in the skills section of the config, never through the API", k, s.Name)
			}
		}
		// The setting must make sense with what broader scopes say.
		if err := pkg.CheckSettings(ss.merged(TargetOf(s.Scope), s.Name)); err != nil {
			return errorf(ErrInvalid, "at %s: %v", s.Scope, err)
		}
	}
	return nil
}

// holdsCredential reports whether m would mask any text of a setting's
// value: a string, or a key or element at any depth of an object or array
// (the CLI's --set key=<JSON> and the API give those).
func holdsCredential(m Masker, v any) bool {
	switch x := v.(type) {
	case string:
		return m.Redact(x) != x
	case map[string]any:
		for k, e := range x {
			if m.Redact(k) != k || holdsCredential(m, e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsCredential(m, e) {
				return true
			}
		}
	}
	return false
}

// SetConfig replaces the settings of the config file (its skills section),
// checking each against what it names; on error nothing changes. Every
// problem is reported, as SettingErrors positioned at the config's lines.
func (r *Registry) SetConfig(list []Setting) error {
	if err := r.CheckConfig(list); err != nil {
		return err
	}
	return r.update(func(c *catalog) error {
		c.settings.config = indexSettings(list)
		return nil
	})
}

// CheckConfig checks settings of the config file as SetConfig does,
// changing nothing: a reload asks before it commits.
func (r *Registry) CheckConfig(list []Setting) error {
	var errs SettingErrors
	seen := map[settingKey]Setting{}
	for i, s := range list {
		k := settingKey{s.Scope, s.Name}
		if first, dup := seen[k]; dup {
			errs = append(errs, &SettingError{Index: i, Field: "name", Msg: fmt.Sprintf("%s is set twice at %s (first at %s)", s.Name, s.Scope, first.Origin)})
			continue
		}
		seen[k] = s
	}
	ss := r.cur.Load().settings
	ss.config = indexSettings(list)
	for i, s := range list {
		if err := r.checkSettingWith(s, nil, ss); err != nil {
			field := "settings"
			var refused *enableRefused
			switch {
			case IsNotFound(err):
				field = "name"
			case errors.As(err, &refused):
				field = "enabled"
			}
			errs = append(errs, &SettingError{Index: i, Field: field, Msg: err.Error()})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// SettingError is a problem with the setting at Index of the list given to
// SetConfig, in its field.
type SettingError struct {
	Index int
	Field string
	Msg   string
}

func (e *SettingError) Error() string { return e.Msg }

// SettingErrors are every problem SetConfig found.
type SettingErrors []*SettingError

func (es SettingErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Msg
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes each SettingError.
func (es SettingErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Set records a setting made with the CLI or the API: enablement (enable,
// disable, inherit) and settings of a package or skill at a scope. It
// refuses a setting the config file makes for the same scope and name,
// naming its line, since the config's would win.
func (r *Registry) Set(ctx context.Context, s Setting) error {
	s.Origin = ""
	if err := r.checkSetting(s, nil); err != nil {
		return err
	}
	if cs, ok := r.cur.Load().settings.config[settingKey{s.Scope, s.Name}]; ok {
		return errorf(ErrConflict, "%s sets %s at %s (enabled: %s); change it there", cs.Origin, s.Name, s.Scope, cs.Enabled)
	}
	err := r.update(func(c *catalog) error {
		k := settingKey{s.Scope, s.Name}
		if s.Enabled == Inherit && len(s.Settings) == 0 {
			if r.opts.Store != nil {
				if err := r.opts.Store.DeleteSetting(ctx, s.Scope, s.Name); err != nil {
					return fmt.Errorf("forget setting: %w", err)
				}
			}
			delete(c.settings.store, k)
			return nil
		}
		if r.opts.Store != nil {
			if err := r.opts.Store.PutSetting(ctx, s); err != nil {
				return fmt.Errorf("record setting: %w", err)
			}
		}
		c.settings.store[k] = s
		return nil
	})
	if err != nil {
		return err
	}
	r.stored()
	return nil
}

// stored tells Options.Stored that a change was written to the store.
func (r *Registry) stored() {
	if r.opts.Store != nil && r.opts.Stored != nil {
		r.opts.Stored()
	}
}

// RefreshSettings reads the settings the store keeps again and, when they
// are not those in effect (another process sharing the store changed
// them), swaps the catalog with them and tells the subscribers, as a
// setting made here does. It reports whether anything changed. A setting
// naming a package or skill this process does not have (a package
// installed on another replica only) is kept and ignored, as at start,
// and logged once.
func (r *Registry) RefreshSettings(ctx context.Context) (bool, error) {
	if r.opts.Store == nil {
		return false, nil
	}
	r.mu.Lock()
	// Read under the lock, so a setting made here meanwhile is not
	// replaced by what the store held before it.
	list, err := r.opts.Store.ListSettings(ctx)
	if err != nil {
		r.mu.Unlock()
		return false, fmt.Errorf("read the stored skill settings: %w", err)
	}
	cur := r.cur.Load()
	next := indexSettings(list)
	if sameSettings(cur.settings.store, next) {
		r.mu.Unlock()
		return false, nil
	}
	c := cur.clone()
	c.settings.store = next
	r.reportUnknown(ctx, c)
	r.cur.Store(c)
	r.mu.Unlock()
	r.changed()
	return true, nil
}

// sameSettings reports whether two sets of settings say the same: the
// same enablement and the same settings (compared as they are stored, so
// a whole number made here as a float64 equals the int64 read back).
func sameSettings(a, b map[settingKey]Setting) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.Enabled != y.Enabled || len(x.Settings) != len(y.Settings) {
			return false
		}
		if len(x.Settings) == 0 {
			continue
		}
		xj, errx := json.Marshal(x.Settings)
		yj, erry := json.Marshal(y.Settings)
		if errx != nil || erry != nil || !bytes.Equal(xj, yj) {
			return false
		}
	}
	return true
}

// reportUnknown logs, once each, the stored settings of c that name no
// package or skill here. Callers hold mu or own r alone.
func (r *Registry) reportUnknown(ctx context.Context, c *catalog) {
	for _, k := range sortedSettingKeys(c.settings.store) {
		_, isPackage := c.packages[k.name]
		_, isRecord := c.records[k.name]
		_, isSkill := c.skills[k.name]
		if isPackage || isRecord || isSkill || r.unknown[k] {
			continue
		}
		r.unknown[k] = true
		r.log.LogAttrs(ctx, slog.LevelWarn, "a stored skill setting names no package or skill installed here; it is ignored here until the package is installed on this replica too",
			slog.String("name", k.name), slog.String("scope", k.scope.String()))
	}
}

// sortedSettingKeys returns the keys of m by scope then name.
func sortedSettingKeys(m map[settingKey]Setting) []settingKey {
	keys := make([]settingKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b settingKey) int {
		return cmp.Or(strings.Compare(a.scope.String(), b.scope.String()), strings.Compare(a.name, b.name))
	})
	return keys
}

// StoredSetting returns the setting the store holds for a scope and name.
func (r *Registry) StoredSetting(scope Scope, name string) (Setting, bool) {
	s, ok := r.cur.Load().settings.store[settingKey{scope, name}]
	return s, ok
}

// ConfigSetting returns the setting the config file makes for a scope and
// name, with its origin (file:line).
func (r *Registry) ConfigSetting(scope Scope, name string) (Setting, bool) {
	s, ok := r.cur.Load().settings.config[settingKey{scope, name}]
	return s, ok
}

// Scopes returns every scope an explicit setting names, the config's and
// the store's, broadest kind first and then by name: where settings are
// made, for choosing a scope to look at.
func (r *Registry) Scopes() []Scope {
	ss := r.cur.Load().settings
	seen := map[Scope]bool{}
	var out []Scope
	for _, src := range [2]map[settingKey]Setting{ss.config, ss.store} {
		for k := range src {
			if !seen[k.scope] {
				seen[k.scope] = true
				out = append(out, k.scope)
			}
		}
	}
	slices.SortFunc(out, func(a, b Scope) int {
		return cmp.Or(cmp.Compare(a.Kind.rank(), b.Kind.rank()), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Enabled reports whether skill is enabled for target, and the scope
// that decided. An unknown skill is not enabled.
func (r *Registry) Enabled(target Target, skill string) Effective {
	c := r.cur.Load()
	e, ok := c.skills[skill]
	if !ok {
		return Effective{Name: skill, Scope: ScopeDefault}
	}
	return c.effective(target, e.skill)
}

func (c *catalog) effective(target Target, s *Skill) Effective {
	out := Effective{Name: s.Name, Package: s.Package, Scope: ScopeDefault}
	if st, ok := c.settings.decide(target, s.Name, s.Package); ok {
		out.Enabled, out.Scope, out.Origin = st.Enabled == Enabled, st.Scope.String(), st.Origin
		if out.Origin == "" {
			out.Origin = "store"
		}
		return out
	}
	// Nothing says: built-ins are on, everything else off.
	if p, ok := c.packages[s.Package]; ok && p.Builtin {
		out.Enabled = true
	}
	return out
}

// Effective lists every skill with whether it is enabled for target and
// the scope that decided, sorted by name.
func (r *Registry) Effective(target Target) []Effective {
	c := r.cur.Load()
	out := make([]Effective, len(c.names))
	for i, n := range c.names {
		out[i] = c.effective(target, c.skills[n].skill)
	}
	return out
}

// EnabledSkills returns the skills enabled for target, sorted by name.
func (r *Registry) EnabledSkills(target Target) []*Skill {
	c := r.cur.Load()
	var out []*Skill
	for _, n := range c.names {
		s := c.skills[n].skill
		if c.effective(target, s).Enabled {
			out = append(out, s)
		}
	}
	return out
}

// PackageEnabled reports whether a package is enabled for target: by its
// own settings, from the most specific scope, or by default (built-ins
// are). Its agents, command tools and entry points follow it.
func (r *Registry) PackageEnabled(target Target, pkg string) Effective {
	c := r.cur.Load()
	p, ok := c.packages[pkg]
	if !ok {
		return Effective{Name: pkg, Scope: ScopeDefault}
	}
	out := Effective{Name: pkg, Package: pkg, Scope: ScopeDefault, Enabled: p.Builtin}
	if st, ok := c.settings.decide(target, "", pkg); ok {
		out.Enabled, out.Scope, out.Origin = st.Enabled == Enabled, st.Scope.String(), st.Origin
		if out.Origin == "" {
			out.Origin = "store"
		}
	}
	return out
}

// Settings returns a package's settings for target, merged from the
// broadest scope to the most specific.
func (r *Registry) Settings(target Target, pkg string) map[string]any {
	return r.cur.Load().settings.merged(target, pkg)
}

func closestName(name string, c *catalog) string {
	return yamldecode.Closest(name, append(sortedKeys(c.packages), c.names...))
}

// IsNotFound reports whether err says a package or skill is unknown.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// enableRefused is CheckEnable's refusal, said as it is.
type enableRefused struct{ err error }

func (e *enableRefused) Error() string { return e.err.Error() }
func (e *enableRefused) Unwrap() error { return e.err }
