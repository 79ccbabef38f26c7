package supervisor

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/schema"
)

// Approval statuses. Only pending changes, and only once.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusDenied   = "denied"
	StatusExpired  = "expired"
)

// Reason codes of Tier 3 human approval. Stable; never renumbered.
const (
	CodeApprovalTimeout     = "APPROVAL-001" // no answer before the deadline: deny
	CodeApprovalRateLimited = "APPROVAL-002" // over approvals.max_per_hour: deny at once
	CodeApprovalDenied      = "APPROVAL-003" // a person denied it
	CodeApprovalGranted     = "APPROVAL-004" // a person approved it (informational)
)

// Event types passed to QueueOptions.OnEvent.
const (
	EventRequired = "approval_required"
	EventResolved = "approval_resolved"
)

// Defaults of QueueOptions.
const (
	DefaultApprovalTimeout = time.Duration(config.DefaultApprovalTimeout) * time.Second
	DefaultMaxPerHour      = config.DefaultApprovalsPerHour
	DefaultPollInterval    = 100 * time.Millisecond
)

// maxReasonLen bounds the free text a person attaches to an answer.
const maxReasonLen = 4096

// Errors of the approval queue.
var (
	// ErrRateLimited: more than MaxPerHour prompts in the last hour. Nothing
	// was created and nobody was notified; the call is denied (APPROVAL-002).
	ErrRateLimited = errors.New("approvals: hourly limit of prompts reached")
	// ErrAlreadyResolved: the approval was answered (or expired) before this
	// answer; the first answer stands.
	ErrAlreadyResolved = errors.New("approvals: already resolved")
	// ErrExpired: the deadline passed before this answer. It is also an
	// ErrAlreadyResolved.
	ErrExpired error = expiredError{}
	// ErrNotFound: no approval has this id.
	ErrNotFound = errors.New("approvals: no such approval")
	// ErrInvalidID: the id is not of the form apr_ + 22 url-safe characters.
	ErrInvalidID = errors.New("approvals: malformed approval id")
)

type expiredError struct{}

func (expiredError) Error() string        { return "approvals: expired" }
func (expiredError) Is(target error) bool { return target == ErrAlreadyResolved }

// Approval is one call waiting for, or answered by, a person.
type Approval struct {
	ID             string          `json:"id"`
	AgentID        string          `json:"agent_id"`
	ConversationID string          `json:"conversation_id"`
	Step           int             `json:"step"`
	ActionType     string          `json:"action_type"`
	Request        json.RawMessage `json:"request"`
	Reasons        []schema.Reason `json:"reasons"`
	Status         string          `json:"status"`
	CreatedAt      time.Time       `json:"created_at"`
	Deadline       time.Time       `json:"deadline"`
	ResolvedBy     string          `json:"resolved_by,omitempty"`
	ResolvedAt     *time.Time      `json:"resolved_at,omitempty"`
	Reason         string          `json:"reason,omitempty"`
}

// Pending reports whether nobody has answered yet and the approval has not
// been marked expired.
func (a Approval) Pending() bool { return a.Status == StatusPending }

// Outcome maps the status to the verdict: approved → allow (APPROVAL-004),
// denied → deny (APPROVAL-003), expired → deny (APPROVAL-001), pending →
// pending. Anything else (a corrupt row) is a deny: fail closed.
func (a Approval) Outcome() (schema.Outcome, schema.Reason) {
	switch a.Status {
	case StatusApproved:
		msg := "approved by " + a.ResolvedBy
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		return schema.Allow, schema.Reason{Code: CodeApprovalGranted, Rule: "human_approval", Message: msg, Outcome: schema.Allow}
	case StatusDenied:
		msg := "denied by " + a.ResolvedBy
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		return schema.Deny, schema.Reason{Code: CodeApprovalDenied, Rule: "human_approval", Message: msg, Outcome: schema.Deny}
	case StatusPending:
		return schema.Pending, schema.Reason{Rule: "human_approval", Message: "waiting for a person: approval " + a.ID, Outcome: schema.Pending}
	case StatusExpired:
		return schema.Deny, schema.Reason{Code: CodeApprovalTimeout, Rule: "human_approval",
			Message: fmt.Sprintf("no answer before the deadline %s", a.Deadline.Format(time.RFC3339)), Outcome: schema.Deny}
	}
	return schema.Deny, schema.Reason{Code: CodeApprovalTimeout, Rule: "human_approval",
		Message: fmt.Sprintf("approval %s has unknown status %q", a.ID, a.Status), Outcome: schema.Deny}
}

