package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func testDeliveries(t *testing.T, open Opener) {
	h := newHarness(t, open)
	find := func(source, id string) (bot.IngestResult, error) {
		t.Helper()
		return h.s.FindDelivery(h.ctx, source, id)
	}

	routedEv := h.event(bot.LocalThread("t"), "@coder go")
	routedEv.Source, routedEv.DeliveryID = bot.SourceGitHub, "72d3-guid"
	wi := h.ingest(routed(routedEv, "coder", epoch())).WorkItem
	ignoredEv := h.event(bot.LocalThread("t"), "a bot")
	ignoredEv.Source, ignoredEv.DeliveryID = bot.SourceSlack, "Ev123"
	in := h.ingest(ignored(ignoredEv, bot.IgnoreBot, epoch())).Ingress

	res, err := find("", "72d3-guid")
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.Nil(t, res.Ingress)
	require.Equal(t, wi.ID, res.WorkItem.ID)
	res, err = find(bot.SourceSlack, "Ev123")
	require.NoError(t, err)
	require.Nil(t, res.WorkItem)
	require.Equal(t, *in, *res.Ingress)

	_, err = find(bot.SourceSlack, "72d3-guid")
	requireCode(t, bot.ENOTFOUND, err)
	_, err = find("", "nope")
	requireCode(t, bot.ENOTFOUND, err)
	_, err = find("", "")
	requireCode(t, bot.EINVALID, err)

	// The same id from two sources: which one is meant must be said.
	twin := h.event(bot.LocalThread("u"), "hi")
	twin.DeliveryID = "72d3-guid"
	local := h.ingest(routed(twin, "docs", epoch())).WorkItem
	_, err = find("", "72d3-guid")
	requireCode(t, bot.EINVALID, err)
	res, err = find(bot.SourceLocal, "72d3-guid")
	require.NoError(t, err)
	require.Equal(t, local.ID, res.WorkItem.ID)

	// Delivered again after the dedup window: the latest is found, long
	// after its dedup key is forgotten.
	later := at(2 * time.Hour)
	again := h.ingest(routed(routedEv, "reviewer", later))
	require.False(t, again.Duplicate)
	_, err = h.s.ExpireDedup(h.ctx, at(100*time.Hour))
	require.NoError(t, err)
	res, err = find(bot.SourceGitHub, "72d3-guid")
	require.NoError(t, err)
	require.Equal(t, again.WorkItem.ID, res.WorkItem.ID)

	h.reopen()
	res, err = find(bot.SourceSlack, "Ev123")
	require.NoError(t, err)
	require.Equal(t, in.ID, res.Ingress.ID)
}
