package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/switchyard/switchyard/agents/sandbox"
)

// Core tool names.
const (
	ReadFile      = "read_file"
	ListDirectory = "list_directory"
	SearchFiles   = "search_files"
	WriteFile     = "write_file"
	EditFile      = "edit_file"
	Bash          = "bash"
)

// CoreNames lists the core tools, the set an agent with no tools list sees.
func CoreNames() []string {
	return []string{ReadFile, ListDirectory, SearchFiles, WriteFile, EditFile, Bash}
}

// CoreOptions tune the core tools.
type CoreOptions struct {
	// BashTimeout is a command's default time limit; 0 means 2 minutes.
	BashTimeout time.Duration
	// BashMaxTimeout caps what a call may ask for; 0 means 10 minutes.
	BashMaxTimeout time.Duration
	// BashOutput caps the output kept from a command; 0 means 64 KiB.
	BashOutput int
	// Env is the environment of commands, "KEY=value". Nil means a minimal
	// one built here (PATH, TMPDIR, LANG, TERM, NO_COLOR): the daemon's own
	// environment holds its credentials and is never passed on. The
	// sandbox sets HOME and git's configuration over it.
	Env []string
	// Sandbox builds the process bash runs. Required: without one, bash
	// is refused rather than run unconfined.
	Sandbox CommandSandbox
	// Confiner says how tightly the sandbox holds each call, from the
	// rights of the agent making it; nil means no network and the
	// workspace writable.
	Confiner Confiner
	// Background runs bash's background: true commands and gives the
	// tools that manage them; nil refuses background commands.
	Background *Background
}

// CommandSandbox builds the program, arguments and directory that run a
// command confined as spec says. *sandbox.Sandbox implements it; while it
// cannot confine anything it returns a *sandbox.UnavailableError.
type CommandSandbox interface {
	Argv(spec sandbox.Spec) (argv []string, dir string, err error)
}

// Confinement is how tightly the sandbox holds one call's commands.
type Confinement struct {
	// Network lets commands reach the network.
	Network bool
	// WorkspaceReadOnly mounts the whole workspace read-only: the caller's
	// rights do not include writing.
	WorkspaceReadOnly bool
	// ReadOnly are paths inside the workspace commands may read but not
	// change, such as .git/hooks for rights without ci.
	ReadOnly []string
	// Masked are files inside the workspace commands see empty, such as
	// .env for rights without secrets.
	Masked []string
}

// Confiner says how a call's commands are confined. agents/policy
// implements it from the agent's profile and the ceilings of its run, the
// same rights every call is decided by.
type Confiner interface {
	Confine(s Scope, workspace string) Confinement
}

func (o CoreOptions) withDefaults() CoreOptions {
	if o.BashTimeout <= 0 {
		o.BashTimeout = 2 * time.Minute
	}
	if o.BashMaxTimeout <= 0 {
		o.BashMaxTimeout = 10 * time.Minute
	}
	if o.BashTimeout > o.BashMaxTimeout {
		o.BashTimeout = o.BashMaxTimeout
	}
	if o.BashOutput <= 0 {
		o.BashOutput = 64 << 10
	}
	return o
}

// Core returns the core tools. Reading tools declare read, writing ones
// write; bash declares read, and the policy adds what its commands need.
func Core(opts CoreOptions) []Tool {
	opts = opts.withDefaults()
	read, write := []Permission{PermRead}, []Permission{PermWrite}
	ts := []Tool{
		&funcTool{info: Info{Name: ReadFile, Kind: KindCore, Permissions: read, Schema: readFileSchema,
			Description: "Read a text file in the workspace. Optional offset (first line, 1-based) and limit (number of lines) read part of a long file."},
			run: readFile},
		&funcTool{info: Info{Name: ListDirectory, Kind: KindCore, Permissions: read, Schema: listDirectorySchema,
			Description: "List a directory of the workspace (default: its root). Directories end in '/'. Set recursive to list the whole tree (without .git)."},
			run: listDirectory},
		&funcTool{info: Info{Name: SearchFiles, Kind: KindCore, Permissions: read, Schema: searchFilesSchema,
			Description: "Search the text files of the workspace for a regular expression (Go RE2 syntax). Returns path:line: text for each match. Narrow with path (a directory) and glob (e.g. \"**/*.go\")."},
			run: searchFiles},
		&funcTool{info: Info{Name: WriteFile, Kind: KindCore, Permissions: write, Schema: writeFileSchema,
			Description: "Create or overwrite a file in the workspace with the given content, creating parent directories. Prefer edit_file for changing part of an existing file."},
			run: writeFile},
		&funcTool{info: Info{Name: EditFile, Kind: KindCore, Permissions: write, Schema: editFileSchema,
			Description: "Replace exact text in a workspace file. old_string must occur exactly once (include surrounding lines to make it unique) unless replace_all is true."},
			run: editFile},
		&funcTool{info: Info{Name: Bash, Kind: KindCore, Permissions: read, Schema: bashSchema,
			Description: fmt.Sprintf("Run a bash command in the workspace directory and return its combined output and exit code. Default time limit %s, at most %s (timeout_seconds). Output is capped at %d KiB. "+
				"With background: true it starts a long-lived process (a watcher, a dev server) and returns its task id at once; "+
				"it stops when your run ends unless cleanup_on_run_end is false.",
				opts.BashTimeout, opts.BashMaxTimeout, opts.BashOutput>>10)},
			run: bash(opts)},
	}
	if opts.Background != nil {
		ts = append(ts, opts.Background.Tools()...)
	}
	return ts
}