// RateLimitedReason is the deny reason for ErrRateLimited.
func RateLimitedReason(maxPerHour int) schema.Reason {
	return schema.Reason{Code: CodeApprovalRateLimited, Rule: "human_approval",
		Message: fmt.Sprintf("more than %d approval prompts in the last hour", maxPerHour), Outcome: schema.Deny}
}

// SameAction reports whether req asks for the same action (type and
// arguments) as the request this approval was made for, so that an answer
// given for one call is never taken for another at the same step.
func (a Approval) SameAction(req schema.Request) bool {
	var stored schema.Request
	if err := json.Unmarshal(a.Request, &stored); err != nil {
		return false
	}
	x, err1 := json.Marshal(stored.Action)
	y, err2 := json.Marshal(req.Action)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// Event is what the queue reports to QueueOptions.OnEvent.
type Event struct {
	Type     string   `json:"type"` // EventRequired or EventResolved
	Approval Approval `json:"approval"`
}

// Notifier tells people that an approval is waiting. A failure is logged; it
// never blocks the queue and never approves anything.
type Notifier interface {
	Notify(ctx context.Context, a Approval) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, a Approval) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, a Approval) error { return f(ctx, a) }

// QueueOptions configure a Queue. Zero values mean the defaults.
type QueueOptions struct {
	// Timeout is how long a person has to answer (default 300 s).
	Timeout time.Duration
	// MaxPerHour bounds the prompts created in any hour (default 10).
	MaxPerHour int
	// Notifier, when set, is told about every new approval, in the
	// background.
	Notifier Notifier
	// PollInterval is how often Wait reads the database to see answers given
	// by other processes (default 100 ms).
	PollInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// OnEvent, when set, is called synchronously for every approval this
	// process creates, resolves or marks expired. It must not block.
	OnEvent func(Event)
}

// OptionsFromConfig turns the approvals section of toolgate.yaml into
// QueueOptions, including the webhook notifier when a URL is configured.
func OptionsFromConfig(c config.Approvals) (QueueOptions, error) {
	opts := QueueOptions{
		Timeout:    time.Duration(c.TimeoutSeconds) * time.Second,
		MaxPerHour: c.MaxPerHour,
	}
	if c.Webhook.URL != "" {
		w, err := NewWebhookNotifier(WebhookOptions{
			URL:    c.Webhook.URL,
			Secret: []byte(config.Secret(c.Webhook.SecretEnv)),
		})
		if err != nil {
			return QueueOptions{}, fmt.Errorf("approvals.webhook (secret from $%s): %w", c.Webhook.SecretEnv, err)
		}
		opts.Notifier = w
	}
	return opts, nil
}

// Queue is the persistent queue of human approvals. It is safe for concurrent
// use, and several processes may share one database: the first answer wins.
type Queue struct {
	db   *sql.DB
	opts QueueOptions
	log  *slog.Logger

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when this process resolves one
	notify  sync.WaitGroup
}

