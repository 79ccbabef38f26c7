// Package groupcommit runs concurrent SQLite write jobs through one writer
// goroutine that commits them in shared transactions (group commit).
//
// Each job runs inside its own SAVEPOINT of the batch's transaction, so a job
// that fails is rolled back alone and the others still commit (a job alone
// in its batch needs no savepoint: its failure rolls back the transaction,
// which holds only its writes). Work a job hands to BeforeCommit runs after
// the batch's last job, before the COMMIT. Do returns only
// after the batch's COMMIT (nil) or with the error that kept the job from
// being committed. A job's writes are therefore exactly as durable as with a
// transaction of its own, and the single writer replaces SQLite's busy-wait
// (sleeps of 1, 2, 5, 10 ms...) between this process's writers with a queue.
package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// MaxBatch is the most jobs one transaction holds.
const MaxBatch = 128

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("writer closed")

// Execer is what a job's transaction offers: *sql.Tx and *sql.Conn (inside
// BEGIN) both are.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Txn is one open write transaction: what jobs write through (Q), how it
// ends, and how each job's savepoint is set, kept or undone.
type Txn[Q Execer] struct {
	Q                Q
	Commit, Rollback func() error
	// Savepoint, Release and RollbackTo run SAVEPOINT, RELEASE and
	// ROLLBACK TO of one savepoint. A nil one runs its SQL text through
	// Q.ExecContext; a Begin that can prepare them once (they run two or
	// three times per job, in the single writer) should.
	Savepoint, Release, RollbackTo func() error
}

// Begin starts one write transaction (it must take SQLite's write lock at
// once: BEGIN IMMEDIATE).
type Begin[Q Execer] func(ctx context.Context) (Txn[Q], error)

// Savepoint statements for a Begin to prepare: Txn's functions run these.
const (
	SavepointSQL  = "SAVEPOINT groupcommit"
	ReleaseSQL    = "RELEASE groupcommit"
	RollbackToSQL = "ROLLBACK TO groupcommit"
)

// Job is one unit of writes. It must not keep q after it returns, and must
// derive everything it writes inside the transaction (it runs at most once).
// OnCommit registers a function to run once the job's writes are committed.
type Job[Q Execer] func(ctx context.Context, q Q, onCommit func(func())) error

// Writer is one writer goroutine draining a queue of jobs.
type Writer[Q Execer] struct {
	begin Begin[Q]
	busy  func() bool // nil: never linger
	jobs  chan *job[Q]

	mu     sync.RWMutex // held for reading while sending on jobs
	closed bool
	done   chan struct{}
}

type job[Q Execer] struct {
	ctx   context.Context
	fn    Job[Q]
	err   error
	hooks []func()
	done  chan struct{}
}

// jobKey is the context key of a running job's before-commit functions.
type jobKey struct{}

type beforeCommit struct {
	fns  []func() error
	done bool // the job returned
}

// BeforeCommit registers fn to run in the writer after the last job of the
// batch that ctx's job runs in, before the batch's COMMIT, in the order
// registered, while the transaction is still open. It lets a job start work
// that does not need the writer (a signature) and write its result at the
// end of the batch, while the writer runs the other jobs. A job whose
// writes are rolled back (it returned an error) drops its functions. An
// error from fn rolls back the whole batch: every job in it fails with that
// error, as on a failed COMMIT. ctx must be the context a Job received,
// used while the job runs; BeforeCommit reports false, registering
// nothing, for any other.
func BeforeCommit(ctx context.Context, fn func() error) bool {
	if !InJob(ctx) {
		return false
	}
	bc := ctx.Value(jobKey{}).(*beforeCommit)
	bc.fns = append(bc.fns, fn)
	return true
}

// InJob reports whether ctx is a running job's: whether BeforeCommit would
// register a function.
func InJob(ctx context.Context) bool {
	bc, ok := ctx.Value(jobKey{}).(*beforeCommit)
	return ok && !bc.done
}

// LingerBelow is the batch size under which a writer with a busy function
// lingers (see Linger).
const LingerBelow = 4

// Option configures a Writer.
type Option func(*options)

type options struct{ busy func() bool }

// Linger makes the writer, before it commits a batch of fewer than
// LingerBelow jobs, ask busy whether many writers-to-be are in flight; if so
// it yields its thread once (runtime.Gosched) and takes the jobs queued
// meanwhile into the batch. It is PostgreSQL's commit_delay with
// commit_siblings: when more goroutines are runnable than there are CPUs,
// the jobs about to be submitted join this batch instead of paying a
// transaction of their own, and when none are runnable the yield returns at
// once. Under light load (busy false) the writer never waits, so a closed
// loop of few callers keeps its latency. busy must be cheap and safe for
// concurrent use.
func Linger(busy func() bool) Option {
	return func(o *options) { o.busy = busy }
}

// New starts a writer; Close stops it.
func New[Q Execer](begin Begin[Q], opts ...Option) *Writer[Q] {
	w := newWriter(begin, opts...)
	go w.loop()
	return w
}

