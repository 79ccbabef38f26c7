package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/groupcommit"
)

// Migrate brings component's tables up to date: migrations[i] is the SQL
// (one or more statements) taking the component from version i to i+1. The
// version reached is kept per component in schema_migrations, so state,
// audit and supervisor keep their own histories in one file. Everything runs
// in one write transaction: two processes opening the file at once apply
// each migration exactly once. Migrations are append-only: never edit or
// reorder a released one. A database whose version is newer than
// len(migrations) (written by a newer toolgate) is refused.
func Migrate(ctx context.Context, db *sql.DB, component string, migrations []string) error {
	if strings.TrimSpace(component) == "" {
		return errors.New("migrate: empty component name")
	}
	err := groupcommit.Immediate(ctx, db, func(conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, sqlSchemaMigrations); err != nil {
			return err
		}
		var version int
		switch err := conn.QueryRowContext(ctx, "SELECT version FROM schema_migrations WHERE component = ?", component).Scan(&version); {
		case errors.Is(err, sql.ErrNoRows):
			version = 0
		case err != nil:
			return fmt.Errorf("read version: %w", err)
		}
		if version > len(migrations) {
			return fmt.Errorf("the database is at version %d but this toolgate knows only %d: written by a newer toolgate?", version, len(migrations))
		}
		for i := version; i < len(migrations); i++ {
			if _, err := conn.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("version %d: %w", i+1, err)
			}
		}
		if version < len(migrations) {
			if _, err := conn.ExecContext(ctx, `INSERT INTO schema_migrations (component, version, applied_at) VALUES (?, ?, ?)
				ON CONFLICT (component) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`,
				component, len(migrations), time.Now().UnixNano()); err != nil {
				return fmt.Errorf("record version: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, explain(err))
	}
	return nil
}

// sqlSchemaMigrations creates the table of each component's version.
const sqlSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	component  TEXT PRIMARY KEY,
	version    INTEGER NOT NULL,
	applied_at INTEGER NOT NULL)`

// migrations are state's own tables. Times are Unix nanoseconds (UTC); days
// are UTC calendar days "YYYY-MM-DD".
var migrations = []string{
	// 1: agents, conversations, reservations, fingerprints, budgets.
	`CREATE TABLE agents (
		id                    TEXT PRIMARY KEY,
		name                  TEXT NOT NULL,
		trust                 INTEGER NOT NULL CHECK (trust BETWEEN 0 AND 3),
		allowed_tools         TEXT NOT NULL DEFAULT '[]',
		blocked_tools         TEXT NOT NULL DEFAULT '[]',
		max_daily_cost_usd    REAL NOT NULL DEFAULT 0,
		max_requests_per_hour INTEGER NOT NULL DEFAULT 0,
		token_sha256          BLOB NOT NULL,
		created_at            INTEGER NOT NULL,
		revoked_at            INTEGER
	);
	CREATE TABLE conversations (
		agent_id        TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		steps_approved  INTEGER NOT NULL DEFAULT 0,
		last_step       INTEGER NOT NULL DEFAULT 0,
		next_seq        INTEGER NOT NULL DEFAULT 0,
		updated_at      INTEGER NOT NULL,
		PRIMARY KEY (agent_id, conversation_id)
	) WITHOUT ROWID;
	CREATE TABLE reservations (
		agent_id        TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		step            INTEGER NOT NULL,
		holder          TEXT NOT NULL,
		expires_at      INTEGER NOT NULL,
		PRIMARY KEY (agent_id, conversation_id, step)
	) WITHOUT ROWID;
	CREATE INDEX reservations_expires_at ON reservations (expires_at);
	CREATE TABLE fingerprints (
		agent_id        TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		seq             INTEGER NOT NULL,
		step            INTEGER NOT NULL,
		fingerprint     TEXT NOT NULL,
		approved_at     INTEGER NOT NULL,
		PRIMARY KEY (agent_id, conversation_id, seq)
	) WITHOUT ROWID;
	CREATE TABLE request_log (
		agent_id TEXT NOT NULL,
		at       INTEGER NOT NULL
	);
	CREATE INDEX request_log_agent_at ON request_log (agent_id, at);
	CREATE TABLE request_window (
		agent_id TEXT PRIMARY KEY,
		n        INTEGER NOT NULL,
		last_at  INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX request_window_last_at ON request_window (last_at);
	CREATE TABLE daily_cost (
		agent_id TEXT NOT NULL,
		day      TEXT NOT NULL,
		cost_usd REAL NOT NULL DEFAULT 0,
		PRIMARY KEY (agent_id, day)
	) WITHOUT ROWID;`,
	// 2: the hourly request count kept per agent and minute instead of one
	// row per request: at most 61 rows per agent, whatever the traffic.
	// The requests of the last hour move into their minutes.
	`CREATE TABLE request_minutes (
		agent_id TEXT NOT NULL,
		minute   INTEGER NOT NULL,
		n        INTEGER NOT NULL,
		PRIMARY KEY (agent_id, minute)
	) WITHOUT ROWID;
	CREATE INDEX request_minutes_minute ON request_minutes (minute);
	INSERT INTO request_minutes (agent_id, minute, n)
		SELECT agent_id, at / 60000000000, count(*) FROM request_log GROUP BY agent_id, at / 60000000000;
	DROP TABLE request_log;
	DROP TABLE request_window;`,
	// 3: reservations live only while a call is decided, so the table holds
	// the calls in flight (and what a crashed process left): the prune
	// that reads expires_at once a minute scans it, rather than every
	// reservation adding to and removing from an index.
	`DROP INDEX reservations_expires_at;`,
}
