package install

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard/switchyard/skills"
)

// fetch writes the package src names into t, using work for anything
// else it needs (a clone, a download), and returns what the source
// resolved to for the lock: the git commit, the npm version and its
// integrity, the archive's sha256.
func (in *Installer) fetch(ctx context.Context, src Source, t *tree, work string) (string, error) {
	switch src.Kind {
	case KindDir:
		root, err := os.OpenRoot(src.Path)
		if err != nil {
			return "", invalid("directory %s: %v", src.Path, unwrapPath(err))
		}
		defer root.Close()
		return "", t.copyDir(root.FS())
	case KindGit:
		return in.fetchGit(ctx, src, t, work)
	case KindNPM:
		return in.fetchNPM(ctx, src, t, work)
	case KindArchive:
		return in.fetchArchive(ctx, src, t, work)
	}
	return "", invalid("unknown kind of source %q", src.Kind)
}

func invalid(format string, args ...any) error {
	return &skills.Error{Kind: skills.ErrInvalid, Msg: fmt.Sprintf(format, args...)}
}

// unwrapPath drops the operation and path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fetchGit clones the repository, finds the commit of the ref (a tag, a
// branch or a commit) and writes its tree as git archive gives it, so the
// files pass the same checks as any archive's and no .git comes along.
func (in *Installer) fetchGit(ctx context.Context, src Source, t *tree, work string) (string, error) {
	clone := filepath.Join(work, "clone")
	if _, err := in.run(ctx, work, "git", "clone", "--quiet", "--no-checkout", "--", src.URL, clone); err != nil {
		return "", err
	}
	var commit string
	refs := []string{"HEAD"}
	if src.Ref != "" {
		refs = []string{src.Ref, "origin/" + src.Ref}
	}
	for _, ref := range refs {
		out, err := in.run(ctx, clone, "git", "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
		if err == nil {
			commit = strings.TrimSpace(string(out))
			break
		}
	}
	if commit == "" {
		return "", invalid("git %s: no tag, branch or commit %q", src.URL, src.Ref)
	}
	cmd := in.command(ctx, clone, "git", "archive", "--format=tar", commit)
	var stderr bytes.Buffer
	cmd.Stderr = &limited{w: &stderr, n: 4096}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("git archive: %w", err)
	}
	werr := t.untar(out)
	_, _ = io.Copy(io.Discard, out) // let git finish when the tree refused early
	if err := cmd.Wait(); err != nil && werr == nil {
		return "", invalid("git archive %s: %s", commit, firstLine(stderr.String(), err))
	}
	return commit, werr
}

// npmPack is what `npm pack --json` says of each tarball.
type npmPack struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Filename  string `json:"filename"`
	Integrity string `json:"integrity"`
}

// fetchNPM asks npm for the tarball of the package (npm resolves the range
// against the registry it is configured for, and checks the tarball's
// integrity) and writes its files, whose top directory is package/.
func (in *Installer) fetchNPM(ctx context.Context, src Source, t *tree, work string) (string, error) {
	spec := src.Name
	if src.Range != "" {
		spec += "@" + src.Range
	}
	out, err := in.run(ctx, work, "npm", "pack", "--json", "--ignore-scripts", "--pack-destination", work, "--", spec)
	if err != nil {
		return "", err
	}
	var packs []npmPack
	if err := json.Unmarshal(out, &packs); err != nil || len(packs) != 1 || packs[0].Filename == "" {
		return "", fmt.Errorf("npm pack %s: unexpected answer: %s", spec, firstLine(string(out), err))
	}
	p := packs[0]
	f, err := os.Open(filepath.Join(work, filepath.Base(p.Filename)))
	if err != nil {
		return "", fmt.Errorf("npm pack %s: %w", spec, err)
	}
	defer f.Close()
	if err := t.extract(f); err != nil {
		return "", err
	}
	return p.Name + "@" + p.Version + " " + p.Integrity, nil
}

