package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/integrations/local"
)

func newThreadCmd(cl *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "thread [flags] THREAD",
		Short: "Show what the bot wrote in a thread",
		Long: "Show the status messages and replies the bot wrote in a thread. THREAD is a session\n" +
			"key (local:t1, github:acme/api#42, slack:T1/C2/1700000000.0001) or a bare local name.",
		Example: "  switchyard thread local:default\n  switchyard thread t1 --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var msgs []local.ThreadMessage
			if err := cl.client().do(cmd.Context(), "GET", "/api/v1/threads/"+threadPath(args[0])+"/messages", nil, &msgs); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, msgs)
			}
			if len(msgs) == 0 {
				fmt.Fprintln(out, "(the bot has written nothing in this thread yet)")
			}
			for _, m := range msgs {
				edited := ""
				if m.Edits > 0 {
					edited = fmt.Sprintf(", edited %d×", m.Edits)
				}
				fmt.Fprintf(out, "[%s %s%s] %s\n", m.Kind, m.UpdatedAt.Local().Format("15:04:05"), edited,
					strings.ReplaceAll(m.Text, "\n", "\n    "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
