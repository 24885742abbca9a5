package bot

import "context"

// Sink delivers outbox messages to one platform (local console, GitHub,
// Slack). The outbox picks the sink by the message's Thread.Source.
//
// Deliver creates the message when msg.RemoteID is empty and returns the
// platform's id for it; otherwise it updates the message RemoteID names (a
// reaction is only ever created). A sink should make creation idempotent on
// msg.Key where the platform allows, so a crash between a successful post and
// MarkDelivered does not show the message twice. Failures the sink can
// classify are returned as *DeliveryError.
type Sink interface {
	Deliver(ctx context.Context, msg OutboxMessage) (remoteID string, err error)
}
