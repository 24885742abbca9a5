package storetest

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func testIngest(t *testing.T, open Opener) {
	t.Run("routed event makes a queued work item and a dispatch", func(t *testing.T) {
		h := newHarness(t, open)
		th := bot.GitHubThread("acme", "api", 7)
		ev := bot.Event{
			Source: bot.SourceGitHub, Kind: "github.issue_comment.created", DeliveryID: "gh-1",
			Actor: "alice", Org: "acme", Repo: "acme/api", Number: 7, Labels: []string{"bug"},
			Requester: bot.Requester{Source: bot.SourceGitHub, ID: "alice", Name: "Alice", Permission: "write"},
			Text:      "@coder fix it", Mentions: []string{"coder"}, Thread: th, SourceRef: "comment:99",
			ReceivedAt: epoch(), Raw: bytes.Repeat([]byte("x"), 40<<10),
		}
		route := bot.Route{Agent: "coder", Kind: bot.RouteMention, Reason: "mention @coder"}
		res := h.ingest(bot.IngestRequest{Event: ev, Route: &route, ParentID: "wi_parent", Now: at(time.Second), DedupUntil: at(time.Hour)})

		require.False(t, res.Duplicate)
		require.Nil(t, res.Ingress)
		wi := res.WorkItem
		require.NotNil(t, wi)
		require.NotEmpty(t, wi.ID)
		require.Equal(t, bot.StatusQueued, wi.Status)
		require.Equal(t, route, wi.Route)
		require.Equal(t, th, wi.Thread)
		require.Equal(t, "wi_parent", wi.ParentID)
		require.Equal(t, bot.SourceGitHub, wi.Source)
		require.Equal(t, ev.Kind, wi.Kind)
		require.Equal(t, "gh-1", wi.DeliveryID)
		require.Equal(t, "alice", wi.Actor)
		require.Equal(t, ev.Requester, wi.Requester)
		require.Equal(t, ev.Text, wi.Text)
		require.Equal(t, "comment:99", wi.SourceRef)
		require.True(t, wi.CreatedAt.Equal(at(time.Second)))
		require.NotEmpty(t, wi.EventRef)
		require.Nil(t, wi.FinishedAt)

		got := h.workItem(wi.ID)
		require.Equal(t, wi, got)
		require.Equal(t, 1, h.depth())

		stored, err := h.s.GetEvent(h.ctx, wi.EventRef)
		require.NoError(t, err)
		require.Equal(t, ev.Raw, stored.Raw)
		stored.Raw, ev.Raw = nil, nil
		require.True(t, stored.ReceivedAt.Equal(ev.ReceivedAt))
		stored.ReceivedAt = ev.ReceivedAt
		require.Equal(t, ev, *stored)
	})

	t.Run("ignored event makes an ingress record only", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hello")
		res := h.ingest(ignored(ev, bot.IgnoreBot, at(time.Second)))

		require.False(t, res.Duplicate)
		require.Nil(t, res.WorkItem)
		in := res.Ingress
		require.NotNil(t, in)
		require.NotEmpty(t, in.ID)
		require.Equal(t, bot.IgnoreBot, in.Reason)
		require.Equal(t, "because "+bot.IgnoreBot, in.Detail)
		require.Equal(t, ev.Source, in.Source)
		require.Equal(t, ev.Kind, in.Kind)
		require.Equal(t, ev.DeliveryID, in.DeliveryID)
		require.Equal(t, ev.Actor, in.Actor)
		require.Equal(t, ev.Thread, in.Thread)
		require.True(t, in.CreatedAt.Equal(at(time.Second)))

		stored, err := h.s.GetEvent(h.ctx, in.EventRef)
		require.NoError(t, err)
		require.Equal(t, ev.Raw, stored.Raw)
		require.Equal(t, ev.Text, stored.Text)

		require.Empty(t, h.list(bot.WorkItemFilter{}))
		require.Zero(t, h.depth())
	})

	t.Run("event without raw payload", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		ev.Raw = nil
		res := h.ingest(routed(ev, "coder", epoch()))
		stored, err := h.s.GetEvent(h.ctx, res.WorkItem.EventRef)
		require.NoError(t, err)
		require.Empty(t, stored.Raw)
		require.Equal(t, "hi", stored.Text)
	})

	t.Run("request must carry exactly one of route and ignore", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		for name, req := range map[string]bot.IngestRequest{
			"neither": {Event: ev, Now: epoch(), DedupUntil: at(time.Hour)},
			"both": {Event: ev, Route: &bot.Route{Agent: "coder", Kind: bot.RouteDefault, Reason: "default"},
				Ignore: &bot.IngressReason{Code: bot.IgnoreBot}, Now: epoch(), DedupUntil: at(time.Hour)},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := h.s.Ingest(h.ctx, req)
				requireCode(t, bot.EINVALID, err)
			})
		}
		require.Empty(t, h.list(bot.WorkItemFilter{}))
		// Nothing was stored, not even the dedup key.
		res := h.ingest(routed(ev, "coder", epoch()))
		require.False(t, res.Duplicate)
	})

	t.Run("concurrent writers of distinct events", func(t *testing.T) {
		h := newHarness(t, open)
		const writers, each = 8, 50
		var mu sync.Mutex
		seen := map[string]bool{}
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Go(func() {
				th := bot.LocalThread(string(rune('a' + w)))
				for range each {
					res, err := h.s.Ingest(h.ctx, routed(h.event(th, "work"), "coder", epoch()))
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					seen[res.WorkItem.ID] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, seen, writers*each, "work item ids must be unique")
		items := h.list(bot.WorkItemFilter{Limit: 1000})
		require.Len(t, items, writers*each)
		for _, wi := range items {
			require.True(t, seen[wi.ID])
		}
		require.Equal(t, writers*each, h.depth())
	})

	t.Run("missing event", func(t *testing.T) {
		h := newHarness(t, open)
		wi := h.submit(bot.LocalThread("t1"), "coder", "hi")
		for _, ref := range []string{"", "nope", wi.ID, wi.EventRef + "0"} {
			_, err := h.s.GetEvent(h.ctx, ref)
			requireCode(t, bot.ENOTFOUND, err)
		}
	})
}

func testDedup(t *testing.T, open Opener) {
	t.Run("same delivery twice returns the original work item", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		first := h.ingest(routed(ev, "coder", epoch()))
		second := h.ingest(routed(ev, "reviewer", at(time.Minute)))
		require.True(t, second.Duplicate)
		require.Nil(t, second.Ingress)
		require.Equal(t, first.WorkItem, second.WorkItem)
		require.Len(t, h.list(bot.WorkItemFilter{}), 1)
		require.Equal(t, 1, h.depth())
	})

	t.Run("same delivery id from another source is not a duplicate", func(t *testing.T) {
		h := newHarness(t, open)
		a := h.event(bot.LocalThread("t1"), "hi")
		b := a
		b.Source = bot.SourceSlack
		require.False(t, h.ingest(routed(a, "coder", epoch())).Duplicate)
		require.False(t, h.ingest(routed(b, "coder", epoch())).Duplicate)
		require.Len(t, h.list(bot.WorkItemFilter{}), 2)
	})

	t.Run("ignored events dedup too", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		first := h.ingest(ignored(ev, bot.IgnoreBot, epoch()))
		for _, req := range []bot.IngestRequest{
			ignored(ev, bot.IgnoreEdited, at(time.Second)),
			routed(ev, "coder", at(time.Second)),
		} {
			res := h.ingest(req)
			require.True(t, res.Duplicate)
			require.Nil(t, res.WorkItem)
			require.Equal(t, first.Ingress, res.Ingress)
		}
		in, _, err := h.s.ListIngress(h.ctx, bot.IngressFilter{})
		require.NoError(t, err)
		require.Len(t, in, 1)
		require.Empty(t, h.list(bot.WorkItemFilter{}))
	})

	t.Run("events without delivery id never dedup", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		ev.DeliveryID = ""
		a := h.ingest(routed(ev, "coder", epoch()))
		b := h.ingest(routed(ev, "coder", epoch()))
		require.False(t, b.Duplicate)
		require.NotEqual(t, a.WorkItem.ID, b.WorkItem.ID)
		n, err := h.s.ExpireDedup(h.ctx, at(1000*time.Hour))
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("concurrent deliveries of one event make one work item", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		const n = 100
		results := make([]bot.IngestResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i], errs[i] = h.s.Ingest(h.ctx, routed(ev, "coder", epoch())) })
		}
		wg.Wait()
		originals := 0
		var id string
		for i := range n {
			require.NoError(t, errs[i])
			require.NotNil(t, results[i].WorkItem)
			if !results[i].Duplicate {
				originals++
			}
			if id == "" {
				id = results[i].WorkItem.ID
			}
			require.Equal(t, id, results[i].WorkItem.ID)
		}
		require.Equal(t, 1, originals)
		require.Len(t, h.list(bot.WorkItemFilter{}), 1)
		require.Equal(t, 1, h.depth())
	})

	t.Run("swept keys are forgotten", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		first := h.ingest(routed(ev, "coder", epoch())) // window ends at +1h

		n, err := h.s.ExpireDedup(h.ctx, at(30*time.Minute))
		require.NoError(t, err)
		require.Zero(t, n)
		require.True(t, h.ingest(routed(ev, "coder", at(30*time.Minute))).Duplicate)

		n, err = h.s.ExpireDedup(h.ctx, at(2*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = h.s.ExpireDedup(h.ctx, at(2*time.Hour))
		require.NoError(t, err)
		require.Zero(t, n)

		again := h.ingest(routed(ev, "coder", at(2*time.Hour)))
		require.False(t, again.Duplicate)
		require.NotEqual(t, first.WorkItem.ID, again.WorkItem.ID)
	})

	t.Run("expired keys that were not swept yet are not duplicates", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		first := h.ingest(routed(ev, "coder", epoch())) // window ends at +1h
		second := h.ingest(routed(ev, "coder", at(2*time.Hour)))
		require.False(t, second.Duplicate)
		require.NotEqual(t, first.WorkItem.ID, second.WorkItem.ID)

		// The sweep must not take the renewed key (window ends at +3h).
		_, err := h.s.ExpireDedup(h.ctx, at(2*time.Hour+time.Minute))
		require.NoError(t, err)
		third := h.ingest(routed(ev, "coder", at(2*time.Hour+30*time.Minute)))
		require.True(t, third.Duplicate)
		require.Equal(t, second.WorkItem.ID, third.WorkItem.ID)
	})

	t.Run("a signed request is stored once, whatever delivery id it claims", func(t *testing.T) {
		signed := func(h *harness, delivery string) bot.Event {
			ev := h.event(bot.LocalThread("t1"), "hi")
			ev.Source, ev.Kind, ev.DeliveryID = bot.SourceGitHub, "github.issue_comment.created", delivery
			ev.Signature = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
			return ev
		}
		for _, tc := range []struct {
			name   string
			replay func(ev bot.Event) bot.Event
			// replayed: found by its signature, not by its delivery id.
			replayed bool
		}{
			{"under a new delivery id", func(ev bot.Event) bot.Event { ev.DeliveryID = "forged-1"; return ev }, true},
			{"without a delivery id", func(ev bot.Event) bot.Event { ev.DeliveryID = ""; return ev }, true},
			{"under its own delivery id (a redelivery)", func(ev bot.Event) bot.Event { return ev }, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, route := range []bool{true, false} {
					h := newHarness(t, open)
					ev := signed(h, "gh-1")
					req := func(ev bot.Event, now time.Time) bot.IngestRequest {
						if route {
							return routed(ev, "coder", now)
						}
						return ignored(ev, bot.IgnoreNoRoute, now)
					}
					unseen, err := h.s.Duplicate(h.ctx, &ev, epoch())
					require.NoError(t, err)
					require.Zero(t, unseen)
					first := h.ingest(req(ev, epoch()))
					require.False(t, first.Duplicate)
					for i := range 2 { // the second time, its forged id is known too
						replay := tc.replay(ev)
						now := at(time.Duration(i+1) * time.Minute)
						seen, err := h.s.Duplicate(h.ctx, &replay, now)
						require.NoError(t, err)
						res := h.ingest(req(replay, now))
						require.Equal(t, res, seen, "Duplicate answers as Ingest does")
						require.True(t, res.Duplicate)
						require.Equal(t, tc.replayed, res.Replayed)
						require.Equal(t, first.WorkItem, res.WorkItem)
						require.Equal(t, first.Ingress, res.Ingress)
					}
					in, _, err := h.s.ListIngress(h.ctx, bot.IngressFilter{})
					require.NoError(t, err)
					require.Equal(t, 1, len(h.list(bot.WorkItemFilter{}))+len(in), "one work item or ingress record")
					// Another request (another signature) under the forged id
					// is its own.
					other := tc.replay(ev)
					other.Signature = "857107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
					if other.DeliveryID == ev.DeliveryID {
						other.DeliveryID = "gh-2"
					}
					require.False(t, h.ingest(req(other, at(time.Hour/2))).Duplicate)
				}
			})
		}
	})

	t.Run("a signature is forgotten when its own window ends", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		ev.Source, ev.Kind, ev.Signature = bot.SourceSlack, bot.KindSlackMessage, "0a"
		req := routed(ev, "coder", epoch())
		req.SignedUntil = at(5 * time.Minute)
		first := h.ingest(req)

		replay := ev
		replay.DeliveryID = "another"
		res := h.ingest(routed(replay, "coder", at(4*time.Minute)))
		require.True(t, res.Duplicate)
		require.True(t, res.Replayed)
		require.Equal(t, first.WorkItem.ID, res.WorkItem.ID)

		replay.DeliveryID = "yet another"
		seen, err := h.s.Duplicate(h.ctx, &replay, at(5*time.Minute+time.Second))
		require.NoError(t, err)
		require.Zero(t, seen, "past its window, not swept yet")
		n, err := h.s.ExpireDedup(h.ctx, at(6*time.Minute))
		require.NoError(t, err)
		require.Equal(t, 1, n) // the delivery id's key lasts the hour
		res = h.ingest(routed(replay, "coder", at(7*time.Minute)))
		require.False(t, res.Duplicate)
		// Its delivery id is still known.
		require.True(t, h.ingest(routed(ev, "coder", at(8*time.Minute))).Duplicate)
	})

	t.Run("concurrent replays of one signed request make one work item", func(t *testing.T) {
		h := newHarness(t, open)
		ev := h.event(bot.LocalThread("t1"), "hi")
		ev.Signature = "ab12"
		const n = 50
		results := make([]bot.IngestResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			replay := ev
			replay.DeliveryID = ev.DeliveryID + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			wg.Go(func() { results[i], errs[i] = h.s.Ingest(h.ctx, routed(replay, "coder", epoch())) })
		}
		wg.Wait()
		originals := 0
		for i := range n {
			require.NoError(t, errs[i])
			require.NotNil(t, results[i].WorkItem)
			if !results[i].Duplicate {
				originals++
			}
		}
		require.Equal(t, 1, originals)
		require.Len(t, h.list(bot.WorkItemFilter{}), 1)
		require.Equal(t, 1, h.depth())
	})

	t.Run("sweep removes only expired keys, many at once", func(t *testing.T) {
		h := newHarness(t, open)
		var wg sync.WaitGroup
		const n = 300
		errs := make(chan error, 2*n)
		for i := range 2 * n {
			wg.Go(func() {
				req := routed(h.event(bot.LocalThread("t1"), "hi"), "coder", epoch())
				if i%2 == 1 {
					req.DedupUntil = at(48 * time.Hour)
				}
				_, err := h.s.Ingest(h.ctx, req)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		removed, err := h.s.ExpireDedup(h.ctx, at(24*time.Hour))
		require.NoError(t, err)
		require.Equal(t, n, removed)
		removed, err = h.s.ExpireDedup(h.ctx, at(49*time.Hour))
		require.NoError(t, err)
		require.Equal(t, n, removed)
	})
}
