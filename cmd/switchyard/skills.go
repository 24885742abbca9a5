package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// installTimeout is how long the CLI waits for the daemon to install a
// package: a clone or a download may take minutes.
const installTimeout = 12 * time.Minute

func newSkillsCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "Skills and packages: list, install, enable per scope, validate and compose",
		Long: "Packages contribute skills, agents, command tools and chat commands. The daemon installs them " +
			"(from a directory, git+<url>[#ref], npm:<name>[@range] or an https:// archive with --sha256) and keeps " +
			"them across restarts. Enablement is per scope, global → org → repo → agent, the most specific setting winning.",
	}
	cmd.AddCommand(
		skillsListCmd(cl, "list", "List the skills of every package", cobra.NoArgs),
		skillsListCmd(cl, "search Q", "List the skills whose name, description or keywords hold every word of Q", cobra.MinimumNArgs(1)),
		skillsShowCmd(cl),
		skillsInstallCmd(cl),
		skillsUninstallCmd(cl),
		skillsSettingCmd(cl, "enable", "Enable a package or a skill at a scope"),
		skillsSettingCmd(cl, "disable", "Disable a package or a skill at a scope"),
		skillsSettingCmd(cl, "inherit", "Forget the setting of a package or a skill at a scope, so broader scopes decide"),
		skillsEffectiveCmd(cl),
		skillsValidateCmd(cl),
		skillsComposeCmd(cl),
		skillsPackagesCmd(cl),
	)
	return cmd
}

func skillsListCmd(cl *clientFlags, use, short string, args cobra.PositionalArgs) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/v1/skills"
			if len(args) > 0 {
				path += "?q=" + url.QueryEscape(strings.Join(args, " "))
			}
			var list []admin.SkillSummary
			if err := cl.client().do(cmd.Context(), "GET", path, nil, &list); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "No skills match.")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPACKAGE\tVERSION\tDESCRIPTION")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Package, s.Version, firstLine(s.Description))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print JSON: [{"name","package","version","description"}]`)
	return c
}

func skillsShowCmd(cl *clientFlags) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a skill (its instructions, tools and rules) or a package",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			var raw json.RawMessage
			err := cl.client().do(cmd.Context(), "GET", "/api/v1/skills/"+url.PathEscape(args[0]), nil, &raw)
			var ae *apiError
			if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				if err := cl.client().do(cmd.Context(), "GET", "/api/v1/packages/"+url.PathEscape(args[0]), nil, &raw); err != nil {
					if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
						return fmt.Errorf("no skill or package %q", args[0])
					}
					return err
				}
				if asJSON {
					return printJSON(out, raw)
				}
				var p admin.PackageDetail
				if err := json.Unmarshal(raw, &p); err != nil {
					return fmt.Errorf("decode package: %w", err)
				}
				printPackage(out, p)
				return nil
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, raw)
			}
			var s admin.SkillDetail
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("decode skill: %w", err)
			}
			printSkill(out, s)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func printSkill(w io.Writer, s admin.SkillDetail) {
	fmt.Fprintf(w, "%s %s (package %s)\n%s\n\n", s.Name, s.Version, s.Package, s.Description)
	list := func(label string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(w, "%-16s %s\n", label+":", strings.Join(items, ", "))
		}
	}
	allowed := s.AllowedTools
	if len(allowed) == 0 {
		allowed = []string{"none"}
	}
	list("allowed tools", allowed)
	list("forbidden tools", s.ForbiddenTools)
	if cr := s.ComposabilityRules; cr != nil {
		list("requires", cr.Requires)
		list("incompatible", cr.IncompatibleWith)
	}
	list("keywords", s.Keywords)
	fmt.Fprintln(w, "\nProtocol:")
	for i, step := range s.ExecutionProtocol {
		fmt.Fprintf(w, "  %d. %s\n", i+1, step)
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "\n%s\n", s.Instructions)
}

