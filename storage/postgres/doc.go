// Package postgres is Switchyard's store for several replicas: every store
// interface the daemon uses (see the daemon's Store), in one PostgreSQL
// database through github.com/jackc/pgx/v5.
//
// # Schema
//
// Versioned migrations (migrations/*.sql) are embedded in the binary and
// applied by Open, or alone by Migrate (`switchyard storage migrate`), in
// order, each in its own transaction, under an advisory lock so replicas
// starting together apply each once. Records are JSON documents beside the
// columns queries select, order and lock by; times are Unix nanoseconds,
// ids the rows' sequences with the bbolt store's prefixes (wi_<n> …).
//
// # What holds each guarantee
//
//   - dedup's primary key: a redelivery is a duplicate on any replica; the
//     second insert waits for the first and finds it (Ingest is one
//     statement, and concurrent events share one round trip and commit).
//   - dispatches taken FOR UPDATE SKIP LOCKED, a transaction advisory lock
//     per unit (thread) and active_units' primary key: one running job per
//     thread, claims never wait for each other; jobs' leases let any
//     replica take a dead replica's work over once they expire.
//   - approvals decided by compare-and-set from pending, in a transaction.
//   - leases (Socket Mode's leader) held by one holder until they expire.
//   - LISTEN/NOTIFY on the "switchyard" channel: work to claim, outbox
//     messages to deliver, approvals decided, configs reloaded; a replica
//     that lost its listening connection looks at everything again.
package postgres
