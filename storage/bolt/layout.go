package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// SchemaVersion is the layout version this code writes, recorded in the meta
// bucket. A file with a newer version is refused rather than misread.
const SchemaVersion = 3

// Bucket names. Record keys named "seq" are the 8-byte big-endian bucket
// sequence of the record, so records append in creation order; index keys
// end in such a sequence so a prefix scan returns records in that order.
const (
	bucketMeta = "meta" // "schema_version" → decimal version

	// Intake. The raw payload is the large part of an event; it is written
	// once under a sequential key, apart from the event, so it is stored
	// as received (no copy on the way in) and retention can drop it alone.
	// Events written before it had a bucket of its own carry it after
	// their JSON.
	bucketEvents      = "events"       // seq → header length (4 bytes) + Event JSON [+ raw payload]
	bucketPayloads    = "payloads"     // event seq → raw payload
	bucketDedup       = "dedup"        // DedupKey → expiry (8 bytes) + id of the work item or ingress record
	bucketDedupExpiry = "dedup_expiry" // expiry (8 bytes) + DedupKey → ""
	bucketIngress     = "ingress"      // seq → IngressRecord JSON
	bucketIngressBy   = "ingress_by_reason"
	// bucketDeliveries remembers what each delivery made for as long as
	// its record lives, for explain: DedupKey → id of the work item or
	// ingress record. The dedup index forgets keys after the dedup window.
	bucketDeliveries = "deliveries"

	// Work items: seq → record JSON; by thread key / status + 0x00 + seq → "".
	bucketWorkItems     = "work_items"
	bucketItemsByThread = "work_items_by_thread"
	bucketItemsByStatus = "work_items_by_status"

	// The queue. Pending holds exactly the dispatches in status pending, so
	// a claim never looks at finished work.
	bucketDispatches      = "dispatches"                   // seq → Dispatch JSON
	bucketPending         = "dispatches_pending"           // seq → unit + 0x00 + agent
	bucketPendingByThread = "dispatches_pending_by_thread" // unit + 0x00 + seq → agent
	bucketJobs            = "jobs"                         // seq → Job JSON without its id lists
	bucketJobItems        = "job_items"                    // job seq → (dispatch seq, work item seq) pairs, 16 bytes each, for a job of more than one work item
	bucketJobsByItem      = "jobs_by_work_item"            // work item seq + job seq → ""
	// bucketActive holds the one running job of each thread with its lease,
	// so a claim reads no job record: unit → job seq (8) + lease expiry
	// (8, timeKey).
	bucketActive = "jobs_active"

	// The outbox: key → OutboxMessage JSON, with indexes by seq.
	bucketOutboxBySeq    = "outbox_by_seq" // seq → key
	bucketOutbox         = "outbox"
	bucketOutboxByThread = "outbox_by_thread" // thread key + 0x00 + seq → key
	// bucketOutboxPending holds the messages still to deliver, grouped by
	// destination so a destination that is down is skipped with one seek,
	// with what Due decides by so it reads only the messages it returns:
	// destination + 0x00 + seq → next attempt (8, timeKey) + work item id
	// (uvarint length + id) + key, while Pending() (see pendingOutbox).
	bucketOutboxPending = "outbox_pending_by_destination"
	bucketOutboxDead    = "outbox_dead" // seq → key

	// bucketCounters holds counts kept in the transactions that change
	// them, so gauges read a number instead of scanning: name → 8-byte
	// big-endian count (see counters.go).
	bucketCounters = "counters"

	bucketSchedules = "schedules" // name → last firing (8-byte Unix nanoseconds)
)

// Buckets returns the names of every top-level bucket the store uses, so a
// benchmark can lay out a raw bbolt file exactly like the store.
func Buckets() [][]byte {
	names := []string{
		bucketMeta,
		bucketEvents, bucketPayloads, bucketDedup, bucketDedupExpiry, bucketIngress, bucketIngressBy, bucketDeliveries,
		bucketWorkItems, bucketItemsByThread, bucketItemsByStatus,
		bucketDispatches, bucketPending, bucketPendingByThread, bucketJobs, bucketJobItems, bucketJobsByItem, bucketActive,
		bucketOutbox, bucketOutboxBySeq, bucketOutboxByThread, bucketOutboxPending, bucketOutboxDead,
		bucketCounters, bucketSchedules,
	}
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = []byte(n)
	}
	return out
}

