package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

// Masker masks credentials in text. The daemon's redactor is one; a
// package whose files it would mask holds a secret and is refused.
type Masker interface {
	Redact(s string) string
}

// LoadOptions say what a package is checked against.
type LoadOptions struct {
	// Masker finds credentials: a manifest and the files it names never
	// hold one. Nil checks nothing, for tools that only read manifests.
	Masker Masker
	// Permissions are the permission names tools may declare; nil accepts
	// any name.
	Permissions []string
	// Builtin marks a package that ships in the binary.
	Builtin bool
	// Dir is where the package's files are on disk, for command tools.
	Dir string
}

// MaxTextFile bounds a file a manifest names (instructions, prompts).
const MaxTextFile = 1 << 20

// Package is an installed (or built-in) package as loaded: its manifest
// and what it contributes, with every file it names read and checked.
type Package struct {
	Manifest *Manifest
	// ManifestFile is the manifest's name in the package.
	ManifestFile string
	Builtin      bool
	// Dir is where its files are on disk; "" for built-in packages, which
	// live in the binary.
	Dir         string
	Skills      []*Skill
	Agents      []Agent
	Tools       []Tool
	Entrypoints []Entrypoint
	// Warnings are what registration found worth saying but not refusing,
	// such as a protocol step naming a tool the skill does not allow.
	Warnings []string

	settings *jsonschema.Schema
}

// Name is the package's name.
func (p *Package) Name() string { return p.Manifest.Name }

// Version is the package's version.
func (p *Package) Version() string { return p.Manifest.Version }

// CheckSettings validates settings against the package's config schema.
func (p *Package) CheckSettings(settings map[string]any) error {
	if err := checkSettings(p.settings, settings); err != nil {
		return fmt.Errorf("settings of package %s: %w", p.Name(), err)
	}
	return nil
}

// Tool is a command tool of a package.
type Tool struct {
	ToolSpec
	Package string `json:"package"`
	// Dir is the package's directory, against which a program path is
	// resolved; "" for built-ins.
	Dir string `json:"-"`
}

// Entrypoint is an entry point of a package.
type Entrypoint struct {
	Name string `json:"name"`
	EntrypointSpec
	Package string `json:"package"`
}

// FindManifest returns the name of the manifest in fsys: exactly one of
// ManifestFiles.
func FindManifest(fsys fs.FS) (string, error) {
	var found []string
	for _, name := range ManifestFiles {
		fi, err := fs.Stat(fsys, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return "", err
		case !fi.Mode().IsRegular():
			return "", fmt.Errorf("%s is not a regular file", name)
		default:
			found = append(found, name)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no manifest: a package has one of %s at its top", strings.Join(ManifestFiles, ", "))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s: a package has one manifest; keep one", strings.Join(found, " and "))
}

// LoadPackage reads and checks the package whose files fsys holds: its
// manifest, and every file the manifest names, which must be regular files
// inside the package. Problems are reported together, each naming its file,
// line and field.
func LoadPackage(fsys fs.FS, opts LoadOptions) (*Package, error) {
	name, err := FindManifest(fsys)
	if err != nil {
		return nil, err
	}
	data, err := readFile(fsys, name)
	if err != nil {
		return nil, err
	}
	m, d := parseManifest(name, data)
	l := loader{fsys: fsys, opts: opts, d: d, manifest: data}
	l.secrets(name, data)
	if d.Failed("") {
		return nil, l.err()
	}
	p := &Package{Manifest: m, ManifestFile: name, Builtin: opts.Builtin, Dir: opts.Dir}
	l.load(p)
	if err := l.err(); err != nil {
		return nil, err
	}
	tools := map[string]bool{}
	for _, t := range p.Tools {
		tools[t.Name] = true
	}
	for _, s := range p.Skills {
		p.Warnings = append(p.Warnings, skillWarnings(s, tools, nil)...)
	}
	return p, nil
}

// loader reads the files a manifest names and collects problems.
type loader struct {
	fsys     fs.FS
	opts     LoadOptions
	d        *yamldecode.Decoder // the manifest's
	manifest []byte
	others   []error // problems of other files
}

func (l *loader) err() error {
	var errs []error
	if err := l.d.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, l.others...)...)
}

