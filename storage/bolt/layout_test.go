package bolt

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// FuzzIngestRecords checks that the records Ingest writes, whose ids are
// spliced into JSON encoded before the ids were known, are exactly the JSON
// of the records with their ids, whatever the text of the event.
func FuzzIngestRecords(f *testing.F) {
	f.Add("local", "t1", "@coder please look", "alice", "id-1", "coder", "mention @coder", "", "", false, false, uint64(1), uint64(1), uint64(1), uint64(1))
	f.Add("github", "", `","id":"","event_ref":"`, "bot", "", "", "", "no_route", `"event_ref":""`, true, false, uint64(7), uint64(1), uint64(1<<40), uint64(0))
	f.Add("slack", `{"id":""}`, "\x00\"\\<>&\u2028", `,"dispatch_id":""}`, `"id":""`, "ops", `{"id":""`, "bot_actor", "", true, false, uint64(1<<63), uint64(2), uint64(3), uint64(0))
	f.Add("github", "171.1", `"key":"","seq":0,`, "octocat", "d-1", "reviewer", "comment:12", "eyes", `"work_item_id":""`, false, true, uint64(9), uint64(4), uint64(5), uint64(1<<33))
	f.Fuzz(func(t *testing.T, source, thread, text, actor, delivery, agent, reason, code, detail string, ignored, react bool, evSeq, seq1, seq2, seq3 uint64) {
		now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		req := bot.IngestRequest{
			Event: bot.Event{
				Source: source, Kind: source + ".message", DeliveryID: delivery, Actor: actor, Text: text,
				Requester: bot.Requester{Source: source, ID: actor, Permission: code}, SourceRef: reason, ReceivedAt: now,
			},
			ParentID: detail, Now: now, DedupUntil: now.Add(time.Hour),
		}
		if thread != "" {
			req.Event.Thread = bot.LocalThread(thread)
		}
		if react && !ignored {
			// A reaction goes on the message SourceRef names.
			req.Event.Thread = bot.SlackThread("T1", "C1", thread)
			req.Reaction = code
		}
		seqs := Seqs{Event: evSeq}
		if ignored {
			req.Ignore = &bot.IngressReason{Code: code, Detail: detail}
			seqs.Ingress = seq1
		} else {
			req.Route = &bot.Route{Agent: agent, Kind: bot.RouteKind(reason), Reason: reason, Rule: code}
			seqs.WorkItem, seqs.Dispatch, seqs.Outbox = seq1, seq2, seq3
		}
		if req.Validate() != nil {
			return
		}
		p, err := planIngest(&req)
		require.NoError(t, err)
		records, _, res := p.records(seqs)
		got := map[string][]byte{}
		for _, r := range records {
			switch r.Bucket {
			case bucketWorkItems, bucketDispatches, bucketIngress, bucketOutbox:
				got[r.Bucket] = r.Value
			}
		}

		evRef := formatID(prefixEvent, evSeq)
		if ignored {
			want := bot.IngressRecord{
				ID: formatID(prefixIngress, seq1), Source: source, Kind: source + ".message", DeliveryID: delivery,
				Actor: actor, Thread: req.Event.Thread, Reason: code, Detail: detail, EventRef: evRef, CreatedAt: now,
			}
			requireJSON(t, &want, got[bucketIngress])
			require.Equal(t, &want, res.Ingress)
			return
		}
		wiID, dID := formatID(prefixWorkItem, seq1), formatID(prefixDispatch, seq2)
		want := workItemRecord{WorkItem: bot.WorkItem{
			ID: wiID, Thread: req.Event.Thread, Status: bot.StatusQueued, Route: *req.Route, ParentID: detail,
			EventRef: evRef, Source: source, Kind: source + ".message", DeliveryID: delivery, Actor: actor,
			Requester: req.Event.Requester, Text: text, SourceRef: reason, CreatedAt: now, UpdatedAt: now,
		}, Dispatch: dID}
		requireJSON(t, &want, got[bucketWorkItems])
		require.Equal(t, &want.WorkItem, res.WorkItem)
		requireJSON(t, &bot.Dispatch{
			ID: dID, WorkItemID: wiID, Agent: agent, Thread: req.Event.Thread,
			Status: bot.DispatchPending, CreatedAt: now, UpdatedAt: now,
		}, got[bucketDispatches])
		if req.Reaction == "" {
			require.NotContains(t, got, bucketOutbox)
			return
		}
		requireJSON(t, &bot.OutboxMessage{
			Key: bot.ReactionKey(wiID, code), Seq: seq3, Thread: req.Event.Thread, WorkItemID: wiID,
			Kind: bot.OutboxReaction, Reaction: code, Target: reason, Version: 1, CreatedAt: now, UpdatedAt: now,
		}, got[bucketOutbox])
	})
}

func requireJSON(t *testing.T, want any, got []byte) {
	t.Helper()
	raw, err := json.Marshal(want)
	require.NoError(t, err)
	require.Equal(t, string(raw), string(got))
}
