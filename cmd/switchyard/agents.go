package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/agents"
)

func newAgentsCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "List and show the agents the daemon runs"}
	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List agents with their source (builtin, package:<p>, user), model and profile",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var raw json.RawMessage
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/agents", nil, &raw); err != nil {
				return err
			}
			var list []agents.Summary
			if err := readAnswer(raw, &list); err != nil {
				return fmt.Errorf("the daemon's list of agents is not one Switchyard gives: %w", err)
			}
			out := cmd.OutOrStdout()
			if listJSON {
				return printJSON(out, raw)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSOURCE\tMODEL\tPROFILE\tMODE\tDESCRIPTION")
			for _, a := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.Source, a.Model, a.Profile, a.Mode, firstLine(a.Description))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print JSON")
	var showJSON bool
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show an agent's definition and instructions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw json.RawMessage
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/agents/"+url.PathEscape(args[0]), nil, &raw, "name"); err != nil {
				return err
			}
			var d agents.Detail
			if err := readAnswer(raw, &d); err != nil {
				return fmt.Errorf("the daemon's agent %s is not one Switchyard gives: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if showJSON {
				return printJSON(out, raw)
			}
			fmt.Fprintf(out, "%s (%s)\n%s\n\n", d.Name, d.Source, d.Description)
			fmt.Fprintf(out, "model:   %s\nprofile: %s\nmode:    %s\n", d.Model, d.Profile, d.Mode)
			if len(d.Tools) > 0 {
				fmt.Fprintf(out, "tools:   %s\n", strings.Join(d.Tools, ", "))
			}
			if len(d.Keywords) > 0 {
				fmt.Fprintf(out, "keywords: %s\n", strings.Join(d.Keywords, ", "))
			}
			fmt.Fprintf(out, "\n%s\n", d.Instructions)
			return nil
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")
	cmd.AddCommand(list, show)
	return cmd
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:79] + "…"
	}
	return s
}
