package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/bot"
)

func newExplainCmd() *cobra.Command {
	var (
		cfgPath, source, kind, text, repo, actor, channel string
		labels, paths                                     []string
		number                                            int
		asJSON                                            bool
	)
	cmd := &cobra.Command{
		Use:   "explain [flags]",
		Short: "Show how an event would be routed, offline, from config",
		Long: "Show which agent an event would be routed to and why, from the config file alone,\n" +
			"without a running daemon and without acting on anything.",
		Example: `  switchyard explain --text "@coder fix the flaky test"
  switchyard explain --text "/deploy staging"
  switchyard explain --source github --kind github.pull_request.opened --repo acme/api --path src/db/x.sql`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadSetup(cmd.Context(), cfgPath, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			if kind == "" {
				kind = defaultKind(source)
			}
			ev := &bot.Event{
				Source: source, Kind: kind, Text: text, Labels: labels, Repo: repo, Paths: paths,
				Actor: actor, Channel: channel, Number: number,
			}
			if i := strings.IndexByte(repo, '/'); i > 0 {
				ev.Org = repo[:i]
			}
			ev.FillFromText()
			route := s.router.Route(ev)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), route)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (%s)\n", route.Agent, route.Reason)
			return nil
		},
	}
	f := cmd.Flags()
	addConfigFlag(cmd, &cfgPath)
	f.StringVar(&source, "source", bot.SourceLocal, "event source: local, github, slack or schedule")
	f.StringVar(&kind, "kind", "", "event kind, e.g. github.pull_request.opened (default from --source)")
	f.StringVar(&text, "text", "", "message text, with mentions and commands")
	f.StringArrayVar(&labels, "label", nil, "a label (repeatable)")
	f.StringVar(&repo, "repo", "", "repository owner/name")
	f.StringArrayVar(&paths, "path", nil, "a changed file of a pull request (repeatable)")
	f.StringVar(&actor, "actor", "", "who sent it")
	f.StringVar(&channel, "channel", "", "Slack channel")
	f.IntVar(&number, "number", 0, "issue or pull request number")
	f.BoolVar(&asJSON, "json", false, `print {"agent","reason","rule"}`)
	return cmd
}

func defaultKind(source string) string {
	switch source {
	case bot.SourceLocal:
		return bot.KindLocalMessage
	case bot.SourceSlack:
		return bot.KindSlackMention
	case bot.SourceSchedule:
		return bot.KindScheduleTick
	}
	return ""
}

func newRulesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "rules", Short: "Inspect routing rules"}
	var (
		cfgPath string
		asJSON  bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List routing rules in the order they are tried, with commands and the default agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadSetup(cmd.Context(), cfgPath, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			rules := s.router.Rules()
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, map[string]any{
					"rules": rules, "commands": s.router.Commands(), "default_agent": s.router.DefaultAgent(),
				})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PRIORITY\tRULE\tAGENT\tMATCH")
			for _, r := range rules {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Priority, r.Name, r.Agent, r.Match)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(rules) == 0 {
				fmt.Fprintln(out, "(no rules)")
			}
			cmds := s.router.Commands()
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range cmds {
					if !yield(k) {
						return
					}
				}
			})
			fmt.Fprintln(out, "\ncommands:")
			for _, n := range names {
				fmt.Fprintf(out, "  /%s → %s\n", n, cmds[n])
			}
			fmt.Fprintf(out, "default agent: %s\n", s.router.DefaultAgent())
			return nil
		},
	}
	addConfigFlag(list, &cfgPath)
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(list)
	return cmd
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check the config file"}
	var cfgPath string
	check := &cobra.Command{
		Use:   "check",
		Short: "Check the config file and agent definitions; exit 2 naming file, line and key on error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadSetup(cmd.Context(), cfgPath, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			names := make([]string, 0)
			for _, a := range s.agents.List() {
				names = append(names, a.Name)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d rules, %d schedules; agents: %s)\n",
				s.cfg.Source, len(s.router.Rules()), len(s.cfg.Schedules), strings.Join(names, ", "))
			return nil
		},
	}
	addConfigFlag(check, &cfgPath)
	cmd.AddCommand(check)
	return cmd
}
