// Package bolt is Switchyard's embedded store: one go.etcd.io/bbolt file
// that implements every store package bot declares (bot.Store).
//
// # Layout
//
// Records live in top-level buckets under the 8-byte big-endian sequence
// of their bucket (NextSequence), so new records append to the B+tree and
// ids read wi_<n>, d_<n>, job_<n>, in_<n>, ev_<n>. Indexes are separate
// buckets whose keys end in such a sequence, so a prefix scan returns
// records in creation order, and newest first when walked backwards.
//
//   - events: the normalised event as a small JSON header followed by the
//     raw payload, written once and read only by GetEvent.
//   - dedup: DedupKey → expiry + id of what the first delivery made;
//     dedup_expiry orders the keys by expiry so ExpireDedup deletes only
//     what has run out.
//   - work_items, with work_items_by_thread and work_items_by_status.
//   - dispatches, with dispatches_pending (exactly the pending ones, in
//     arrival order) and dispatches_pending_by_thread (for batching a
//     thread's later messages into one job); jobs, jobs_by_work_item, and
//     jobs_active (thread → its one running job).
//   - outbox (key → message), outbox_by_seq, outbox_by_thread,
//     outbox_pending_by_destination (with each message's next attempt and
//     work item, so Due reads only the messages it returns) and outbox_dead
//     (seq → key).
//   - schedules (name → last firing) and meta (schema version).
//
// IngestRecords and Buckets export the intake layout, so a benchmark can
// write the same records with raw bbolt and measure what the store adds.
//
// # Transactions
//
// Ingest runs in DB.Batch: concurrent webhook and Slack handlers share one
// commit and one fsync. Every other write is a DB.Update, every read a
// DB.View. The queue's invariants (one running job per thread, a dispatch
// either pending or leased by exactly one running job) hold because each
// queue operation is one write transaction.
package bolt
