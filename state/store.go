package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolgate/toolgate/internal/groupcommit"
)

// BusyTimeout is how long a statement waits for another writer (in this or
// another process) before the store reports itself unavailable.
const BusyTimeout = 5 * time.Second

// busyTimeout is BusyTimeout, shortened by tests that hold the lock.
var busyTimeout = BusyTimeout

// ErrUnavailable matches (errors.Is) every failure of the store itself: a
// database locked past BusyTimeout, a full disk, a corrupt or read-only file,
// a closed store. The pipeline maps it to a deny with code STATE-001.
var ErrUnavailable = errors.New("state store unavailable")

// ErrNotFound is returned for an agent id that is not registered.
var ErrNotFound = errors.New("not found")

// Error is a failure of the store: what was being done, on which file, and
// the underlying error. It matches ErrUnavailable with errors.Is and unwraps
// to the driver's error (or context.Canceled, ...).
type Error struct {
	Op   string // what state was doing, e.g. "reserve"
	Path string // the database file
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("state: %s (%s): %v", e.Op, e.Path, e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every *Error match ErrUnavailable.
func (e *Error) Is(target error) bool { return target == ErrUnavailable }

// Tx is a write transaction of the store's writer (see Store.Write): it
// runs statements with ExecContext, QueryContext and QueryRowContext, as a
// *sql.Tx does, each prepared once on the writer's own connection and kept
// for its life, so query texts should be constants with ? parameters.
type Tx = groupcommit.Tx

// Store is the state database. It is safe for concurrent use; writes from one
// process are queued in Go and committed together (group commit, see Write),
// writes from several processes wait on SQLite's lock up to BusyTimeout.
type Store struct {
	db   *sql.DB
	path string
	// ckpt checkpoints the WAL off the writer (checkpoint.go).
	ckpt *checkpointer
	// w is this process's single writer: every write transaction of the
	// store (and of the audit log sharing the file) goes through it, so
	// they queue in Go rather than spin on SQLite's busy handler, and
	// concurrent ones share one transaction.
	w *groupcommit.Writer[*Tx]
	// wconn is w's own connection, with its statements prepared once.
	wconn *groupcommit.Conn
	// lastPrune is the time (UnixNano, of the request) Reserve last pruned.
	lastPrune atomic.Int64
	// inFlight counts this process's reservations not yet committed or
	// released: the decisions whose commits are on their way to w.
	inFlight atomic.Int64
}

// commitSiblings is how many reservations must be in flight for the writer
// to linger over a small batch (groupcommit.Linger), as PostgreSQL's
// commit_siblings. With fewer, most callers wait on the batch at hand and a
// yield would only delay them (a yield before every small batch cost 15% of
// the decisions per second at 8 concurrent clients; with this condition, 8
// clients are unchanged and 64 gain 2-5%; docs/server.md).
const commitSiblings = 16

// Open opens (creating if needed, with its parent directory at 0700) the
// database at path, switches it to WAL, and applies state's migrations. A
// file that is not a database, is corrupt or cannot be written is refused
// with an error naming the path.
func Open(ctx context.Context, path string) (*Store, error) {
	if strings.TrimSpace(path) == "" {
		return nil, &Error{Op: "open", Path: path, Err: errors.New("empty database path")}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{Op: "open", Path: path, Err: err}
	}
	fail := func(err error) (*Store, error) {
		return nil, &Error{Op: "open", Path: abs, Err: explain(err)}
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return fail(err)
	}
	if fi, err := os.Stat(abs); err == nil {
		if !fi.Mode().IsRegular() {
			return fail(errors.New("not a regular file"))
		}
		// Checked by mode as well as by SQLite, because a process running as
		// root could otherwise open a file its owner made read-only.
		if fi.Mode().Perm()&0o222 == 0 {
			return fail(errors.New("the file is read-only (no write permission): state needs to write"))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	db, err := sql.Open("sqlite", dsn(abs))
	if err != nil {
		return fail(err)
	}
	s := &Store{db: db, path: abs, ckpt: startCheckpointer(db, checkpointInterval), wconn: groupcommit.NewConn(db)}
	s.w = groupcommit.New(func(ctx context.Context) (groupcommit.Txn[*Tx], error) {
		s.ckpt.beforeBegin(ctx)
		t, err := s.wconn.Begin(ctx)
		if err != nil {
			return t, err
		}
		commit := t.Commit
		t.Commit = func() error {
			err := commit()
			if err == nil {
				s.ckpt.committed()
			}
			return err
		}
		return t, nil
	}, groupcommit.Linger(func() bool { return s.inFlight.Load() >= commitSiblings }))
	// Touch the file: journal_mode is set per connection by the DSN, so the
	// first connection reads the header and fails on a file that is not a
	// database. Then make sure we can write: BEGIN IMMEDIATE takes the write
	// lock, which a read-only file refuses.
	if err := s.probe(ctx); err != nil {
		s.Close()
		return fail(err)
	}
	if err := Migrate(ctx, db, "state", migrations); err != nil {
		s.Close()
		return nil, &Error{Op: "open", Path: abs, Err: err}
	}
	return s, nil
}

func dsn(abs string) string {
	u := url.URL{Path: filepath.ToSlash(abs)}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walBackstopPages))
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return "file:" + u.EscapedPath() + "?" + q.Encode()
}

func (s *Store) probe(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		return err
	}
	return s.write(ctx, "open", func(ctx context.Context, tx *Tx) error {
		// An empty write transaction still takes the write lock.
		_, err := tx.ExecContext(ctx, sqlSchemaMigrations)
		return err
	})
}

// explain adds a sentence a person can act on to SQLite's terse errors.
func explain(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("the file is not a SQLite database (corrupt or another format): %w", err)
	case sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("the database file is corrupt: %w", err)
	case sqlite3.SQLITE_READONLY:
		return fmt.Errorf("the database is read-only: %w", err)
	case sqlite3.SQLITE_CANTOPEN:
		return fmt.Errorf("cannot open the database file or its -wal/-shm files: %w", err)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("the disk is full: %w", err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("the database stayed locked for longer than %v: %w", busyTimeout, err)
	case sqlite3.SQLITE_IOERR:
		return fmt.Errorf("I/O error: %w", err)
	}
	return err
}

// Close finishes the queued writes and closes the database.
func (s *Store) Close() error {
	s.w.Close()
	s.wconn.Close()
	s.ckpt.close()
	if err := s.db.Close(); err != nil {
		return &Error{Op: "close", Path: s.path, Err: err}
	}
	return nil
}

// DB is the underlying database, for packages that keep their own tables in
// the same file (audit, approvals). They create them with Migrate under
// their own component name.
func (s *Store) DB() *sql.DB { return s.db }

// Path is the database file's absolute path.
func (s *Store) Path() string { return s.path }

func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Path: s.path, Err: explain(err)}
}

