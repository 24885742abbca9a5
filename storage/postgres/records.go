package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// The records beside the queue: schedules, the audit log, conversations
// and transcripts, GitHub installations, packages and skill settings, and
// approvals.

var _ skills.Store = (*Store)(nil)

// LastFired returns when the named schedule last fired, in UTC.
func (s *Store) LastFired(ctx context.Context, name string) (time.Time, bool, error) {
	if err := s.open(); err != nil {
		return time.Time{}, false, err
	}
	if !storable(name) {
		return time.Time{}, false, nil
	}
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT last_fired FROM schedules WHERE name = $1", name).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, s.wrap("last firing of schedule", err)
	}
	return fromNanos(n), true, nil
}

// SetLastFired records when the named schedule fired.
func (s *Store) SetLastFired(ctx context.Context, name string, at time.Time) error {
	if err := s.open(); err != nil {
		return err
	}
	if name == "" {
		return bot.Errorf(bot.EINVALID, "schedule without a name")
	}
	if err := bot.ValidText("schedule name", name); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO schedules (name, last_fired) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET last_fired = EXCLUDED.last_fired`, name, nanos(at))
	return s.wrap("record schedule firing", err)
}

const (
	defaultAuditLimit   = 100
	maxAuditLimit       = 10_000
	maxAuditDecisionLen = 64
)

func validAuditDecision(decision string) error {
	if decision == "" || len(decision) > maxAuditDecisionLen || strings.ContainsRune(decision, 0) {
		return bot.Errorf(bot.EINVALID, "audit decision %q: want 1-%d characters without NUL", decision, maxAuditDecisionLen)
	}
	return nil
}

// AppendAudit adds one audit document at the given time under decision.
func (s *Store) AppendAudit(ctx context.Context, at time.Time, decision string, doc []byte) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := validAuditDecision(decision); err != nil {
		return err
	}
	if len(doc) == 0 {
		return bot.Errorf(bot.EINVALID, "audit record: empty document")
	}
	_, err := s.pool.Exec(ctx, "INSERT INTO audit (at, decision, doc) VALUES ($1, $2, $3)", nanos(at), decision, doc)
	return s.wrap("append audit record", err)
}

// ListAudit returns a page of the documents recorded at or after since, of
// the decision ("": any), newest first, and the cursor of the next page.
func (s *Store) ListAudit(ctx context.Context, since time.Time, decision string, limit int, cursor string) ([][]byte, string, error) {
	if err := s.open(); err != nil {
		return nil, "", err
	}
	if decision != "" {
		if err := validAuditDecision(decision); err != nil {
			return nil, "", err
		}
	}
	switch {
	case limit <= 0:
		limit = defaultAuditLimit
	case limit > maxAuditLimit:
		limit = maxAuditLimit
	}
	keys, err := decodeCursor(cursorAudit, cursor, 2)
	if err != nil {
		return nil, "", err
	}
	beforeAt, beforeSeq := int64(math.MaxInt64), int64(math.MaxInt64)
	if keys != nil {
		beforeAt, beforeSeq = keys[0], keys[1]
	}
	var floor int64
	if !since.IsZero() {
		floor = nanos(since)
	}
	rows, err := s.pool.Query(ctx, `SELECT at, seq, doc FROM audit
		WHERE (at, seq) < ($1, $2) AND at >= $3 AND ($4 = '' OR decision = $4)
		ORDER BY at DESC, seq DESC LIMIT $5`, beforeAt, beforeSeq, floor, decision, limit+1)
	if err != nil {
		return nil, "", s.wrap("list audit records", err)
	}
	defer rows.Close()
	var (
		out          [][]byte
		lastAt, last int64
	)
	for rows.Next() {
		var (
			at, seq int64
			doc     []byte
		)
		if err := rows.Scan(&at, &seq, &doc); err != nil {
			return nil, "", s.wrap("list audit records", err)
		}
		if len(out) == limit {
			return out, encodeCursor(cursorAudit, lastAt, last), nil
		}
		out = append(out, doc)
		lastAt, last = at, seq
	}
	return out, "", s.wrap("list audit records", rows.Err())
}

func validAgentKeys(what, outer, inner string) error {
	if outer == "" || inner == "" {
		return bot.Errorf(bot.EINVALID, "%s: empty key (%q, %q)", what, outer, inner)
	}
	return nil
}

// LoadConversation returns the stored conversation of (sessionKey, agent),
// or nil when there is none.
func (s *Store) LoadConversation(ctx context.Context, sessionKey, agent string) ([]byte, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if err := validAgentKeys("conversation", sessionKey, agent); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.pool.QueryRow(ctx, "SELECT doc FROM conversations WHERE session_key = $1 AND agent = $2", sessionKey, agent).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return doc, s.wrap("load conversation", err)
}

// SaveConversation replaces the conversation of (sessionKey, agent).
func (s *Store) SaveConversation(ctx context.Context, sessionKey, agent string, doc []byte) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := validAgentKeys("conversation", sessionKey, agent); err != nil {
		return err
	}
	if doc == nil {
		doc = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO conversations (session_key, agent, doc) VALUES ($1, $2, $3)
		ON CONFLICT (session_key, agent) DO UPDATE SET doc = EXCLUDED.doc`, sessionKey, agent, doc)
	return s.wrap("save conversation", err)
}

