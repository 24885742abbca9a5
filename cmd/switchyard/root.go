package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree. Commands that read or change the
// daemon's state talk to the running daemon over HTTP; commands that only
// read config work offline.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "switchyard",
		Short:         "Switchyard routes chat-ops requests to AI agents and reports back in the thread",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(exitUsage, err)
	})
	cl := &clientFlags{}
	root.PersistentFlags().StringVar(&cl.server, "server", envOr("SWITCHYARD_SERVER", "http://127.0.0.1:8080"),
		"address of the running daemon ($SWITCHYARD_SERVER)")
	// Commands that read the config themselves declare their own --config
	// with the same meaning; this one tells the others where the daemon
	// keeps its API token.
	root.PersistentFlags().StringVar(&cl.config, "config", "",
		"the daemon's config file, for its data directory and API token (default ./config.yaml when present)")
	root.AddCommand(
		newServeCmd(),
		newSendCmd(cl),
		newThreadCmd(cl),
		newWorkItemsCmd(cl),
		newRunsCmd(cl),
		newWorkspacesCmd(cl),
		newIngressCmd(cl),
		newAgentsCmd(cl),
		newSkillsCmd(cl),
		newPolicyCmd(),
		newAuditCmd(cl),
		newApprovalsCmd(cl),
		newExplainCmd(cl),
		newRulesCmd(cl),
		newConfigCmd(cl),
		newStorageCmd(cl),
		newAdminCmd(),
		newHealthcheckCmd(cl),
		newVersionCmd(),
	)
	return root
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
