package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/skills"
)

var _ CommandSandbox = (*sandbox.Sandbox)(nil)

// process is one command to run for a tool.
type process struct {
	name    string
	args    []string
	dir     string
	env     []string
	stdin   io.Reader
	timeout time.Duration
	output  int // bytes of output kept
}

// run executes p and returns its combined output, capped, and a non-nil
// error for a non-zero exit, a timeout or a start failure. The command runs
// in its own process group so a timeout or cancellation kills everything it
// started, not only the shell.
func (p process) run(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.name, p.args...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdin = p.stdin
	out := &capped{max: p.output}
	cmd.Stdout = out
	cmd.Stderr = out
	setProcessGroup(cmd)
	// Children that keep the pipes open must not hold the call forever.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	text := out.String()
	switch {
	case err == nil:
		return text, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return text, fmt.Errorf("timed out after %s and was killed", p.timeout)
	case ctx.Err() != nil:
		return text, fmt.Errorf("cancelled: %w", ctx.Err())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return text, fmt.Errorf("exit code %d", exit.ExitCode())
	}
	return text, err
}

// baseEnv is the environment commands get when none is configured, built
// here: enough to find programs, write temporary files and print UTF-8.
// Nothing else of the daemon's own environment, which holds its
// credentials, is passed on; its PATH names only where programs are. The
// sandbox adds the home, which is never the workspace.
func baseEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "TMPDIR=/tmp", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1"}
}

// capped keeps the first max bytes written and the last part, and counts
// what it dropped in between.
type capped struct {
	mu      sync.Mutex
	max     int
	head    bytes.Buffer
	tail    []byte
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	headMax := c.max - c.max/4
	if room := headMax - c.head.Len(); room > 0 {
		k := min(room, len(p))
		c.head.Write(p[:k])
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	tailMax := c.max / 4
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - tailMax; over > 0 {
		c.dropped += over
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
	return n, nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return c.head.String() + string(c.tail)
	}
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s",
		strings.ToValidUTF8(c.head.String(), ""), c.dropped, strings.ToValidUTF8(string(c.tail), ""))
}

func bash(opts CoreOptions) func(context.Context, CallContext, json.RawMessage) (string, error) {
	return func(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
		var in struct {
			Command         string `json:"command"`
			TimeoutSeconds  int    `json:"timeout_seconds"`
			Background      bool   `json:"background"`
			CleanupOnRunEnd *bool  `json:"cleanup_on_run_end"`
		}
		if err := DecodeInput(input, &in); err != nil {
			return "", err
		}
		if in.CleanupOnRunEnd != nil && !in.Background {
			return "", errors.New("invalid input: cleanup_on_run_end is for background commands")
		}
		if in.Background && opts.Background == nil {
			return "", Refuse("background commands are not available here")
		}
		if strings.TrimSpace(in.Command) == "" {
			return "", errors.New("invalid input: command is required")
		}
		if cc.Workspace == "" {
			return "", errors.New("this run has no workspace")
		}
		timeout := opts.BashTimeout
		if in.TimeoutSeconds > 0 {
			timeout = min(time.Duration(in.TimeoutSeconds)*time.Second, opts.BashMaxTimeout)
		}
		argv, dir, err := confined(Bash, opts.Sandbox, opts.Confiner, cc, sandbox.Spec{Script: in.Command})
		if err != nil {
			return "", err
		}
		env := opts.Env
		if env == nil {
			env = baseEnv()
		}
		if in.Background {
			cleanup := in.CleanupOnRunEnd == nil || *in.CleanupOnRunEnd
			t, err := opts.Background.start(ctx, cc, in.Command, argv, dir, env, cleanup)
			if err != nil {
				return "", err
			}
			when := "it stops when this run ends"
			if !cleanup {
				when = "it keeps running after this run ends; later runs of this thread manage it"
			}
			return fmt.Sprintf("started background task %s; %s. read_background_output reads its output, stop_background_task stops it, list_background_tasks lists your tasks.",
				t.ID, when), nil
		}
		out, err := process{
			name: argv[0], args: argv[1:], dir: dir, env: env, timeout: timeout, output: opts.BashOutput,
		}.run(ctx)
		if err == nil && out == "" {
			return "(no output, exit code 0)", nil
		}
		return out, err
	}
}

// confined prepares spec for a call of tool through sb, confined as the
// caller's rights say, and returns the program, its arguments and the
// directory to run in. Without a sandbox, or while the sandbox cannot
// confine anything, the call is refused: nothing runs unconfined unless
// the operator chose sandbox.mode none.
func confined(tool string, sb CommandSandbox, conf Confiner, cc CallContext, spec sandbox.Spec) ([]string, string, error) {
	if sb == nil {
		return nil, "", Refuse("%s cannot run: no sandbox is configured", tool)
	}
	spec.Workspace = cc.Workspace
	if conf != nil {
		c := conf.Confine(cc.Scope, cc.Workspace)
		spec.Network, spec.WorkspaceReadOnly, spec.ReadOnly, spec.Masked = c.Network, c.WorkspaceReadOnly, c.ReadOnly, c.Masked
	}
	argv, dir, err := sb.Argv(spec)
	var unavailable *sandbox.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		return nil, "", Refuse("%s cannot run: %v", tool, err)
	case err != nil:
		return nil, "", fmt.Errorf("prepare command: %w", err)
	case len(argv) == 0:
		return nil, "", errors.New("sandbox: no command to run")
	}
	// The sandbox may resolve the workspace to its real path, which is
	// the only one bound inside it.
	return argv, dir, nil
}

