package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/skills"
)

// Options configure an Installer.
type Options struct {
	// Registry is where installed packages go into effect.
	Registry *skills.Registry
	// Dir holds the packages, one directory each, <name>@<version>:
	// <data_dir>/packages.
	Dir string
	// Load is what packages are checked against (secrets, permissions).
	Load   skills.LoadOptions
	Limits Limits
	// Timeout bounds one install; default 10 minutes.
	Timeout time.Duration
	// HTTP downloads archives; nil means a client with a 5-minute
	// timeout. Whichever client, its redirects are followed only to
	// https (checkRedirect).
	HTTP *http.Client
	// Env is the environment git and npm are given a part of; nil means
	// the daemon's.
	Env    func() []string
	Now    func() time.Time
	Logger *slog.Logger
}

// Installer installs and uninstalls packages, one at a time.
type Installer struct {
	opts   Options
	reg    *skills.Registry
	limits Limits
	http   *http.Client
	env    func() []string
	log    *slog.Logger
	mu     sync.Mutex
}

// Prefixes of the directories an install works in, beside the packages.
const (
	stagingPrefix = ".install-"
	trashPrefix   = ".removed-"
)

// New returns an installer over dir, removing what an install or an
// uninstall that was cut short (the daemon killed) left behind.
func New(ctx context.Context, opts Options) (*Installer, error) {
	if opts.Registry == nil || opts.Dir == "" {
		return nil, errors.New("install: a registry and a packages directory are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// git and npm run in directories of their own: a relative path (the
	// default data_dir is "data") would name another place for each, and
	// the lock records where a package is for any later start.
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("packages directory: %w", err)
	}
	opts.Dir = dir
	in := &Installer{opts: opts, reg: opts.Registry, limits: opts.Limits.withDefaults(), http: opts.HTTP, env: opts.Env, log: opts.Logger}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if in.http == nil {
		in.http = &http.Client{Timeout: 5 * time.Minute}
	}
	client := *in.http
	client.CheckRedirect = checkRedirect
	in.http = &client
	if in.env == nil {
		in.env = os.Environ
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("packages directory: %w", err)
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("packages directory: %w", err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if strings.HasPrefix(e.Name(), stagingPrefix) || strings.HasPrefix(e.Name(), trashPrefix) {
			if err := os.RemoveAll(filepath.Join(opts.Dir, e.Name())); err != nil {
				in.log.Warn("could not remove what an interrupted install left", slog.String("dir", e.Name()), slog.String("error", err.Error()))
			}
		}
	}
	return in, nil
}

// checkRedirect follows at most 5 redirects, each to https: a plain
// http:// address only from a download that began at one on this machine
// (as a source may), and only to this machine. A server elsewhere never
// points the daemon at a service listening on this machine's plain http.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("too many redirects")
	}
	first := via[0].URL
	local := first.Scheme == "http" && loopback(first.Hostname()) && loopback(req.URL.Hostname())
	if req.URL.Scheme != "https" && !local {
		return fmt.Errorf("redirected to %s, which is not https", req.URL.Redacted())
	}
	return nil
}

// Request is one install.
type Request struct {
	// Source is a directory, git+<url>[#ref], npm:<name>[@range] or an
	// https:// archive.
	Source string `json:"source"`
	// SHA256 is an archive's expected digest.
	SHA256 string `json:"sha256,omitempty"`
	// Enable enables the package at these scopes in the same step
	// (install --enable).
	Enable []skills.Scope `json:"enable,omitempty"`
	// Check, when set, is asked about the package once it is loaded and
	// checked, before anything is placed or recorded: its error refuses
	// the install. The builder's installs use it.
	Check func(*skills.Package) error `json:"-"`
}

// Result says what an install did.
type Result struct {
	Package  string `json:"package"`
	Version  string `json:"version"`
	Source   string `json:"source"`
	Resolved string `json:"resolved,omitempty"`
	Digest   string `json:"digest"`
	// Previous is the version it replaced, if any.
	Previous string `json:"previous,omitempty"`
	// Unchanged is set when exactly this package was installed already.
	Unchanged bool     `json:"unchanged,omitempty"`
	Skills    []string `json:"skills"`
	Agents    []string `json:"agents"`
	Tools     []string `json:"tools"`
	Commands  []string `json:"commands"`
	Triggers  []string `json:"triggers"`
	// Enabled are the scopes it was enabled at.
	Enabled  []string `json:"enabled"`
	Warnings []string `json:"warnings"`
}