// BackgroundNames are the tools that manage background tasks, offered
// beside the core tools where background commands can run.
func BackgroundNames() []string {
	return []string{ListBackgroundTasks, ReadBackgroundOutput, StopBackgroundTask}
}

// CoreInfo returns the Info of the core tool called name, for calls
// decided without a running daemon (`switchyard policy check`).
func CoreInfo(name string) (Info, bool) {
	for _, t := range Core(CoreOptions{}) {
		if info := t.Info(); info.Name == name {
			return info, true
		}
	}
	return Info{}, false
}

type funcTool struct {
	info Info
	run  func(ctx context.Context, cc CallContext, input json.RawMessage) (string, error)
}

func (t *funcTool) Info() Info { return t.info }
func (t *funcTool) Run(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
	return t.run(ctx, cc, input)
}

var (
	readFileSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File path relative to the workspace"},` +
		`"offset":{"type":"integer","minimum":1,"description":"First line to read, 1-based"},` +
		`"limit":{"type":"integer","minimum":1,"description":"Number of lines to read"}},` +
		`"required":["path"],"additionalProperties":false}`)
	listDirectorySchema = json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"Directory relative to the workspace; default \".\""},` +
		`"recursive":{"type":"boolean"}},"additionalProperties":false}`)
	searchFilesSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"Regular expression (RE2)"},` +
		`"path":{"type":"string","description":"Directory to search, relative to the workspace; default \".\""},` +
		`"glob":{"type":"string","description":"Only files whose path matches, e.g. \"**/*.go\""},` +
		`"case_insensitive":{"type":"boolean"}},` +
		`"required":["pattern"],"additionalProperties":false}`)
	writeFileSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File path relative to the workspace"},` +
		`"content":{"type":"string"}},` +
		`"required":["path","content"],"additionalProperties":false}`)
	editFileSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File path relative to the workspace"},` +
		`"old_string":{"type":"string","description":"Exact text to replace"},` +
		`"new_string":{"type":"string","description":"Replacement text"},` +
		`"replace_all":{"type":"boolean","description":"Replace every occurrence"}},` +
		`"required":["path","old_string","new_string"],"additionalProperties":false}`)
	bashSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","description":"The command line, run with bash -c"},` +
		`"timeout_seconds":{"type":"integer","minimum":1},` +
		`"background":{"type":"boolean","description":"Start it as a background task and return its id at once"},` +
		`"cleanup_on_run_end":{"type":"boolean","description":"For background: stop it when this run ends (default true); false keeps it for later runs of this thread"}},` +
		`"required":["command"],"additionalProperties":false}`)
)

const (
	maxReadBytes   = 4 << 20
	maxSearchBytes = 1 << 20
	maxListEntries = 1000
	maxMatches     = 200
)

func readFile(_ context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	if in.Path == "" {
		return "", errors.New("invalid input: path is required")
	}
	root, rel, err := openIn(cc.Workspace, in.Path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, st, err := openChecked(root, in.Path, rel)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return "", err
		}
		return "", fmt.Errorf("read %s: %w", in.Path, unwrapPath(err))
	}
	defer f.Close()
	if st.IsDir() {
		return "", fmt.Errorf("read %s: it is a directory; use list_directory", in.Path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", in.Path, unwrapPath(err))
	}
	if isBinary(data) {
		return fmt.Sprintf("%s is a binary file of %d bytes", in.Path, st.Size()), nil
	}
	text := string(data)
	if in.Offset > 0 || in.Limit > 0 {
		lines := strings.SplitAfter(text, "\n")
		start := max(in.Offset, 1) - 1
		if start >= len(lines) {
			return "", fmt.Errorf("read %s: offset %d is past the end (%d lines)", in.Path, in.Offset, len(lines))
		}
		end := len(lines)
		if in.Limit > 0 && start+in.Limit < end {
			end = start + in.Limit
		}
		return fmt.Sprintf("[lines %d-%d of %d]\n%s", start+1, end, len(lines), strings.Join(lines[start:end], "")), nil
	}
	if st.Size() > maxReadBytes {
		text += fmt.Sprintf("\n[… file is %d bytes; read the rest with offset and limit]", st.Size())
	}
	return text, nil
}

