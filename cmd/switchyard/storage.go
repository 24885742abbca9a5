package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/postgres"
)

func newStorageCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Look after the daemon's store: compact the bbolt file, migrate a PostgreSQL database",
	}
	var dataDir string
	compact := &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the store file to give back the space retention freed (with the daemon stopped)",
		Long: "The daemon's hourly sweep removes what retention: lets go, but the store file (bbolt) keeps\n" +
			"the pages it freed for later records and never shrinks. compact rewrites the file without\n" +
			"them. It works only while no daemon runs on the file, and says so otherwise. The copy is\n" +
			"written beside the file and checked before it replaces it; on any failure the store is\n" +
			"left as it was. PostgreSQL gives space back with its own VACUUM.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				cfg, err := loadConfig(cl.config)
				if err != nil {
					return err
				}
				if cfg.Storage.Driver == config.StoragePostgres {
					return withCode(exitUsage, fmt.Errorf("storage.driver is postgres: compact rewrites a bbolt file; PostgreSQL gives space back with VACUUM"))
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
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations the config's PostgreSQL database lacks, and nothing else",
		Long: "Apply the schema migrations this build has and the database of storage.dsn lacks, in order,\n" +
			"each in its own transaction, under an advisory lock (serve applies them at start too; run\n" +
			"this before a rolling upgrade to apply them once, ahead of the replicas). The bolt store\n" +
			"needs no migration.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cl.config)
			if err != nil {
				return err
			}
			if cfg.Storage.Driver != config.StoragePostgres {
				return withCode(exitUsage, fmt.Errorf("storage.driver is %s: migrate is for the postgres driver; the bolt store in %s needs none",
					cfg.Storage.Driver, cfg.DataDir))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			applied, err := postgres.Migrate(ctx, cfg.Storage.DSN.Reveal())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, name := range applied {
				fmt.Fprintf(out, "applied %s\n", name)
			}
			fmt.Fprintf(out, "the database is at schema version %d\n", postgres.SchemaVersion())
			return nil
		},
	}
	cmd.AddCommand(compact, migrate)
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