// Install fetches, checks and puts a package into effect. The package's
// files go to a staging directory beside the packages first; its manifest
// and every file it names are checked there, then its dependencies and
// the settings asked for; only then is the directory renamed into place
// and the package recorded. On any failure nothing is left: not the
// staging directory, not a record.
func (in *Installer) Install(ctx context.Context, req Request) (Result, error) {
	src, err := ParseSource(req.Source, req.SHA256)
	if err != nil {
		return Result{}, &skills.Error{Kind: skills.ErrInvalid, Msg: err.Error()}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, in.opts.Timeout)
	defer cancel()

	staging, err := os.MkdirTemp(in.opts.Dir, stagingPrefix)
	if err != nil {
		return Result{}, fmt.Errorf("install: %w", err)
	}
	defer os.RemoveAll(staging)
	treeDir := filepath.Join(staging, "tree")
	t, err := newTree(treeDir, in.limits, src.String())
	if err != nil {
		return Result{}, fmt.Errorf("install: %w", err)
	}
	work := filepath.Join(staging, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.close()
		return Result{}, fmt.Errorf("install: %w", err)
	}
	resolved, err := in.fetch(ctx, src, t, work)
	t.close()
	if err != nil {
		return Result{}, err
	}
	top, err := packageTop(treeDir)
	if err != nil {
		return Result{}, err
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return Result{}, fmt.Errorf("install: %w", err)
	}
	defer root.Close()
	name, version, err := peekManifest(root.FS())
	if err != nil {
		return Result{}, err
	}
	final := filepath.Join(in.opts.Dir, name+"@"+version)
	opts := in.opts.Load
	opts.Dir = final
	p, err := skills.LoadPackage(root.FS(), opts)
	if err != nil {
		return Result{}, &skills.Error{Kind: skills.ErrInvalid, Msg: err.Error()}
	}
	digest, err := skills.Digest(root.FS())
	if err != nil {
		return Result{}, &skills.Error{Kind: skills.ErrInvalid, Msg: err.Error()}
	}
	if req.Check != nil {
		if err := req.Check(p); err != nil {
			return Result{}, err
		}
	}
	res := in.result(p, src, resolved, digest)
	prev, had := in.reg.Record(p.Name())
	if had {
		res.Previous = prev.Version
		// As removeDir reads it: an older lock may name it relative.
		if abs, err := filepath.Abs(prev.Dir); err == nil && prev.Dir != "" {
			prev.Dir = abs
		}
	}
	settings := make([]skills.Setting, len(req.Enable))
	for i, sc := range req.Enable {
		settings[i] = skills.Setting{Scope: sc, Name: p.Name(), Enabled: skills.Enabled}
		res.Enabled = append(res.Enabled, sc.String())
	}
	if had && prev.Digest == digest && prev.Dir == final {
		// Exactly this is installed: only the settings asked for change.
		res.Unchanged, res.Previous = true, ""
		for _, s := range settings {
			if err := in.reg.Set(ctx, s); err != nil {
				return Result{}, err
			}
		}
		return res, nil
	}
	if err := in.reg.CheckDependencies(p); err != nil {
		return Result{}, err
	}
	rec := skills.InstalledPackage{
		Name: p.Name(), Version: p.Version(), Source: src.String(), Resolved: resolved, Digest: digest,
		Dependencies: p.Manifest.Dependencies, Dir: final, InstalledAt: in.opts.Now().UTC(),
	}
	// The same version installed again with other files: its directory is
	// moved aside first, and back should recording fail.
	var aside string
	if _, err := os.Lstat(final); err == nil {
		aside, err = os.MkdirTemp(in.opts.Dir, trashPrefix)
		if err != nil {
			return Result{}, fmt.Errorf("install: %w", err)
		}
		defer os.RemoveAll(aside)
		if err := os.Rename(final, filepath.Join(aside, "old")); err != nil {
			return Result{}, fmt.Errorf("install: move %s aside: %w", final, err)
		}
	}
	if err := os.Rename(top, final); err != nil {
		in.restore(aside, final)
		return Result{}, fmt.Errorf("install: %w", err)
	}
	if err := in.reg.Add(ctx, p, rec, settings...); err != nil {
		if rerr := os.RemoveAll(final); rerr != nil {
			in.log.Error("could not remove a package that was not recorded", slog.String("dir", final), slog.String("error", rerr.Error()))
		}
		in.restore(aside, final)
		return Result{}, err
	}
	if had && prev.Dir != final {
		in.removeDir(prev.Dir)
	}
	in.log.Info("package installed", slog.String("package", p.Name()), slog.String("version", p.Version()),
		slog.String("source", rec.Source), slog.String("digest", digest))
	return res, nil
}