// Record is one key/value pair in a top-level bucket.
type Record struct {
	Bucket     string
	Key, Value []byte
}

// Seqs are the bucket sequences an ingested event takes: Event always,
// WorkItem and Dispatch for a routed event (and Outbox when it gets a
// reaction), Ingress for an ignored one.
type Seqs struct {
	Event, WorkItem, Dispatch, Outbox, Ingress uint64
}

// IngestRecords returns the records Ingest writes for a new (not duplicate)
// event given the sequences it allocated. Ingest writes exactly these with
// Put, so a raw bbolt loop over them is the baseline of the store's intake.
// Counters are among them with the value Ingest adds to them; Ingest reads
// each and writes the sum.
func IngestRecords(req bot.IngestRequest, seqs Seqs) ([]Record, error) {
	p, err := planIngest(&req)
	if err != nil {
		return nil, err
	}
	records, counts, _ := p.records(seqs)
	for _, c := range counts {
		records = append(records, Record{Bucket: bucketCounters, Key: []byte(c.name), Value: encodeCount(c.delta)})
	}
	return records, nil
}

// ingestPlan is what Ingest writes for one new event, encoded before the
// write transaction. bbolt runs the functions of a batch one after another
// in its single writer, so every microsecond one of them spends is spent
// by every caller of the batch; encoding a message's text twice as JSON
// took longer than writing it. Only the sequences are left to the
// transaction, and with them the ids, which are spliced into JSON encoded
// with empty ids.
type ingestPlan struct {
	dedupKey string
	until    []byte // the dedup key's expiry, timeKey
	sigKey   string // the signature's dedup key, "" for an unsigned event
	sigUntil []byte // its expiry, timeKey
	event    []byte // the events value; it holds no id
	payload  []byte // the raw payload, as received

	// A routed event: the work item and its dispatch, with empty ids.
	workItem *bot.WorkItem
	item     template // id, event_ref, dispatch_id
	dispatch template // id, work_item_id
	agent    string
	thread   string // session key; "" for an event without a thread

	// Its reaction, when it gets one: the outbox message with an empty
	// key, seq and work item id.
	reaction    *bot.OutboxMessage
	reactionRec template // key, seq, work_item_id
	reactionKey string   // the key's end after the work item id, escaped for JSON
	destination string

	// An ignored event: the ingress record with empty ids.
	ingress    *bot.IngressRecord
	ingressRec template // id, event_ref
}

func planIngest(req *bot.IngestRequest) (*ingestPlan, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	now := utc(req.Now)
	dedupUntil := req.DedupUntil
	if dedupUntil.IsZero() {
		dedupUntil = now.Add(bot.DefaultDedupWindow)
	}
	ev := &req.Event
	event, err := encodeEvent(ev)
	if err != nil {
		return nil, err
	}
	p := &ingestPlan{dedupKey: ev.DedupKey(), until: timeKey(dedupUntil), event: event, payload: ev.Raw, thread: ev.Thread.Key()}
	if p.sigKey = ev.SignatureKey(); p.sigKey != "" {
		p.sigUntil = p.until
		if !req.SignedUntil.IsZero() {
			p.sigUntil = timeKey(req.SignedUntil)
		}
	}
	if req.Route != nil {
		rec := workItemRecord{WorkItem: bot.WorkItem{
			Thread: ev.Thread, Status: bot.StatusQueued, Route: *req.Route, ParentID: req.ParentID,
			Source: ev.Source, Kind: ev.Kind, DeliveryID: ev.DeliveryID,
			Actor: ev.Actor, Requester: ev.Requester, Text: ev.Text, SourceRef: ev.SourceRef,
			CreatedAt: now, UpdatedAt: now,
		}}
		d := bot.Dispatch{
			Agent: req.Route.Agent, Thread: ev.Thread, Status: bot.DispatchPending, CreatedAt: now, UpdatedAt: now,
		}
		if p.item, err = newTemplate("work item", &rec, "id", "event_ref", "dispatch_id"); err != nil {
			return nil, err
		}
		if p.dispatch, err = newTemplate("dispatch", &d, "id", "work_item_id"); err != nil {
			return nil, err
		}
		p.workItem, p.agent = &rec.WorkItem, d.Agent
		if req.Reaction != "" {
			m := bot.ReactionMessage(&rec.WorkItem, req.Reaction)
			m.Key = "" // ReactionKey of the work item's id, spliced in
			// work_item_id is left out of the JSON when empty: a NUL keeps
			// its place.
			m.WorkItemID = "\x00"
			m.Version, m.CreatedAt, m.UpdatedAt = 1, now, now
			if p.reactionRec, err = newTemplate("reaction", &m, "key", "seq", "work_item_id"); err != nil {
				return nil, err
			}
			escaped, err := marshal(bot.ReactionKey("", req.Reaction))
			if err != nil {
				return nil, fmt.Errorf("encode reaction: %w", err)
			}
			p.reaction, p.destination = &m, ev.Thread.Destination()
			p.reactionKey = string(escaped[1 : len(escaped)-1])
		}
		return p, nil
	}
	in := bot.IngressRecord{
		Source: ev.Source, Kind: ev.Kind, DeliveryID: ev.DeliveryID, Actor: ev.Actor,
		Thread: ev.Thread, Reason: req.Ignore.Code, Detail: req.Ignore.Detail, CreatedAt: now,
	}
	if p.ingressRec, err = newTemplate("ingress record", &in, "id", "event_ref"); err != nil {
		return nil, err
	}
	p.ingress = &in
	return p, nil
}

