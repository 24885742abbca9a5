package bolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/storage/bolt"
)

func openConversationStore(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConversationsPerThreadAndAgent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := openConversationStore(t, path)
	const thread, other = "github:acme/app#7", "slack:T1/C2/1700000000.000100"

	doc, err := s.LoadConversation(ctx, thread, "coder")
	require.NoError(t, err)
	require.Nil(t, doc, "nothing stored yet, not even the bucket")
	n, err := s.ResetConversations(ctx, thread)
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, s.SaveConversation(ctx, thread, "coder", []byte(`{"v":1}`)))
	require.NoError(t, s.SaveConversation(ctx, thread, "coder", []byte(`{"v":2}`)))
	require.NoError(t, s.SaveConversation(ctx, thread, "reviewer", []byte(`{"r":1}`)))
	require.NoError(t, s.SaveConversation(ctx, other, "coder", []byte(`{"o":1}`)))

	doc, err = s.LoadConversation(ctx, thread, "coder")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":2}`, string(doc), "a save replaces")

	// Survives a restart.
	require.NoError(t, s.Close())
	s = openConversationStore(t, path)
	doc, err = s.LoadConversation(ctx, thread, "reviewer")
	require.NoError(t, err)
	require.JSONEq(t, `{"r":1}`, string(doc))

	n, err = s.ResetConversations(ctx, thread)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, agent := range []string{"coder", "reviewer"} {
		doc, err = s.LoadConversation(ctx, thread, agent)
		require.NoError(t, err)
		require.Nil(t, doc)
	}
	doc, err = s.LoadConversation(ctx, other, "coder")
	require.NoError(t, err)
	require.JSONEq(t, `{"o":1}`, string(doc), "other threads keep theirs")

	// The thread starts afresh after a reset.
	require.NoError(t, s.SaveConversation(ctx, thread, "coder", []byte(`{"v":3}`)))
	doc, err = s.LoadConversation(ctx, thread, "coder")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":3}`, string(doc))
}

func TestTranscriptsInSaveOrder(t *testing.T) {
	ctx := context.Background()
	s := openConversationStore(t, filepath.Join(t.TempDir(), "switchyard.db"))

	list, err := s.ListTranscripts(ctx, "job_1")
	require.NoError(t, err)
	require.Empty(t, list)

	// Callees finish, and are saved, before their callers; run ids do not
	// sort in that order.
	require.NoError(t, s.SaveTranscript(ctx, "job_1", "job_1.2", []byte(`"second callee"`)))
	require.NoError(t, s.SaveTranscript(ctx, "job_1", "job_1.10", []byte(`"first callee"`)))
	require.NoError(t, s.SaveTranscript(ctx, "job_1", "job_1", []byte(`"caller"`)))
	require.NoError(t, s.SaveTranscript(ctx, "job_2", "job_2", []byte(`"another job"`)))
	require.NoError(t, s.SaveTranscript(ctx, "job_1", "job_1.2", []byte(`"second callee, again"`)))

	list, err = s.ListTranscripts(ctx, "job_1")
	require.NoError(t, err)
	var got []string
	for _, d := range list {
		got = append(got, string(d))
	}
	require.Equal(t, []string{`"second callee, again"`, `"first callee"`, `"caller"`}, got)
}

func TestConversationsRefuseBadInput(t *testing.T) {
	ctx := context.Background()
	s := openConversationStore(t, filepath.Join(t.TempDir(), "switchyard.db"))

	require.Equal(t, bot.EINVALID, bot.ErrorCode(s.SaveConversation(ctx, "", "coder", []byte("{}"))))
	require.Equal(t, bot.EINVALID, bot.ErrorCode(s.SaveConversation(ctx, "local:t", "", []byte("{}"))))
	_, err := s.LoadConversation(ctx, "local:t", "")
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	_, err = s.ResetConversations(ctx, "")
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
	require.Equal(t, bot.EINVALID, bot.ErrorCode(s.SaveTranscript(ctx, "job_1", "", []byte("{}"))))
	_, err = s.ListTranscripts(ctx, "")
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.SaveConversation(cancelled, "local:t", "coder", []byte("{}")), context.Canceled)

	require.NoError(t, s.Close())
	_, err = s.LoadConversation(ctx, "local:t", "coder")
	require.Equal(t, bot.EUNAVAILABLE, bot.ErrorCode(err), "a closed store says so")
}
