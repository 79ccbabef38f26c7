package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/toolgate/toolgate/internal/groupcommit"
)

// DefaultCheckpointEvery is how often (in entries) Append signs a checkpoint
// when Options.CheckpointEvery is zero.
const DefaultCheckpointEvery = 100

// Options tune a Log.
type Options struct {
	// CheckpointEvery signs a checkpoint every N entries (0: 100; negative:
	// only on Close).
	CheckpointEvery int
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Write, when set, runs the log's write transactions: fn runs inside a
	// transaction that already holds SQLite's write lock, and Write returns
	// once it committed. state.Store.Write does this, so that state and the
	// audit log share one writer and commit together. nil: the log runs its
	// own writer on db (BEGIN IMMEDIATE, concurrent appends committed
	// together).
	Write func(ctx context.Context, fn func(ctx context.Context, q Querier) error) error
}

// Querier is where the log writes an entry: a transaction that holds
// SQLite's write lock (a *state.Tx or a *sql.Tx, for AppendIn). Statements
// are constant texts with parameters, run once per entry, so a Querier that
// keeps them prepared (as state's does) saves their parsing.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Log appends entries to the chain. It is safe for concurrent use, and
// several processes may append to the same database: every append reads the
// head and inserts the next entry inside a transaction that holds SQLite's
// write lock (BEGIN IMMEDIATE). Concurrent appends of one process share a
// transaction (group commit): each still reads the head, links and hashes
// its own entry, in order, and returns only after the COMMIT; the entries'
// signatures are made on other goroutines meanwhile and stored before the
// COMMIT.
type Log struct {
	db     *sql.DB
	signer signature.Signer
	every  int64
	logger *slog.Logger
	now    func() time.Time
	write  func(ctx context.Context, fn func(ctx context.Context, q Querier) error) error
	own    *groupcommit.Writer[*groupcommit.Tx] // nil with Options.Write
	conn   *groupcommit.Conn                    // own's connection

	mu     sync.Mutex // serialises Close and Checkpoint
	closed atomic.Bool
}

// migrations are the audit tables' schema versions, applied in order. They
// are kept as plain statements so state.Migrate can run them later.
var migrations = []string{
	`CREATE TABLE audit_entries (
		seq INTEGER PRIMARY KEY,
		time TEXT NOT NULL,
		agent_id TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		step INTEGER NOT NULL,
		action_type TEXT NOT NULL,
		request_digest TEXT NOT NULL,
		args_preview TEXT NOT NULL,
		decision TEXT NOT NULL,
		reasons TEXT NOT NULL,
		tier INTEGER NOT NULL,
		bundle TEXT NOT NULL,
		revision TEXT NOT NULL,
		probes TEXT NOT NULL,
		approval_id TEXT NOT NULL,
		request_json TEXT NOT NULL,
		prev_hash TEXT NOT NULL,
		hash TEXT NOT NULL,
		signature BLOB
	);
	CREATE INDEX audit_entries_agent ON audit_entries(agent_id, seq);
	CREATE INDEX audit_entries_conversation ON audit_entries(conversation_id, seq);
	CREATE INDEX audit_entries_time ON audit_entries(time);
	CREATE TABLE audit_checkpoints (
		size INTEGER PRIMARY KEY,
		head_hash TEXT NOT NULL,
		time TEXT NOT NULL,
		signature BLOB
	);`,
}

// Open prepares the log on db, creating or migrating its tables. signer may
// be nil: the chain is then hashed but not signed.
func Open(ctx context.Context, db *sql.DB, signer signature.Signer, opts Options) (*Log, error) {
	if err := migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("audit: migrate: %w", err)
	}
	l := &Log{db: db, signer: signer, every: int64(opts.CheckpointEvery), logger: opts.Logger, now: opts.Now}
	if l.every == 0 {
		l.every = DefaultCheckpointEvery
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	if l.now == nil {
		l.now = time.Now
	}
	if opts.Write != nil {
		l.write = opts.Write
	} else {
		l.conn = groupcommit.NewConn(db)
		l.own = groupcommit.New(l.conn.Begin)
		l.write = func(ctx context.Context, fn func(context.Context, Querier) error) error {
			return l.own.Do(ctx, func(ctx context.Context, tx *groupcommit.Tx, _ func(func())) error { return fn(ctx, tx) })
		}
	}
	return l, nil
}

