// Package storetest is the conformance suite of bot.Store: every
// implementation runs Run against itself from its own tests, so all of them
// honour the same contract (dedup, queue leases and batching, outbox
// versions, list filters, errors).
//
// The suite asserts only what package bot documents or what a user of the
// daemon would observe; it does not look at ids' format or a store's files.
package storetest