func printPackage(w io.Writer, p admin.PackageDetail) {
	kind := "installed"
	if p.Builtin {
		kind = "built in"
	}
	fmt.Fprintf(w, "%s %s (%s)\n%s\n\n", p.Name, p.Version, kind, p.Description)
	row := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "%-10s %s\n", label+":", value)
		}
	}
	row("source", p.Source)
	row("resolved", p.Resolved)
	row("digest", p.Digest)
	row("skills", strings.Join(p.Skills, ", "))
	row("agents", strings.Join(p.Agents, ", "))
	row("tools", strings.Join(p.Tools, ", "))
	row("commands", strings.Join(p.Commands, ", "))
	row("triggers", strings.Join(p.Triggers, ", "))
	if p.Manifest != nil {
		row("needs", strings.Join(p.Manifest.Permissions, ", "))
		var deps []string
		for _, name := range slices.Sorted(maps.Keys(p.Manifest.Dependencies)) {
			deps = append(deps, name+" "+p.Manifest.Dependencies[name])
		}
		row("requires", strings.Join(deps, ", "))
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

func skillsInstallCmd(cl *clientFlags) *cobra.Command {
	var (
		sha256 string
		enable []string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "install SOURCE",
		Short: "Install a package: a directory, git+<url>[#ref], npm:<name>[@range] or an https:// archive (--sha256)",
		Long: "The daemon fetches and checks the package and keeps it across restarts. A directory is one on the " +
			"daemon's machine (a relative path is made absolute here, as is a git repository's given as a path). A new package is enabled nowhere until enabled: " +
			"--enable SCOPE (repeatable) does both in one step.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := args[0]
			if parsed, err := install.ParseSource(src, sha256); err != nil {
				return withCode(exitUsage, err)
			} else if parsed.Kind == install.KindDir || parsed.Kind == install.KindGit {
				src = parsed.String() // a path on this machine made absolute here
			}
			for _, e := range enable {
				if _, err := skills.ParseScope(e); err != nil {
					return withCode(exitUsage, fmt.Errorf("--enable: %w", err))
				}
			}
			c := cl.client()
			c.http.Timeout = installTimeout
			var res install.Result
			if err := c.do(cmd.Context(), "POST", "/api/v1/packages", admin.InstallRequest{Source: src, SHA256: sha256, Enable: enable}, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, res)
			}
			printInstall(out, res)
			return nil
		},
	}
	c.Flags().StringVar(&sha256, "sha256", "", "the SHA-256 of an https:// archive (required for archives)")
	c.Flags().StringArrayVar(&enable, "enable", nil, "also enable the package at this scope: global, org:<o>, repo:<o>/<r> or agent:<a> (repeatable)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func printInstall(w io.Writer, r install.Result) {
	switch {
	case r.Unchanged:
		fmt.Fprintf(w, "%s %s is installed already (%s)\n", r.Package, r.Version, r.Digest)
	case r.Previous == r.Version:
		fmt.Fprintf(w, "reinstalled %s %s with other files, from %s (%s)\n", r.Package, r.Version, r.Source, r.Digest)
	case r.Previous != "":
		fmt.Fprintf(w, "installed %s %s over %s, from %s (%s)\n", r.Package, r.Version, r.Previous, r.Source, r.Digest)
	default:
		fmt.Fprintf(w, "installed %s %s from %s (%s)\n", r.Package, r.Version, r.Source, r.Digest)
	}
	row := func(label string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(w, "  %-9s %s\n", label+":", strings.Join(items, ", "))
		}
	}
	row("skills", r.Skills)
	row("agents", r.Agents)
	row("tools", r.Tools)
	row("commands", r.Commands)
	row("triggers", r.Triggers)
	if len(r.Enabled) > 0 {
		row("enabled", r.Enabled)
	} else if !r.Unchanged {
		fmt.Fprintf(w, "  enabled nowhere yet: switchyard skills enable %s --scope SCOPE\n", r.Package)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

func skillsUninstallCmd(cl *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall NAME",
		Short: "Uninstall a package (refused while another package depends on it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rec skills.InstalledPackage
			if err := cl.client().do(cmd.Context(), "DELETE", "/api/v1/packages/"+url.PathEscape(args[0]), nil, &rec); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "uninstalled %s %s\n", rec.Name, rec.Version)
			return nil
		},
	}
}

