package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"
)

func openDB(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gc.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// counted is a Begin whose savepoint functions are prepared statements
// (prepared: true) or left nil, counting the calls of each.
func counted(db *sql.DB, prepared bool, calls *[3]atomic.Int64) Begin[*sql.Tx] {
	var sts [3]*sql.Stmt
	if prepared {
		for i, q := range []string{SavepointSQL, ReleaseSQL, RollbackToSQL} {
			st, err := db.Prepare(q)
			if err != nil {
				panic(err)
			}
			sts[i] = st
		}
	}
	return func(ctx context.Context) (Txn[*sql.Tx], error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return Txn[*sql.Tx]{}, err
		}
		t := Txn[*sql.Tx]{Q: tx, Commit: tx.Commit, Rollback: tx.Rollback}
		if prepared {
			fs := make([]func() error, 3)
			for i := range fs {
				st := tx.StmtContext(ctx, sts[i])
				fs[i] = func() error {
					calls[i].Add(1)
					_, err := st.ExecContext(ctx)
					return err
				}
			}
			t.Savepoint, t.Release, t.RollbackTo = fs[0], fs[1], fs[2]
		}
		return t, nil
	}
}

// TestFailedJobRollsBackAlone: jobs of one batch that fail leave nothing,
// the others commit, and only committed jobs' hooks run; with the
// savepoints as prepared statements and as text.
func TestFailedJobRollsBackAlone(t *testing.T) {
	for _, prepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			db := openDB(t)
			var calls [3]atomic.Int64
			w := New(counted(db, prepared, &calls))
			defer w.Close()
			ctx := context.Background()
			errOdd := errors.New("odd")
			var hooks atomic.Int64
			var wg sync.WaitGroup
			errs := make([]error, 40)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = w.Do(ctx, func(ctx context.Context, tx *sql.Tx, onCommit func(func())) error {
						if _, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, i); err != nil {
							return err
						}
						onCommit(func() { hooks.Add(1) })
						if i%2 == 1 {
							return errOdd // after its write: the savepoint must undo it
						}
						return nil
					})
				}()
			}
			wg.Wait()
			checkOddFailed(t, db, errs, errOdd)
			if hooks.Load() != 20 {
				t.Errorf("hooks ran %d times, want 20", hooks.Load())
			}
			// A job alone in its batch runs without a savepoint.
			if sp, rel, rb := calls[0].Load(), calls[1].Load(), calls[2].Load(); prepared && (sp != rel || sp > 40 || rb > 20 || sp == 0) {
				t.Errorf("savepoint/release/rollback to: %d/%d/%d calls", sp, rel, rb)
			}
		})
	}
}

// checkOddFailed checks 40 jobs that inserted their number into t, the odd
// ones then failing with errOdd: only the even ones committed.
func checkOddFailed(t *testing.T, db *sql.DB, errs []error, errOdd error) {
	t.Helper()
	for i, err := range errs {
		if want := i%2 == 1; errors.Is(err, errOdd) != want || (!want && err != nil) {
			t.Errorf("job %d: %v", i, err)
		}
	}
	var n, odd int
	if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE k % 2 = 1) FROM t`).Scan(&n, &odd); err != nil {
		t.Fatal(err)
	}
	if n != 20 || odd != 0 {
		t.Errorf("rows %d (odd %d), want 20 (0)", n, odd)
	}
}

// TestCommitFailureFailsBatch: when COMMIT fails, every job of the batch
// gets the error and no hook runs.
func TestCommitFailureFailsBatch(t *testing.T) {
	db := openDB(t)
	var calls [3]atomic.Int64
	begin := counted(db, true, &calls)
	boom := errors.New("boom")
	w := New(func(ctx context.Context) (Txn[*sql.Tx], error) {
		tx, err := begin(ctx)
		tx.Commit = func() error { return boom }
		return tx, err
	})
	defer w.Close()
	ran := false
	err := w.Do(context.Background(), func(ctx context.Context, tx *sql.Tx, onCommit func(func())) error {
		onCommit(func() { ran = true })
		_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (1)`)
		return err
	})
	if !errors.Is(err, boom) || ran {
		t.Fatalf("Do: %v, hook ran %v; want boom and no hook", err, ran)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows %d (%v), want 0", n, err)
	}
}