// restore moves a directory moved aside back.
func (in *Installer) restore(aside, final string) {
	if aside == "" {
		return
	}
	if err := os.Rename(filepath.Join(aside, "old"), final); err != nil {
		in.log.Error("could not restore a package's previous files", slog.String("dir", final), slog.String("error", err.Error()))
	}
}

// removeDir removes a package directory that is no longer recorded: it is
// renamed aside at once (so no reader finds half of it) and then removed.
func (in *Installer) removeDir(dir string) {
	if dir == "" {
		return
	}
	// A lock written before directories were recorded whole names one
	// relative to where the daemon runs.
	dir, err := filepath.Abs(dir)
	if err != nil || filepath.Dir(dir) != in.opts.Dir {
		return // never anything outside the packages directory
	}
	aside, err := os.MkdirTemp(in.opts.Dir, trashPrefix)
	if err == nil {
		if err = os.Rename(dir, filepath.Join(aside, "old")); err == nil || errors.Is(err, fs.ErrNotExist) {
			err = os.RemoveAll(aside)
		}
	}
	if err != nil {
		in.log.Warn("could not remove a package directory", slog.String("dir", dir), slog.String("error", err.Error()))
	}
}

// Uninstall takes a package out of effect and removes its files. It
// refuses while another package depends on it, while the config file sets
// it, and for built-in packages.
func (in *Installer) Uninstall(ctx context.Context, name string) (skills.InstalledPackage, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	rec, err := in.reg.Remove(ctx, name)
	if err != nil {
		return rec, err
	}
	in.removeDir(rec.Dir)
	in.log.Info("package uninstalled", slog.String("package", name), slog.String("version", rec.Version))
	return rec, nil
}

// packageTop finds the package's top in what a source gave: the directory
// itself when it holds a manifest, or its only subdirectory (archives of a
// repository put everything under one, npm under package/), __MACOSX aside.
func packageTop(dir string) (string, error) {
	for _, m := range skills.ManifestFiles {
		if _, err := os.Lstat(filepath.Join(dir, m)); err == nil {
			return dir, nil
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	// A zip made on a Mac has the Finder's __MACOSX beside the files.
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == "__MACOSX" })
	if len(entries) == 1 && entries[0].IsDir() {
		return filepath.Join(dir, entries[0].Name()), nil
	}
	return dir, nil // LoadPackage says what is missing
}

// peekManifest reads the package's name and version, which its directory
// is named by, before the whole package is checked.
func peekManifest(fsys fs.FS) (string, string, error) {
	file, err := skills.FindManifest(fsys)
	if err != nil {
		return "", "", &skills.Error{Kind: skills.ErrInvalid, Msg: err.Error()}
	}
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return "", "", err
	}
	m, err := skills.ParseManifest(file, data)
	if err != nil {
		return "", "", &skills.Error{Kind: skills.ErrInvalid, Msg: err.Error()}
	}
	return m.Name, m.Version, nil
}

func (in *Installer) result(p *skills.Package, src Source, resolved, digest string) Result {
	res := Result{
		Package: p.Name(), Version: p.Version(), Source: src.String(), Resolved: resolved, Digest: digest,
		Skills: []string{}, Agents: []string{}, Tools: []string{}, Commands: []string{}, Triggers: []string{},
		Enabled: []string{}, Warnings: in.reg.PackageWarnings(p),
	}
	if res.Warnings == nil {
		res.Warnings = []string{}
	}
	for _, s := range p.Skills {
		res.Skills = append(res.Skills, s.Name)
	}
	for _, a := range p.Agents {
		res.Agents = append(res.Agents, a.Name)
	}
	for _, t := range p.Tools {
		res.Tools = append(res.Tools, t.Name)
	}
	for _, e := range p.Entrypoints {
		res.Commands = append(res.Commands, e.Commands...)
		res.Triggers = append(res.Triggers, e.Triggers...)
	}
	slices.Sort(res.Commands)
	slices.Sort(res.Triggers)
	return res
}
