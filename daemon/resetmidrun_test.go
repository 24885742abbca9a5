package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// TestAResetDuringARunLeavesTheNextRunNothing resets a thread while a run
// of it is still working: that run finishes, and the next one starts from
// nothing, neither the conversation from before the reset nor the run that
// was under way.
func TestAResetDuringARunLeavesTheNextRunNothing(t *testing.T) {
	release := make(chan struct{})
	model := newFakeModel(t, func(ctx context.Context, req chatRequest) reply {
		if strings.Contains(req.first(), "slowly") {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		var seen []string
		for _, m := range req.Messages {
			seen = append(seen, m.Role+": "+m.text())
		}
		return reply{Text: "I have seen:\n" + strings.Join(seen, "\n")}
	})
	tr := startTree(t, model, treeOptions{})

	first := tr.send(t, "mid", "@lead the word is banana")
	require.Equal(t, bot.StatusDone, tr.finished(t, first, time.Minute).Status)
	second := tr.send(t, "mid", "@lead answer slowly, the word is cherry")
	require.Eventually(t, func() bool { return len(model.seen("lead")) == 2 }, 30*time.Second, 10*time.Millisecond)
	require.Contains(t, model.seen("lead")[1].first(), "cherry")
	require.Contains(t, model.seen("lead")[1].Messages[0].text(), "banana", "the run under way had the thread's conversation")

	code, body := tr.do(t, "POST", "/api/v1/threads/mid/reset", "")
	require.Equal(t, http.StatusOK, code, string(body))
	close(release)
	require.Equal(t, bot.StatusDone, tr.finished(t, second, time.Minute).Status)

	third := tr.send(t, "mid", "@lead what is the word?")
	require.Equal(t, bot.StatusDone, tr.finished(t, third, time.Minute).Status)
	reqs := model.seen("lead")
	require.Len(t, reqs, 3)
	last := reqs[2]
	require.Len(t, last.Messages, 1, "the next run starts from its own message alone")
	require.Contains(t, last.first(), "what is the word?")
	require.NotContains(t, last.System, "banana")
	require.NotContains(t, last.System, "cherry")
	require.NotContains(t, last.System, first)
	require.NotContains(t, last.System, second)
}
