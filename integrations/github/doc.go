// Package github connects Switchyard to GitHub as a GitHub App.
//
// Inbound, NewWebhookHandler verifies webhook deliveries (HMAC-SHA256 over the
// raw body, before anything is parsed), normalises them into bot.Event with
// go-github's webhook types, applies GitHub's trigger rules (bots, the App
// itself, editors who add no mention, people without the configured
// permission on the repository) and hands the event to the core intake,
// answering GitHub only after the intake has persisted it.
//
// Outbound, Client authenticates as the App and hands out one go-github
// client per installation, with installation tokens cached and refreshed by
// ghinstallation; Sink delivers outbox messages (the living status comment,
// the final reply, reactions) to issues and pull requests.
//
// Installations and the repositories they cover are recorded through
// InstallationStore, which storage/bolt implements.
package github
