package bot

// Topics of the notifications the processes sharing a store send each
// other (see the daemon's Replicas): what changed, so each can act at once
// instead of at its next poll.
const (
	TopicWork     = "work"     // the queue has work to claim
	TopicOutbox   = "outbox"   // outbox messages are due
	TopicApproval = "approval" // payload: the id of an approval that was decided
	TopicConfig   = "config"   // payload: the replica that reloaded its config
	TopicRules    = "rules"    // payload: the replica that changed a stored routing rule
	TopicSkills   = "skills"   // payload: the replica that changed a stored skill setting or package
	TopicCancel   = "cancel"   // payload: the id of a running job whose work was cancelled
	TopicResync   = "resync"   // notifications may have been missed: look again
)
