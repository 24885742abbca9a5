package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
)

func newRunsCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, await and cancel the runs agents started: subagents, agents called as tools, handoffs",
		Long: "Every subagent (spawn_subagent), agent called as a tool and handoff is a record of the\n" +
			"ledger with its owner (the thread and agent that may manage it), its creator (the job, dispatch\n" +
			"and work item that started it), its parent links and its own work item, dispatch and job.",
	}
	var (
		owner, status, agent, cursor string
		limit                        int
		asJSON                       bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List ledger records, newest first, a page at a time",
		Example: "  switchyard runs list --owner local:t1\n" +
			"  switchyard runs list --status running --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if owner != "" {
				q.Set("owner", owner)
			}
			if status != "" {
				q.Set("status", status)
			}
			if agent != "" {
				q.Set("agent", agent)
			}
			pagingQuery(q, limit, cursor)
			var p page[bot.ChildRun]
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/runs?"+q.Encode(), nil, &p); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if p.Items == nil {
					p.Items = []bot.ChildRun{}
				}
				if err := printJSON(out, p.Items); err != nil {
					return err
				}
				printNext(cmd.ErrOrStderr(), cmd, p.Next)
				return nil
			}
			if len(p.Items) == 0 {
				fmt.Fprintln(out, "(no runs)")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tAGENT\tSTATUS\tOWNER\tPARENT\tTOKENS\tCREATED\tTASK")
			for _, r := range p.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Kind, r.Agent, r.Status,
					r.SessionKey+" @"+r.AgentID, r.ParentLinks.WorkItemID, r.Tokens,
					r.CreatedAt.Local().Format("2006-01-02 15:04:05"), oneLine(r.Task, 60))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printNext(cmd.ErrOrStderr(), cmd, p.Next)
			return nil
		},
	}
	list.Flags().StringVar(&owner, "owner", "", "only records this thread owns (session key or local name)")
	list.Flags().StringVar(&agent, "agent", "", "only records of this owning agent")
	list.Flags().StringVar(&status, "status", "", "only this status: queued, running, done, failed, cancelled, timed_out, interrupted")
	addPagingFlags(list, &limit, &cursor, 1000)
	list.Flags().BoolVar(&asJSON, "json", false, "print the records as a JSON array")

	var treeJSON bool
	tree := &cobra.Command{
		Use:   "tree WORK_ITEM_ID",
		Short: "Show what a work item's runs started, nested by their parent links",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var root admin.RunNode
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/runs/tree/"+url.PathEscape(args[0]), nil, &root); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if treeJSON {
				return printJSON(out, root)
			}
			printTree(out, root, 0)
			return nil
		},
	}
	tree.Flags().BoolVar(&treeJSON, "json", false, `print {"id","agent","status","children":[…]}`)

	var (
		timeout   time.Duration
		awaitJSON bool
	)
	await := &cobra.Command{
		Use:   "await ID",
		Short: "Wait for a run to end and print it",
		Long: "Wait until the run ends, or the timeout passes (then it exits 1 and says the run is still\n" +
			"open), and print its record. The daemon waits at most 10m a request; a longer timeout asks again.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return withCode(exitUsage, fmt.Errorf("--timeout %s: want a positive duration such as 30s or 5m", timeout))
			}
			c := cl.client()
			c.http = &http.Client{Timeout: min(timeout, admin.MaxAwait) + 30*time.Second}
			deadline := time.Now().Add(timeout)
			var rec bot.ChildRun
			for {
				left := min(time.Until(deadline), admin.MaxAwait)
				q := url.Values{"timeout": {max(left.Round(time.Millisecond), time.Millisecond).String()}}
				asked := time.Now()
				if err := c.do(cmd.Context(), "POST", "/api/v1/runs/"+url.PathEscape(args[0])+"/await?"+q.Encode(), nil, &rec); err != nil {
					return err
				}
				// A daemon that answered early with the run still open
				// (shutting down) is not asked again at once.
				if !rec.Status.Open() || time.Until(deadline) < time.Second || time.Since(asked) < left/2 {
					break
				}
			}
			out := cmd.OutOrStdout()
			if awaitJSON {
				if err := printJSON(out, rec); err != nil {
					return err
				}
			} else {
				printRun(out, rec)
			}
			if rec.Status.Open() {
				return withCode(exitFailure, fmt.Errorf("%s is still %s after %s", rec.ID, rec.Status, timeout))
			}
			return nil
		},
	}
	await.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait at most")
	await.Flags().BoolVar(&awaitJSON, "json", false, "print the record as JSON")

	var cancelJSON bool
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a queued or running subagent or handoff, and the work it stands for, with a receipt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rec bot.ChildRun
			if err := cl.client().do(cmd.Context(), "POST", "/api/v1/runs/"+url.PathEscape(args[0])+"/cancel", nil, &rec); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cancelJSON {
				return printJSON(out, rec)
			}
			printRun(out, rec)
			return nil
		},
	}
	cancel.Flags().BoolVar(&cancelJSON, "json", false, "print the record as JSON")
	cmd.AddCommand(list, tree, await, cancel)
	return cmd
}