// ResetConversations forgets every agent's conversation of sessionKey and
// returns how many it forgot.
func (s *Store) ResetConversations(ctx context.Context, sessionKey string) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	if sessionKey == "" {
		return 0, bot.Errorf(bot.EINVALID, "conversation: empty session key")
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM conversations WHERE session_key = $1", sessionKey)
	if err != nil {
		return 0, s.wrap("reset conversations", err)
	}
	return int(tag.RowsAffected()), nil
}

// SaveTranscript stores the transcript of run runID of job jobID. Saving a
// run again replaces its document and keeps its place in the order.
func (s *Store) SaveTranscript(ctx context.Context, jobID, runID string, doc []byte) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := validAgentKeys("transcript", jobID, runID); err != nil {
		return err
	}
	return s.wrap("save transcript", saveTranscript(ctx, s.pool, jobID, runID, doc))
}

// saveTranscript stores doc as run runID's transcript of job jobID.
func saveTranscript(ctx context.Context, db querier, jobID, runID string, doc []byte) error {
	if doc == nil {
		doc = []byte{}
	}
	_, err := db.Exec(ctx, `INSERT INTO transcripts (job_id, run_id, doc) VALUES ($1, $2, $3)
		ON CONFLICT (job_id, run_id) DO UPDATE SET doc = EXCLUDED.doc`, jobID, runID, doc)
	return err
}

// ListTranscripts returns the transcripts of jobID in the order their runs
// were first saved.
func (s *Store) ListTranscripts(ctx context.Context, jobID string) ([][]byte, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if jobID == "" {
		return nil, bot.Errorf(bot.EINVALID, "transcript: empty job id")
	}
	rows, err := s.pool.Query(ctx, "SELECT doc FROM transcripts WHERE job_id = $1 ORDER BY ord", jobID)
	if err != nil {
		return nil, s.wrap("list transcripts", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.wrap("list transcripts", err)
	}
	if out == nil {
		out = [][]byte{}
	}
	return out, nil
}

// installationRecord is an installation as stored.
type installationRecord struct {
	ID        int64     `json:"id"`
	Account   string    `json:"account"`
	Suspended bool      `json:"suspended,omitempty"`
	Repos     []string  `json:"repos"`
	UpdatedAt time.Time `json:"updated_at"`
}

func repoKey(repo string) (string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", bot.Errorf(bot.EINVALID, "repository %q: want owner/name", repo)
	}
	return strings.ToLower(repo), nil
}

