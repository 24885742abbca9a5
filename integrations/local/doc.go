// Package local is the local console channel: people (and scripts) talk to
// Switchyard over HTTP or with `switchyard send`, with no GitHub or Slack
// account. Messages become local.message events in threads "local:<name>";
// what the bot writes there is read back from the outbox.
package local
