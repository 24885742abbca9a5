package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
)

// notifyChannel is the one LISTEN/NOTIFY channel; a notification's payload
// is its topic, a colon and the topic's payload.
const notifyChannel = "switchyard"

// Ingest writes an event in one statement: the dedup key first (the primary
// key makes a concurrent delivery of the same event wait and then find it),
// then, only when it was free, the signature's key (s), and, only when that
// was free too, the payload, the work item with its pending dispatch (or
// the ingress record), the delivery index and a notification that wakes
// idle workers on every replica. Events that arrive together share a round
// trip and a commit (the group commit).
const (
	ingestRouted = `WITH ids AS MATERIALIZED (
	SELECT nextval('events_seq_seq') AS ev, nextval('work_items_seq_seq') AS wi, nextval('dispatches_seq_seq') AS dp
), %sd AS (%s), s AS (%s), e AS (
	INSERT INTO events (seq, header, raw) SELECT ids.ev, $4, NULLIF($5::bytea, ''::bytea) FROM ids, s RETURNING 1
), w AS (
	INSERT INTO work_items (seq, event_seq, thread, status, dispatch_seq, doc)
	SELECT ids.wi, ids.ev, $6, 'queued', ids.dp, $7 FROM ids, s RETURNING 1
), p AS (
	INSERT INTO dispatches (seq, work_item_seq, unit, agent, status, doc)
	SELECT ids.dp, ids.wi, CASE WHEN $6::text = '' THEN '!wi_' || ids.wi ELSE $6::text END, $8, 'pending', $9 FROM ids, s RETURNING 1
)%s%s, n AS (
	SELECT pg_notify('` + notifyChannel + `', '` + bot.TopicWork + `:') FROM s%s
)
SELECT ids.ev, ids.wi, ids.dp, EXISTS (SELECT 1 FROM s), (SELECT count(*) FROM n), %s FROM ids`

	ingestIgnored = `WITH ids AS MATERIALIZED (
	SELECT nextval('events_seq_seq') AS ev, nextval('ingress_seq_seq') AS inn
), %sd AS (%s), s AS (%s), e AS (
	INSERT INTO events (seq, header, raw) SELECT ids.ev, $4, NULLIF($5::bytea, ''::bytea) FROM ids, s RETURNING 1
), i AS (
	INSERT INTO ingress (seq, event_seq, reason, doc) SELECT ids.inn, ids.ev, $6, $7 FROM ids, s RETURNING 1
)%s
SELECT ids.ev, ids.inn, 0::bigint, EXISTS (SELECT 1 FROM s), 0::bigint, %s FROM ids`

	// The dedup key of an event that has one: taken unless it is known
	// and not expired at now (or, %[2]s, a signed event's signature is).
	// Its ref, %[1]s, is what the event makes.
	dedupTake = `INSERT INTO dedup AS x (key, until, ref) SELECT $1, $2::bigint, %[1]s FROM ids%[2]s
	ON CONFLICT (key) DO UPDATE SET until = EXCLUDED.until, ref = EXCLUDED.ref WHERE x.until < $3::bigint
	RETURNING 1`
	// An event without a dedup key is never a duplicate; $1 to $3 are
	// then unused, but named so their types are known.
	dedupNone = `SELECT $1::text AS key, $2::bigint AS until, $3::bigint AS now`
	// What a signed event's statement knows before it writes: whether its
	// dedup key ($1) and its signature's ($%[1]d) are known and not expired
	// at now. A request replayed under a new delivery id then takes no
	// key at all, as on bbolt.
	sigSeen = `k AS (SELECT EXISTS (SELECT 1 FROM dedup WHERE key = $1 AND until >= $3::bigint) AS seen,
	EXISTS (SELECT 1 FROM dedup WHERE key = $%[1]d::text AND until >= $3::bigint) AS signed), `
	sigUnseen = `, k WHERE NOT k.signed`
	// A replay: the signature was known and the dedup key was not, or it
	// was taken by a replay whose original was not committed yet when the
	// statement began.
	sigReplayed = `(SELECT NOT k.seen AND k.signed FROM k) OR EXISTS (SELECT 1 FROM d) AND NOT EXISTS (SELECT 1 FROM s)`
	// The signature's key of a signed event ($%[2]d, until $%[3]d), taken
	// once the dedup key was, unless it is known and not expired.
	sigTake = `INSERT INTO dedup AS x (key, until, ref) SELECT $%[2]d::text, $%[3]d::bigint, %[1]s FROM ids, d
	ON CONFLICT (key) DO UPDATE SET until = EXCLUDED.until, ref = EXCLUDED.ref WHERE x.until < $3::bigint
	RETURNING 1`
	sigNone = `SELECT 1 FROM d`
	// The reaction of a routed event: its outbox message, whose key, work
	// item and sequence are spliced into the document made beforehand.
	reaction = `, r AS (
	INSERT INTO outbox (key, seq, thread, destination, work_item, pending, dead, next_attempt, doc)
	SELECT 'wi_' || ids.wi || $10::text, o.seq, $6, $11, 'wi_' || ids.wi, true, false, $12::bigint,
		convert_to(jsonb_set(jsonb_set(jsonb_set($13::jsonb, '{key}', to_jsonb('wi_' || ids.wi || $10::text)),
			'{work_item_id}', to_jsonb('wi_' || ids.wi)), '{seq}', to_jsonb(o.seq))::text, 'UTF8')
	FROM ids, s, (SELECT nextval('outbox_seq') AS seq) o RETURNING 1
)`
	reactionNotify = `
	UNION ALL SELECT pg_notify('` + notifyChannel + `', '` + bot.TopicOutbox + `:') FROM r`
	delivery = `, l AS (
	INSERT INTO deliveries (key, ref) SELECT $1, %s FROM ids, s
	ON CONFLICT (key) DO UPDATE SET ref = EXCLUDED.ref RETURNING 1
)`
)

