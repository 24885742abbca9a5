package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
		return withCode(exitUsage, flagError(err))
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
	strictArgs(root)
	return root
}

// strictArgs makes every wrong use of a command's arguments bad input
// (exit status 2) that says what the command takes, down the whole tree:
// a word that is none of a group's commands ("workitems lsit") is refused
// instead of showing the group's help with exit status 0, and too few or
// too many arguments name the command and its usage.
func strictArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictArgs(sub)
	}
	if c.HasSubCommands() {
		if !c.Runnable() {
			// A group alone shows its help; it must run for its
			// arguments to be checked at all.
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			why := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				why += fmt.Sprintf("; did you mean %q?", s[0])
			} else {
				why += fmt.Sprintf("; see %s --help", cmd.CommandPath())
			}
			return withCode(exitUsage, errors.New(why))
		}
		return
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if check(cmd, args) == nil {
			// An empty argument names nothing: as an id it would ask
			// for another endpoint (workitems show "" lists them).
			for i, a := range args {
				if a == "" {
					return withCode(exitUsage, fmt.Errorf("argument %d of %s is empty; usage: %s", i+1, cmd.CommandPath(), cmd.UseLine()))
				}
			}
			return nil
		}
		given := strconv.Itoa(len(args)) + " given"
		if len(args) > 0 {
			given += ": " + strings.Join(args, " ")
		}
		return withCode(exitUsage, fmt.Errorf("wrong number of arguments for %s (%s); usage: %s", cmd.CommandPath(), given, cmd.UseLine()))
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// flagError says what a flag's value should have been in words, where
// pflag would quote the Go parser that refused it ("strconv.ParseBool:
// parsing \"maybe\": invalid syntax"). Values of the CLI's own types say it
// themselves already.
func flagError(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	var ne *strconv.NumError
	var want string
	switch cause := ive.Unwrap(); {
	case errors.As(cause, &ne) && ne.Func == "ParseBool":
		want = "want true or false"
	case errors.As(cause, &ne) && errors.Is(ne.Err, strconv.ErrRange):
		want = "the number is too large"
	case errors.As(cause, &ne):
		want = "want a whole number"
	case cause != nil && strings.HasPrefix(cause.Error(), "time: "):
		want = "want a duration such as 30s, 5m or 1h30m"
	default:
		return err
	}
	return fmt.Errorf("invalid argument %q for %q flag: %s", ive.GetValue(), "--"+ive.GetFlag().Name, want)
}
