package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/slack-go/slack"

	"github.com/switchyard/switchyard/bot"
)

// Action ids of the Approve / Deny buttons on approval prompts. The prompt
// puts the approval's id in each button's value.
const (
	ActionApprove = "switchyard_approve"
	ActionDeny    = "switchyard_deny"
)

// ApprovalClick is one click on an approval prompt's button.
type ApprovalClick struct {
	Approve    bool   // Approve clicked; false for Deny
	ApprovalID string // the button's value
	User       string // who clicked (Slack user id); the decider checks approvers
	Team       string
	Channel    string
	MessageTS  string // the prompt message
	ThreadTS   string // its thread, when the prompt is a reply
	// ResponseURL lets the decider answer the clicker (for example "only
	// approvers can decide") or replace the prompt.
	ResponseURL string
}

// ApprovalDecider receives approval clicks. The daemon implements it over
// the permission engine's approvals: it checks the approver list, records
// the decision (or the refused attempt) in the audit log and resumes or
// denies the waiting tool call. An error with a bot code the clicker can act
// on (EUNAUTHORIZED, EFORBIDDEN, ECONFLICT, ENOTFOUND, EINVALID,
// EUNAVAILABLE) is told to the clicker alone; any other error fails the
// request.
type ApprovalDecider interface {
	DecideApproval(ctx context.Context, click ApprovalClick) error
}

// interaction is what the core reads of an interaction payload. Like
// events, only the fields used are decoded: slack-go's InteractionCallback
// decodes whole messages and views strictly, and a click must not be lost
// to a field of an unexpected shape elsewhere in the payload.
type interaction struct {
	Type string `json:"type"`
	User struct {
		ID     string `json:"id"`
		TeamID string `json:"team_id"`
	} `json:"user"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	Container struct {
		ChannelID string `json:"channel_id"`
		MessageTS string `json:"message_ts"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"container"`
	Message struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
	} `json:"message"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		BlockID  string `json:"block_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// handleInteraction processes an interaction payload (JSON) from either
// transport. Only approval buttons mean anything to Switchyard; the rest is
// acknowledged and dropped.
func (a *Adapter) handleInteraction(ctx context.Context, raw []byte) error {
	var ic interaction
	if err := json.Unmarshal(raw, &ic); err != nil {
		return fmt.Errorf("%w: interaction: %v", errBadPayload, err)
	}
	if ic.Type != string(slack.InteractionTypeBlockActions) {
		a.opts.Logger.Debug("slack interaction ignored", slog.String("type", ic.Type))
		return nil
	}
	for _, act := range ic.Actions {
		if act.ActionID != ActionApprove && act.ActionID != ActionDeny {
			continue
		}
		click := ApprovalClick{
			Approve:     act.ActionID == ActionApprove,
			ApprovalID:  act.Value,
			User:        ic.User.ID,
			Team:        firstNonEmpty(ic.Team.ID, ic.User.TeamID),
			Channel:     firstNonEmpty(ic.Channel.ID, ic.Container.ChannelID),
			MessageTS:   firstNonEmpty(ic.Container.MessageTS, ic.Message.TS),
			ThreadTS:    firstNonEmpty(ic.Container.ThreadTS, ic.Message.ThreadTS),
			ResponseURL: ic.ResponseURL,
		}
		var err error = errNoApprovals
		if a.opts.Approvals != nil {
			err = a.opts.Approvals.DecideApproval(ctx, click)
		}
		switch bot.ErrorCode(err) {
		case "":
			a.opts.Logger.Info("slack approval decided", slog.String("approval", click.ApprovalID),
				slog.String("user", click.User), slog.Bool("approve", click.Approve))
		case bot.EUNAUTHORIZED, bot.EFORBIDDEN, bot.ECONFLICT, bot.ENOTFOUND, bot.EINVALID, bot.EUNAVAILABLE:
			// Nothing changed; only the clicker hears why.
			a.opts.Logger.Info("slack approval click refused", slog.String("approval", click.ApprovalID),
				slog.String("user", click.User), slog.String("reason", bot.ErrorMessage(err)))
			a.refuse(refusal{channel: click.Channel, user: click.User, threadTS: click.ThreadTS, text: bot.ErrorMessage(err)})
		default:
			return fmt.Errorf("decide approval %q: %w", click.ApprovalID, err)
		}
	}
	return nil
}

var errNoApprovals = bot.Errorf(bot.EUNAVAILABLE, "approvals are not set up on this Switchyard")