func listDirectory(_ context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	root, rel, err := openIn(cc.Workspace, in.Path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if err := isDirectory(root, in.Path, rel); err != nil {
		return "", err
	}
	fsys := root.FS()
	var b strings.Builder
	n := 0
	line := func(p string, d fs.DirEntry) {
		switch {
		case d.IsDir():
			fmt.Fprintf(&b, "%s/\n", p)
		case d.Type()&fs.ModeSymlink != 0:
			fmt.Fprintf(&b, "%s@\n", p)
		default:
			size := int64(-1)
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
			fmt.Fprintf(&b, "%s (%d bytes)\n", p, size)
		}
		n++
	}
	if !in.Recursive {
		entries, err := fs.ReadDir(fsys, rel)
		if err != nil {
			return "", fmt.Errorf("list %s: %w", displayPath(in.Path), unwrapPath(err))
		}
		for _, d := range entries {
			if n == maxListEntries {
				fmt.Fprintf(&b, "[… %d more entries]\n", len(entries)-n)
				break
			}
			line(d.Name(), d)
		}
	} else {
		err := fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == rel {
				return nil
			}
			if d.IsDir() && d.Name() == ".git" {
				return fs.SkipDir
			}
			if n == maxListEntries {
				b.WriteString("[… more entries omitted; list a subdirectory]\n")
				return fs.SkipAll
			}
			line(relTo(rel, p), d)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("list %s: %w", displayPath(in.Path), unwrapPath(err))
		}
	}
	if n == 0 {
		return displayPath(in.Path) + " is empty", nil
	}
	return b.String(), nil
}

