// Package bot holds Switchyard's core vocabulary and the machinery that moves
// an event from intake to a report in its thread: ingest (dedup and persist
// before acknowledging), the router, the dispatch queue and its workers, the
// reporter and its outbox, continuation summaries and schedules.
//
// Package bot imports nothing else of the project. It declares the small
// interfaces it needs (the stores, Runner, Sink) and the adapters implement
// them: storage/bolt the stores, agents the Runner, integrations/* the sinks.
package bot
