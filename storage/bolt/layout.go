package bolt

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// SchemaVersion is the layout version this code writes, recorded in the meta
// bucket. A file with a newer version is refused rather than misread.
const SchemaVersion = 1

// Bucket names. Record keys named "seq" are the 8-byte big-endian bucket
// sequence of the record, so records append in creation order; index keys
// end in such a sequence so a prefix scan returns records in that order.
const (
	bucketMeta = "meta" // "schema_version" → decimal version

	// Intake. The raw payload is the large part of an event; it is written
	// once under a sequential key and never touched again.
	bucketEvents      = "events"       // seq → header length (4 bytes) + Event JSON + raw payload
	bucketDedup       = "dedup"        // DedupKey → expiry (8 bytes) + id of the work item or ingress record
	bucketDedupExpiry = "dedup_expiry" // expiry (8 bytes) + DedupKey → ""
	bucketIngress     = "ingress"      // seq → IngressRecord JSON
	bucketIngressBy   = "ingress_by_reason"

	// Work items: seq → record JSON; by thread key / status + 0x00 + seq → "".
	bucketWorkItems     = "work_items"
	bucketItemsByThread = "work_items_by_thread"
	bucketItemsByStatus = "work_items_by_status"

	// The queue. Pending holds exactly the dispatches in status pending, so
	// a claim never looks at finished work.
	bucketDispatches      = "dispatches"                   // seq → Dispatch JSON
	bucketPending         = "dispatches_pending"           // seq → unit + 0x00 + agent
	bucketPendingByThread = "dispatches_pending_by_thread" // unit + 0x00 + seq → agent
	bucketJobs            = "jobs"                         // seq → Job JSON
	bucketJobsByItem      = "jobs_by_work_item"            // work item seq + job seq → ""
	bucketActive          = "jobs_active"                  // unit → job seq: the one running job of a thread

	// The outbox: key → OutboxMessage JSON, with indexes by seq.
	bucketOutbox         = "outbox"
	bucketOutboxByThread = "outbox_by_thread" // thread key + 0x00 + seq → key
	bucketOutboxPending  = "outbox_pending"   // seq → key, while Pending()
	bucketOutboxDead     = "outbox_dead"      // seq → key

	bucketSchedules = "schedules" // name → last firing (8-byte Unix nanoseconds)
)

// Buckets returns the names of every top-level bucket the store uses, so a
// benchmark can lay out a raw bbolt file exactly like the store.
func Buckets() [][]byte {
	names := []string{
		bucketMeta,
		bucketEvents, bucketDedup, bucketDedupExpiry, bucketIngress, bucketIngressBy,
		bucketWorkItems, bucketItemsByThread, bucketItemsByStatus,
		bucketDispatches, bucketPending, bucketPendingByThread, bucketJobs, bucketJobsByItem, bucketActive,
		bucketOutbox, bucketOutboxByThread, bucketOutboxPending, bucketOutboxDead,
		bucketSchedules,
	}
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = []byte(n)
	}
	return out
}

// Record is one key/value pair in a top-level bucket.
type Record struct {
	Bucket, Key, Value []byte
}

// Seqs are the bucket sequences an ingested event takes: Event always,
// WorkItem and Dispatch for a routed event, Ingress for an ignored one.
type Seqs struct {
	Event, WorkItem, Dispatch, Ingress uint64
}

// IngestRecords returns the records Ingest writes for a new (not duplicate)
// event given the sequences it allocated. Ingest writes exactly these with
// Put, so a raw bbolt loop over them is the baseline of the store's intake.
func IngestRecords(req bot.IngestRequest, seqs Seqs) ([]Record, error) {
	p, err := planIngest(&req, seqs)
	if err != nil {
		return nil, err
	}
	return p.records, nil
}

type ingestPlan struct {
	records  []Record
	workItem *bot.WorkItem
	ingress  *bot.IngressRecord
}

