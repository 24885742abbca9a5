package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/switchyard/switchyard/admin/ui"
	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/storage/bolt"
	"github.com/switchyard/switchyard/storage/postgres"
)

// Store is everything the daemon keeps, as the parts it wires use it:
// intake, queue, outbox and schedules (bot), conversations and transcripts
// (agents), the audit log and approvals (policy), GitHub installations,
// installed packages and skill settings, the admin UI's sessions, and what
// replicas share. The daemon depends on this interface only; storage/bolt
// and storage/postgres implement it and storage/storetest holds both to
// one contract.
type Store interface {
	bot.Store
	agents.ConversationStore
	agents.TranscriptStore
	policy.AuditStore
	policy.ApprovalStore
	github.InstallationStore
	skills.Store
	bot.RuleStore
	ui.SessionStore
	Replicas
	// Where names the store for people: its file, or its database
	// without the password.
	Where() string
}

// Replicas is what the processes sharing a store coordinate through. A
// bbolt file has one process, so its store answers for that process alone;
// PostgreSQL reaches every replica.
type Replicas interface {
	// Notify tells every process listening on the store, this one too, of
	// a change: topic names what changed, payload which record.
	Notify(ctx context.Context, topic, payload string) error
	// Listen calls fn with each notification until ctx ends. After a
	// connection was lost and made again it calls fn with bot.TopicResync, as
	// notifications may have been missed meanwhile.
	Listen(ctx context.Context, fn func(topic, payload string)) error
	// HoldLease takes or renews the lease called name for holder until
	// now+ttl, and reports whether holder has it: it is free, expired, or
	// holder's already.
	HoldLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	// ReleaseLease gives up holder's lease called name, if it has it.
	ReleaseLease(ctx context.Context, name, holder string) error
}

// orphanReclaimer is a store only one process can open (bbolt): every job
// it finds running at start belongs to a process that died.
type orphanReclaimer interface {
	ExpireOrphanedLeases(ctx context.Context, now time.Time) (int, error)
}

var (
	_ Store           = (*bolt.Store)(nil)
	_ orphanReclaimer = (*bolt.Store)(nil)
	_ Store           = (*postgres.Store)(nil)
)

// OpenStore opens the store the config's storage section names: the bbolt
// file in data_dir, or the PostgreSQL database, whose migrations it applies
// first.
func OpenStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (Store, error) {
	if cfg.Storage.Driver == config.StoragePostgres {
		return postgres.Open(ctx, cfg.Storage.DSN.Reveal(), postgres.Options{MaxConns: cfg.Storage.MaxConns, Logger: log})
	}
	return bolt.Open(ctx, filepath.Join(cfg.DataDir, DataFile), bolt.Options{Logger: log})
}
