package state

import (
	"context"
	"database/sql"
)

// The statements of the hot path (Reserve, Commit, Release). In the
// writer's transaction (a *Tx) each is prepared once on the writer's
// connection: parsing SQL was a third of a cycle's CPU.
const (
	sqlAgent = "SELECT " + agentColumns + " FROM agents WHERE id = ?"
	// The hourly window: per agent, a count of requests per minute (Unix
	// time / 60), summed over the current minute and the 60 before it.
	// Minutes older than that are deleted by the next prune (Store.prune,
	// once per PruneEvery); the sum never reads them.
	sqlCountMinute = `INSERT INTO request_minutes (agent_id, minute, n) VALUES (?1, ?2, 1)
		ON CONFLICT (agent_id, minute) DO UPDATE SET n = n + 1`
	sqlSumMinutes   = "SELECT coalesce(sum(n), 0) FROM request_minutes WHERE agent_id = ? AND minute >= ?"
	sqlPruneMinutes = "DELETE FROM request_minutes WHERE minute < ?"
	sqlDailyCost    = "SELECT cost_usd FROM daily_cost WHERE agent_id = ? AND day = ?"
	sqlConversation = "SELECT steps_approved, last_step FROM conversations WHERE agent_id = ? AND conversation_id = ?"
	sqlRecent       = "SELECT fingerprint FROM fingerprints WHERE agent_id = ? AND conversation_id = ? ORDER BY seq DESC LIMIT ?"
	// Takes the step unless a live reservation holds it: RowsAffected is 1
	// when we hold it, 0 when another request does.
	sqlReserve = `INSERT INTO reservations (agent_id, conversation_id, step, holder, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (agent_id, conversation_id, step) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE reservations.expires_at <= ?6`
	sqlPruneReservations = "DELETE FROM reservations WHERE expires_at < ?"
	sqlDropReservation   = "DELETE FROM reservations WHERE agent_id = ? AND conversation_id = ? AND step = ? AND holder = ?"
	sqlConsume           = `INSERT INTO conversations (agent_id, conversation_id, steps_approved, last_step, next_seq, updated_at)
		VALUES (?, ?, 1, ?, 1, ?) ON CONFLICT (agent_id, conversation_id) DO UPDATE SET
		steps_approved = steps_approved + 1, last_step = max(last_step, excluded.last_step),
		next_seq = next_seq + 1, updated_at = excluded.updated_at
		RETURNING next_seq`
	sqlAddFingerprint    = `INSERT INTO fingerprints (agent_id, conversation_id, seq, step, fingerprint, approved_at) VALUES (?, ?, ?, ?, ?, ?)`
	sqlPruneFingerprints = "DELETE FROM fingerprints WHERE agent_id = ? AND conversation_id = ? AND seq <= ?"
	sqlAddCost           = `INSERT INTO daily_cost (agent_id, day, cost_usd) VALUES (?, ?, ?)
		ON CONFLICT (agent_id, day) DO UPDATE SET cost_usd = cost_usd + excluded.cost_usd`
)

// querier is what the store's *sql.DB and the writer's *Tx share for
// reading: the facts are read in Reserve's transaction, and outside any by
// Budget and Conversation.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