// newWriter is a writer whose loop has not started.
func newWriter[Q Execer](begin Begin[Q], opts ...Option) *Writer[Q] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Writer[Q]{begin: begin, busy: o.busy, jobs: make(chan *job[Q], MaxBatch), done: make(chan struct{})}
}

// Do runs fn in the next batch and returns once that batch committed (nil)
// or fn's writes were rolled back (the error: fn's own, or the batch's BEGIN,
// SAVEPOINT or COMMIT failure). A ctx that ends while fn waits in the queue
// skips it; once fn runs, Do waits for the batch (bounded by SQLite's busy
// timeout), so that an error never hides a committed write.
func (w *Writer[Q]) Do(ctx context.Context, fn Job[Q]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := &job[Q]{ctx: ctx, fn: fn, done: make(chan struct{})}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return ErrClosed
	}
	select {
	case w.jobs <- j:
		w.mu.RUnlock()
	case <-ctx.Done():
		w.mu.RUnlock()
		return ctx.Err()
	}
	<-j.done
	if j.err == nil {
		for _, h := range j.hooks {
			h()
		}
	}
	return j.err
}

// Close runs the jobs already queued, then stops the writer.
func (w *Writer[Q]) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return
	}
	w.closed = true
	close(w.jobs)
	w.mu.Unlock()
	<-w.done
}

func (w *Writer[Q]) loop() {
	defer close(w.done)
	batch := make([]*job[Q], 0, MaxBatch)
	for j := range w.jobs {
		batch = w.drain(append(batch[:0], j))
		if len(batch) < LingerBelow && w.busy != nil && w.busy() {
			runtime.Gosched()
			batch = w.drain(batch)
		}
		w.run(batch)
		clear(batch)
	}
}

// drain adds the jobs already queued to batch, up to MaxBatch.
func (w *Writer[Q]) drain(batch []*job[Q]) []*job[Q] {
	for len(batch) < MaxBatch {
		select {
		case j, ok := <-w.jobs:
			if !ok {
				return batch
			}
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}

// run commits one batch and wakes its callers.
func (w *Writer[Q]) run(batch []*job[Q]) {
	defer func() {
		for _, j := range batch {
			close(j.done)
		}
	}()
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = err // gave up while queued: never ran
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	// The transaction itself never follows a caller's cancellation: an
	// interrupted statement would roll back every job of the batch.
	ctx := context.Background()
	t, err := w.begin(ctx)
	if err != nil {
		failAll(live, err)
		return
	}
	q := t.Q
	abort := func(err error) {
		_ = t.Rollback()
		failAll(live, err)
	}
	savepoint := orExec(ctx, q, t.Savepoint, SavepointSQL)
	release := orExec(ctx, q, t.Release, ReleaseSQL)
	rollbackTo := orExec(ctx, q, t.RollbackTo, RollbackToSQL)
	if len(live) == 1 {
		// A job alone in its transaction needs no savepoint: if it
		// fails, the whole transaction is rolled back (under load a batch
		// often holds a single job, and these are two statements of it).
		savepoint, release = noop, noop
		rollbackTo = func() error { return errAlone }
	}
	committed := live[:0:0]
	var before []func() error
	for _, j := range live {
		if err := savepoint(); err != nil {
			abort(err)
			return
		}
		var hooks []func()
		bc := &beforeCommit{}
		err := j.fn(context.WithValue(context.WithoutCancel(j.ctx), jobKey{}, bc), q, func(h func()) { hooks = append(hooks, h) })
		bc.done = true
		if err != nil {
			// A failure SQLite answered by rolling back the whole
			// transaction (disk full, I/O error) leaves no savepoint: then
			// nothing of the batch is committed.
			if rbErr := rollbackTo(); rbErr != nil {
				abort(err)
				return
			}
		}
		if relErr := release(); relErr != nil {
			abort(relErr)
			return
		}
		if err != nil {
			j.err = err
			continue
		}
		j.hooks = hooks
		before = append(before, bc.fns...)
		committed = append(committed, j)
	}
	for _, fn := range before {
		if err := fn(); err != nil {
			_ = t.Rollback()
			failAll(committed, err)
			return
		}
	}
	if err := t.Commit(); err != nil {
		_ = t.Rollback()
		failAll(committed, fmt.Errorf("commit: %w", err))
	}
}

func noop() error { return nil }

// errAlone makes a lone job's failure roll back its whole transaction.
var errAlone = errors.New("no savepoint")

// orExec is f, or running query on q when f is nil.
func orExec[Q Execer](ctx context.Context, q Q, f func() error, query string) func() error {
	if f != nil {
		return f
	}
	return func() error {
		_, err := q.ExecContext(ctx, query)
		return err
	}
}

func failAll[Q Execer](jobs []*job[Q], err error) {
	for _, j := range jobs {
		j.err = err
		j.hooks = nil
	}
}