// ingestShape is what an event's statement depends on: routed or not, with
// a dedup key or not, with a reaction or not, signed or not.
type ingestShape struct{ routed, keyed, reaction, signed bool }

// ingestSQL is the statement of each shape.
var ingestSQL = ingestStatements()

func ingestStatements() map[ingestShape]string {
	out := map[ingestShape]string{}
	for _, sh := range []ingestShape{
		{true, true, false, false}, {true, false, false, false}, {true, true, true, false}, {true, false, true, false},
		{false, true, false, false}, {false, false, false, false},
	} {
		for _, signed := range []bool{false, true} {
			sh.signed = signed
			out[sh] = ingestStatement(sh)
		}
	}
	return out
}

func ingestStatement(sh ingestShape) string {
	// What the event makes, and the parameter after the last its statement
	// uses, where the signature's key and expiry go.
	made, next := "'in_' || ids.inn", 8
	if sh.routed {
		made, next = "'wi_' || ids.wi", 10
		if sh.reaction {
			next = 14
		}
	}
	k, d, s, l, replayed, unseen := "", dedupNone, sigNone, "", "false", ""
	if sh.signed {
		k, s, replayed, unseen = fmt.Sprintf(sigSeen, next), fmt.Sprintf(sigTake, made, next, next+1), sigReplayed, sigUnseen
	}
	if sh.keyed {
		d, l = fmt.Sprintf(dedupTake, made, unseen), fmt.Sprintf(delivery, made)
	}
	if !sh.routed {
		return fmt.Sprintf(ingestIgnored, k, d, s, l, replayed)
	}
	r, rn := "", ""
	if sh.reaction {
		r, rn = reaction, reactionNotify
	}
	return fmt.Sprintf(ingestRouted, k, d, s, l, r, rn, replayed)
}

// ID prefixes, as the bbolt store's: the number is the row's sequence.
const (
	prefixWorkItem = "wi_"
	prefixDispatch = "d_"
	prefixJob      = "job_"
	prefixIngress  = "in_"
	prefixEvent    = "ev_"
)

func formatID(prefix string, seq int64) string { return prefix + strconv.FormatInt(seq, 10) }