func (l *loader) load(p *Package) {
	m, d := p.Manifest, l.d
	if l.opts.Permissions != nil {
		checkList(d, "permissions", m.Permissions, func(perm string) string {
			if !slices.Contains(l.opts.Permissions, perm) {
				return fmt.Sprintf("unknown permission %q (want %s)", perm, strings.Join(l.opts.Permissions, ", "))
			}
			return ""
		})
	}
	for i := range m.Skills {
		s := m.Skills[i] // a copy: the manifest stays as written
		s.Package = m.Name
		if s.Version == "" {
			s.Version = m.Version
		}
		if s.InstructionsFile != "" {
			s.Instructions = l.text(fmt.Sprintf("skills[%d].instructions_file", i), s.InstructionsFile)
		}
		s.Instructions = strings.TrimSpace(s.Instructions)
		p.Skills = append(p.Skills, &s)
	}
	for i, spec := range m.Agents {
		if a, ok := l.agent(fmt.Sprintf("agents[%d]", i), spec); ok {
			a.Package = m.Name
			p.Agents = append(p.Agents, a)
		}
	}
	if da := m.Agent; da != nil && !d.Failed("agent") {
		a := Agent{AgentFields: da.Fields(m.Name, m.Description), File: d.File(), Package: m.Name}
		a.Instructions = l.instructions("agent.instructions", da.Instructions)
		p.Agents = append(p.Agents, a)
	}
	for i, spec := range m.Tools {
		if prog := spec.Command; len(prog) > 0 && strings.ContainsRune(prog[0], '/') && inPackage(prog[0]) {
			l.regular(fmt.Sprintf("tools[%d].command", i), prog[0])
		}
		p.Tools = append(p.Tools, Tool{ToolSpec: spec, Package: m.Name, Dir: l.opts.Dir})
	}
	for _, name := range sortedKeys(m.Entrypoints) {
		p.Entrypoints = append(p.Entrypoints, Entrypoint{Name: name, EntrypointSpec: m.Entrypoints[name], Package: m.Name})
	}
	if len(m.Config) > 0 {
		p.settings, _ = compileSchema(m.Name, m.Config) // checked with the manifest
	}
}

// agent resolves a manifest's agent entry: its file's frontmatter, the
// manifest's values over it, and the instructions.
func (l *loader) agent(path string, spec AgentSpec) (Agent, bool) {
	a := Agent{AgentFields: spec.AgentFields, File: l.d.File(), Instructions: strings.TrimSpace(spec.Instructions),
		lines: fieldLines(l.d.Positions(), path)}
	if file := spec.promptFile(); file != "" {
		field := path + ".file"
		if spec.SystemPromptFile != "" {
			field = path + ".system_prompt_file"
		}
		data, ok := l.read(field, file)
		if !ok {
			return a, false
		}
		if !strings.HasPrefix(strings.TrimPrefix(string(data), "\xef\xbb\xbf"), "---") {
			a.Instructions = strings.TrimSpace(string(data)) // a prompt without frontmatter
		} else {
			fromFile, fd, closing := parseAgentFile(file, data)
			if closing == 0 || fd.Err() != nil {
				l.others = append(l.others, fd.Err())
				return a, false
			}
			a.AgentFields = fromFile.AgentFields.over(spec.AgentFields)
			a.Instructions, a.File, a.lines = fromFile.Instructions, file, fromFile.lines
		}
		for _, req := range []struct{ field, value string }{{"name", a.Name}, {"description", a.Description}} {
			if req.value == "" {
				l.d.FailAt(path, "%s: required: give it here or in the frontmatter of %s", req.field, file)
			}
		}
	}
	return a, true
}

