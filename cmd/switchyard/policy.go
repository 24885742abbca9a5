package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/slack"
)

// Exit statuses of `policy check`.
const (
	exitDeny          = 3
	exitNeedsApproval = 4
)

// loadEngine builds the permission engine from the config file, offline.
func loadEngine(cfgPath string) (*policy.Engine, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	engine, err := policy.New(policy.Options{Profiles: cfg.Profiles, Access: cfg.Access})
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return engine, nil
}

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Check tool calls against permission profiles, offline"}
	var (
		cfgPath, profile, agent, workspace string
		skills                             []string
		asJSON                             bool
	)
	check := &cobra.Command{
		Use:   "check --profile NAME [flags] -- TOOL 'ARGS_JSON'",
		Short: "Decide a tool call: exit 0 allow, 3 deny, 4 needs approval, 2 bad input",
		Example: `  switchyard policy check --profile read-only -- bash '{"command":"rm -rf /"}'
  switchyard policy check --profile contributor --workspace . -- write_file '{"path":"x.go","content":""}'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			engine, err := loadEngine(cfgPath)
			if err != nil {
				return err
			}
			if profile == "" {
				return withCode(exitUsage, fmt.Errorf("--profile is required (one of %s)", strings.Join(engine.Names(), ", ")))
			}
			if !json.Valid([]byte(args[1])) {
				return withCode(exitUsage, fmt.Errorf("ARGS_JSON %q is not JSON", args[1]))
			}
			if workspace == "" {
				if workspace, err = os.Getwd(); err != nil {
					return err
				}
			}
			var ss []policy.Skill
			for _, s := range skills {
				for name := range strings.SplitSeq(s, ",") {
					if name = strings.TrimSpace(name); name != "" {
						ss = append(ss, policy.Skill{Name: name})
					}
				}
			}
			info, err := offlineTool(args[0])
			if err != nil {
				return withCode(exitUsage, err)
			}
			d, err := engine.CheckOffline(policy.CheckRequest{
				Profile: profile, Agent: agent, Skills: ss, Workspace: workspace, Tool: info, Input: json.RawMessage(args[1]),
			})
			if err != nil {
				return withCode(exitUsage, err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := printJSON(out, d); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%s: %s (rule %s)\n", d.Verdict, d.Reason, d.Rule)
			}
			switch d.Verdict {
			case tools.Allow:
				return nil
			case tools.NeedsApproval:
				return withCode(exitNeedsApproval, nil)
			default:
				return withCode(exitDeny, nil)
			}
		},
	}
	f := check.Flags()
	addConfigFlag(check, &cfgPath)
	f.StringVar(&profile, "profile", "", "permission profile (required)")
	f.StringVar(&agent, "agent", "", "the calling agent")
	f.StringSliceVar(&skills, "skills", nil, "loaded skills, comma-separated")
	f.StringVar(&workspace, "workspace", "", "workspace paths resolve in (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print the decision as JSON")

	var profilesCfg string
	var profilesJSON bool
	profiles := &cobra.Command{
		Use:   "profiles",
		Short: "List the permission profiles, built-in and from config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engine, err := loadEngine(profilesCfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if profilesJSON {
				return printJSON(out, engine.Profiles())
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROFILE\tBUILTIN\tNETWORK\tPERMISSIONS\tDESCRIPTION")
			for _, p := range engine.Profiles() {
				perms := make([]string, len(p.Permissions))
				for i, x := range p.Permissions {
					perms[i] = string(x)
				}
				fmt.Fprintf(tw, "%s\t%t\t%t\t%s\t%s\n", p.Name, p.Builtin, p.Network, strings.Join(perms, ","), firstLine(p.Description))
			}
			return tw.Flush()
		},
	}
	addConfigFlag(profiles, &profilesCfg)
	profiles.Flags().BoolVar(&profilesJSON, "json", false, "print JSON")
	cmd.AddCommand(check, profiles)
	return cmd
}

func newAuditCmd(cl *clientFlags) *cobra.Command {
	var (
		since, decision, cursor string
		limit                   int
		asJSON                  bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: denials, approvals and sensitive tool calls, newest first, a page at a time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if since != "" {
				q.Set("since", since)
			}
			if decision != "" {
				q.Set("decision", decision)
			}
			pagingQuery(q, limit, cursor)
			var p page[policy.AuditRecord]
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/audit?"+q.Encode(), nil, &p); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, p)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tDECISION\tAGENT\tPROFILE\tTOOL\tRULE\tREASON")
			for _, r := range p.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05"),
					r.Decision, r.Agent, r.Profile, r.Tool, r.Rule, firstLine(r.Reason))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printNext(cmd.ErrOrStderr(), cmd, p.Next)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&since, "since", "", "only records since then: a duration back (1h) or an RFC 3339 time")
	f.StringVar(&decision, "decision", "", "only this decision: allow, deny, needs_approval, approved, rejected, expired, cancelled, not_approver, wrong_identity, from_run, change")
	addPagingFlags(cmd, &limit, &cursor, 10000)
	f.BoolVar(&asJSON, "json", false, `print {"items":[…],"next":"<cursor>"}`)
	return cmd
}

func newApprovalsCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "approvals", Short: "List, approve and deny tool calls waiting for a person"}
	var (
		all, asJSON bool
		by          string
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List pending approvals (--all: decided ones too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []bot.Approval
			path := "/api/v1/approvals"
			if all {
				path += "?all=true"
			}
			if err := cl.client().do(cmd.Context(), "GET", path, nil, &list); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "(no approvals waiting)")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tAGENT\tTOOL\tTHREAD\tEXPIRES\tREASON")
			for _, a := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, a.Agent, a.Tool, a.SessionKey,
					a.ExpiresAt.Local().Format("15:04:05"), firstLine(a.Reason))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include decided approvals")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	decide := func(verb string) *cobra.Command {
		c := &cobra.Command{
			Use:   verb + " ID",
			Short: strings.ToUpper(verb[:1]) + verb[1:] + " a waiting tool call (you must be one of its profile's approvers)",
			Long: strings.ToUpper(verb[:1]) + verb[1:] + " a waiting tool call as the name of your API token: the one the daemon\n" +
				"made (admin), or a name of server.api_tokens when $SWITCHYARD_API_TOKEN holds its token.\n" +
				"That name must be one of the approvers of the call's profile.",
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var a bot.Approval
				var body any
				if by != "" {
					body = admin.DecisionRequest{By: by}
				}
				if err := cl.client().do(cmd.Context(), "POST", "/api/v1/approvals/"+url.PathEscape(args[0])+"/"+verb, body, &a); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s by %s\n", a.ID, a.Status, a.DecidedBy)
				return nil
			},
		}
		c.Flags().StringVar(&by, "by", "", "who decides; must be your token's name, which it defaults to")
		return c
	}
	cmd.AddCommand(list, decide("approve"), decide("deny"))
	return cmd
}

// offlineTool returns the Info of a tool called by name offline: a core,
// GitHub or Slack tool, or agent_<name>, which the engine knows itself.
func offlineTool(name string) (tools.Info, error) {
	if _, ok := tools.CoreInfo(name); ok || strings.HasPrefix(name, "agent_") {
		return tools.Info{Name: name}, nil
	}
	known := tools.CoreNames()
	for _, info := range slices.Concat(github.ToolInfos(), slack.ToolInfos()) {
		if info.Name == name {
			return info, nil
		}
		known = append(known, info.Name)
	}
	return tools.Info{}, fmt.Errorf("unknown tool %q: want agent_<name> or one of %s", name, strings.Join(known, ", "))
}