func skillsSettingCmd(cl *clientFlags, verb, short string) *cobra.Command {
	var (
		scope string
		set   []string
	)
	c := &cobra.Command{
		Use:   verb + " NAME --scope SCOPE",
		Short: short,
		Long: short + ". NAME is a package (everything it contributes) or one skill; SCOPE is global, org:<org>, " +
			"repo:<owner>/<repo> or agent:<agent>. It takes effect for the next run.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if scope == "" {
				return withCode(exitUsage, errors.New("--scope is required: global, org:<org>, repo:<owner>/<repo> or agent:<agent>"))
			}
			if _, err := skills.ParseScope(scope); err != nil {
				return withCode(exitUsage, err)
			}
			req := admin.SettingRequest{Scope: scope}
			for _, kv := range set {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return withCode(exitUsage, fmt.Errorf("--set %q: want key=value", kv))
				}
				if req.Settings == nil {
					req.Settings = map[string]any{}
				}
				req.Settings[k] = skills.ParseSettingValue(v)
			}
			var res admin.SettingResult
			if err := cl.client().do(cmd.Context(), "POST", "/api/v1/skills/"+url.PathEscape(args[0])+"/"+verb, req, &res); err != nil {
				return err
			}
			switch verb {
			case "inherit":
				fmt.Fprintf(cmd.OutOrStdout(), "%s at %s: no setting; broader scopes decide\n", res.Name, res.Scope)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%sd %s at %s\n", verb, res.Name, res.Scope)
			}
			return nil
		},
	}
	c.Flags().StringVar(&scope, "scope", "", "global, org:<org>, repo:<owner>/<repo> or agent:<agent> (required)")
	if verb == "enable" {
		c.Flags().StringArrayVar(&set, "set", nil, "a package setting at this scope, key=value (a JSON value or a string; repeatable); the settings given replace those stored at the scope, which enable and disable keep without --set; secrets belong in the config as ${ENV}")
	}
	return c
}

func skillsEffectiveCmd(cl *clientFlags) *cobra.Command {
	var (
		repo, org, agent string
		asJSON           bool
	)
	c := &cobra.Command{
		Use:   "effective --repo owner/name --agent NAME",
		Short: "List every skill with whether it is enabled for a repository and agent, and the scope that decided",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"repo": repo, "org": org, "agent": agent} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var list []skills.Effective
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/skills/effective?"+q.Encode(), nil, &list); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				type row struct {
					Name    string `json:"name"`
					Enabled bool   `json:"enabled"`
					Scope   string `json:"scope"`
				}
				rows := make([]row, len(list))
				for i, e := range list {
					rows[i] = row{e.Name, e.Enabled, e.Scope}
				}
				return printJSON(out, rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tENABLED\tSCOPE\tSET IN")
			for _, e := range list {
				fmt.Fprintf(tw, "%s\t%t\t%s\t%s\n", e.Name, e.Enabled, e.Scope, e.Origin)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&repo, "repo", "", "the repository, owner/name")
	c.Flags().StringVar(&org, "org", "", "the org, when there is no repository")
	c.Flags().StringVar(&agent, "agent", "", "the agent")
	c.Flags().BoolVar(&asJSON, "json", false, `print JSON: [{"name","enabled","scope"}]`)
	return c
}

func skillsValidateCmd(cl *clientFlags) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "validate NAMES...",
		Short: "Check that skills can be loaded together: all known, required companions present, none incompatible (exit 1 if not)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res skills.ValidationResult
			if err := cl.client().do(cmd.Context(), "POST", "/api/v1/skills/validate", admin.SkillsRequest{Skills: args}, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := printJSON(out, res); err != nil {
					return err
				}
			} else {
				for _, e := range res.Errors {
					fmt.Fprintf(out, "%s: %s\n", e.Code, e.Message)
				}
				for _, w := range res.Warnings {
					fmt.Fprintf(out, "warning: %s\n", w)
				}
				if res.Valid {
					// The set, as validation reads it: a name given twice once.
					var set []string
					for _, name := range args {
						if !slices.Contains(set, name) {
							set = append(set, name)
						}
					}
					fmt.Fprintf(out, "valid: %s\n", strings.Join(set, ", "))
				}
			}
			if !res.Valid {
				return withCode(exitFailure, nil)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"valid","errors":[{"code","message","skills"}],"warnings"}`)
	return c
}

func skillsComposeCmd(cl *clientFlags) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "compose NAMES...",
		Short: "Show the tools skills allow together, the most restrictive winning: what any forbids is forbidden",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res skills.Composition
			if err := cl.client().do(cmd.Context(), "POST", "/api/v1/skills/compose", admin.SkillsRequest{Skills: args}, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, res)
			}
			none := func(s []string) string {
				if len(s) == 0 {
					return "none"
				}
				return strings.Join(s, ", ")
			}
			fmt.Fprintf(out, "skills:    %s\nallowed:   %s\nforbidden: %s\n", none(res.Skills), none(res.AllowedTools), none(res.ForbiddenTools))
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"skills","allowed_tools","forbidden_tools"}`)
	return c
}

func skillsPackagesCmd(cl *clientFlags) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "packages",
		Short: "List the packages with their versions, sources and digests: the lock",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []admin.PackageSummary
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/packages", nil, &list); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, list)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tSOURCE\tDIGEST")
			for _, p := range list {
				source, digest := p.Source, p.Digest
				if p.Builtin {
					source = "built in"
				}
				if p.Broken != "" {
					digest = "does not load: " + p.Broken
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Version, source, digest)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