// migrate applies the migrations not yet recorded in audit_meta. It writes
// nothing when the schema is current, so it succeeds on a read-only database
// that already has the tables.
func migrate(ctx context.Context, db *sql.DB) error {
	version, err := schemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if version == len(migrations) {
		return nil
	}
	if version > len(migrations) {
		return fmt.Errorf("audit schema version %d is newer than this toolgate knows (%d)", version, len(migrations))
	}
	return groupcommit.Immediate(ctx, db, func(conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS audit_meta (version INTEGER NOT NULL)`); err != nil {
			return err
		}
		var v int
		err := conn.QueryRowContext(ctx, `SELECT version FROM audit_meta`).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := conn.ExecContext(ctx, `INSERT INTO audit_meta (version) VALUES (0)`); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		for ; v < len(migrations); v++ {
			if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migration %d: %w", v+1, err)
			}
		}
		_, err = conn.ExecContext(ctx, `UPDATE audit_meta SET version = ?`, v)
		return err
	})
}

// schemaVersion is the recorded version, 0 when there is no audit_meta.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'audit_meta'`).Scan(&n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM audit_meta`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// Append writes one final decision to the chain and returns the stored entry.
// It returns only after the transaction committed; any error wraps
// ErrNotRecorded and means the entry is not in the log.
func (l *Log) Append(ctx context.Context, rec Record) (Entry, error) {
	r, err := newRow(rec, l.now())
	if err != nil {
		return Entry{}, notRecorded("encode", err)
	}
	if l.closed.Load() {
		return Entry{}, notRecorded("append", ErrClosed)
	}
	err = l.write(ctx, func(ctx context.Context, q Querier) error { return l.appendRow(ctx, q, &r) })
	if err != nil {
		return Entry{}, notRecorded(fmt.Sprintf("entry for %s/%s step %d", r.agentID, r.convID, r.step), err)
	}
	return entryOf(&r, rec), nil
}

// AppendIn writes one final decision to the chain through q, a transaction
// that holds SQLite's write lock (one of state.Store.Write's): the entry is
// in the log once q commits, and not before. Any error wraps ErrNotRecorded;
// the caller must then roll q back (return the error from its function).
// Inside a job of the store's writer (state.Store.Write) the entry is
// signed off the writer and its signature stored just before the batch's
// COMMIT: the returned Entry then has no Signature yet, and a failed
// signature fails the whole batch.
func (l *Log) AppendIn(ctx context.Context, q Querier, rec Record) (Entry, error) {
	r, err := newRow(rec, l.now())
	if err != nil {
		return Entry{}, notRecorded("encode", err)
	}
	if err := l.appendRow(ctx, q, &r); err != nil {
		return Entry{}, notRecorded(fmt.Sprintf("entry for %s/%s step %d", r.agentID, r.convID, r.step), err)
	}
	return entryOf(&r, rec), nil
}

// appendRow links, hashes, signs and inserts r after the head read in q's
// transaction, with a checkpoint every l.every entries.
func (l *Log) appendRow(ctx context.Context, q Querier, r *row) error {
	// Checked in the transaction: Close's final checkpoint is written after
	// every entry that got this far.
	if l.closed.Load() {
		return ErrClosed
	}
	seq, head, err := readHead(ctx, q)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	r.seq, r.prevHash = seq+1, head
	digest := entryDigest(r)
	r.hash = hex.EncodeToString(digest)
	// In a batch of the group-commit writer, the signature is made on
	// another goroutine while the writer goes on with the batch's other
	// jobs, and written into the row just before the COMMIT (BeforeCommit):
	// the same digest is signed, and no row is committed without its
	// signature, since a failed signature or UPDATE rolls back the batch.
	var sig *signing
	switch {
	case l.signer == nil:
	case groupcommit.InJob(ctx):
		sig = &signing{signer: l.signer, digest: digest, done: make(chan struct{})}
		go sig.run()
	default:
		if r.signature, err = l.signer.SignMessage(bytes.NewReader(digest)); err != nil {
			return fmt.Errorf("sign: %w", err)
		}
	}
	args := []any{r.seq, r.time, r.agentID, r.convID, r.step, r.actionType, r.requestDigest,
		r.argsPreview, r.decision, r.reasons, r.tier, r.bundle, r.revision, r.probes,
		r.approvalID, r.requestJSON, r.prevHash, r.hash, r.signature}
	if _, err = q.ExecContext(ctx, insertEntry, args...); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if sig != nil {
		seq := r.seq
		groupcommit.BeforeCommit(ctx, func() error {
			s, err := sig.wait()
			if err != nil {
				return fmt.Errorf("sign entry %d: %w", seq, err)
			}
			if _, err = q.ExecContext(ctx, setSignature, s, seq); err != nil {
				return fmt.Errorf("store signature of entry %d: %w", seq, err)
			}
			r.signature = s
			return nil
		})
	}
	if l.every > 0 && r.seq%l.every == 0 {
		return l.checkpoint(ctx, q, r.seq, r.hash)
	}
	return nil
}

// entryOf is the Entry for a row just written from rec, without decoding
// the JSON columns back.
func entryOf(r *row, rec Record) Entry {
	t, _ := time.Parse(timeLayout, r.time)
	return Entry{
		Seq: r.seq, Time: t, AgentID: r.agentID, ConversationID: r.convID, Step: int(r.step),
		ActionType: r.actionType, RequestDigest: r.requestDigest, ArgsPreview: r.argsPreview,
		Decision: rec.Decision.Outcome, Reasons: rec.Decision.Reasons, Tier: rec.Decision.Tier,
		Bundle: r.bundle, Revision: r.revision, Probes: rec.Probes, ApprovalID: r.approvalID,
		RequestJSON: json.RawMessage(r.requestJSON), PrevHash: r.prevHash, Hash: r.hash, Signature: r.signature,
	}
}

const insertEntry = `INSERT INTO audit_entries (seq, time, agent_id, conversation_id, step,
	action_type, request_digest, args_preview, decision, reasons, tier, bundle, revision,
	probes, approval_id, request_json, prev_hash, hash, signature)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

const selectHead = `SELECT seq, hash FROM audit_entries ORDER BY seq DESC LIMIT 1`

const setSignature = `UPDATE audit_entries SET signature = ? WHERE seq = ?`

// signing is one entry's signature, made by whichever comes first: the
// goroutine started for it, or the writer when it needs the signature.
// The writer so never waits for a goroutine that has not been scheduled
// yet (on busy cores, behind requests' policy evaluations), only for one
// that is signing.
type signing struct {
	signer  signature.Signer
	digest  []byte
	claimed atomic.Bool
	done    chan struct{}
	sig     []byte
	err     error
}

// run signs, unless someone else already is.
func (s *signing) run() {
	if !s.claimed.CompareAndSwap(false, true) {
		return
	}
	s.sig, s.err = s.signer.SignMessage(bytes.NewReader(s.digest))
	close(s.done)
}

// wait returns the signature, making it here if nobody started yet.
func (s *signing) wait() ([]byte, error) {
	s.run()
	<-s.done
	return s.sig, s.err
}

// readHead returns the last entry's seq and hash (0 and GenesisHash when the
// log is empty).
func readHead(ctx context.Context, q Querier) (int64, string, error) {
	var seq int64
	var h string
	err := q.QueryRowContext(ctx, selectHead).Scan(&seq, &h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, GenesisHash, nil
	}
	return seq, h, err
}

// checkpoint signs and stores (size, head) inside the caller's transaction.
func (l *Log) checkpoint(ctx context.Context, q Querier, size int64, head string) error {
	t := l.now().UTC()
	var sig []byte
	if l.signer != nil {
		var err error
		if sig, err = l.signer.SignMessage(bytes.NewReader(checkpointDigest(size, head, t))); err != nil {
			return fmt.Errorf("sign checkpoint: %w", err)
		}
	}
	if _, err := q.ExecContext(ctx,
		`INSERT OR IGNORE INTO audit_checkpoints (size, head_hash, time, signature) VALUES (?, ?, ?, ?)`,
		size, head, t.Format(timeLayout), sig); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Checkpoint signs a checkpoint of the current head now (if the head has
// none yet) and returns the latest checkpoint.
func (l *Log) Checkpoint(ctx context.Context) (Checkpoint, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkpointHead(ctx); err != nil {
		return Checkpoint{}, err
	}
	return LatestCheckpoint(ctx, l.db)
}

func (l *Log) checkpointHead(ctx context.Context) error {
	return l.write(ctx, func(ctx context.Context, q Querier) error {
		seq, head, err := readHead(ctx, q)
		if err != nil || seq == 0 {
			return err
		}
		return l.checkpoint(ctx, q, seq, head)
	})
}

// Close writes a final signed checkpoint of the head, so that a later
// truncation of the tail is found, and refuses further appends. It does not
// close the database.
func (l *Log) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	err := l.checkpointHead(ctx)
	// Every append that got past the closed check ran before the
	// checkpoint above, in the same writer.
	if l.own != nil {
		l.own.Close()
		l.conn.Close()
	}
	if err != nil {
		return fmt.Errorf("audit: final checkpoint: %w", err)
	}
	return nil
}
