package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConnWriter: a writer on its own Conn commits concurrent jobs in shared
// transactions, rolls a failed job back alone, keeps each statement text
// prepared once, and gives its connection back on Close.
func TestConnWriter(t *testing.T) {
	db := openDB(t)
	c := NewConn(db)
	w := New(c.Begin)
	ctx := context.Background()
	errOdd := errors.New("odd")
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			errs[i] = w.Do(ctx, func(ctx context.Context, tx *Tx, _ func(func())) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, i); err != nil {
					return err
				}
				var n int
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE k = ?`, i).Scan(&n); err != nil || n != 1 {
					return fmt.Errorf("own row not visible: %d, %v", n, err)
				}
				if i%2 == 1 {
					return errOdd
				}
				return nil
			})
		})
	}
	wg.Wait()
	checkOddFailed(t, db, errs, errOdd)
	// Each text once: the transaction's, the savepoints' and the jobs' two.
	checkKept(t, c, `INSERT INTO t (k) VALUES (?)`, `SELECT count(*) FROM t WHERE k = ?`)
	if got := db.Stats().InUse; got != 1 {
		t.Errorf("connections in use while the writer runs: %d, want 1", got)
	}
	w.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := db.Stats().InUse; got != 0 {
		t.Errorf("connections in use after Close: %d, want 0", got)
	}
}

// checkKept fails unless the statements c keeps prepared are among the
// transaction's own and want.
func checkKept(t *testing.T, c *Conn, want ...string) {
	t.Helper()
	ok := map[string]bool{"BEGIN IMMEDIATE": true, "COMMIT": true, "ROLLBACK": true,
		SavepointSQL: true, ReleaseSQL: true, RollbackToSQL: true}
	for _, q := range want {
		ok[q] = true
	}
	for q := range c.stmts {
		if !ok[q] {
			t.Errorf("unexpected statement kept prepared: %q", q)
		}
	}
	for _, q := range want {
		if c.stmts[q] == nil {
			t.Errorf("statement not kept prepared: %q", q)
		}
	}
}

// connWriter is a writer on its own Conn to a fresh database, closed when
// the test ends.
func connWriter(t *testing.T) (*sql.DB, *Conn, *Writer[*Tx]) {
	db := openDB(t)
	c := NewConn(db)
	w := New(c.Begin)
	t.Cleanup(func() {
		w.Close()
		c.Close()
	})
	return db, c, w
}

// TestConnStatementLimit: past MaxStatements distinct texts, statements
// still run, unprepared, and the cache stops growing.
func TestConnStatementLimit(t *testing.T) {
	db, c, w := connWriter(t)
	err := w.Do(context.Background(), func(ctx context.Context, tx *Tx, _ func(func())) error {
		for i := range MaxStatements + 10 {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO t (k) VALUES (%d)`, i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != MaxStatements+10 {
		t.Fatalf("rows %d (%v), want %d", n, err, MaxStatements+10)
	}
	if len(c.stmts) != MaxStatements {
		t.Errorf("%d statements kept, want %d", len(c.stmts), MaxStatements)
	}
}

// TestConnBadStatement: a statement SQLite cannot prepare fails its job with
// SQLite's error, through Exec, Query and QueryRow alike, and the writer goes
// on.
func TestConnBadStatement(t *testing.T) {
	_, c, w := connWriter(t)
	ctx := context.Background()
	for name, run := range map[string]func(context.Context, *Tx) error{
		"exec": func(ctx context.Context, tx *Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO nosuch (k) VALUES (1)`)
			return err
		},
		"query": func(ctx context.Context, tx *Tx) error {
			rows, err := tx.QueryContext(ctx, `SELECT k FROM nosuch`)
			if err == nil {
				rows.Close()
			}
			return err
		},
		"query row": func(ctx context.Context, tx *Tx) error {
			var k int
			return tx.QueryRowContext(ctx, `SELECT k FROM nosuch`).Scan(&k)
		},
	} {
		err := w.Do(ctx, func(ctx context.Context, tx *Tx, _ func(func())) error { return run(ctx, tx) })
		if err == nil || !strings.Contains(err.Error(), "no such table") {
			t.Errorf("%s: %v, want SQLite's no such table", name, err)
		}
	}
	err := w.Do(ctx, func(ctx context.Context, tx *Tx, _ func(func())) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (1)`)
		return err
	})
	if err != nil {
		t.Fatalf("a good job after the bad ones: %v", err)
	}
	checkKept(t, c, `INSERT INTO t (k) VALUES (1)`)
}

// TestConnLocked: while another connection holds the write lock, Begin
// fails after the busy timeout and keeps its connection; once the lock is
// free the next job commits.
func TestConnLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gc.db")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(50)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db, other := open(), open()
	if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := NewConn(db)
	w := New(c.Begin)
	defer c.Close()
	defer w.Close()
	insert := func(k int) error {
		return w.Do(ctx, func(ctx context.Context, tx *Tx, _ func(func())) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, k)
			return err
		})
	}
	if err := insert(1); err != nil {
		t.Fatal(err)
	}
	conn := c.conn
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if err := insert(2); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("insert while locked: %v, want database is locked", err)
	}
	if _, err := lock.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if err := insert(3); err != nil {
		t.Fatalf("insert after the lock: %v", err)
	}
	if c.conn != conn {
		t.Error("the connection was replaced after a busy BEGIN")
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows %d (%v), want 2", n, err)
	}
}