// records returns what the plan writes with the given sequences, the
// counters it changes, and the result Ingest answers with. bbolt holds on
// to the keys and values of a Put until the transaction commits and may run
// a batch function more than once, so everything holding a sequence is
// allocated afresh on each call; the event value, shared between calls, is
// never written to. It runs inside the group commit, where every caller of
// the batch waits for it, so its small keys share one allocation and a key
// written to several buckets is allocated once.
func (p *ingestPlan) records(seqs Seqs) ([]Record, []countDelta, bot.IngestResult) {
	records := make([]Record, 0, 15)
	var counts []countDelta
	put := func(bucket string, key, value []byte) {
		if value == nil {
			value = []byte{}
		}
		records = append(records, Record{Bucket: bucket, Key: key, Value: value})
	}
	// The keys: sequences, index keys of the thread, the unit and the
	// destination, and the dedup keys, at most this many bytes.
	keys := arena(make([]byte, 0, 6*8+4*(len(p.thread)+9)+len(p.destination)+9+3*(len(p.dedupKey)+8)+2*(len(p.sigKey)+8)+128))
	evRef := formatID(prefixEvent, seqs.Event)
	evKey := keys.seq(seqs.Event)
	put(bucketEvents, evKey, p.event)
	if len(p.payload) > 0 {
		put(bucketPayloads, evKey, p.payload)
	}

	var id string
	var res bot.IngestResult
	if p.workItem != nil {
		id = formatID(prefixWorkItem, seqs.WorkItem)
		dispatchID := formatID(prefixDispatch, seqs.Dispatch)
		put(bucketWorkItems, keys.seq(seqs.WorkItem), p.item.fill(id, evRef, dispatchID))
		if p.thread != "" {
			put(bucketItemsByThread, keys.index(p.thread, seqs.WorkItem), nil)
		}
		put(bucketItemsByStatus, keys.index(string(bot.StatusQueued), seqs.WorkItem), nil)
		put(bucketDispatches, keys.seq(seqs.Dispatch), p.dispatch.fill(dispatchID, id))
		unit := p.thread
		if unit == "" {
			unit = unitKey(p.workItem.Thread, id)
		}
		put(bucketPending, keys.seq(seqs.Dispatch), pendingValue(unit, p.agent))
		put(bucketPendingByThread, keys.index(unit, seqs.Dispatch), []byte(p.agent))
		counts = append(counts, countDelta{counterDispatchesPending, 1})
		wi := *p.workItem
		wi.ID, wi.EventRef = id, evRef
		res.WorkItem = &wi
		if p.reaction != nil {
			key := []byte(bot.ReactionKey(id, p.reaction.Reaction))
			put(bucketOutbox, key, p.reactionRec.fill(id+p.reactionKey, strconv.FormatUint(seqs.Outbox, 10), id))
			put(bucketOutboxBySeq, keys.seq(seqs.Outbox), key)
			put(bucketOutboxByThread, keys.index(p.thread, seqs.Outbox), key)
			put(bucketOutboxPending, keys.index(p.destination, seqs.Outbox), keys.pendingOutbox(p.reaction.NextAttemptAt, id, key))
			counts = append(counts, countDelta{counterOutboxPending, 1}, countDelta{pendingAt(p.destination), 1})
		}
	} else {
		id = formatID(prefixIngress, seqs.Ingress)
		put(bucketIngress, keys.seq(seqs.Ingress), p.ingressRec.fill(id, evRef))
		put(bucketIngressBy, keys.index(p.ingress.Reason, seqs.Ingress), nil)
		in := *p.ingress
		in.ID, in.EventRef = id, evRef
		res.Ingress = &in
	}

	if p.dedupKey != "" {
		dedupKey := keys.str(p.dedupKey)
		put(bucketDeliveries, dedupKey, []byte(id))
		put(bucketDedup, dedupKey, keys.join(p.until, id))
		put(bucketDedupExpiry, keys.join(p.until, p.dedupKey), nil)
	}
	if p.sigKey != "" {
		// Not in the delivery index: a signature is no delivery id.
		put(bucketDedup, keys.str(p.sigKey), keys.join(p.sigUntil, id))
		put(bucketDedupExpiry, keys.join(p.sigUntil, p.sigKey), nil)
	}
	return records, counts, res
}

