package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// InstallPackageTool installs a package the agent wrote in its workspace.
const InstallPackageTool = "install_package"

// BuilderAgent is the built-in agent that writes and installs agents; it
// alone is offered install_package.
const BuilderAgent = "builder"

// PackageInstaller installs the package in a directory and puts it into
// effect at once, enabled at the scopes given; the daemon's installer.
type PackageInstaller interface {
	InstallPackage(ctx context.Context, dir string, enable []skills.Scope) (Installed, error)
}

// Installed is what an install put into effect.
type Installed struct {
	Package  string
	Version  string
	Previous string // the version it replaced, if any
	Agents   []string
	Skills   []string
	Tools    []string
	Commands []string
	Enabled  []string // the scopes it is enabled at
	Warnings []string
}

var installSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"path":{"type":"string","description":"The package's directory in your workspace, holding its manifest.yaml"}},` +
	`"required":["path"],"additionalProperties":false}`)

// installTool installs a directory of the run's workspace as a package and
// enables it where the run happens: the thread's repository, or everywhere
// for a thread that has none. Every call waits for a person's approval.
type installTool struct {
	rt *Runtime
	rn *run
}

func (t *installTool) Info() tools.Info {
	return tools.Info{
		Name: InstallPackageTool,
		Description: "Install the package in a directory of your workspace (its manifest.yaml and the files it names) into Switchyard and " +
			"enable it here: its agents are listed and callable as agent_<name> from your next turn, without a restart. " +
			"A person approves every install first; you wait for the answer.",
		Schema: installSchema,
		Kind:   tools.KindControl,
		// It changes what the daemon runs; a person decides each time.
		Permissions:   []tools.Permission{tools.PermWrite},
		RequiredAgent: BuilderAgent,
		Approval:      true,
	}
}

func (t *installTool) Run(ctx context.Context, cc tools.CallContext, input json.RawMessage) (string, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := tools.DecodeInput(input, &in); err != nil {
		return "", err
	}
	if strings.TrimSpace(in.Path) == "" {
		return "", errors.New("invalid input: path is required")
	}
	if cc.Workspace == "" {
		return "", errors.New("this run has no workspace to install from")
	}
	p, err := tools.Resolve(cc.Workspace, in.Path)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(p.Abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory of your workspace", p.Rel)
	}
	scope := skills.Global
	if t.rn.target.Repo != "" {
		scope = skills.Scope{Kind: skills.ScopeRepo, Name: t.rn.target.Repo}
	}
	res, err := t.rt.opts.Installer.InstallPackage(ctx, p.Abs, []skills.Scope{scope})
	if err != nil {
		return "", fmt.Errorf("install %s: %w", p.Rel, err)
	}
	t.rt.report(ctx, t.rn, bot.ProgressEvent{Kind: bot.ProgressNote, Tool: InstallPackageTool,
		Text: fmt.Sprintf("installed package %s %s", res.Package, res.Version)})
	var b strings.Builder
	fmt.Fprintf(&b, "Installed package %s %s", res.Package, res.Version)
	switch res.Previous {
	case "":
	case res.Version:
		b.WriteString(" (it replaced that version's files)")
	default:
		fmt.Fprintf(&b, " (it replaced %s)", res.Previous)
	}
	fmt.Fprintf(&b, ", enabled at %s.\n", listOr(res.Enabled, scope.String()))
	if len(res.Agents) > 0 {
		calls := make([]string, len(res.Agents))
		for i, a := range res.Agents {
			calls[i] = ToolName(a)
		}
		fmt.Fprintf(&b, "Agents: %s; from your next turn you can call them as %s.\n", strings.Join(res.Agents, ", "), strings.Join(calls, ", "))
	}
	if len(res.Skills) > 0 {
		fmt.Fprintf(&b, "Skills: %s.\n", strings.Join(res.Skills, ", "))
	}
	if len(res.Tools) > 0 {
		fmt.Fprintf(&b, "Tools: %s.\n", strings.Join(res.Tools, ", "))
	}
	if len(res.Commands) > 0 {
		fmt.Fprintf(&b, "Commands: %s.\n", strings.Join(res.Commands, ", "))
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "Warning: %s\n", w)
	}
	return b.String(), nil
}
