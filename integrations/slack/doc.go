// Package slack connects Switchyard to a Slack workspace.
//
// Inbound, one transport-independent core turns Events API payloads
// (app_mention, direct messages, replies in threads the bot works in), slash
// commands and interactions into bot.Events and hands them to the intake; two
// transports feed it: Socket Mode over slack-go's socketmode client, for teams
// without a public URL, and HTTP (POST /slack/events, /slack/commands,
// /slack/interactions) verified with the v0 signing secret. Either way Slack is
// acknowledged only after the intake has persisted the event, and Slack's
// retries are deduplicated by the intake on the event id.
//
// Outbound, Sink delivers the core's outbox messages: the living status
// message of a work item (Block Kit, edited in place with chat.update), the
// final reply (split into several messages when long) and reactions, paced
// at about one message a second per channel and honouring 429 Retry-After.
package slack