func repoKeys(repos []string) ([]string, error) {
	keys := make([]string, len(repos))
	for i, r := range repos {
		k, err := repoKey(r)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

func getInstallation(ctx context.Context, q querier, id int64) (*installationRecord, error) {
	var doc []byte
	err := q.QueryRow(ctx, "SELECT doc FROM installations WHERE id = $1 FOR UPDATE", id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec installationRecord
	if err := json.Unmarshal(doc, &rec); err != nil {
		return nil, fmt.Errorf("decode installation %d: %w", id, err)
	}
	return &rec, nil
}

func putInstallation(ctx context.Context, q querier, rec *installationRecord) error {
	doc, err := jsonDoc(rec)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO installations (id, doc) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc`, rec.ID, doc)
	return err
}

func (rec *installationRecord) dropRepo(repo string) {
	rec.Repos = slices.DeleteFunc(rec.Repos, func(r string) bool { return strings.EqualFold(r, repo) })
}

// SaveInstallation creates or updates installation id and adds and removes
// repositories, in one transaction. A repository added here that another
// installation covered moves to this one.
func (s *Store) SaveInstallation(ctx context.Context, id int64, account string, suspended bool, added, removed []string) error {
	if id <= 0 {
		return bot.Errorf(bot.EINVALID, "installation id %d: want a positive id", id)
	}
	addKeys, err := repoKeys(added)
	if err != nil {
		return err
	}
	removeKeys, err := repoKeys(removed)
	if err != nil {
		return err
	}
	return s.tx(ctx, "save github installation", func(tx pgx.Tx) error {
		rec, err := getInstallation(ctx, tx, id)
		if err != nil {
			return err
		}
		if rec == nil {
			rec = &installationRecord{ID: id}
		}
		if account != "" {
			rec.Account = account
		}
		rec.Suspended = suspended
		rec.UpdatedAt = utc(time.Now())
		for i, key := range addKeys {
			var other int64
			err := tx.QueryRow(ctx, "SELECT installation FROM installation_repos WHERE repo = $1 FOR UPDATE", key).Scan(&other)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if err == nil && other != id {
				o, err := getInstallation(ctx, tx, other)
				if err != nil {
					return err
				}
				if o != nil {
					o.dropRepo(added[i])
					if err := putInstallation(ctx, tx, o); err != nil {
						return err
					}
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO installation_repos (repo, installation) VALUES ($1, $2)
				ON CONFLICT (repo) DO UPDATE SET installation = EXCLUDED.installation`, key, id); err != nil {
				return err
			}
			rec.dropRepo(added[i])
			rec.Repos = append(rec.Repos, added[i])
		}
		for i, key := range removeKeys {
			if _, err := tx.Exec(ctx, "DELETE FROM installation_repos WHERE repo = $1 AND installation = $2", key, id); err != nil {
				return err
			}
			rec.dropRepo(removed[i])
		}
		return putInstallation(ctx, tx, rec)
	})
}

// DeleteInstallation forgets installation id and the repositories it
// covers. Deleting an unknown installation is not an error.
func (s *Store) DeleteInstallation(ctx context.Context, id int64) error {
	return s.tx(ctx, "delete github installation", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM installation_repos WHERE installation = $1", id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM installations WHERE id = $1", id)
		return err
	})
}