// OpenQueue creates the tables if needed and returns the queue. The caller
// owns db and closes it after Close.
func OpenQueue(ctx context.Context, db *sql.DB, opts QueueOptions) (*Queue, error) {
	if db == nil {
		return nil, errors.New("approvals: nil database")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultApprovalTimeout
	}
	if opts.MaxPerHour <= 0 {
		opts.MaxPerHour = DefaultMaxPerHour
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := migrateApprovals(ctx, db); err != nil {
		return nil, err
	}
	return &Queue{db: db, opts: opts, log: opts.Logger, changed: make(chan struct{})}, nil
}

// Close waits for notifications still being delivered. It does not close the
// database.
func (q *Queue) Close() error {
	q.notify.Wait()
	return nil
}

// MaxPerHour is the hourly limit in force, for the APPROVAL-002 message.
func (q *Queue) MaxPerHour() int { return q.opts.MaxPerHour }

// Request queues req for a person, with the Tier 1 (or supervisor) reasons
// that sent it here, and notifies in the background. Over the hourly limit it
// returns ErrRateLimited without creating anything or notifying anyone.
func (q *Queue) Request(ctx context.Context, req schema.Request, reasons []schema.Reason) (Approval, error) {
	if err := req.Validate(); err != nil {
		return Approval{}, fmt.Errorf("approvals: %w", err)
	}
	req.Agent.Token = "" // never persist a credential
	body, err := json.Marshal(req)
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: encode request: %w", err)
	}
	if reasons == nil {
		reasons = []schema.Reason{}
	}
	rs, err := json.Marshal(reasons)
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: encode reasons: %w", err)
	}
	id, err := newID()
	if err != nil {
		return Approval{}, err
	}
	now := q.opts.Now().UTC().Truncate(time.Millisecond)
	a := Approval{
		ID: id, AgentID: req.Agent.ID, ConversationID: req.Context.ConversationID,
		Step: req.Context.StepNumber, ActionType: req.Action.Type, Request: body,
		Reasons: reasons, Status: StatusPending, CreatedAt: now, Deadline: now.Add(q.opts.Timeout),
	}
	// One statement: the count and the insert cannot interleave with another
	// writer, so concurrent requests (even from other processes) cannot
	// overshoot the limit.
	res, err := q.db.ExecContext(ctx, `INSERT INTO approvals
		(id, agent_id, conversation_id, step, action_type, request, reasons, status, created_at, deadline)
		SELECT ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?
		WHERE (SELECT COUNT(*) FROM approvals WHERE created_at > ?) < ?`,
		a.ID, a.AgentID, a.ConversationID, a.Step, a.ActionType, string(body), string(rs),
		ms(a.CreatedAt), ms(a.Deadline), ms(now.Add(-time.Hour)), q.opts.MaxPerHour)
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: insert: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Approval{}, fmt.Errorf("approvals: insert: %w", err)
	} else if n == 0 {
		q.log.Warn("approval prompt refused: hourly limit reached",
			"agent", a.AgentID, "conversation", a.ConversationID, "step", a.Step, "max_per_hour", q.opts.MaxPerHour)
		return Approval{}, ErrRateLimited
	}
	q.log.Info("approval required", "id", a.ID, "agent", a.AgentID, "action", a.ActionType, "deadline", a.Deadline)
	q.emit(EventRequired, a)
	if n := q.opts.Notifier; n != nil {
		q.notify.Add(1)
		go q.deliver(context.WithoutCancel(ctx), n, a)
	}
	return a, nil
}

// deliver notifies without holding up the caller; a failure is only logged.
// It gives up at the approval's deadline: after that nobody can answer.
func (q *Queue) deliver(ctx context.Context, n Notifier, a Approval) {
	defer q.notify.Done()
	ctx, cancel := context.WithTimeout(ctx, a.Deadline.Sub(q.opts.Now()))
	defer cancel()
	if err := n.Notify(ctx, a); err != nil {
		q.log.Error("approval notification failed; the approval stays pending", "id", a.ID, "err", err)
	}
}

