package bot

import "context"

// Sink delivers outbox messages to one platform (local console, GitHub,
// Slack). The outbox picks the sink by the message's Thread.Source.
//
// Deliver creates the message when msg.RemoteID is empty and returns the
// platform's id for it; otherwise it updates the message RemoteID names (a
// reaction is only ever created). Failures the sink can classify are
// returned as *DeliveryError.
//
// A sink need not guard against posting twice itself: the Deliverer records
// every creating attempt before it makes it and, after one that may have
// reached the platform, asks the sink's Finder first (see Finder).
type Sink interface {
	Deliver(ctx context.Context, msg OutboxMessage) (remoteID string, err error)
}

// Finder is a Sink that can find the message an earlier creating attempt
// made. Before the Deliverer creates a message whose earlier attempt may
// have reached the platform (msg.Attempted), it calls Find; when the message
// is there, the Deliverer adopts its id and delivers the latest version as
// an update instead of creating a second message. Sinks whose platform makes
// creation idempotent by itself (reactions) answer found false. A sink
// without a Finder may show such a message twice.
type Finder interface {
	Find(ctx context.Context, msg OutboxMessage) (remoteID string, found bool, err error)
}