// InstallationForRepo returns the installation covering repo, or 0.
func (s *Store) InstallationForRepo(ctx context.Context, repo string) (int64, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	key, err := repoKey(repo)
	if err != nil {
		return 0, err
	}
	var id int64
	err = s.pool.QueryRow(ctx, "SELECT installation FROM installation_repos WHERE repo = $1", key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, s.wrap("github installation for repo", err)
}

func validPackageRecord(p skills.InstalledPackage) error {
	if !skills.ValidName(p.Name) {
		return bot.Errorf(bot.EINVALID, "package %q: not a valid package name", p.Name)
	}
	if p.Version == "" || p.Digest == "" || p.Dir == "" {
		return bot.Errorf(bot.EINVALID, "package %s: a record needs its version, digest and directory", p.Name)
	}
	return nil
}

func validSetting(st skills.Setting) error {
	if st.Name == "" {
		return bot.Errorf(bot.EINVALID, "setting: no package or skill named")
	}
	if _, err := skills.ParseScope(st.Scope.String()); err != nil {
		return bot.Errorf(bot.EINVALID, "setting of %s: %v", st.Name, err)
	}
	if st.Origin != "" {
		return bot.Errorf(bot.EINVALID, "setting of %s: settings of the config file (%s) are not stored", st.Name, st.Origin)
	}
	return nil
}

// ListPackages returns every installed package's record, sorted by name.
func (s *Store) ListPackages(ctx context.Context) ([]skills.InstalledPackage, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT doc FROM packages ORDER BY name")
	if err != nil {
		return nil, s.wrap("list packages", err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.wrap("list packages", err)
	}
	var out []skills.InstalledPackage
	for _, doc := range docs {
		var p skills.InstalledPackage
		if err := json.Unmarshal(doc, &p); err != nil {
			return nil, fmt.Errorf("decode package: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

func putSetting(ctx context.Context, q querier, st skills.Setting) error {
	doc, err := jsonDoc(st)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO skill_settings (scope, name, doc) VALUES ($1, $2, $3)
		ON CONFLICT (scope, name) DO UPDATE SET doc = EXCLUDED.doc`, st.Scope.String(), st.Name, doc)
	return err
}

// PutPackage records an installed package and the settings given, in one
// transaction, replacing a record of the same name.
func (s *Store) PutPackage(ctx context.Context, p skills.InstalledPackage, settings ...skills.Setting) error {
	if err := validPackageRecord(p); err != nil {
		return err
	}
	for _, st := range settings {
		if err := validSetting(st); err != nil {
			return err
		}
	}
	doc, err := jsonDoc(p)
	if err != nil {
		return err
	}
	return s.tx(ctx, "record package", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO packages (name, doc) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET doc = EXCLUDED.doc`, p.Name, doc); err != nil {
			return err
		}
		for _, st := range settings {
			if err := putSetting(ctx, tx, st); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeletePackage forgets a package and every stored setting naming any of
// names, in one transaction.
func (s *Store) DeletePackage(ctx context.Context, name string, names []string) error {
	return s.tx(ctx, "forget package", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM packages WHERE name = $1", name); err != nil {
			return err
		}
		if names == nil {
			names = []string{}
		}
		_, err := tx.Exec(ctx, "DELETE FROM skill_settings WHERE name = ANY($1)", names)
		return err
	})
}

// ListSettings returns every stored setting, by scope then name.
func (s *Store) ListSettings(ctx context.Context) ([]skills.Setting, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT doc FROM skill_settings ORDER BY scope, name")
	if err != nil {
		return nil, s.wrap("list skill settings", err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.wrap("list skill settings", err)
	}
	var out []skills.Setting
	for _, doc := range docs {
		var st skills.Setting
		if err := json.Unmarshal(doc, &st); err != nil {
			return nil, fmt.Errorf("decode setting: %w", err)
		}
		out = append(out, st)
	}
	return out, nil
}

// PutSetting records a setting, replacing the one of the same scope and
// name.
func (s *Store) PutSetting(ctx context.Context, st skills.Setting) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := validSetting(st); err != nil {
		return err
	}
	return s.wrap("record skill setting", putSetting(ctx, s.pool, st))
}

// DeleteSetting forgets the setting of that scope and name, if any.
func (s *Store) DeleteSetting(ctx context.Context, scope skills.Scope, name string) error {
	if err := s.open(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, "DELETE FROM skill_settings WHERE scope = $1 AND name = $2", scope.String(), name)
	return s.wrap("forget skill setting", err)
}

func validApproval(a bot.Approval) error {
	switch {
	case a.ID == "":
		return bot.Errorf(bot.EINVALID, "approval: no id")
	case a.Status != bot.ApprovalPending:
		return bot.Errorf(bot.EINVALID, "approval %s: a new approval is pending, not %s", a.ID, a.Status)
	case a.ExpiresAt.IsZero():
		return bot.Errorf(bot.EINVALID, "approval %s: no expiry", a.ID)
	}
	return nil
}

func scanApproval(row pgx.Row) (bot.Approval, error) {
	var doc []byte
	if err := row.Scan(&doc); err != nil {
		return bot.Approval{}, err
	}
	var a bot.Approval
	if err := json.Unmarshal(doc, &a); err != nil {
		return bot.Approval{}, fmt.Errorf("decode approval: %w", err)
	}
	return a, nil
}

func putApproval(ctx context.Context, q querier, a bot.Approval, insert bool) error {
	doc, err := jsonDoc(a)
	if err != nil {
		return err
	}
	var decided *int64
	if a.DecidedAt != nil {
		n := nanos(*a.DecidedAt)
		decided = &n
	}
	sql := "UPDATE approvals SET status = $3, decided_at = $5, taken = $6, doc = $7 WHERE id = $1 AND key = $2 AND created_at = $4"
	if insert {
		sql = "INSERT INTO approvals (id, key, status, created_at, decided_at, taken, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)"
	}
	_, err = q.Exec(ctx, sql, a.ID, a.Key, string(a.Status), nanos(a.CreatedAt), decided, a.Taken, doc)
	return err
}

// CreateApproval stores a pending approval unless one with its key can be
// waited on.
func (s *Store) CreateApproval(ctx context.Context, a bot.Approval) (bot.Approval, bool, error) {
	if err := validApproval(a); err != nil {
		return bot.Approval{}, false, err
	}
	a.CreatedAt, a.ExpiresAt = utc(a.CreatedAt), utc(a.ExpiresAt)
	a.DecidedAt, a.DecidedBy, a.Taken = nil, "", false
	out, created := a, true
	err := s.tx(ctx, "create approval", func(tx pgx.Tx) error {
		out, created = a, true
		if a.Key != "" {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 29))", a.Key); err != nil {
				return err
			}
			prev, err := scanApproval(tx.QueryRow(ctx, `SELECT doc FROM approvals WHERE key = $1 AND (status = 'pending' OR NOT taken)
				ORDER BY created_at DESC LIMIT 1`, a.Key))
			if err == nil {
				out, created = prev, false
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if err := putApproval(ctx, tx, a, true); err != nil {
			if isUniqueViolation(err) {
				return bot.Errorf(bot.ECONFLICT, "approval %s exists", a.ID)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return bot.Approval{}, false, err
	}
	return out, created, nil
}

// FindApproval returns the approval a run asking with key would wait on:
// pending, or decided and not taken by a run yet. ENOTFOUND when there is
// none.
func (s *Store) FindApproval(ctx context.Context, key string) (bot.Approval, error) {
	if err := s.open(); err != nil {
		return bot.Approval{}, err
	}
	a, err := scanApproval(s.pool.QueryRow(ctx, `SELECT doc FROM approvals WHERE key = $1 AND key <> '' AND (status = 'pending' OR NOT taken)
		ORDER BY created_at DESC LIMIT 1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return bot.Approval{}, bot.Errorf(bot.ENOTFOUND, "no approval waits for %q", key)
	}
	return a, s.wrap("find approval", err)
}

// GetApproval returns one approval, or ENOTFOUND.
func (s *Store) GetApproval(ctx context.Context, id string) (bot.Approval, error) {
	if err := s.open(); err != nil {
		return bot.Approval{}, err
	}
	a, err := scanApproval(s.pool.QueryRow(ctx, "SELECT doc FROM approvals WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return bot.Approval{}, bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
	}
	return a, s.wrap("get approval", err)
}

// ListApprovals returns the pending approvals, oldest first, and with
// decided the latest limit decided ones after them, newest first.
func (s *Store) ListApprovals(ctx context.Context, decided bool, limit int) ([]bot.Approval, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	limit = bot.ListLimit(limit)
	out := []bot.Approval{}
	collect := func(sql string, args ...any) error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanApproval(rows)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	}
	if err := collect("SELECT doc FROM approvals WHERE status = 'pending' ORDER BY created_at, id"); err != nil {
		return nil, s.wrap("list approvals", err)
	}
	if decided {
		if err := collect("SELECT doc FROM approvals WHERE status <> 'pending' ORDER BY decided_at DESC, id DESC LIMIT $1", limit); err != nil {
			return nil, s.wrap("list approvals", err)
		}
	}
	return out, nil
}

// DecideApproval ends a pending approval.
func (s *Store) DecideApproval(ctx context.Context, id string, o bot.ApprovalOutcome) (bot.Approval, error) {
	if !o.Status.Valid() || o.Status == bot.ApprovalPending {
		return bot.Approval{}, bot.Errorf(bot.EINVALID, "approval %s: cannot end as %q", id, o.Status)
	}
	var out bot.Approval
	err := s.tx(ctx, "decide approval", func(tx pgx.Tx) error {
		a, err := scanApproval(tx.QueryRow(ctx, "SELECT doc FROM approvals WHERE id = $1 FOR UPDATE", id))
		if errors.Is(err, pgx.ErrNoRows) {
			return bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
		}
		if err != nil {
			return err
		}
		out = a
		if a.Status != bot.ApprovalPending {
			return bot.Errorf(bot.ECONFLICT, "approval %q is already %s", id, a.Status)
		}
		at := utc(o.At)
		a.Status, a.DecidedBy, a.DecidedAt, a.Taken = o.Status, o.By, &at, o.Taken
		out = a
		return putApproval(ctx, tx, a, false)
	})
	return out, err
}

// TakeApproval records that a run received a decided approval's outcome.
func (s *Store) TakeApproval(ctx context.Context, id string) error {
	return s.tx(ctx, "take approval", func(tx pgx.Tx) error {
		a, err := scanApproval(tx.QueryRow(ctx, "SELECT doc FROM approvals WHERE id = $1 FOR UPDATE", id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return bot.Errorf(bot.ENOTFOUND, "approval %q not found", id)
		case err != nil:
			return err
		case a.Status == bot.ApprovalPending:
			return bot.Errorf(bot.ECONFLICT, "approval %q is still pending", id)
		case a.Taken:
			return nil
		}
		a.Taken = true
		return putApproval(ctx, tx, a, false)
	})
}