func parseID(prefix, id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || rest == "" || rest[0] == '0' || rest[0] == '+' || rest[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// unit is what one running job at a time is held over: the thread, or for
// an event without a thread its own work item. Thread keys start with
// their source and a colon, so "!" cannot be one.
func unit(th bot.Thread, workItemID string) string {
	if k := th.Key(); k != "" {
		return k
	}
	return "!" + workItemID
}

// nanos is t as the Unix nanoseconds a bigint column keeps, clamped to
// what they can say (1970 to 2262), as bbolt's keys are: a time outside
// would wrap around (the zero time is 0).
func nanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func utc(t time.Time) time.Time { return t.Round(0).UTC() }

// ingestPlan is one event's statement and what its result is made of.
type ingestPlan struct {
	sql      string
	args     []any
	key, sig string // dedup key and signature key, each "" when absent
	workItem *bot.WorkItem
	ingress  *bot.IngressRecord
}

func planIngest(req *bot.IngestRequest) (*ingestPlan, error) {
	now := utc(req.Now)
	until := req.DedupUntil
	if until.IsZero() {
		until = now.Add(bot.DefaultDedupWindow)
	}
	ev := &req.Event
	header, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	key, sig := ev.DedupKey(), ev.SignatureKey()
	p := &ingestPlan{key: key, sig: sig, sql: ingestSQL[ingestShape{req.Route != nil, key != "", req.Reaction != "", sig != ""}]}
	sigUntil := until
	if !req.SignedUntil.IsZero() {
		sigUntil = req.SignedUntil
	}
	raw := ev.Raw
	if raw == nil {
		raw = []byte{}
	}
	args := []any{key, nanos(utc(until)), nanos(now), header, raw}
	if req.Route != nil {
		wi := bot.WorkItem{
			Thread: ev.Thread, Status: bot.StatusQueued, Route: *req.Route, ParentID: req.ParentID,
			Source: ev.Source, Kind: ev.Kind, DeliveryID: ev.DeliveryID,
			Actor: ev.Actor, Requester: ev.Requester, Text: ev.Text, SourceRef: ev.SourceRef,
			CreatedAt: now, UpdatedAt: now,
		}
		d := bot.Dispatch{Agent: req.Route.Agent, Thread: ev.Thread, Status: bot.DispatchPending, CreatedAt: now, UpdatedAt: now}
		wiDoc, err := json.Marshal(wi)
		if err != nil {
			return nil, fmt.Errorf("encode work item: %w", err)
		}
		dDoc, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode dispatch: %w", err)
		}
		p.args = append(args, ev.Thread.Key(), wiDoc, d.Agent, dDoc)
		if req.Reaction != "" {
			m := bot.ReactionMessage(&wi, req.Reaction)
			m.Version, m.CreatedAt, m.UpdatedAt = 1, now, now
			mDoc, err := json.Marshal(m)
			if err != nil {
				return nil, fmt.Errorf("encode reaction: %w", err)
			}
			p.args = append(p.args, bot.ReactionKey("", req.Reaction), ev.Thread.Destination(), nanos(m.NextAttemptAt), mDoc)
		}
		p.workItem = &wi
		p.signed(sigUntil)
		return p, nil
	}
	in := bot.IngressRecord{
		Source: ev.Source, Kind: ev.Kind, DeliveryID: ev.DeliveryID, Actor: ev.Actor,
		Thread: ev.Thread, Reason: req.Ignore.Code, Detail: req.Ignore.Detail, CreatedAt: now,
	}
	inDoc, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode ingress record: %w", err)
	}
	p.args = append(args, in.Reason, inDoc)
	p.ingress = &in
	p.signed(sigUntil)
	return p, nil
}

// signed adds the signature's key and expiry of a signed event to the
// statement's parameters, last.
func (p *ingestPlan) signed(until time.Time) {
	if p.sig != "" {
		p.args = append(p.args, p.sig, nanos(utc(until)))
	}
}

// ingestRow is what the statement answers.
type ingestRow struct {
	ev, rec, dispatch int64
	stored            bool
	notified          int64
	replayed          bool // the dedup key was free, the signature's was not
}

func (r *ingestRow) scan(row pgx.Row) error {
	return row.Scan(&r.ev, &r.rec, &r.dispatch, &r.stored, &r.notified, &r.replayed)
}

