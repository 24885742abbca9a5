package agents

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
)

//go:embed builtin/*.md
var builtinFS embed.FS

// Builtin returns the built-in agents: builder, coder, docs, ops, reviewer,
// triage.
func Builtin() ([]Definition, error) {
	entries, err := fs.ReadDir(builtinFS, "builtin")
	if err != nil {
		return nil, fmt.Errorf("built-in agents: %w", err)
	}
	var out []Definition
	for _, e := range entries {
		name := path.Join("builtin", e.Name())
		data, err := builtinFS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("built-in agents: %w", err)
		}
		d, err := Parse(name, data)
		if err != nil {
			return nil, err
		}
		d.Source = SourceBuiltin
		out = append(out, d)
	}
	return out, nil
}

// PackageSource lists the agents installed packages contribute:
// FromPackages over the skills registry; ParsePackage reads an agent file
// of a package.
type PackageSource interface {
	Agents(ctx context.Context) ([]Definition, error)
}

// ParsePackage reads an agent file contributed by package pkg.
func ParsePackage(pkg, file string, data []byte) (Definition, error) {
	d, err := Parse(file, data)
	if err != nil {
		return d, err
	}
	d.Source = sourcePackage + pkg
	d.Package = pkg
	return d, nil
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Dir is agents_dir: every *.md file in it is a user agent. A missing
	// directory means no user agents.
	Dir string
	// Packages contribute agents; nil means none.
	Packages PackageSource
	Logger   *slog.Logger
}

// AgentSource is the agents in effect: *Manager, or whatever says which
// Manager is in effect now.
type AgentSource interface {
	Get(name string) (Definition, bool)
	List() []Definition
}

// Manager holds the agents in effect: user files over package agents over
// built-ins. Reload swaps the whole set at once, so readers see either the
// old or the new one.
type Manager struct {
	opts ManagerOptions
	log  *slog.Logger

	mu     sync.RWMutex
	byName map[string]Definition
	sorted []Definition
}

// NewManager loads the agents.
func NewManager(ctx context.Context, opts ManagerOptions) (*Manager, error) {
	m := &Manager{opts: opts, log: opts.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if err := m.Reload(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Reload reads every source again. On error the previous set stays.
func (m *Manager) Reload(ctx context.Context) error {
	builtin, err := Builtin()
	if err != nil {
		return err
	}
	var pkgs []Definition
	if m.opts.Packages != nil {
		if pkgs, err = m.opts.Packages.Agents(ctx); err != nil {
			return fmt.Errorf("package agents: %w", err)
		}
		for _, d := range pkgs {
			if !strings.HasPrefix(d.Source, sourcePackage) || d.Package == "" {
				return fmt.Errorf("package agent %q (%s): source must be package:<name>, got %q", d.Name, d.File, d.Source)
			}
		}
	}
	user, err := loadDir(m.opts.Dir)
	if err != nil {
		return err
	}

	byName := map[string]Definition{}
	// Lowest priority first; a later tier replaces an earlier one and says
	// so. Within the package tier the first package wins, with a warning.
	for _, tier := range [][]Definition{builtin, pkgs, user} {
		claimed := map[string]bool{}
		for _, d := range tier {
			prev, exists := byName[d.Name]
			switch {
			case !exists:
			case claimed[d.Name]:
				m.log.LogAttrs(ctx, slog.LevelWarn, "agent defined twice in one tier; keeping the first",
					slog.String("agent", d.Name), slog.String("kept", describe(prev)), slog.String("ignored", describe(d)))
				continue
			default:
				m.log.LogAttrs(ctx, slog.LevelWarn, "agent overridden",
					slog.String("agent", d.Name), slog.String("by", describe(d)), slog.String("overridden", describe(prev)))
				d.Overrides = append(slices.Clone(prev.Overrides), prev.Source)
			}
			claimed[d.Name] = true
			byName[d.Name] = d
		}
	}
	sorted := make([]Definition, 0, len(byName))
	for _, d := range byName {
		sorted = append(sorted, d)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	m.mu.Lock()
	m.byName, m.sorted = byName, sorted
	m.mu.Unlock()
	return nil
}

func describe(d Definition) string { return d.Source + " (" + d.File + ")" }

// loadDir reads the user agents of dir. Every file is read; all problems are
// reported together so one restart fixes them all.
func loadDir(dir string) ([]Definition, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agents_dir: %w", err)
	}
	var out []Definition
	var errs []error
	files := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, err) // it names the file
			continue
		}
		d, err := Parse(file, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, dup := files[d.Name]; dup {
			errs = append(errs, &DefinitionError{File: file, Line: d.lines["name"], Field: "name", Msg: fmt.Sprintf("agent %q is already defined in %s", d.Name, first)})
			continue
		}
		files[d.Name] = file
		d.Source = SourceUser
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// List returns the agents in effect, sorted by name. The slice is shared
// with other callers and must not be modified; Reload replaces it rather
// than changing it.
func (m *Manager) List() []Definition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.sorted
}

// Summaries returns the `agents list --json` entries.
func (m *Manager) Summaries() []Summary {
	list := m.List()
	out := make([]Summary, len(list))
	for i, d := range list {
		out[i] = d.Summary()
	}
	return out
}

// Get returns the agent of that name; names are compared case-insensitively,
// as mentions are.
func (m *Manager) Get(name string) (Definition, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	d, ok := m.byName[strings.ToLower(name)]
	return d, ok
}

// RouterInfo returns what the router's content matching needs.
func (m *Manager) RouterInfo() []bot.AgentInfo {
	list := m.List()
	out := make([]bot.AgentInfo, len(list))
	for i, d := range list {
		out[i] = bot.AgentInfo{Name: d.Name, Keywords: d.Keywords}
	}
	return out
}

// ToolName is the name under which a tool-mode agent is offered to others.
func ToolName(agent string) string { return "agent_" + agent }

// HandoffTool is the control tool that re-routes the work item.
const HandoffTool = "handoff_to"

// Validate checks every agent against k and reports every problem at once.
// The names agents may list besides k.Tools are added here: agent_<name> of
// each tool-mode agent, and handoff_to. Nil k.Profiles means the built-in
// profiles.
func (m *Manager) Validate(k Known) error {
	list := m.List()
	if k.Tools != nil {
		k.Tools = append(slices.Clone(k.Tools), EnableSkillTool, DisableSkillTool, InstallPackageTool)
		k.Tools = append(k.Tools, ControlTools()...)
		for _, d := range list {
			if d.Mode == ModeTool {
				k.Tools = append(k.Tools, ToolName(d.Name))
			}
		}
	}
	if k.Profiles == nil {
		k.Profiles = tools.BuiltinProfiles{}.Names()
	}
	var errs []error
	for _, d := range list {
		if err := d.Validate(k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
