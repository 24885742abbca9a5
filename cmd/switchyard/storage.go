package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/storage/bolt"
)

func newStorageCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Look after the daemon's store",
	}
	var dataDir string
	compact := &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the store file to give back the space retention freed (with the daemon stopped)",
		Long: "The daemon's hourly sweep removes what retention: lets go, but the store file (bbolt) keeps\n" +
			"the pages it freed for later records and never shrinks. compact rewrites the file without\n" +
			"them. It works only while no daemon runs on the file, and says so otherwise. The copy is\n" +
			"written beside the file and checked before it replaces it; on any failure the store is\n" +
			"left as it was.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				cfg, err := loadConfig(cl.config)
				if err != nil {
					return err
				}
				dataDir = cfg.DataDir
			}
			path := filepath.Join(dataDir, daemon.DataFile)
			res, err := bolt.Compact(cmd.Context(), path)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "compacted %s: %s, was %s\n", path, size(res.After), size(res.Before))
			return nil
		},
	}
	compact.Flags().StringVar(&dataDir, "data-dir", "", "the data directory, overriding data_dir of the config")
	cmd.AddCommand(compact)
	return cmd
}

// size says a number of bytes for people.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
