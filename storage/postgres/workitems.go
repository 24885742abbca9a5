package postgres

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

func jsonDoc(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// Listings page newest first: a cursor is the listing's tag and the key
// its page ended at, base64url-encoded; to callers it is opaque, and a
// cursor of one listing is refused by another.
const (
	cursorWorkItems byte = 'w' // key: seq (8)
	cursorIngress   byte = 'i' // key: seq (8)
	cursorAudit     byte = 'a' // key: time (8) + seq (8)
)

func encodeCursor(tag byte, keys ...int64) string {
	b := []byte{tag}
	for _, k := range keys {
		b = binary.BigEndian.AppendUint64(b, uint64(k))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns the keys of a cursor of the listing tag ("" is the
// first page: nil), or EINVALID.
func decodeCursor(tag byte, cursor string, n int) ([]int64, error) {
	if cursor == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != 1+8*n || b[0] != tag {
		return nil, bot.BadCursor(cursor)
	}
	out := make([]int64, n)
	for i := range out {
		v := binary.BigEndian.Uint64(b[1+8*i:])
		if v > math.MaxInt64 {
			return nil, bot.BadCursor(cursor)
		}
		out[i] = int64(v)
	}
	return out, nil
}

// GetWorkItem returns a work item, or ENOTFOUND.
func (s *Store) GetWorkItem(ctx context.Context, id string) (*bot.WorkItem, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	r, err := getWorkItem(ctx, s.pool, id, false)
	if err != nil {
		return nil, s.wrap("get work item", err)
	}
	return &r.WorkItem, nil
}

// ListWorkItems returns a page of work items, newest first, and the cursor
// of the next page. A conversation's work items come in one page.
func (s *Store) ListWorkItems(ctx context.Context, f bot.WorkItemFilter) ([]bot.WorkItem, string, error) {
	if err := s.open(); err != nil {
		return nil, "", err
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, "", bot.Errorf(bot.EINVALID, "unknown work item status %q", f.Status)
	}
	if f.Conversation != "" && f.Cursor != "" {
		return nil, "", bot.Errorf(bot.EINVALID, "a conversation's work items come in one page: no cursor")
	}
	keys, err := decodeCursor(cursorWorkItems, f.Cursor, 1)
	if err != nil {
		return nil, "", err
	}
	before := int64(math.MaxInt64)
	if keys != nil {
		before = keys[0]
	}
	if !storable(f.Thread) || !storable(f.Conversation) {
		return []bot.WorkItem{}, "", nil // text no work item can have
	}
	limit := bot.ListLimit(f.Limit)
	var rows pgx.Rows
	switch {
	case f.Job != "":
		seq, ok := parseID(prefixJob, f.Job)
		var exists bool
		if ok {
			if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM jobs WHERE seq = $1)", seq).Scan(&exists); err != nil {
				return nil, "", s.wrap("list work items", err)
			}
		}
		if !exists {
			return nil, "", bot.Errorf(bot.ENOTFOUND, "job %q not found", f.Job)
		}
		rows, err = s.pool.Query(ctx, "SELECT "+workItemCols+` FROM work_items
			WHERE seq IN (SELECT work_item_seq FROM job_work_items WHERE job_seq = $1) AND seq < $2 AND ($3 = '' OR status = $3)
			ORDER BY seq DESC LIMIT $4`, seq, before, string(f.Status), limit+1)
	case f.Conversation != "":
		// The conversation's latest threads (thread keys conversation/ts,
		// where Slack timestamps sort as they happen), then newest first.
		rows, err = s.pool.Query(ctx, "SELECT "+workItemCols+` FROM work_items
			WHERE starts_with(thread, $1) ORDER BY thread DESC, seq DESC LIMIT $2`, f.Conversation+"/", limit)
	default:
		rows, err = s.pool.Query(ctx, "SELECT "+workItemCols+` FROM work_items
			WHERE seq < $1 AND ($2 = '' OR thread = $2) AND ($3 = '' OR status = $3)
			ORDER BY seq DESC LIMIT $4`, before, f.Thread, string(f.Status), limit+1)
	}
	if err != nil {
		return nil, "", s.wrap("list work items", err)
	}
	out := []bot.WorkItem{}
	for rows.Next() {
		r, err := scanWorkItem(rows)
		if err != nil {
			rows.Close()
			return nil, "", s.wrap("list work items", err)
		}
		out = append(out, r.WorkItem)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.wrap("list work items", err)
	}
	if f.Conversation != "" {
		slices.SortFunc(out, func(a, b bot.WorkItem) int {
			x, _ := parseID(prefixWorkItem, a.ID)
			y, _ := parseID(prefixWorkItem, b.ID)
			return cmp.Compare(y, x)
		})
		return out, "", nil
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last, _ := parseID(prefixWorkItem, out[limit-1].ID)
		next = encodeCursor(cursorWorkItems, last)
	}
	return out, next, nil
}

// ListJobs returns the jobs that ran a work item, oldest first.
func (s *Store) ListJobs(ctx context.Context, workItemID string) ([]bot.Job, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	wi, err := getWorkItem(ctx, s.pool, workItemID, false)
	if err != nil {
		return nil, s.wrap("list jobs", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT j.seq, j.doc FROM job_work_items x JOIN jobs j ON j.seq = x.job_seq
		WHERE x.work_item_seq = $1 ORDER BY j.seq`, wi.seq)
	if err != nil {
		return nil, s.wrap("list jobs", err)
	}
	out := []bot.Job{}
	for rows.Next() {
		var (
			seq int64
			doc []byte
			j   bot.Job
		)
		if err := rows.Scan(&seq, &doc); err != nil {
			rows.Close()
			return nil, s.wrap("list jobs", err)
		}
		if err := json.Unmarshal(doc, &j); err != nil {
			rows.Close()
			return nil, fmt.Errorf("decode job %d: %w", seq, err)
		}
		j.ID = formatID(prefixJob, seq)
		out = append(out, j)
	}
	return out, s.wrap("list jobs", rows.Err())
}

// RerouteWorkItem hands a work item to hop.To: it records the hop, routes
// the work item to the new agent and queues a dispatch for it. A dispatch
// of the work item still waiting in the queue is dropped; one that is
// running finishes without changing the work item again.
func (s *Store) RerouteWorkItem(ctx context.Context, id string, hop bot.Hop) (*bot.WorkItem, error) {
	if hop.To == "" {
		return nil, bot.Errorf(bot.EINVALID, "reroute %s: no target agent", id)
	}
	if hop.At.IsZero() {
		hop.At = time.Now()
	}
	hop.At = utc(hop.At)
	var out *bot.WorkItem
	err := s.tx(ctx, "reroute work item", func(tx pgx.Tx) error {
		wi, err := getWorkItem(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if len(wi.Hops) >= bot.MaxHops {
			return bot.Errorf(bot.ECONFLICT, "work item %s was handed off %d times already (limit %d)", id, len(wi.Hops), bot.MaxHops)
		}
		h := hop
		if h.From == "" {
			h.From = wi.Route.Agent
		}
		if wi.dispatch != 0 {
			d, err := getDispatch(ctx, tx, wi.dispatch, true)
			if err != nil {
				return err
			}
			if d.Status == bot.DispatchPending {
				d.Status = bot.DispatchFailed
				d.LastError = fmt.Sprintf("superseded by the handoff to @%s", h.To)
				d.UpdatedAt = h.At
				if err := putDispatch(ctx, tx, d); err != nil {
					return err
				}
			}
		}
		d := bot.Dispatch{Agent: h.To, Thread: wi.Thread, Status: bot.DispatchPending, CreatedAt: h.At, UpdatedAt: h.At}
		doc, err := jsonDoc(d)
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `INSERT INTO dispatches (work_item_seq, unit, agent, status, doc)
			VALUES ($1, $2, $3, 'pending', $4) RETURNING seq`, wi.seq, unit(wi.Thread, wi.ID), h.To, doc).Scan(&wi.dispatch); err != nil {
			return err
		}
		reason := "handoff from @" + h.From
		if h.Reason != "" {
			reason += ": " + h.Reason
		}
		wi.Hops = append(wi.Hops, h)
		if wi.FirstRoute == nil {
			first := wi.Route
			wi.FirstRoute = &first
		}
		wi.Route = bot.Route{Agent: h.To, Kind: bot.RouteHandoff, Reason: reason}
		wi.Status = bot.StatusQueued
		wi.Summary, wi.Error, wi.FinishedAt = "", "", nil
		wi.UpdatedAt = h.At
		if err := putWorkItem(ctx, tx, wi); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, bot.TopicWork+":"); err != nil {
			return err
		}
		out = &wi.WorkItem
		return nil
	})
	return out, err
}

// ListIngress returns a page of ingress records, newest first, and the
// cursor of the next page.
func (s *Store) ListIngress(ctx context.Context, f bot.IngressFilter) ([]bot.IngressRecord, string, error) {
	if err := s.open(); err != nil {
		return nil, "", err
	}
	keys, err := decodeCursor(cursorIngress, f.Cursor, 1)
	if err != nil {
		return nil, "", err
	}
	before := int64(math.MaxInt64)
	if keys != nil {
		before = keys[0]
	}
	limit := bot.ListLimit(f.Limit)
	rows, err := s.pool.Query(ctx, `SELECT seq, event_seq, doc FROM ingress
		WHERE seq < $1 AND ($2 = '' OR reason = $2) ORDER BY seq DESC LIMIT $3`, before, f.Reason, limit+1)
	if err != nil {
		return nil, "", s.wrap("list ingress", err)
	}
	out := []bot.IngressRecord{}
	var seqs []int64
	for rows.Next() {
		var (
			seq, ev int64
			doc     []byte
		)
		if err := rows.Scan(&seq, &ev, &doc); err != nil {
			rows.Close()
			return nil, "", s.wrap("list ingress", err)
		}
		in, err := decodeIngress(seq, ev, doc)
		if err != nil {
			rows.Close()
			return nil, "", err
		}
		out = append(out, *in)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.wrap("list ingress", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(cursorIngress, seqs[limit-1])
	}
	return out, next, nil
}
