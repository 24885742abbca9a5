package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/integrations/local"
)

func newSendCmd(cl *clientFlags) *cobra.Command {
	var (
		thread, id, user string
		wait, asJSON     bool
		timeout          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send [flags] TEXT",
		Short: "Send a message to the daemon's local console",
		Long: "Send a message to a local thread of the running daemon. It prints the work item and\n" +
			"where it was routed; with --wait it waits for the final reply, prints it, and exits\n" +
			"0 when the work item succeeded and 1 when it failed.",
		Example: `  switchyard send "@triage hello"
  switchyard send --thread t1 --wait "@coder list the files"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait && timeout <= 0 {
				// Refused before anything is sent: the message would make
				// a work item nobody waits for.
				return withCode(exitUsage, fmt.Errorf("--timeout %s: want a positive duration such as 30s or 10m", timeout))
			}
			c := cl.client()
			req := local.MessageRequest{Thread: thread, Text: strings.Join(args, " "), User: user, ID: id}
			var res local.MessageResponse
			if err := c.do(cmd.Context(), "POST", "/api/v1/messages", req, &res, "work_item_id", "thread"); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !wait {
				if asJSON {
					return printJSON(out, res)
				}
				printAccepted(out, res)
				return nil
			}
			if !asJSON {
				printAccepted(out, res)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			wi, reply, err := waitReply(ctx, c, res.WorkItemID)
			if err != nil {
				switch {
				case cmd.Context().Err() != nil:
					// Ctrl-C stops the waiting, not the work.
					return fmt.Errorf("stopped waiting for %s; it goes on: switchyard workitems show %s", res.WorkItemID, res.WorkItemID)
				case errors.Is(ctx.Err(), context.DeadlineExceeded):
					return fmt.Errorf("%s is not finished after --timeout %s; it goes on: switchyard workitems show %s", res.WorkItemID, timeout, res.WorkItemID)
				}
				return err
			}
			if asJSON {
				if err := printJSON(out, sendResult{MessageResponse: res, Status: wi.Status, Reply: reply}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(out, reply)
			}
			if wi.Status != bot.StatusDone {
				return withCode(exitFailure, nil)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "default", "local thread name, or local:<name>")
	f.StringVar(&id, "id", "", "client message id: sending the same id again makes no new work item")
	f.StringVar(&user, "user", envOr("USER", "local"), "who is speaking")
	f.BoolVar(&wait, "wait", false, "wait for the final reply and print it")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	return cmd
}

type sendResult struct {
	local.MessageResponse
	Status bot.WorkStatus `json:"status"`
	Reply  string         `json:"reply"`
}

func printAccepted(w io.Writer, res local.MessageResponse) {
	dup := ""
	if res.Duplicate {
		dup = " (duplicate: already received)"
	}
	fmt.Fprintf(w, "%s in %s → %s (%s)%s\n", res.WorkItemID, res.Thread, res.Route.Agent, res.Route.Reason, dup)
}

// waitReply polls until the work item is finished and its reply is shown in
// the thread.
func waitReply(ctx context.Context, c *client, id string) (*admin.WorkItemDetail, string, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var wi admin.WorkItemDetail
	for {
		if err := c.do(ctx, "GET", "/api/v1/workitems/"+id, nil, &wi, "id", "status"); err != nil {
			return nil, "", waitErr(ctx, err)
		}
		if wi.Status.Finished() {
			break
		}
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("waiting for %s: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
	// The reply is usually delivered within moments of the work item
	// finishing; a work item handled together with an earlier one has its
	// reply under that one's key, so fall back to the recorded summary.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var msgs []local.ThreadMessage
		if err := c.do(ctx, "GET", "/api/v1/threads/"+threadPath(wi.Thread.Key())+"/messages", nil, &msgs); err != nil {
			return nil, "", waitErr(ctx, err)
		}
		for _, m := range msgs {
			if m.ID == id+"/reply" {
				return &wi, m.Text, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("waiting for the reply of %s: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
	if wi.Status == bot.StatusDone {
		return &wi, wi.Summary, nil
	}
	return &wi, fmt.Sprintf("%s could not finish %s: %s", wi.Route.Agent, wi.ID, wi.Error), nil
}

func waitErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("gave up waiting: %w", ctx.Err())
	}
	return err
}