func validateIngest(req *bot.IngestRequest) error {
	if (req.Route == nil) == (req.Ignore == nil) {
		return bot.Errorf(bot.EINVALID, "ingest: exactly one of route and ignore must be set")
	}
	if req.Route != nil && req.Route.Agent == "" {
		return bot.Errorf(bot.EINVALID, "ingest: route names no agent")
	}
	if req.Ignore != nil && req.Ignore.Code == "" {
		return bot.Errorf(bot.EINVALID, "ingest: ignore reason has no code")
	}
	return nil
}

func planIngest(req *bot.IngestRequest, seqs Seqs) (ingestPlan, error) {
	if err := validateIngest(req); err != nil {
		return ingestPlan{}, err
	}
	now := utc(req.Now)
	dedupUntil := req.DedupUntil
	if dedupUntil.IsZero() {
		dedupUntil = now.Add(bot.DefaultDedupWindow)
	}
	ev := &req.Event
	evRef := formatID(prefixEvent, seqs.Event)
	evValue, err := encodeEvent(ev)
	if err != nil {
		return ingestPlan{}, err
	}
	p := ingestPlan{records: make([]Record, 0, 9)}
	p.put(bucketEvents, seqKey(seqs.Event), evValue)

	var id string
	if req.Route != nil {
		id = formatID(prefixWorkItem, seqs.WorkItem)
		dispatchID := formatID(prefixDispatch, seqs.Dispatch)
		rec := workItemRecord{
			WorkItem: bot.WorkItem{
				ID: id, Thread: ev.Thread, Status: bot.StatusQueued, Route: *req.Route, ParentID: req.ParentID,
				EventRef: evRef, Source: ev.Source, Kind: ev.Kind, DeliveryID: ev.DeliveryID,
				Actor: ev.Actor, Text: ev.Text, SourceRef: ev.SourceRef,
				CreatedAt: now, UpdatedAt: now,
			},
			Dispatch: dispatchID,
		}
		d := bot.Dispatch{
			ID: dispatchID, WorkItemID: id, Agent: req.Route.Agent, Thread: ev.Thread,
			Status: bot.DispatchPending, CreatedAt: now, UpdatedAt: now,
		}
		wiValue, err := json.Marshal(&rec)
		if err != nil {
			return ingestPlan{}, fmt.Errorf("encode work item: %w", err)
		}
		dValue, err := json.Marshal(&d)
		if err != nil {
			return ingestPlan{}, fmt.Errorf("encode dispatch: %w", err)
		}
		p.put(bucketWorkItems, seqKey(seqs.WorkItem), wiValue)
		if tk := ev.Thread.Key(); tk != "" {
			p.put(bucketItemsByThread, indexKey(tk, seqs.WorkItem), nil)
		}
		p.put(bucketItemsByStatus, indexKey(string(bot.StatusQueued), seqs.WorkItem), nil)
		p.put(bucketDispatches, seqKey(seqs.Dispatch), dValue)
		unit := unitKey(ev.Thread, id)
		p.put(bucketPending, seqKey(seqs.Dispatch), pendingValue(unit, d.Agent))
		p.put(bucketPendingByThread, indexKey(unit, seqs.Dispatch), []byte(d.Agent))
		p.workItem = &rec.WorkItem
	} else {
		id = formatID(prefixIngress, seqs.Ingress)
		in := bot.IngressRecord{
			ID: id, Source: ev.Source, Kind: ev.Kind, DeliveryID: ev.DeliveryID, Actor: ev.Actor,
			Thread: ev.Thread, Reason: req.Ignore.Code, Detail: req.Ignore.Detail, EventRef: evRef, CreatedAt: now,
		}
		v, err := json.Marshal(&in)
		if err != nil {
			return ingestPlan{}, fmt.Errorf("encode ingress record: %w", err)
		}
		p.put(bucketIngress, seqKey(seqs.Ingress), v)
		p.put(bucketIngressBy, indexKey(in.Reason, seqs.Ingress), nil)
		p.ingress = &in
	}

	if key := ev.DedupKey(); key != "" {
		until := timeKey(dedupUntil)
		p.put(bucketDedup, []byte(key), append(until, id...))
		p.put(bucketDedupExpiry, append(until, key...), nil)
	}
	return p, nil
}