// instructions reads a declarative agent's instructions: the path of a
// markdown or text file of the package, or the text itself.
func (l *loader) instructions(field, v string) string {
	v = strings.TrimSpace(v)
	if !strings.ContainsAny(v, " \n") && (strings.HasSuffix(v, ".md") || strings.HasSuffix(v, ".txt")) {
		return strings.TrimSpace(l.text(field, v))
	}
	return v
}

// text reads a text file the manifest names at field.
func (l *loader) text(field, name string) string {
	data, ok := l.read(field, name)
	if !ok {
		return ""
	}
	return string(data)
}

// read reads a file the manifest names at field: a regular file inside
// the package, UTF-8 text of at most MaxTextFile bytes, holding no secret.
func (l *loader) read(field, name string) ([]byte, bool) {
	if !l.regular(field, name) {
		return nil, false
	}
	data, err := readFile(l.fsys, path.Clean(name))
	if err != nil {
		l.d.FailAt(field, "%v", err)
		return nil, false
	}
	if !utf8.Valid(data) {
		l.d.FailAt(field, "%s is not UTF-8 text", name)
		return nil, false
	}
	l.secrets(name, data)
	return data, true
}

// regular checks that the file a manifest names at field is a regular file
// inside the package.
func (l *loader) regular(field, name string) bool {
	clean := path.Clean(name)
	if !inPackage(name) || !fs.ValidPath(clean) || clean == "." {
		l.d.FailAt(field, "%q is outside the package: name a file inside it, relative to the manifest", name)
		return false
	}
	fi, err := fs.Lstat(l.fsys, clean)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		l.d.FailAt(field, "%s is not in the package", name)
	case err != nil:
		l.d.FailAt(field, "%s: %v", name, err)
	case !fi.Mode().IsRegular():
		l.d.FailAt(field, "%s is not a regular file", name)
	case fi.Size() <= maxLFSPointer && lfsPointer(l.fsys, clean):
		l.d.FailAt(field, "%s %s", name, lfsPointerMsg)
	default:
		return true
	}
	return false
}

// maxLFSPointer is the size a Git LFS pointer file stays under, as its
// specification bounds it.
const maxLFSPointer = 1024

// lfsMagic begins every Git LFS pointer file.
const lfsMagic = "version https://git-lfs.github.com/spec/v1"

// lfsPointerMsg says what is wrong with a file that is a Git LFS pointer.
const lfsPointerMsg = "is a Git LFS pointer, not the file it stands for: install from a source that holds " +
	"the file itself (a checkout after git lfs pull, or an archive of one)"

// isLFSPointer reports whether data is a Git LFS pointer: a repository
// that keeps a file in LFS holds only this in its place, and git gives it
// so wherever git-lfs does not fetch the content.
func isLFSPointer(data []byte) bool {
	return len(data) <= maxLFSPointer && bytes.HasPrefix(data, []byte(lfsMagic))
}

// lfsPointer reports whether the file name is a Git LFS pointer.
func lfsPointer(fsys fs.FS, name string) bool {
	f, err := fsys.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(lfsMagic))
	n, _ := io.ReadFull(f, head)
	return isLFSPointer(head[:n])
}

// secrets refuses a file that holds what the masker masks, at its line.
func (l *loader) secrets(file string, data []byte) {
	if l.opts.Masker == nil {
		return
	}
	text := string(data)
	if l.opts.Masker.Redact(text) == text {
		return
	}
	line := 0
	for i, ln := range strings.Split(text, "\n") {
		if l.opts.Masker.Redact(ln) != ln {
			line = i + 1
			break
		}
	}
	err := &yamldecode.Error{File: file, Line: line, Msg: "looks like a credential; a package never holds secrets: " +
		"declare a setting in its config schema and give its value as ${ENV} in the skills section of the config"}
	l.others = append(l.others, err)
}

// readFile reads a file of at most MaxTextFile bytes.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTextFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxTextFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, MaxTextFile)
	}
	return data, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