// CommandSpec is a command tool contributed by a package: the program runs
// with the call's input as JSON on stdin and its output becomes the result.
type CommandSpec struct {
	Name        string
	Description string
	// Package is the contributing package; Dir its directory, against which
	// a relative Command is resolved.
	Package string
	Dir     string
	Command string
	Args    []string
	// Schema is the input's JSON schema; nil accepts any object.
	Schema json.RawMessage
	// RequiredAgent, when set, is the only agent that may see and call it.
	RequiredAgent string
	// Permissions are what the command needs, as the package's manifest
	// declares them (exec for a program that runs code, read for one that
	// only reads). Required.
	Permissions []Permission
	// Timeout defaults to 2 minutes; Output to 64 KiB.
	Timeout time.Duration
	Output  int
	// Env is the command's environment; nil means the minimal one bash
	// gets, plus SWITCHYARD_* variables naming the call.
	Env []string
	// Sandbox and Confiner run the command as they run bash: inside the
	// sandbox, confined by the caller's rights. Without a sandbox the
	// command is refused.
	Sandbox  CommandSandbox
	Confiner Confiner
}

// NewCommand returns the tool spec describes.
func NewCommand(spec CommandSpec) (Tool, error) {
	if !ValidName(spec.Name) {
		return nil, fmt.Errorf("command tool %q: invalid name", spec.Name)
	}
	if spec.Command == "" {
		return nil, fmt.Errorf("command tool %q: command is required", spec.Name)
	}
	if spec.Schema == nil {
		spec.Schema = json.RawMessage(`{"type":"object"}`)
	}
	if err := validSchema(spec.Schema); err != nil {
		return nil, fmt.Errorf("command tool %q: %w", spec.Name, err)
	}
	schema, err := skills.CompileSchema(spec.Name, spec.Schema)
	if err != nil {
		return nil, fmt.Errorf("command tool %q: input schema: %w", spec.Name, err)
	}
	if err := checkDeclared(spec.Permissions); err != nil {
		return nil, fmt.Errorf("command tool %q: %w", spec.Name, err)
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 2 * time.Minute
	}
	if spec.Output <= 0 {
		spec.Output = 64 << 10
	}
	return &commandTool{spec: spec, schema: schema}, nil
}

// jsonKind names the kind of JSON value doc starts with, in words.
func jsonKind(doc []byte) string {
	doc = bytes.TrimLeft(doc, " \t\r\n")
	if len(doc) == 0 {
		return "nothing"
	}
	switch c := doc[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 'n':
		return "null"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return "text that is not JSON"
}

// maxCommandInput is the largest input a command tool is given on stdin.
const maxCommandInput = 1 << 20

type commandTool struct {
	spec   CommandSpec
	schema *skills.Schema
}

// CheckInput holds input to the tool's input schema: a JSON object of at
// most maxCommandInput bytes that the schema accepts (types, required and
// extra fields as it says). The toolset calls it before the policy and an
// approver see the call, and Run again before anything runs.
func (t *commandTool) CheckInput(input json.RawMessage) error {
	if len(input) > maxCommandInput {
		return fmt.Errorf("invalid input: %d bytes, more than the %d a command tool takes", len(input), maxCommandInput)
	}
	if kind := jsonKind(input); kind != "an object" {
		return fmt.Errorf("invalid input: want a JSON object, got %s", kind)
	}
	if err := t.schema.CheckJSON(input); err != nil {
		return fmt.Errorf("invalid input for %s: %w", t.spec.Name, err)
	}
	return nil
}

func (t *commandTool) Info() Info {
	return Info{
		Name: t.spec.Name, Description: t.spec.Description, Schema: t.spec.Schema,
		Kind: KindCommand, Package: t.spec.Package, RequiredAgent: t.spec.RequiredAgent,
		Permissions: slices.Clone(t.spec.Permissions),
	}
}

func (t *commandTool) Run(ctx context.Context, cc CallContext, input json.RawMessage) (string, error) {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := t.CheckInput(input); err != nil {
		return "", Refuse("%v", err)
	}
	if cc.Workspace == "" {
		return "", errors.New("this run has no workspace")
	}
	name := t.spec.Command
	if strings.ContainsRune(name, '/') && !strings.HasPrefix(name, "/") && t.spec.Dir != "" {
		name = t.spec.Dir + "/" + name
	}
	spec := sandbox.Spec{Argv: append([]string{name}, t.spec.Args...)}
	if t.spec.Dir != "" {
		spec.Expose = []string{t.spec.Dir}
	}
	argv, dir, err := confined(t.spec.Name, t.spec.Sandbox, t.spec.Confiner, cc, spec)
	if err != nil {
		return "", err
	}
	env := t.spec.Env
	if env == nil {
		env = append(baseEnv(),
			"SWITCHYARD_AGENT="+cc.Agent,
			"SWITCHYARD_SESSION_KEY="+cc.SessionKey,
			"SWITCHYARD_CORRELATION_ID="+cc.CorrelationID,
			"SWITCHYARD_WORKSPACE="+dir,
			"SWITCHYARD_PACKAGE_DIR="+t.spec.Dir,
		)
	}
	out, err := process{
		name: argv[0], args: argv[1:], dir: dir, env: env, stdin: bytes.NewReader(input),
		timeout: t.spec.Timeout, output: t.spec.Output,
	}.run(ctx)
	if err != nil {
		return out, fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	return out, nil
}