// Resolve records a person's answer. The first answer wins; a later one gets
// ErrAlreadyResolved (ErrExpired after the deadline) together with the
// approval as it stands.
func (q *Queue) Resolve(ctx context.Context, id string, approve bool, by, reason string) (Approval, error) {
	if !ValidID(id) {
		return Approval{}, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	by = strings.TrimSpace(by)
	if by == "" {
		return Approval{}, errors.New("approvals: an answer needs the name of who gave it")
	}
	if len(reason) > maxReasonLen {
		return Approval{}, fmt.Errorf("approvals: reason longer than %d bytes", maxReasonLen)
	}
	status := StatusDenied
	if approve {
		status = StatusApproved
	}
	now := q.opts.Now().UTC()
	res, err := q.db.ExecContext(ctx, `UPDATE approvals
		SET status = ?, resolved_by = ?, resolved_at = ?, reason = ?
		WHERE id = ? AND status = 'pending' AND deadline > ?`,
		status, by, ms(now), reason, id, ms(now))
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: resolve %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: resolve %s: %w", id, err)
	}
	a, err := q.Get(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if n == 0 {
		switch a.Status {
		case StatusExpired:
			return a, fmt.Errorf("%w: %s passed its deadline %s", ErrExpired, id, a.Deadline.Format(time.RFC3339))
		case StatusPending: // cannot happen: the update would have matched
			return a, fmt.Errorf("approvals: resolve %s: not updated", id)
		}
		return a, fmt.Errorf("%w: %s was %s by %s", ErrAlreadyResolved, id, a.Status, a.ResolvedBy)
	}
	q.log.Info("approval resolved", "id", id, "status", status, "by", by)
	q.wake()
	q.emit(EventResolved, a)
	return a, nil
}

// Wait returns when the approval is answered or expired (marking it expired),
// or when ctx ends (then with the approval as it stands and ctx's error).
// Answers from other processes are seen by polling; answers from this process
// wake it at once.
func (q *Queue) Wait(ctx context.Context, id string) (Approval, error) {
	for {
		ch := q.signal()
		a, err := q.Get(ctx, id)
		if err != nil && ctx.Err() != nil {
			// Report the approval as it stands, not the interrupted read.
			a, err = q.Get(context.WithoutCancel(ctx), id)
			if err == nil {
				err = fmt.Errorf("approvals: wait %s: %w", id, ctx.Err())
			}
			return a, err
		}
		if err != nil || !a.Pending() {
			return a, err
		}
		d := q.opts.PollInterval
		if left := a.Deadline.Sub(q.opts.Now()); left < d {
			d = max(left, time.Millisecond)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return a, fmt.Errorf("approvals: wait %s: %w", id, ctx.Err())
		case <-ch:
			t.Stop()
		case <-t.C:
		}
	}
}

// Get reads one approval, marking it expired first if its deadline passed.
func (q *Queue) Get(ctx context.Context, id string) (Approval, error) {
	if !ValidID(id) {
		return Approval{}, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	if err := q.expire(ctx, "id = ?", id); err != nil {
		return Approval{}, err
	}
	row := q.db.QueryRowContext(ctx, `SELECT `+columns+` FROM approvals WHERE id = ?`, id)
	a, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: get %s: %w", id, err)
	}
	return a, nil
}

// List returns approvals with the given status, newest first; "" or "all"
// lists every one.
func (q *Queue) List(ctx context.Context, status string) ([]Approval, error) {
	if err := q.expire(ctx, "1 = 1"); err != nil {
		return nil, err
	}
	query := `SELECT ` + columns + ` FROM approvals`
	var args []any
	switch status {
	case "", "all":
	case StatusPending, StatusApproved, StatusDenied, StatusExpired:
		query += ` WHERE status = ?`
		args = append(args, status)
	default:
		return nil, fmt.Errorf("approvals: unknown status %q (want pending, approved, denied, expired or all)", status)
	}
	query += ` ORDER BY created_at DESC, id`
	return q.query(ctx, query, args...)
}

// FindByStep returns the newest approval made for a conversation step, so a
// later evaluation of that step sees the answer. Check Approval.SameAction
// before applying an answer to a request.
func (q *Queue) FindByStep(ctx context.Context, conversationID string, step int) (Approval, bool, error) {
	if err := q.expire(ctx, "conversation_id = ? AND step = ?", conversationID, step); err != nil {
		return Approval{}, false, err
	}
	as, err := q.query(ctx, `SELECT `+columns+` FROM approvals
		WHERE conversation_id = ? AND step = ? ORDER BY created_at DESC, rowid DESC LIMIT 1`, conversationID, step)
	if err != nil || len(as) == 0 {
		return Approval{}, false, err
	}
	return as[0], true, nil
}

// FindForRequest returns the newest approval made for this very call: the
// same agent, conversation step, action and arguments. This is the safe
// lookup for a re-evaluated step: an answer about one call is never applied
// to another call at the same step.
func (q *Queue) FindForRequest(ctx context.Context, req schema.Request) (Approval, bool, error) {
	conv, step := req.Context.ConversationID, req.Context.StepNumber
	if err := q.expire(ctx, "conversation_id = ? AND step = ?", conv, step); err != nil {
		return Approval{}, false, err
	}
	as, err := q.query(ctx, `SELECT `+columns+` FROM approvals
		WHERE conversation_id = ? AND step = ? AND agent_id = ? AND action_type = ?
		ORDER BY created_at DESC, rowid DESC`, conv, step, req.Agent.ID, req.Action.Type)
	if err != nil {
		return Approval{}, false, err
	}
	for _, a := range as {
		if a.SameAction(req) {
			return a, true, nil
		}
	}
	return Approval{}, false, nil
}

// expire marks the pending approvals matching where whose deadline passed,
// and reports each one it marked.
func (q *Queue) expire(ctx context.Context, where string, args ...any) error {
	now := ms(q.opts.Now())
	rows, err := q.db.QueryContext(ctx, `UPDATE approvals
		SET status = 'expired', resolved_at = deadline, reason = 'no answer before the deadline'
		WHERE status = 'pending' AND deadline <= ? AND (`+where+`)
		RETURNING `+columns, append([]any{now}, args...)...)
	if err != nil {
		return fmt.Errorf("approvals: expire: %w", err)
	}
	defer rows.Close()
	var expired []Approval
	for rows.Next() {
		a, err := scan(rows)
		if err != nil {
			return fmt.Errorf("approvals: expire: %w", err)
		}
		expired = append(expired, a)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("approvals: expire: %w", err)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("approvals: expire: %w", err)
	}
	for _, a := range expired {
		q.log.Info("approval expired", "id", a.ID, "deadline", a.Deadline)
		q.emit(EventResolved, a)
	}
	if len(expired) > 0 {
		q.wake()
	}
	return nil
}

func (q *Queue) query(ctx context.Context, query string, args ...any) ([]Approval, error) {
	rows, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("approvals: query: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("approvals: query: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("approvals: query: %w", err)
	}
	return out, nil
}

func (q *Queue) emit(typ string, a Approval) {
	if q.opts.OnEvent != nil {
		q.opts.OnEvent(Event{Type: typ, Approval: a})
	}
}

func (q *Queue) signal() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changed
}