func (p *ingestPlan) put(bucket string, key, value []byte) {
	if value == nil {
		value = []byte{}
	}
	p.records = append(p.records, Record{Bucket: []byte(bucket), Key: key, Value: value})
}

// workItemRecord is a work item as stored: the work item plus the dispatch
// that currently carries it. A job only changes the status of work items
// whose current dispatch it runs, so a hand-off during a run is not undone
// when the run ends.
type workItemRecord struct {
	bot.WorkItem
	Dispatch string `json:"dispatch_id"`
}

// ID prefixes; the number is the record's bucket sequence.
const (
	prefixWorkItem = "wi_"
	prefixDispatch = "d_"
	prefixJob      = "job_"
	prefixIngress  = "in_"
	prefixEvent    = "ev_"
)

func formatID(prefix string, seq uint64) string {
	return prefix + strconv.FormatUint(seq, 10)
}

// parseID returns the sequence of an id with the given prefix.
func parseID(prefix, id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || rest == "" || rest[0] == '0' || rest[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
}

// indexKey is prefix + 0x00 + seq. Thread keys, statuses and reasons hold no
// NUL, so one prefix's keys never interleave with another's.
func indexKey(prefix string, seq uint64) []byte {
	k := make([]byte, 0, len(prefix)+9)
	k = append(k, prefix...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// unitKey is what one active job at a time is enforced over: the thread, or
// for an event without a thread its own work item, so thread-less work does
// not queue up behind unrelated thread-less work.
func unitKey(th bot.Thread, workItemID string) string {
	if k := th.Key(); k != "" {
		return k
	}
	return "\x00" + workItemID
}

func pendingValue(unit, agent string) []byte {
	v := make([]byte, 0, len(unit)+1+len(agent))
	v = append(v, unit...)
	v = append(v, 0)
	return append(v, agent...)
}

func splitPendingValue(v []byte) (unit, agent string) {
	i := strings.LastIndexByte(string(v), 0)
	if i < 0 {
		return string(v), ""
	}
	return string(v[:i]), string(v[i+1:])
}

// timeKey encodes t as 8-byte big-endian Unix nanoseconds, clamped to the
// representable range, so byte order is time order.
func timeKey(t time.Time) []byte {
	var n int64
	switch {
	case t.Before(time.Unix(0, 0)):
		n = 0
	case t.After(time.Unix(0, math.MaxInt64)):
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(n))
}

// utc drops the monotonic reading and the zone, so a time reads back from
// the file equal to what was written.
func utc(t time.Time) time.Time { return t.Round(0).UTC() }

func decodeTime(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()
}

// encodeEvent lays out an event as a 4-byte header length, the event's JSON
// (which leaves out Raw) and the raw payload as is: nothing scans or
// re-encodes the payload.
func encodeEvent(ev *bot.Event) ([]byte, error) {
	h, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	if uint64(len(h)) > math.MaxUint32 {
		return nil, bot.Errorf(bot.ETOOLARGE, "event header of %d bytes", len(h))
	}
	v := make([]byte, 4, 4+len(h)+len(ev.Raw))
	binary.BigEndian.PutUint32(v, uint32(len(h)))
	v = append(v, h...)
	return append(v, ev.Raw...), nil
}

func decodeEvent(v []byte) (*bot.Event, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("decode event: %d bytes", len(v))
	}
	n := binary.BigEndian.Uint32(v)
	if uint64(len(v)-4) < uint64(n) {
		return nil, fmt.Errorf("decode event: header of %d bytes in a %d-byte record", n, len(v))
	}
	var ev bot.Event
	if err := json.Unmarshal(v[4:4+n], &ev); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	if raw := v[4+n:]; len(raw) > 0 {
		ev.Raw = append([]byte(nil), raw...)
	}
	return &ev, nil
}
