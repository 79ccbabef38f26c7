package state

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/toolgate/toolgate/internal/groupcommit"
)

// stmts are the statements of the hot path (Reserve, Commit, Release),
// prepared once per Store: parsing SQL was a third of a cycle's CPU.
type stmts struct {
	agent             *sql.Stmt
	countMinute       *sql.Stmt
	sumMinutes        *sql.Stmt
	pruneMinutes      *sql.Stmt
	dailyCost         *sql.Stmt
	conversation      *sql.Stmt
	recent            *sql.Stmt
	reserve           *sql.Stmt
	pruneReservations *sql.Stmt
	dropReservation   *sql.Stmt
	consume           *sql.Stmt
	addFingerprint    *sql.Stmt
	pruneFingerprints *sql.Stmt
	addCost           *sql.Stmt
	// The writer's per-job savepoint (groupcommit.Txn).
	savepoint, release, rollbackTo *sql.Stmt
}

func prepare(ctx context.Context, db *sql.DB) (*stmts, error) {
	q := &stmts{}
	for _, p := range []struct {
		dst *(*sql.Stmt)
		sql string
	}{
		{&q.agent, "SELECT " + agentColumns + " FROM agents WHERE id = ?"},
		// The hourly window: per agent, a count of requests per minute
		// (Unix time / 60), summed over the current minute and the 60
		// before it. Minutes older than that are deleted by the next prune
		// (Store.prune, once per PruneEvery); the sum never reads them.
		{&q.countMinute, `INSERT INTO request_minutes (agent_id, minute, n) VALUES (?1, ?2, 1)
			ON CONFLICT (agent_id, minute) DO UPDATE SET n = n + 1`},
		{&q.sumMinutes, "SELECT coalesce(sum(n), 0) FROM request_minutes WHERE agent_id = ? AND minute >= ?"},
		{&q.pruneMinutes, "DELETE FROM request_minutes WHERE minute < ?"},
		{&q.dailyCost, "SELECT cost_usd FROM daily_cost WHERE agent_id = ? AND day = ?"},
		{&q.conversation, "SELECT steps_approved, last_step FROM conversations WHERE agent_id = ? AND conversation_id = ?"},
		{&q.recent, "SELECT fingerprint FROM fingerprints WHERE agent_id = ? AND conversation_id = ? ORDER BY seq DESC LIMIT ?"},
		// Takes the step unless a live reservation holds it: RowsAffected
		// is 1 when we hold it, 0 when another request does.
		{&q.reserve, `INSERT INTO reservations (agent_id, conversation_id, step, holder, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (agent_id, conversation_id, step) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE reservations.expires_at <= ?6`},
		{&q.pruneReservations, "DELETE FROM reservations WHERE expires_at < ?"},
		{&q.dropReservation, "DELETE FROM reservations WHERE agent_id = ? AND conversation_id = ? AND step = ? AND holder = ?"},
		{&q.consume, `INSERT INTO conversations (agent_id, conversation_id, steps_approved, last_step, next_seq, updated_at)
			VALUES (?, ?, 1, ?, 1, ?) ON CONFLICT (agent_id, conversation_id) DO UPDATE SET
			steps_approved = steps_approved + 1, last_step = max(last_step, excluded.last_step),
			next_seq = next_seq + 1, updated_at = excluded.updated_at
			RETURNING next_seq`},
		{&q.addFingerprint, `INSERT INTO fingerprints (agent_id, conversation_id, seq, step, fingerprint, approved_at) VALUES (?, ?, ?, ?, ?, ?)`},
		{&q.pruneFingerprints, "DELETE FROM fingerprints WHERE agent_id = ? AND conversation_id = ? AND seq <= ?"},
		{&q.addCost, `INSERT INTO daily_cost (agent_id, day, cost_usd) VALUES (?, ?, ?)
			ON CONFLICT (agent_id, day) DO UPDATE SET cost_usd = cost_usd + excluded.cost_usd`},
		{&q.savepoint, groupcommit.SavepointSQL},
		{&q.release, groupcommit.ReleaseSQL},
		{&q.rollbackTo, groupcommit.RollbackToSQL},
	} {
		st, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			q.close()
			return nil, fmt.Errorf("prepare %q: %w", p.sql, explain(err))
		}
		*p.dst = st
	}
	return q, nil
}

func (q *stmts) close() {
	for _, st := range []*sql.Stmt{q.agent, q.countMinute, q.sumMinutes, q.pruneMinutes, q.dailyCost,
		q.conversation, q.recent, q.reserve, q.pruneReservations, q.dropReservation, q.consume,
		q.addFingerprint, q.pruneFingerprints, q.addCost, q.savepoint, q.release, q.rollbackTo} {
		if st != nil {
			st.Close()
		}
	}
}
