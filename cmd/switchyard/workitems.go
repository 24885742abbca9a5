package main

import (
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
)

func newWorkItemsCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "workitems",
		Aliases: []string{"wi"},
		Short:   "List and show work items",
	}
	var (
		thread, status, job, cursor string
		limit                       int
		asJSON                      bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List work items, newest first, a page at a time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if thread != "" {
				q.Set("thread", thread)
			}
			if status != "" {
				q.Set("status", status)
			}
			if job != "" {
				q.Set("job", job)
			}
			pagingQuery(q, limit, cursor)
			var p page[admin.WorkItemSummary]
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/workitems?"+q.Encode(), nil, &p); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				// A JSON array, as scripts have read it from the start;
				// the next page's command goes to stderr, as a table's.
				items := p.Items
				if items == nil {
					items = []admin.WorkItemSummary{}
				}
				if err := printJSON(out, items); err != nil {
					return err
				}
				printNext(cmd.ErrOrStderr(), cmd, p.Next)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTHREAD\tSTATUS\tAGENT\tREASON\tCREATED")
			for _, wi := range p.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", wi.ID, wi.Thread, wi.Status, wi.Route.Agent,
					wi.Route.Reason, wi.Created.Local().Format("2006-01-02 15:04:05"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printNext(cmd.ErrOrStderr(), cmd, p.Next)
			return nil
		},
	}
	list.Flags().StringVar(&thread, "thread", "", "only this thread (session key or local name)")
	list.Flags().StringVar(&status, "status", "", "only this status: queued, running, done, failed, cancelled")
	list.Flags().StringVar(&job, "job", "", "only the work items this job ran (a job's status message names it)")
	addPagingFlags(list, &limit, &cursor, 1000)
	list.Flags().BoolVar(&asJSON, "json", false, `print a JSON array of {"id","thread","status","route","parent_work_item_id","created_at"}; the next page's command goes to stderr`)

	var showJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a work item with its route, jobs, parent and children",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var wi admin.WorkItemDetail
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/workitems/"+url.PathEscape(args[0]), nil, &wi, "id", "status"); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if showJSON {
				return printJSON(out, wi)
			}
			fmt.Fprintf(out, "%s  %s\n", wi.ID, wi.Status)
			fmt.Fprintf(out, "thread:   %s\n", wi.Thread.Key())
			fmt.Fprintf(out, "route:    %s (%s)\n", wi.Route.Agent, wi.Route.Reason)
			for _, h := range wi.Hops {
				fmt.Fprintf(out, "hop:      %s → %s: %s\n", h.From, h.To, h.Reason)
			}
			if wi.ParentID != "" {
				fmt.Fprintf(out, "parent:   %s\n", wi.ParentID)
			}
			fmt.Fprintf(out, "event:    %s %s by %s\n", wi.Source, wi.Kind, wi.Actor)
			fmt.Fprintf(out, "created:  %s\n", wi.CreatedAt.Local().Format("2006-01-02 15:04:05"))
			if wi.FinishedAt != nil {
				fmt.Fprintf(out, "finished: %s\n", wi.FinishedAt.Local().Format("2006-01-02 15:04:05"))
			}
			if wi.Text != "" {
				fmt.Fprintf(out, "text:     %s\n", wi.Text)
			}
			for _, j := range wi.Jobs {
				fmt.Fprintf(out, "job:      %s attempt %d %s %s\n", j.ID, j.Attempt, j.Status, j.Error)
			}
			if wi.Run != nil {
				fmt.Fprintf(out, "run:      %s, spawned by @%s in %s\n", wi.Run.ID, wi.Run.AgentID, wi.Run.ParentLinks.JobID)
			}
			for _, c := range wi.Children {
				line := fmt.Sprintf("child:    %s %s @%s %s", c.ID, c.Kind, c.Agent, c.Status)
				if c.WorkItemID != "" && c.WorkItemID != wi.ID {
					line += " (" + c.WorkItemID + ")"
				}
				if c.Task != "" {
					line += ": " + oneLine(c.Task, 80)
				}
				fmt.Fprintln(out, line)
			}
			if wi.Summary != "" {
				fmt.Fprintf(out, "summary:\n%s\n", wi.Summary)
			}
			if wi.Error != "" {
				fmt.Fprintf(out, "error:    %s\n", wi.Error)
			}
			return nil
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")

	var (
		reason     string
		cancelJSON bool
	)
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a queued or running work item: a queued one leaves the queue, a running one stops",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var wi bot.WorkItem
			req := admin.CancelRequest{Reason: reason}
			if err := cl.client().do(cmd.Context(), "POST", "/api/v1/workitems/"+url.PathEscape(args[0])+"/cancel", req, &wi, "id", "status"); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cancelJSON {
				return printJSON(out, wi)
			}
			if wi.Status == bot.StatusRunning {
				fmt.Fprintf(out, "%s is stopping: its run ends cancelled\n", wi.ID)
				return nil
			}
			fmt.Fprintf(out, "%s %s\n", wi.ID, wi.Status)
			return nil
		},
	}
	cancel.Flags().StringVar(&reason, "reason", "", "why: the work item and its thread's status message say it")
	cancel.Flags().BoolVar(&cancelJSON, "json", false, "print the work item as JSON")
	cmd.AddCommand(list, show, cancel)
	return cmd
}

func newIngressCmd(cl *clientFlags) *cobra.Command {
	var (
		reason, cursor string
		limit          int
		asJSON         bool
	)
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "List events that made no work item, with the reason, newest first, a page at a time",
		Long: "List the events the daemon received and made no work item of (a GitHub event nobody asked\n" +
			"for, a bot, an edit, someone outside the allow lists …), with the reason code and why.\n" +
			"`switchyard explain --delivery ID` decides one of them again against the config in effect now.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if reason != "" {
				q.Set("reason", reason)
			}
			pagingQuery(q, limit, cursor)
			var p page[bot.IngressRecord]
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/ingress?"+q.Encode(), nil, &p); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, p)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tKIND\tDELIVERY\tACTOR\tREASON\tDETAIL")
			for _, r := range p.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.CreatedAt.Local().Format("2006-01-02 15:04:05"),
					r.Kind, r.DeliveryID, r.Actor, r.Reason, firstLine(r.Detail))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printNext(cmd.ErrOrStderr(), cmd, p.Next)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "only this reason: no_route, bot_actor, unauthorized, not_allowed, unsupported, edited, deleted, approval, answered")
	addPagingFlags(cmd, &limit, &cursor, 1000)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"items":[…],"next":"<cursor>"}`)
	return cmd
}
