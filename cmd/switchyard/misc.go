package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "switchyard %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

func newHealthcheckCmd(cl *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the daemon answers /readyz (for container health checks)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cl.client().do(cmd.Context(), "GET", "/readyz", nil, nil); err != nil {
				return withCode(exitFailure, err)
			}
			return nil
		},
	}
}
