package adapters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
)

// Bounds of the context kept per session.
const (
	// MaxRecordedResults is how many tool results a session keeps.
	MaxRecordedResults = 20
	// MaxResultBytes bounds one recorded tool result.
	MaxResultBytes = 16 << 10
	// ResultRetention is how long a recorded result is kept.
	ResultRetention = 7 * 24 * time.Hour
)

// migrations are the "hooks" component's tables. Times are Unix nanoseconds.
var migrations = []string{
	// 1: per-session step counters and recorded tool results.
	`CREATE TABLE hook_steps (
		agent_id        TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		step            INTEGER NOT NULL,
		updated_at      INTEGER NOT NULL,
		PRIMARY KEY (agent_id, conversation_id)
	) WITHOUT ROWID;
	CREATE TABLE hook_context (
		agent_id        TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		seq             INTEGER NOT NULL,
		source          TEXT NOT NULL,
		content         TEXT NOT NULL,
		at              INTEGER NOT NULL,
		PRIMARY KEY (agent_id, conversation_id, seq)
	) WITHOUT ROWID;
	CREATE INDEX hook_context_at ON hook_context (at);`,
}

// Sessions keeps, per (agent, conversation), the next step number to use and
// the recent tool results, in the state database. Safe for concurrent use.
type Sessions struct {
	db    *sql.DB
	store *state.Store
}

// OpenSessions applies the "hooks" migrations to the store's database.
func OpenSessions(ctx context.Context, store *state.Store) (*Sessions, error) {
	if store == nil {
		return nil, errors.New("sessions: no state store (the adapters need state)")
	}
	if err := state.Migrate(ctx, store.DB(), "hooks", migrations); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return &Sessions{db: store.DB(), store: store}, nil
}

// NextStep hands out the session's next step number: one more than both the
// last step it handed out and the last step the conversation committed, so
// consecutive calls never replay a step (LOOP-002) and concurrent calls get
// distinct steps.
func (s *Sessions) NextStep(ctx context.Context, agentID, conversationID string) (int, error) {
	cf, err := s.store.Conversation(ctx, agentID, conversationID)
	if err != nil {
		return 0, fmt.Errorf("next step: %w", err)
	}
	var step int
	err = s.db.QueryRowContext(ctx, `INSERT INTO hook_steps (agent_id, conversation_id, step, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (agent_id, conversation_id) DO UPDATE SET step = max(hook_steps.step + 1, excluded.step), updated_at = excluded.updated_at
		RETURNING step`, agentID, conversationID, cf.LastStep+1, time.Now().UnixNano()).Scan(&step)
	if err != nil {
		return 0, fmt.Errorf("next step: %w", err)
	}
	return step, nil
}

// Record keeps a tool result as untrusted context for the session's later
// calls: at most MaxResultBytes of it, and the MaxRecordedResults newest.
func (s *Sessions) Record(ctx context.Context, agentID, conversationID, source, content string) error {
	content = truncate(content, MaxResultBytes)
	if content == "" {
		return nil
	}
	now := time.Now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	defer tx.Rollback()
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM hook_context WHERE agent_id = ? AND conversation_id = ?`,
		agentID, conversationID).Scan(&seq); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO hook_context (agent_id, conversation_id, seq, source, content, at) VALUES (?, ?, ?, ?, ?, ?)`,
		agentID, conversationID, seq, source, content, now.UnixNano()); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM hook_context WHERE agent_id = ? AND conversation_id = ? AND seq <= ?`,
		agentID, conversationID, seq-MaxRecordedResults); err != nil {
		return fmt.Errorf("record result: prune: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM hook_context WHERE at < ?`, now.Add(-ResultRetention).UnixNano()); err != nil {
		return fmt.Errorf("record result: expire: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	return nil
}

// Recent returns the session's recorded tool results as untrusted blocks,
// oldest first.
func (s *Sessions) Recent(ctx context.Context, agentID, conversationID string) ([]schema.Block, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT source, content FROM hook_context WHERE agent_id = ? AND conversation_id = ? ORDER BY seq`,
		agentID, conversationID)
	if err != nil {
		return nil, fmt.Errorf("recent results: %w", err)
	}
	defer rows.Close()
	var out []schema.Block
	for rows.Next() {
		var b schema.Block
		if err := rows.Scan(&b.Source, &b.Content); err != nil {
			return nil, fmt.Errorf("recent results: %w", err)
		}
		b.Trust = schema.Untrusted
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent results: %w", err)
	}
	return out, nil
}

// lazySessions opens Sessions once, on first use, for handlers built from a
// Verifier alone.
type lazySessions struct {
	once sync.Once
	s    *Sessions
	err  error
}

func (l *lazySessions) get(ctx context.Context, store *state.Store) (*Sessions, error) {
	l.once.Do(func() {
		if store == nil {
			l.err = errNoState
			return
		}
		l.s, l.err = OpenSessions(ctx, store)
	})
	return l.s, l.err
}

var errNoState = errors.New("no state store")