// Ingest persists an event: the payload, the dedup key, and the work item
// with its pending dispatch or the ingress record, in one transaction. A
// known, unexpired dedup key writes nothing and returns the original.
func (s *Store) Ingest(ctx context.Context, req bot.IngestRequest) (bot.IngestResult, error) {
	if err := s.open(); err != nil {
		return bot.IngestResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return bot.IngestResult{}, err
	}
	if err := req.Validate(); err != nil {
		return bot.IngestResult{}, err
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	req.Now = utc(req.Now)
	p, err := planIngest(&req)
	if err != nil {
		return bot.IngestResult{}, err
	}
	row, err := s.batch.do(ctx, p)
	if err != nil {
		return bot.IngestResult{}, s.wrap("ingest", err)
	}
	if !row.stored {
		res, err := s.duplicate(ctx, p, row.replayed)
		return res, s.wrap("ingest", err)
	}
	evRef := formatID(prefixEvent, row.ev)
	if p.workItem != nil {
		wi := *p.workItem
		wi.ID, wi.EventRef = formatID(prefixWorkItem, row.rec), evRef
		return bot.IngestResult{WorkItem: &wi}, nil
	}
	in := *p.ingress
	in.ID, in.EventRef = formatID(prefixIngress, row.rec), evRef
	return bot.IngestResult{Ingress: &in}, nil
}

// Duplicate implements bot.IngestStore.
func (s *Store) Duplicate(ctx context.Context, ev *bot.Event, now time.Time) (bot.IngestResult, error) {
	if err := s.open(); err != nil {
		return bot.IngestResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return bot.IngestResult{}, err
	}
	p := &ingestPlan{key: ev.DedupKey(), sig: ev.SignatureKey()}
	if p.key == "" && p.sig == "" {
		return bot.IngestResult{}, nil
	}
	var seen, signed bool
	err := s.pool.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM dedup WHERE key = $1 AND $1 <> '' AND until >= $3),
		EXISTS (SELECT 1 FROM dedup WHERE key = $2 AND $2 <> '' AND until >= $3)`,
		p.key, p.sig, nanos(utc(now))).Scan(&seen, &signed)
	if err != nil {
		return bot.IngestResult{}, s.wrap("look up a duplicate", err)
	}
	if !seen && !signed {
		return bot.IngestResult{}, nil
	}
	res, err := s.duplicate(ctx, p, !seen)
	return res, s.wrap("look up a duplicate", err)
}

// duplicate returns the original of an event the statement did not store:
// by its dedup key, or by its signature when it was replayed, or when its
// dedup key was taken by a replay whose original was not yet committed.
func (s *Store) duplicate(ctx context.Context, p *ingestPlan, replayed bool) (bot.IngestResult, error) {
	if !replayed {
		res, err := s.original(ctx, p.key)
		if p.sig == "" || !errors.Is(err, pgx.ErrNoRows) && bot.ErrorCode(err) != bot.ENOTFOUND {
			return res, err
		}
	}
	res, err := s.original(ctx, p.sig)
	if errors.Is(err, pgx.ErrNoRows) || bot.ErrorCode(err) == bot.ENOTFOUND {
		// Retention dropped what the request made; it is a replay all the
		// same.
		res, err = bot.IngestResult{Duplicate: true}, nil
	}
	res.Replayed = true
	return res, err
}

// original returns what the first delivery of a dedup key made.
func (s *Store) original(ctx context.Context, key string) (bot.IngestResult, error) {
	var ref string
	if err := s.pool.QueryRow(ctx, "SELECT ref FROM dedup WHERE key = $1", key).Scan(&ref); err != nil {
		return bot.IngestResult{}, fmt.Errorf("find the original of %s: %w", key, err)
	}
	res, err := s.made(ctx, s.pool, ref)
	res.Duplicate = true
	return res, err
}

// made returns the work item or ingress record of id.
func (s *Store) made(ctx context.Context, q querier, id string) (bot.IngestResult, error) {
	if seq, ok := parseID(prefixIngress, id); ok {
		in, err := getIngress(ctx, q, seq)
		if err != nil {
			return bot.IngestResult{}, err
		}
		return bot.IngestResult{Ingress: in}, nil
	}
	wi, err := getWorkItem(ctx, q, id, false)
	if err != nil {
		return bot.IngestResult{}, err
	}
	return bot.IngestResult{WorkItem: &wi.WorkItem}, nil
}

// batcher is Ingest's group commit: events that arrive within delay of
// each other, up to size, go to the server in one round trip and commit
// together. Should the batch fail, each of its events is written on its
// own, so one event's problem is its own.
type batcher struct {
	s     *Store
	size  int
	delay time.Duration

	mu      sync.Mutex
	pending []*batchItem
	timer   *time.Timer
	wg      sync.WaitGroup
}

type batchItem struct {
	plan *ingestPlan
	done chan batchResult
}

type batchResult struct {
	row ingestRow
	err error
}

func newBatcher(s *Store, size int, delay time.Duration) *batcher {
	return &batcher{s: s, size: size, delay: delay}
}

// batchTimeout bounds one batch: its callers each wait at most until their
// own context ends.
const batchTimeout = 30 * time.Second

func (b *batcher) do(ctx context.Context, p *ingestPlan) (ingestRow, error) {
	if b.size <= 1 {
		var row ingestRow
		err := row.scan(b.s.pool.QueryRow(ctx, p.sql, p.args...))
		return row, err
	}
	it := &batchItem{plan: p, done: make(chan batchResult, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, it)
	switch {
	case len(b.pending) >= b.size:
		b.flushLocked()
	case len(b.pending) == 1:
		b.timer = time.AfterFunc(b.delay, b.flush)
	}
	b.mu.Unlock()
	select {
	case r := <-it.done:
		return r.row, r.err
	case <-ctx.Done():
		return ingestRow{}, ctx.Err()
	}
}

func (b *batcher) flush() {
	b.mu.Lock()
	b.flushLocked()
	b.mu.Unlock()
}

func (b *batcher) flushLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	items := b.pending
	b.pending = nil
	if len(items) == 0 {
		return
	}
	b.wg.Go(func() { b.send(items) })
}

func (b *batcher) send(items []*batchItem) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if len(items) > 1 {
		var batch pgx.Batch
		for _, it := range items {
			batch.Queue(it.plan.sql, it.plan.args...)
		}
		// One Sync for the whole batch: one implicit transaction, one
		// commit.
		br := b.s.pool.SendBatch(ctx, &batch)
		rows := make([]ingestRow, len(items))
		var err error
		for i := range items {
			if err = rows[i].scan(br.QueryRow()); err != nil {
				break
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			for i, it := range items {
				it.done <- batchResult{row: rows[i]}
			}
			return
		}
		if !retryAlone(err) {
			for _, it := range items {
				it.done <- batchResult{err: err}
			}
			return
		}
	}
	// Alone: one event, or a batch that failed as a whole.
	for _, it := range items {
		var row ingestRow
		err := row.scan(b.s.pool.QueryRow(ctx, it.plan.sql, it.plan.args...))
		it.done <- batchResult{row: row, err: err}
	}
}

// retryAlone reports whether a failed batch is worth writing event by
// event: not when the database cannot be reached at all.
func retryAlone(err error) bool {
	return !isNetError(err) && !errors.Is(err, context.DeadlineExceeded)
}

func (b *batcher) stop() {
	b.flush()
	b.wg.Wait()
}

// ExpireDedup forgets dedup keys whose window ended before now, at most
// 1,000 per statement so a large sweep does not hold locks long.
func (s *Store) ExpireDedup(ctx context.Context, now time.Time) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		tag, err := s.pool.Exec(ctx, `DELETE FROM dedup WHERE key IN (
			SELECT key FROM dedup WHERE until < $1 ORDER BY until LIMIT 1000 FOR UPDATE SKIP LOCKED)`, nanos(now))
		if err != nil {
			return total, s.wrap("expire dedup keys", err)
		}
		n := int(tag.RowsAffected())
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}

// GetEvent returns a stored event with its raw payload.
func (s *Store) GetEvent(ctx context.Context, ref string) (*bot.Event, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	seq, ok := parseID(prefixEvent, ref)
	if !ok {
		return nil, bot.Errorf(bot.ENOTFOUND, "event %q not found", ref)
	}
	var header, raw []byte
	err := s.pool.QueryRow(ctx, "SELECT header, raw FROM events WHERE seq = $1", seq).Scan(&header, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, bot.Errorf(bot.ENOTFOUND, "event %q not found", ref)
	}
	if err != nil {
		return nil, s.wrap("get event", err)
	}
	var ev bot.Event
	if err := json.Unmarshal(header, &ev); err != nil {
		return nil, fmt.Errorf("decode event %s: %w", ref, err)
	}
	if len(raw) > 0 {
		ev.Raw = raw
	}
	return &ev, nil
}

// FindDelivery returns what the delivery with the id made.
func (s *Store) FindDelivery(ctx context.Context, source, deliveryID string) (bot.IngestResult, error) {
	if err := s.open(); err != nil {
		return bot.IngestResult{}, err
	}
	if deliveryID == "" {
		return bot.IngestResult{}, bot.Errorf(bot.EINVALID, "find delivery: no delivery id")
	}
	sources := []string{source}
	if source == "" {
		sources = []string{bot.SourceGitHub, bot.SourceSlack, bot.SourceLocal, bot.SourceSchedule}
	}
	var (
		res   bot.IngestResult
		found []string
	)
	for _, src := range sources {
		key := (&bot.Event{Source: src, DeliveryID: deliveryID}).DedupKey()
		if !storable(key) {
			continue
		}
		var ref string
		err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT ref FROM deliveries WHERE key = $1), (SELECT ref FROM dedup WHERE key = $1), '')`, key).Scan(&ref)
		if err != nil {
			return bot.IngestResult{}, s.wrap("find delivery", err)
		}
		if ref == "" {
			continue
		}
		r, err := s.made(ctx, s.pool, ref)
		if err != nil {
			return bot.IngestResult{}, s.wrap("find delivery", err)
		}
		found = append(found, src)
		res = r
	}
	switch len(found) {
	case 0:
		where := "any source"
		if source != "" {
			where = source
		}
		return bot.IngestResult{}, bot.Errorf(bot.ENOTFOUND, "no delivery %q from %s", deliveryID, where)
	case 1:
		return res, nil
	}
	return bot.IngestResult{}, bot.Errorf(bot.EINVALID, "delivery %q came from %s: name the source", deliveryID, strings.Join(found, " and "))
}
