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
	pruneStaleLog     *sql.Stmt
	pruneStaleWindow  *sql.Stmt
	pruneAgentLog     *sql.Stmt
	logRequest        *sql.Stmt
	bumpWindow        *sql.Stmt
	windowCount       *sql.Stmt
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
		// The hourly window: one row per request, and per agent a running
		// count, so reading it never scans the hour. Active agents shed
		// their expired rows on each request; agents idle for an hour lose
		// theirs at the next prune (Store.prune, once per PruneEvery).
		{&q.pruneStaleLog, "DELETE FROM request_log WHERE agent_id IN (SELECT agent_id FROM request_window WHERE last_at <= ?)"},
		{&q.pruneStaleWindow, "DELETE FROM request_window WHERE last_at <= ?"},
		{&q.pruneAgentLog, "DELETE FROM request_log WHERE agent_id = ? AND at <= ?"},
		{&q.logRequest, "INSERT INTO request_log (agent_id, at) VALUES (?, ?)"},
		{&q.bumpWindow, `INSERT INTO request_window (agent_id, n, last_at) VALUES (?1, 1, ?2)
			ON CONFLICT (agent_id) DO UPDATE SET n = request_window.n + 1 - ?3, last_at = max(request_window.last_at, excluded.last_at)
			RETURNING n`},
		{&q.windowCount, "SELECT n FROM request_window WHERE agent_id = ? AND last_at > ?"},
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
	for _, st := range []*sql.Stmt{q.agent, q.pruneStaleLog, q.pruneStaleWindow, q.pruneAgentLog, q.logRequest,
		q.bumpWindow, q.windowCount, q.dailyCost, q.conversation, q.recent, q.reserve, q.pruneReservations, q.dropReservation,
		q.consume, q.addFingerprint, q.pruneFingerprints, q.addCost, q.savepoint, q.release, q.rollbackTo} {
		if st != nil {
			st.Close()
		}
	}
}