// arena hands out small byte slices cut from one buffer. A slice it has
// handed out is never written again: appending past the buffer's capacity
// moves on to a new one and leaves the old where it is.
type arena []byte

// take returns the bytes appended since len n, capped so that nothing
// appended to the slice can reach the arena's next ones.
func (a *arena) take(n int) []byte { return (*a)[n:len(*a):len(*a)] }

func (a *arena) seq(seq uint64) []byte {
	n := len(*a)
	*a = binary.BigEndian.AppendUint64(*a, seq)
	return a.take(n)
}

// index is indexKey: prefix + 0x00 + seq.
func (a *arena) index(prefix string, seq uint64) []byte {
	n := len(*a)
	*a = append(append(*a, prefix...), 0)
	*a = binary.BigEndian.AppendUint64(*a, seq)
	return a.take(n)
}

// pendingOutbox is the pending index's value of a message.
func (a *arena) pendingOutbox(next time.Time, workItem string, key []byte) []byte {
	n := len(*a)
	*a = appendPendingOutbox(*a, next, workItem, key)
	return a.take(n)
}

func (a *arena) str(s string) []byte {
	n := len(*a)
	*a = append(*a, s...)
	return a.take(n)
}

func (a *arena) join(b []byte, s string) []byte {
	n := len(*a)
	*a = append(append(*a, b...), s...)
	return a.take(n)
}

// template is a record's JSON encoded with empty ids, and where each id
// goes.
type template struct {
	json  []byte
	holes []hole // ascending
}

// hole is where an id goes: between the quotes of "", in place of the 0 of
// a number member (skip 1), or in place of the \u0000 that holds the place
// of a member left out when empty (skip 6).
type hole struct {
	at, skip int
}

// newTemplate encodes v, whose fields named in ids are empty strings, zero
// numbers or, where an empty one would be left out, "\x00", and finds where
// their values go, each after the one
// before. A key is found only where it is a key: a quote that follows '{'
// or ',' opens a member name, never text inside a string, where every
// quote is escaped.
func newTemplate(what string, v any, ids ...string) (template, error) {
	b, err := marshal(v)
	if err != nil {
		return template{}, fmt.Errorf("encode %s: %w", what, err)
	}
	t := template{json: b, holes: make([]hole, 0, len(ids))}
	from := 0
	for _, name := range ids {
		found := false
		for _, member := range []struct {
			text string
			skip int
		}{{`"` + name + `":""`, 0}, {`"` + name + `":0`, 1}, {`"` + name + `":"\u0000"`, 6}} {
			for i := from; !found; {
				j := bytes.Index(b[i:], []byte(member.text))
				if j < 0 {
					break
				}
				i += j
				end := i + len(member.text)
				quoted := member.text[len(member.text)-1] == '"'
				if i > 0 && (b[i-1] == '{' || b[i-1] == ',') && (quoted || end < len(b) && (b[end] == ',' || b[end] == '}')) {
					at := end - member.skip // the 0 of a number
					if quoted {
						at = end - 1 - member.skip // inside the quotes
					}
					t.holes = append(t.holes, hole{at: at, skip: member.skip})
					from, found = end, true
				}
				i++
			}
			if found {
				break
			}
		}
		if !found {
			return template{}, fmt.Errorf("encode %s: no empty member %q in its JSON", what, name)
		}
	}
	return t, nil
}

