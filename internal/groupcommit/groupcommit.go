// Package groupcommit runs concurrent SQLite write jobs through one writer
// goroutine that commits them in shared transactions (group commit).
//
// Each job runs inside its own SAVEPOINT of the batch's transaction, so a job
// that fails is rolled back alone and the others still commit; Do returns only
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

// Begin starts one write transaction (it must take SQLite's write lock at
// once: BEGIN IMMEDIATE) and returns it with its commit and rollback.
type Begin[Q Execer] func(ctx context.Context) (q Q, commit, rollback func() error, err error)

// Job is one unit of writes. It must not keep q after it returns, and must
// derive everything it writes inside the transaction (it runs at most once).
// OnCommit registers a function to run once the job's writes are committed.
type Job[Q Execer] func(ctx context.Context, q Q, onCommit func(func())) error

// Writer is one writer goroutine draining a queue of jobs.
type Writer[Q Execer] struct {
	begin Begin[Q]
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

// New starts a writer; Close stops it.
func New[Q Execer](begin Begin[Q]) *Writer[Q] {
	w := &Writer[Q]{begin: begin, jobs: make(chan *job[Q], MaxBatch), done: make(chan struct{})}
	go w.loop()
	return w
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
		batch = append(batch[:0], j)
	drain:
		for len(batch) < MaxBatch {
			select {
			case j, ok := <-w.jobs:
				if !ok {
					break drain
				}
				batch = append(batch, j)
			default:
				break drain
			}
		}
		w.run(batch)
		clear(batch)
	}
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
	q, commit, rollback, err := w.begin(ctx)
	if err != nil {
		failAll(live, err)
		return
	}
	abort := func(err error) {
		_ = rollback()
		failAll(live, err)
	}
	committed := live[:0:0]
	for _, j := range live {
		if _, err := q.ExecContext(ctx, "SAVEPOINT groupcommit"); err != nil {
			abort(err)
			return
		}
		var hooks []func()
		err := j.fn(context.WithoutCancel(j.ctx), q, func(h func()) { hooks = append(hooks, h) })
		if err != nil {
			// A failure SQLite answered by rolling back the whole
			// transaction (disk full, I/O error) leaves no savepoint: then
			// nothing of the batch is committed.
			if _, rbErr := q.ExecContext(ctx, "ROLLBACK TO groupcommit"); rbErr != nil {
				abort(err)
				return
			}
		}
		if _, relErr := q.ExecContext(ctx, "RELEASE groupcommit"); relErr != nil {
			abort(relErr)
			return
		}
		if err != nil {
			j.err = err
			continue
		}
		j.hooks = hooks
		committed = append(committed, j)
	}
	if err := commit(); err != nil {
		_ = rollback()
		failAll(committed, fmt.Errorf("commit: %w", err))
	}
}

func failAll[Q Execer](jobs []*job[Q], err error) {
	for _, j := range jobs {
		j.err = err
		j.hooks = nil
	}
}