// BenchmarkConnStatements compares a batch of 32 statements (16 queries of
// one row, 16 inserts or upserts) in a *sql.Tx with statements prepared on
// the *sql.DB, the way a Writer's Begin on *sql.Tx runs them, and on a Conn.
func BenchmarkConnStatements(b *testing.B) {
	const (
		get    = `SELECT k FROM t WHERE k = ?`
		upsert = `INSERT INTO t (k) VALUES (?) ON CONFLICT (k) DO NOTHING`
	)
	work := func(ctx context.Context, b *testing.B, q func(string) stmt) {
		for i := range 16 {
			var k int
			if err := q(get).QueryRowContext(ctx, i).Scan(&k); err != nil && !errors.Is(err, sql.ErrNoRows) {
				b.Fatal(err)
			}
			if _, err := q(upsert).ExecContext(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("sql.Tx", func(b *testing.B) {
		db := openDB(b)
		prepared := map[string]*sql.Stmt{}
		for _, q := range []string{get, upsert} {
			st, err := db.Prepare(q)
			if err != nil {
				b.Fatal(err)
			}
			prepared[q] = st
		}
		w := New(func(ctx context.Context) (Txn[*sql.Tx], error) {
			tx, err := db.BeginTx(ctx, nil)
			return Txn[*sql.Tx]{Q: tx, Commit: tx.Commit, Rollback: tx.Rollback}, err
		})
		defer w.Close()
		for b.Loop() {
			err := w.Do(context.Background(), func(ctx context.Context, tx *sql.Tx, _ func(func())) error {
				work(ctx, b, func(q string) stmt { return tx.StmtContext(ctx, prepared[q]) })
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Conn", func(b *testing.B) {
		db := openDB(b)
		c := NewConn(db)
		w := New(c.Begin)
		defer c.Close()
		defer w.Close()
		for b.Loop() {
			err := w.Do(context.Background(), func(ctx context.Context, tx *Tx, _ func(func())) error {
				work(ctx, b, func(q string) stmt { return boundText{tx, q} })
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// stmt is what the benchmark runs: a *sql.Stmt or a boundText.
type stmt interface {
	ExecContext(context.Context, ...any) (sql.Result, error)
	QueryRowContext(context.Context, ...any) *sql.Row
}

// boundText is a query text on a Tx, with a *sql.Stmt's methods.
type boundText struct {
	tx *Tx
	q  string
}

func (s boundText) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return s.tx.ExecContext(ctx, s.q, args...)
}

func (s boundText) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	return s.tx.QueryRowContext(ctx, s.q, args...)
}

// TestStuckInTransaction: only a ROLLBACK that failed for another reason
// than SQLite's "no transaction is active" leaves the connection in one.
func TestStuckInTransaction(t *testing.T) {
	db := openDB(t)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, noTx := conn.ExecContext(context.Background(), "ROLLBACK")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{noTx, false},
		{errors.New("disk I/O error"), true},
	} {
		if got := stuckInTransaction(c.err); got != c.want {
			t.Errorf("stuckInTransaction(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if noTx == nil {
		t.Fatal("ROLLBACK outside a transaction succeeded")
	}
}

// TestImmediate: fn's writes commit when it returns nil and roll back when
// it fails or panics, or the COMMIT fails; the connection goes back to the pool outside any
// transaction, so the next Immediate on the one-connection pool works.
func TestImmediate(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`PRAGMA foreign_keys = ON`,
		`CREATE TABLE child (k INTEGER REFERENCES t (k) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	for _, c := range []struct {
		name    string
		fn      func(*sql.Conn) error
		wantErr string // "" for none
		rows    int    // rows of t and child afterwards
	}{
		{"commit", func(c *sql.Conn) error { return exec(c, `INSERT INTO t VALUES (1)`) }, "", 1},
		{"fn fails", func(c *sql.Conn) error {
			if err := exec(c, `INSERT INTO t VALUES (2)`); err != nil {
				return err
			}
			return boom
		}, "boom", 1},
		{"fn rolled back itself", func(c *sql.Conn) error {
			if err := exec(c, `INSERT INTO t VALUES (3)`); err != nil {
				return err
			}
			if err := exec(c, `ROLLBACK`); err != nil {
				return err
			}
			return boom
		}, "boom", 1},
		{"commit fails", func(c *sql.Conn) error { return exec(c, `INSERT INTO child VALUES (99)`) }, "commit: ", 1},
		{"fn panics", func(c *sql.Conn) error {
			if err := exec(c, `INSERT INTO t VALUES (4)`); err != nil {
				return err
			}
			panic(boom)
		}, "panic: boom", 1},
		{"after the failures", func(c *sql.Conn) error { return exec(c, `INSERT INTO child VALUES (1)`) }, "", 2},
	} {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return Immediate(ctx, db, c.fn)
		}()
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		}
		var rows int
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM child)`).Scan(&rows); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if rows != c.rows {
			t.Errorf("%s: %d rows, want %d", c.name, rows, c.rows)
		}
		if n := db.Stats().OpenConnections; n != 1 {
			t.Errorf("%s: %d open connections, want the pool's one kept", c.name, n)
		}
	}
}

func exec(c *sql.Conn, q string) error {
	_, err := c.ExecContext(context.Background(), q)
	return err
}