// Write runs fn in a write transaction of the store's database, for packages
// that keep their tables in the same file (the audit log) or must write
// together with a step's commit. Concurrent writes share one transaction
// (group commit): fn runs inside a savepoint of it, so an error from fn rolls
// back fn's writes only. Write returns after the transaction committed, or
// with the error that kept fn's writes out of the file; functions passed to
// onCommit run (on the caller's goroutine) only after a commit. fn runs at
// most once, gets a context that is not cancelled, must not keep tx, and must
// read what it builds on inside tx (another process may have written since).
// Errors other than fn's own come back as *Error.
func (s *Store) Write(ctx context.Context, op string, fn func(ctx context.Context, tx *Tx, onCommit func(func())) error) error {
	err := s.w.Do(ctx, func(ctx context.Context, tx *Tx, onCommit func(func())) error {
		if err := fn(ctx, tx, onCommit); err != nil {
			return fnError{err}
		}
		return nil
	})
	if fe, ok := err.(fnError); ok {
		return fe.err
	}
	return s.fail(op, err)
}

// fnError marks an error returned by Write's fn, handed back unchanged.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// write runs fn in a write transaction (see Write), committing when fn
// returns nil. Errors come back as *Error, except ErrNotFound and
// ErrReservationLost.
func (s *Store) write(ctx context.Context, op string, fn func(context.Context, *Tx) error) error {
	err := s.w.Do(ctx, func(ctx context.Context, tx *Tx, _ func(func())) error { return fn(ctx, tx) })
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrReservationLost) {
		return err
	}
	return s.fail(op, err)
}