func (q *Queue) wake() {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.changed)
	q.changed = make(chan struct{})
}

const columns = `id, agent_id, conversation_id, step, action_type, request, reasons, status,
	created_at, deadline, resolved_by, resolved_at, reason`

type scanner interface{ Scan(dest ...any) error }

func scan(s scanner) (Approval, error) {
	var (
		a                 Approval
		req, reasons      string
		created, deadline int64
		resolvedAt        sql.NullInt64
	)
	if err := s.Scan(&a.ID, &a.AgentID, &a.ConversationID, &a.Step, &a.ActionType, &req, &reasons,
		&a.Status, &created, &deadline, &a.ResolvedBy, &resolvedAt, &a.Reason); err != nil {
		return Approval{}, err
	}
	a.Request = json.RawMessage(req)
	if err := json.Unmarshal([]byte(reasons), &a.Reasons); err != nil {
		return Approval{}, fmt.Errorf("approval %s: reasons: %w", a.ID, err)
	}
	a.CreatedAt, a.Deadline = fromMS(created), fromMS(deadline)
	if resolvedAt.Valid {
		t := fromMS(resolvedAt.Int64)
		a.ResolvedAt = &t
	}
	return a, nil
}

func ms(t time.Time) int64     { return t.UnixMilli() }
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

const idPrefix = "apr_"

// idLen is the prefix and 128 bits in unpadded base64url.
var idLen = len(idPrefix) + base64.RawURLEncoding.EncodedLen(16)

// newID is apr_ followed by 128 random bits in unpadded base64url.
func newID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("approvals: random id: %w", err)
	}
	return idPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// ValidID reports whether id has the form of an approval id.
func ValidID(id string) bool {
	if len(id) != idLen || !strings.HasPrefix(id, idPrefix) {
		return false
	}
	for i := len(idPrefix); i < len(id); i++ {
		c := id[i]
		if c != '-' && c != '_' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// approvalsMigrations are applied in order; approvals_meta remembers how
// many ran. Append only.
var approvalsMigrations = []string{
	`CREATE TABLE IF NOT EXISTS approvals (
		id              TEXT PRIMARY KEY,
		agent_id        TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		step            INTEGER NOT NULL,
		action_type     TEXT NOT NULL,
		request         TEXT NOT NULL,
		reasons         TEXT NOT NULL,
		status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
		created_at      INTEGER NOT NULL, -- Unix milliseconds
		deadline        INTEGER NOT NULL,
		resolved_by     TEXT NOT NULL DEFAULT '',
		resolved_at     INTEGER,
		reason          TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX IF NOT EXISTS approvals_status_deadline ON approvals (status, deadline);
	CREATE INDEX IF NOT EXISTS approvals_created ON approvals (created_at);
	CREATE INDEX IF NOT EXISTS approvals_step ON approvals (conversation_id, step, created_at);`,
}

// migrateApprovals brings the approvals tables up to date. Their version
// lives in approvals_meta, not in state.Migrate's schema_migrations: moving
// it there would need a step that carries existing files' version over, so
// it stays here.
func migrateApprovals(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("approvals: migrate: %w", err)
	}
	defer tx.Rollback()
	// Write first, so this transaction holds the write lock before it reads
	// the version: two processes starting together apply each step once.
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS approvals_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("approvals: migrate: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO approvals_meta (key, value) VALUES ('schema_version', 0)`); err != nil {
		return fmt.Errorf("approvals: migrate: %w", err)
	}
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT value FROM approvals_meta WHERE key = 'schema_version'`).Scan(&version); err != nil {
		return fmt.Errorf("approvals: migrate: %w", err)
	}
	if version > len(approvalsMigrations) {
		return fmt.Errorf("approvals: database schema version %d is newer than this toolgate knows (%d)", version, len(approvalsMigrations))
	}
	for i := version; i < len(approvalsMigrations); i++ {
		if _, err := tx.ExecContext(ctx, approvalsMigrations[i]); err != nil {
			return fmt.Errorf("approvals: migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE approvals_meta SET value = ? WHERE key = 'schema_version'`, len(approvalsMigrations)); err != nil {
		return fmt.Errorf("approvals: migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("approvals: migrate: %w", err)
	}
	return nil
}