// TestBeforeCommit: functions registered by a job run after the batch's
// last job and before its COMMIT, in order, inside the transaction; a
// failed job's are dropped; an error from one fails every job of the batch
// and commits nothing; outside a job nothing is registered.
func TestBeforeCommit(t *testing.T) {
	ctx := context.Background()
	if InJob(ctx) || BeforeCommit(ctx, func() error { return nil }) {
		t.Fatal("registered outside a job")
	}
	db := openDB(t)
	var calls [3]atomic.Int64
	w := New(counted(db, true, &calls))
	defer w.Close()

	// Hold the writer so that the jobs below share one batch.
	hold, held := make(chan struct{}), make(chan struct{})
	go w.Do(ctx, func(context.Context, *sql.Tx, func(func())) error {
		close(held)
		<-hold
		return nil
	})
	<-held
	var mu sync.Mutex
	var order []string
	errFail := errors.New("job failed")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Do(ctx, func(ctx context.Context, tx *sql.Tx, _ func(func())) error {
				if !InJob(ctx) {
					return errors.New("not in a job")
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, i); err != nil {
					return err
				}
				BeforeCommit(ctx, func() error {
					mu.Lock()
					defer mu.Unlock()
					order = append(order, fmt.Sprint(i))
					// Still in the transaction: it can write.
					_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, 100+i)
					return err
				})
				if i == 1 {
					return errFail
				}
				return nil
			})
		}()
	}
	// Wait until all three are queued, then let the batch go.
	for len(w.jobs) < 3 {
		runtime.Gosched()
	}
	close(hold)
	wg.Wait()
	if errs[0] != nil || !errors.Is(errs[1], errFail) || errs[2] != nil {
		t.Fatalf("errors %v", errs)
	}
	if len(order) != 2 || (order[0] != "0" && order[0] != "2") || order[0] == order[1] {
		t.Errorf("before-commit order %v, want the two committed jobs' once each", order)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE k IN (0, 2, 100, 102)`).Scan(&n); err != nil || n != 4 {
		t.Errorf("committed rows %d (%v), want 4", n, err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE k IN (1, 101)`).Scan(&n); err != nil || n != 0 {
		t.Errorf("failed job's rows %d (%v), want 0", n, err)
	}

	// A failing before-commit function fails the whole batch.
	boom := errors.New("boom")
	hooked := false
	err := w.Do(ctx, func(ctx context.Context, tx *sql.Tx, onCommit func(func())) error {
		onCommit(func() { hooked = true })
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (7)`); err != nil {
			return err
		}
		BeforeCommit(ctx, func() error { return boom })
		return nil
	})
	if !errors.Is(err, boom) || hooked {
		t.Fatalf("Do: %v, hook ran %v; want boom, no hook", err, hooked)
	}
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE k = 7`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows of the failed batch: %d (%v)", n, err)
	}
}

// TestLoneJob: a job alone in its batch runs without a savepoint; when it
// fails its transaction is rolled back, and the writer goes on.
func TestLoneJob(t *testing.T) {
	db := openDB(t)
	var calls [3]atomic.Int64
	w := New(counted(db, true, &calls))
	defer w.Close()
	ctx := context.Background()
	errFail := errors.New("fail")
	for i, fail := range []bool{true, false, true, false} {
		err := w.Do(ctx, func(ctx context.Context, tx *sql.Tx, _ func(func())) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, i); err != nil {
				return err
			}
			if fail {
				return errFail
			}
			return nil
		})
		if fail != errors.Is(err, errFail) || (!fail && err != nil) {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE k IN (1, 3)`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows %d (%v), want 2", n, err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows %d (%v), want 2", n, err)
	}
	if sp := calls[0].Load(); sp != 0 {
		t.Errorf("%d savepoints for lone jobs", sp)
	}
}

// TestLinger: a writer whose busy function says yes takes the jobs queued
// while it lingered into the batch at hand; one that says no, or has none,
// commits them in a batch of their own; and busy is not asked for a batch
// of LingerBelow jobs or more.
func TestLinger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		busy   *bool // nil: no Linger option
		first  int   // jobs queued before the writer takes any
		asked  int   // calls of busy
		begins int64 // transactions
	}{
		{"busy", new(true), 1, 1, 1},
		{"idle", new(false), 1, 2, 2},
		{"no option", nil, 1, 0, 2},
		{"large batch", new(true), LingerBelow, 1, 2}, // asked for the late job's batch only
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			var begins atomic.Int64
			begin := func(ctx context.Context) (Txn[*sql.Tx], error) {
				begins.Add(1)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return Txn[*sql.Tx]{}, err
				}
				return Txn[*sql.Tx]{Q: tx, Commit: tx.Commit, Rollback: tx.Rollback}, nil
			}
			ctx := context.Background()
			newJob := func(k int) *job[*sql.Tx] {
				return &job[*sql.Tx]{ctx: ctx, done: make(chan struct{}), fn: func(ctx context.Context, tx *sql.Tx, _ func(func())) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, k)
					return err
				}}
			}
			// late arrives while the writer lingers over the first batch:
			// busy queues it itself, so that the test does not race the
			// writer. Without a call of busy, the test queues it after the
			// first batch.
			var w *Writer[*sql.Tx]
			late := newJob(1000)
			var lateQueued atomic.Bool
			queueLate := func() {
				if lateQueued.CompareAndSwap(false, true) {
					w.jobs <- late
				}
			}
			var asked atomic.Int64
			var opts []Option
			if tc.busy != nil {
				opts = append(opts, Linger(func() bool {
					asked.Add(1)
					queueLate()
					return *tc.busy
				}))
			}
			// The first jobs are queued before the writer starts, so that
			// it finds all of them at once.
			w = newWriter(begin, opts...)
			first := make([]*job[*sql.Tx], tc.first)
			for i := range first {
				first[i] = newJob(i)
				w.jobs <- first[i]
			}
			go w.loop()
			defer w.Close()
			for _, j := range append(first, late) {
				if j == late {
					queueLate()
				}
				<-j.done
				if j.err != nil {
					t.Fatal(j.err)
				}
			}
			if got := asked.Load(); got != int64(tc.asked) {
				t.Errorf("busy asked %d times, want %d", got, tc.asked)
			}
			if got := begins.Load(); got != tc.begins {
				t.Errorf("%d transactions, want %d", got, tc.begins)
			}
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != tc.first+1 {
				t.Errorf("%d rows, want %d", n, tc.first+1)
			}
		})
	}
}