func searchFiles(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Pattern         string `json:"pattern"`
		Path            string `json:"path"`
		Glob            string `json:"glob"`
		CaseInsensitive bool   `json:"case_insensitive"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	if in.Pattern == "" {
		return "", errors.New("invalid input: pattern is required")
	}
	expr := in.Pattern
	if in.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", fmt.Errorf("invalid input: pattern: %w", err)
	}
	if in.Glob != "" && !doublestar.ValidatePattern(in.Glob) {
		return "", fmt.Errorf("invalid input: glob %q is not a valid pattern", in.Glob)
	}
	root, rel, err := openIn(cc.Workspace, in.Path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	// The walk follows no link below rel, but rel itself may be one: a
	// file is judged by where it is as well as by the name it is found by.
	linked, err := linkedRel(cc.Workspace, rel)
	if err != nil {
		return "", fmt.Errorf("search %s: %w", displayPath(in.Path), unwrapPath(err))
	}
	fsys := root.FS()
	var b strings.Builder
	matches, skipped := 0, 0
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if in.Glob != "" {
			if ok, _ := doublestar.Match(in.Glob, relTo(rel, p)); !ok {
				if ok, _ := doublestar.Match(in.Glob, p); !ok {
					return nil
				}
			}
		}
		if SecretLooking(p) || SecretLooking(path.Join(linked, relTo(rel, p))) {
			skipped++
			return nil
		}
		data, ok := searchable(root, p)
		if !ok {
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), maxSearchBytes)
		for ln := 1; sc.Scan(); ln++ {
			if !re.Match(sc.Bytes()) {
				continue
			}
			if matches == maxMatches {
				b.WriteString("[… more matches omitted; narrow the search with path or glob]\n")
				return fs.SkipAll
			}
			text := sc.Text()
			if len(text) > 300 {
				text = strings.ToValidUTF8(text[:300], "") + "…"
			}
			fmt.Fprintf(&b, "%s:%d: %s\n", p, ln, text)
			matches++
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("search %s: %w", displayPath(in.Path), unwrapPath(err))
	}
	if skipped > 0 {
		if matches == 0 {
			b.WriteString("no matches\n")
		}
		fmt.Fprintf(&b, "[not searched: %s; read_file decides whether you may read one]\n", secretsSkipped(skipped))
	}
	if b.Len() == 0 {
		return "no matches", nil
	}
	return b.String(), nil
}

// searchable reads a file search_files may look into: a regular file of at
// most maxSearchBytes, not binary, with no other name (see checkOpened). It
// checks the file it opened, not the path.
func searchable(root *os.Root, p string) ([]byte, bool) {
	f, st, err := openChecked(root, p, p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if !st.Mode().IsRegular() || st.Size() > maxSearchBytes {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSearchBytes+1))
	if err != nil || len(data) > maxSearchBytes || isBinary(data) {
		return nil, false
	}
	return data, true
}

func writeFile(_ context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	if in.Path == "" || in.Content == nil {
		return "", errors.New("invalid input: path and content are required")
	}
	rel, _, err := resolve(cc.Workspace, in.Path)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("write %s: that is the workspace itself", in.Path)
	}
	root, err := openRoot(cc.Workspace)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o750); err != nil {
			return "", fmt.Errorf("write %s: %w", in.Path, unwrapPath(err))
		}
	}
	if err := writeChecked(root, in.Path, rel, []byte(*in.Content), 0o644, os.O_CREATE); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(*in.Content), rel), nil
}

func editFile(_ context.Context, cc CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Path       string  `json:"path"`
		OldString  *string `json:"old_string"`
		NewString  *string `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
	}
	if err := DecodeInput(input, &in); err != nil {
		return "", err
	}
	if in.Path == "" || in.OldString == nil || in.NewString == nil {
		return "", errors.New("invalid input: path, old_string and new_string are required")
	}
	if *in.OldString == "" {
		return "", errors.New("invalid input: old_string is empty; use write_file to create a file")
	}
	if *in.OldString == *in.NewString {
		return "", errors.New("invalid input: old_string and new_string are the same")
	}
	root, rel, err := openIn(cc.Workspace, in.Path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, st, err := openChecked(root, in.Path, rel)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(f)
		f.Close()
	}
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return "", err
		}
		return "", fmt.Errorf("edit %s: %w", in.Path, unwrapPath(err))
	}
	text := string(data)
	n := strings.Count(text, *in.OldString)
	switch {
	case n == 0:
		return "", fmt.Errorf("edit %s: old_string not found; read the file and copy the text exactly", in.Path)
	case n > 1 && !in.ReplaceAll:
		return "", fmt.Errorf("edit %s: old_string occurs %d times; include more surrounding text or set replace_all", in.Path, n)
	}
	if in.ReplaceAll {
		text = strings.ReplaceAll(text, *in.OldString, *in.NewString)
	} else {
		text = strings.Replace(text, *in.OldString, *in.NewString, 1)
	}
	if err := writeChecked(root, in.Path, rel, []byte(text), st.Mode().Perm(), 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("replaced %d occurrence(s) in %s", n, rel), nil
}

// isDirectory checks that rel in root is a directory before it is listed,
// opening it without waiting: listing a named pipe would wait for a writer.
func isDirectory(root *os.Root, p, rel string) error {
	f, err := openFile(root, rel, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("list %s: %w", displayPath(p), unwrapPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("list %s: %w", displayPath(p), unwrapPath(err))
	}
	if !st.IsDir() {
		if err := checkOpened(displayPath(p), st); err != nil {
			return err
		}
		return fmt.Errorf("list %s: it is a file; use read_file", displayPath(p))
	}
	return nil
}

// readChecked reads rel in root, refused when the file opened has another
// name (see checkOpened).
func readChecked(root *os.Root, rel string) ([]byte, error) {
	f, _, err := openChecked(root, rel, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeChecked writes data to rel in root, the file opened before it is
// changed and refused when it has another name (see checkOpened), so a hard
// link, even one made after the path was checked, is never written
// through. flag adds os.O_CREATE for a file that may be new.
func writeChecked(root *os.Root, p, rel string, data []byte, perm fs.FileMode, flag int) error {
	f, err := openFile(root, rel, os.O_WRONLY|flag, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, unwrapPath(err))
	}
	st, err := f.Stat()
	if err == nil {
		if err = checkOpened(p, st); err != nil {
			f.Close()
			return err
		}
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, unwrapPath(err))
	}
	return nil
}

func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

func relTo(base, p string) string {
	if base == "." {
		return p
	}
	return strings.TrimPrefix(p, base+"/")
}

func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// unwrapPath drops the *fs.PathError wrapper, whose path is the workspace
// relative form the message already names, to keep messages short.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// secretsSkipped says how many files search_files left out as secrets.
func secretsSkipped(n int) string {
	if n == 1 {
		return "1 file that looks like a secret"
	}
	return fmt.Sprintf("%d files that look like secrets", n)
}