// fill returns the JSON with ids[i] at holes[i]; ids are escaped for JSON
// already (a prefix and a decimal number need no escaping).
func (t template) fill(ids ...string) []byte {
	n := len(t.json)
	for _, id := range ids {
		n += len(id)
	}
	out := make([]byte, 0, n)
	prev := 0
	for i, h := range t.holes {
		out = append(out, t.json[prev:h.at]...)
		out = append(out, ids[i]...)
		prev = h.at + h.skip
	}
	return append(out, t.json[prev:]...)
}

// workItemRecord is a work item as stored: the work item plus the dispatch
// that currently carries it. A job only changes the status of work items
// whose current dispatch it runs, so a hand-off during a run is not undone
// when the run ends.
type workItemRecord struct {
	bot.WorkItem
	Dispatch string `json:"dispatch_id"`
}

// UnmarshalJSON reads a stored work item. Records written before routes
// had a typed kind carry only the reason; their kind is derived from the
// reason's first word here, the one place that reads a reason, so every
// reader sees a kind. Records are not rewritten: the derivation is exact
// for every reason those versions wrote.
func (r *workItemRecord) UnmarshalJSON(b []byte) error {
	type plain workItemRecord
	if err := unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	if r.Route.Kind == "" {
		r.Route.Kind = legacyRouteKind(r.Route.Reason)
	}
	return nil
}

// legacyRouteKind is the kind of a route stored without one, from the
// reasons earlier versions wrote: "mention @x", "command /x", `rule "x" …`,
// `content: keyword "x"`, "default", `handoff from @x…`, `handoff: @x owns
// this thread …` and `schedule "x"`.
func legacyRouteKind(reason string) bot.RouteKind {
	word, _, _ := strings.Cut(reason, " ")
	switch strings.TrimSuffix(word, ":") {
	case "mention":
		return bot.RouteMention
	case "command":
		return bot.RouteCommand
	case "rule":
		return bot.RouteRule
	case "content":
		return bot.RouteKeyword
	case "handoff":
		return bot.RouteHandoff
	case "schedule":
		return bot.RouteSchedule
	}
	return bot.RouteDefault
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

// dispatchUnit is the unit of d: its lane, or its thread's.
func dispatchUnit(d *bot.Dispatch) string {
	if d.Lane != "" {
		return d.Lane
	}
	return unitKey(d.Thread, d.WorkItemID)
}

// jobUnit is the unit a job holds while it runs.
func jobUnit(j *bot.Job) string {
	if j.Lane != "" {
		return j.Lane
	}
	return unitKey(j.Thread, firstOf(j.WorkItemIDs))
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
func timeKey(t time.Time) []byte { return appendTimeKey(make([]byte, 0, 8), t) }

// appendTimeKey appends timeKey(t) to b.
func appendTimeKey(b []byte, t time.Time) []byte {
	var n int64
	switch {
	case t.Before(time.Unix(0, 0)):
		n = 0
	case t.After(time.Unix(0, math.MaxInt64)):
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

// utc drops the monotonic reading and the zone, so a time reads back from
// the file equal to what was written.
func utc(t time.Time) time.Time { return t.Round(0).UTC() }

func decodeTime(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()
}

// encodeEvent lays out an event as a 4-byte header length and the event's
// JSON, which leaves out Raw: the payload is stored as is, apart.
func encodeEvent(ev *bot.Event) ([]byte, error) {
	h, err := marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	if uint64(len(h)) > math.MaxUint32 {
		return nil, bot.Errorf(bot.ETOOLARGE, "event header of %d bytes", len(h))
	}
	v := make([]byte, 4, 4+len(h))
	binary.BigEndian.PutUint32(v, uint32(len(h)))
	return append(v, h...), nil
}

// decodeEvent reads an events value and the payload stored apart (nil when
// there is none: the event had none, retention dropped it, or it is an
// older record carrying it after its JSON).
func decodeEvent(v, payload []byte) (*bot.Event, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("decode event: %d bytes", len(v))
	}
	n := binary.BigEndian.Uint32(v)
	if uint64(len(v)-4) < uint64(n) {
		return nil, fmt.Errorf("decode event: header of %d bytes in a %d-byte record", n, len(v))
	}
	var ev bot.Event
	if err := unmarshal(v[4:4+n], &ev); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	if raw := v[4+n:]; len(raw) > 0 {
		payload = raw
	}
	if len(payload) > 0 {
		ev.Raw = append([]byte(nil), payload...)
	}
	return &ev, nil
}