// fetchArchive downloads the archive, refusing it unless its SHA-256 is
// the one given, then writes its files.
func (in *Installer) fetchArchive(ctx context.Context, src Source, t *tree, work string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return "", invalid("%s: %v", src.URL, err)
	}
	// The file's own bytes, which the sha256 given is of: asked for
	// itself, a gzip-encoded answer (a .tar.gz stored with
	// Content-Encoding: gzip) is not decoded on the way, as curl or a
	// browser's download would not.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := in.http.Do(req)
	if err != nil {
		return "", invalid("download %s: %v", src.URL, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", invalid("download %s: the server answered %s", src.URL, resp.Status)
	}
	f, err := os.Create(filepath.Join(work, "archive"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, in.limits.MaxDownload+1))
	if err != nil {
		return "", invalid("download %s: %v", src.URL, err)
	}
	if n > in.limits.MaxDownload {
		return "", refuse("%s is larger than %d bytes", src.URL, in.limits.MaxDownload)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != src.SHA256 {
		return "", refuse("%s: its SHA-256 is %s, not %s as given; nothing was installed", src.URL, got, src.SHA256)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return "sha256:" + src.SHA256, t.extract(f)
}

// unwrapURL drops what *url.Error repeats (the method and URL).
func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && strings.HasPrefix(err.Error(), "Get ") {
		return ue.Unwrap()
	}
	return err
}

// waitDelay is how long a killed git or npm is given to close its output.
const waitDelay = 5 * time.Second

// command builds a command of git or npm. Its environment is the
// daemon's minus everything but what those programs need to reach their
// servers (PATH, HOME, proxies, npm's and git's own settings): the
// daemon's credentials stay out. Git may use only its plain transports.
func (in *Installer) command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// At the install's timeout the program is killed with every helper it
	// started, and the wait for their output ends soon after even if one
	// escaped: a server that never answers cannot hold the install.
	ownGroup(cmd)
	cmd.WaitDelay = waitDelay
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=file:git:http:https:ssh", "LANG=C"}
	for _, kv := range in.env() {
		k, _, _ := strings.Cut(kv, "=")
		switch upper := strings.ToUpper(k); {
		case k == "PATH", k == "HOME", k == "TMPDIR", k == "USER",
			upper == "HTTP_PROXY", upper == "HTTPS_PROXY", upper == "NO_PROXY", upper == "ALL_PROXY",
			k == "SSL_CERT_FILE", k == "SSL_CERT_DIR", k == "NODE_EXTRA_CA_CERTS",
			k == "SSH_AUTH_SOCK", k == "GIT_SSH_COMMAND", k == "GIT_CONFIG_GLOBAL",
			strings.HasPrefix(upper, "NPM_CONFIG_"):
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// run runs a command and returns its output; a failure is said with the
// first line of what the program wrote.
func (in *Installer) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := in.command(ctx, dir, name, args...)
	var stdout bytes.Buffer
	var stderr bytes.Buffer
	cmd.Stdout = &limited{w: &stdout, n: 1 << 20}
	cmd.Stderr = &limited{w: &stderr, n: 4096}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", name, args[0], ctx.Err())
		}
		var ee *exec.Error
		if errors.As(err, &ee) {
			return nil, &skills.Error{Kind: skills.ErrInvalid, Msg: fmt.Sprintf("%s is not installed on the daemon's machine; it is needed for this source", name)}
		}
		return nil, invalid("%s %s: %s", name, args[0], firstLine(stderr.String(), err))
	}
	return stdout.Bytes(), nil
}

// firstLine is the first line of what git or npm wrote that says why it
// failed (npm's codes and log hints left out), or err.
func firstLine(s string, err error) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "", strings.HasPrefix(l, "npm notice"), strings.HasPrefix(l, "npm warn"),
			strings.HasPrefix(l, "npm error code "), strings.HasPrefix(l, "npm error errno "),
			strings.Contains(l, "A complete log of this run"):
			continue
		}
		l = strings.TrimPrefix(strings.TrimPrefix(l, "fatal: "), "npm error ")
		// npm repeats its code before the words: "notarget No matching …".
		if code, rest, ok := strings.Cut(l, " "); ok && code == strings.ToLower(code) && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			l = rest
		}
		return l
	}
	if err != nil {
		return err.Error()
	}
	return "failed"
}

// limited keeps the first n bytes written to it and drops the rest.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
