package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// A change of the packages that comes while the coordinator swaps (a
// reload putting the config's package settings in effect, another install)
// is put in effect right after, by whoever holds the coordinator: no
// deadlock, nothing lost, the caller of Refresh never waits on a reload.
func TestRefreshDuringASwapRunsAfterIt(t *testing.T) {
	ctx := context.Background()
	s, err := Load(ctx, LoadOptions{Getenv: func(name string) string {
		if name == "OLLAMA_HOST" {
			return "http://127.0.0.1:1" // nothing answers: no model is found
		}
		return ""
	}})
	require.NoError(t, err)
	// Each reload reads the config anew.
	c := NewCoordinator(s, func(context.Context) (*Setup, error) {
		next, cfg := *s, *s.Config
		next.Config = &cfg
		return &next, nil
	}, nil, nil)
	var rebuilds atomic.Int32
	c.rebuild = func(_ context.Context, cur *Setup) (*Setup, error) {
		rebuilds.Add(1)
		next := *cur
		return &next, nil
	}
	// The commit of a reload changes the packages, as putting the config's
	// package settings in effect does; a refresh does not (prepareSkills).
	c.Subscribe(SubscriberFunc(func(ctx context.Context, prev, next *Setup) (func(), error) {
		if prev.Config == next.Config {
			return func() {}, nil
		}
		return func() { require.NoError(t, c.Refresh(ctx)) }, nil
	}))

	_, err = c.Reload(ctx)
	require.NoError(t, err)
	require.Equal(t, int32(1), rebuilds.Load(), "the refresh asked during the reload ran after it, once")

	// Refreshes from many goroutines while reloads go on: each ends, and the
	// last change is in effect after the last of them returns.
	rebuilds.Store(0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { require.NoError(t, c.Refresh(ctx)) })
		wg.Go(func() { _, err := c.Reload(ctx); require.NoError(t, err) })
	}
	wg.Wait()
	require.GreaterOrEqual(t, rebuilds.Load(), int32(1))
	require.False(t, c.refresh.Load(), "no refresh is left waiting")
}
