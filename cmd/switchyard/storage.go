package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/dump"
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
			if dataDir != "" {
				if err := config.CheckDataDir(dataDir); err != nil {
					return withCode(exitUsage, fmt.Errorf("--data-dir: %w", err))
				}
			} else {
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
	cmd.AddCommand(compact, migrate, newStorageCopyCmd(cl))
	return cmd
}

// newStorageCopyCmd is storage copy: everything of a bbolt store into an
// empty PostgreSQL database.
func newStorageCopyCmd(cl *clientFlags) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "copy",
		Short: "Copy everything of a bbolt store into an empty PostgreSQL database (with the daemon stopped)",
		Long: "Copy every record of the bbolt store (work items, events, jobs, the outbox, approvals, the audit\n" +
			"log, conversations and transcripts, installations, skills, the ledger, budgets, schedules …)\n" +
			"into a PostgreSQL database that holds none, with their ids, so that explain, workitems show,\n" +
			"threads and pending approvals carry on there and new ids follow on from the old ones. The\n" +
			"bbolt file is only read, and only while no daemon runs on it; the copy is one transaction,\n" +
			"so a copy that fails leaves the database empty. Then set storage.driver: postgres and start\n" +
			"the daemon.\n\n" +
			"--from defaults to the bbolt file in data_dir of the config, --to to its storage.dsn.",
		Example: "  switchyard storage copy --from bolt:/var/lib/switchyard --to postgres://switchyard@db/switchyard",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, dsn, err := copyEnds(cl, from, to)
			if err != nil {
				return withCode(exitUsage, err)
			}
			ctx := cmd.Context()
			src, err := bolt.OpenReadOnly(ctx, path, bolt.Options{LockTimeout: copyLock})
			if err != nil {
				if errors.Is(err, bolt.ErrLocked) {
					return fmt.Errorf("copy from %s: the file is in use, by a running daemon most likely; stop it first: the copy reads only a file nobody writes", path)
				}
				return fmt.Errorf("copy: %w", err) // it names the file
			}
			defer src.Close()
			dst, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 2})
			if err != nil {
				return fmt.Errorf("copy to PostgreSQL: %w", err)
			}
			defer dst.Close()
			start := time.Now()
			counts, err := dump.Copy(ctx, src, dst)
			if err != nil {
				return fmt.Errorf("copy %s to %s: %w", path, dst.Where(), err)
			}
			out := cmd.OutOrStdout()
			total := 0
			for _, k := range dump.Kinds() {
				if n := counts[k]; n > 0 {
					fmt.Fprintf(out, "%10d %s\n", n, k)
					total += n
				}
			}
			records := "records"
			if total == 1 {
				records = "record"
			}
			fmt.Fprintf(out, "copied %d %s from %s to %s in %s\n", total, records, path, dst.Where(),
				time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the bbolt store, bolt:PATH (the data directory or its switchyard.db); default the config's data_dir")
	cmd.Flags().StringVar(&to, "to", "", "the PostgreSQL database, postgres:DSN or a postgres:// URL; default the config's storage.dsn")
	return cmd
}

// copyLock is how long copy waits for the bbolt file: a daemon holds
// it for as long as it runs, so waiting longer would not help.
const copyLock = time.Second

// copyEnds returns the bbolt file and the DSN of storage copy, from its
// flags or, where one is not given, the config.
func copyEnds(cl *clientFlags, from, to string) (path, dsn string, err error) {
	if from == "" || to == "" {
		cfg, err := loadConfig(cl.config)
		if err != nil {
			return "", "", fmt.Errorf("%w (or give both --from and --to)", err)
		}
		if from == "" {
			from = "bolt:" + cfg.DataDir
		}
		if to == "" {
			if cfg.Storage.Driver != config.StoragePostgres || !cfg.Storage.DSN.IsSet() {
				return "", "", fmt.Errorf("name the database to copy to: --to postgres:DSN (the config's storage.driver is %s)", cfg.Storage.Driver)
			}
			dsn = cfg.Storage.DSN.Reveal()
		}
	}
	rest, ok := strings.CutPrefix(from, "bolt:")
	if !ok || rest == "" {
		return "", "", fmt.Errorf("--from %q: want bolt:PATH, the data directory or its %s", from, daemon.DataFile)
	}
	path = rest
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, daemon.DataFile)
	}
	if dsn == "" {
		switch {
		case strings.HasPrefix(to, "postgres://"), strings.HasPrefix(to, "postgresql://"):
			dsn = to
		default:
			rest, ok := strings.CutPrefix(to, "postgres:")
			if !ok || rest == "" {
				// The value may hold a password: it is not repeated.
				return "", "", fmt.Errorf("--to: want postgres:DSN or a postgres:// URL")
			}
			dsn = rest
		}
	}
	return path, dsn, nil
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
