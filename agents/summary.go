package agents

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/switchyard/switchyard/bot"
)

// summarize ends the status message of a run that started others, or
// leaves things open, with what it spent (its subagents' included) and
// what its thread and agent still have open.
func (r *Runtime) summarize(ctx context.Context, rn *run, resp AgentResponse) {
	if r.children == nil {
		return
	}
	spawned, err := r.subagentsOf(ctx, rn.jobItem, false)
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "list the run's subagents", append(rn.attrs(), slog.String("error", err.Error()))...)
		return
	}
	started, tokens := len(spawned), resp.TokensUsed
	for _, c := range spawned {
		tokens += c.Tokens
	}
	open, err := r.children.OpenRecords(ctx, rn.sessionKey, rn.def.Name)
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "list what is still open", append(rn.attrs(), slog.String("error", err.Error()))...)
		return
	}
	if started == 0 && len(open) == 0 {
		return
	}
	r.report(ctx, rn, bot.ProgressEvent{Kind: bot.ProgressSummary, Text: summaryText(tokens, started > 0, open)})
}

// summaryText says what a run spent and what is still open.
func summaryText(tokens int, children bool, open []bot.OpenRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spent %s", bot.Count(tokens, "token", "tokens"))
	if children {
		b.WriteString(" with its subagents")
	}
	if len(open) == 0 {
		b.WriteString("; nothing left open")
		return b.String()
	}
	b.WriteString("; still open: ")
	for i, o := range open {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s, %s)", o.ID, strings.ReplaceAll(o.Kind, "_", " "), o.Status)
	}
	return b.String()
}