// printTree prints a run tree, one indented line a node.
func printTree(w io.Writer, n admin.RunNode, depth int) {
	line := fmt.Sprintf("%s%s %s @%s %s", strings.Repeat("  ", depth), n.ID, n.Kind, n.Agent, n.Status)
	if n.Kind != "work_item" && n.WorkItemID != "" {
		line += " (" + n.WorkItemID + ")"
	}
	if n.Tokens > 0 {
		line += ", " + bot.Count(n.Tokens, "token", "tokens")
	}
	if n.Task != "" {
		line += ": " + oneLine(n.Task, 80)
	}
	fmt.Fprintln(w, line)
	for _, c := range n.Children {
		printTree(w, c, depth+1)
	}
}

// printRun prints a record for people.
func printRun(w io.Writer, r bot.ChildRun) {
	fmt.Fprintf(w, "%s  %s @%s %s\n", r.ID, r.Kind, r.Agent, r.Status)
	fmt.Fprintf(w, "owner:    %s @%s\n", r.SessionKey, r.AgentID)
	fmt.Fprintf(w, "parent:   %s (job %s)\n", r.ParentLinks.WorkItemID, r.ParentLinks.JobID)
	if r.ChildWorkItemID != "" {
		fmt.Fprintf(w, "own:      %s\n", strings.Join(nonEmpty(r.ChildWorkItemID, r.ChildDispatchID, r.ChildJobID), ", "))
	}
	if r.Task != "" {
		fmt.Fprintf(w, "task:     %s\n", oneLine(r.Task, 200))
	}
	fmt.Fprintf(w, "tokens:   %d\n", r.Tokens)
	if r.Result != "" {
		fmt.Fprintf(w, "result:\n%s\n", r.Result)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error:    %s\n", r.Error)
	}
	if rc := r.Receipt; rc != nil {
		printReceipt(w, *rc)
	}
}

func printReceipt(w io.Writer, rc bot.Receipt) {
	fmt.Fprintf(w, "receipt:  %s %s (%s, was %s) by %s at %s: %s\n", rc.Action, rc.RecordID, strings.ReplaceAll(rc.Kind, "_", " "),
		rc.PreviousStatus, rc.By, rc.At.Local().Format("2006-01-02 15:04:05"), rc.Reason)
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

func newWorkspacesCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workspaces",
		Short: "Manage the threads' workspaces",
	}
	var (
		force  bool
		asJSON bool
	)
	del := &cobra.Command{
		Use:   "delete KEY",
		Short: "Delete a thread's workspace",
		Long: "Delete the workspace of a thread (KEY is its session key, or a bare local name). It is refused\n" +
			"while the thread's subagents or background tasks are open, unless --force, which closes them\n" +
			"first, each with a receipt, and while a run of the thread is queued or working.",
		Example: "  switchyard workspaces delete local:t1\n  switchyard workspaces delete github:acme/api#42 --force",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := ""
			if force {
				q = "?force=true"
			}
			var res admin.WorkspaceDeletion
			if err := cl.client().do(cmd.Context(), "DELETE", "/api/v1/workspaces/"+threadPath(args[0])+q, nil, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, res)
			}
			for _, rc := range res.Receipts {
				printReceipt(out, rc)
			}
			if res.Deleted {
				fmt.Fprintf(out, "Deleted the workspace of %s (%s).\n", res.Thread, res.Workspace)
			} else {
				fmt.Fprintf(out, "%s had no workspace.\n", res.Thread)
			}
			return nil
		},
	}
	del.Flags().BoolVar(&force, "force", false, "close the thread's open subagents and background tasks first, with receipts")
	del.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(del)
	return cmd
}
