package state

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// WAL checkpoints. In WAL mode a commit appends pages to the write-ahead log,
// and a checkpoint copies them back into the database file, with an fsync of
// each file (synchronous=NORMAL syncs nothing else). SQLite's default runs a
// checkpoint in the connection that commits once the log passes 1,000 pages:
// here the single writer, which then stops committing for the copy and the
// fsyncs; under load (a decision writes about six pages) it did so dozens of
// times a second. That stall, more than the copying, capped `serve`: with no
// checkpoint at all during a load test, decisions per second rose 12-18%.
//
// So the store checkpoints on its own goroutine, CheckpointInterval after a
// commit (at most once per interval): two PASSIVE checkpoints, which never
// wait for the writer, the second copying what was committed during the
// first. The writer then finishes the job before its next transaction (the
// few pages committed since), so that the transaction starts the log over
// from its beginning: without that moment the log would never be fully
// copied under steady load and would grow without end. The writer's own
// automatic checkpoint stays, at walBackstopPages, for a log this cannot
// keep small (the goroutine stopped, or a reader pinning old pages); the
// interval is short enough that the heaviest load measured (about 26,000
// pages a second) stays well under it.
//
// Durability is bounded in time by the same means: a commit is on disk,
// against a power loss as well as a crash, once the next checkpoint has
// synced the log, about CheckpointInterval later, where with the default it
// waited for 1,000 pages of other commits, however long they took to come.

// CheckpointInterval is how long after a commit the background checkpoint
// runs.
const CheckpointInterval = 250 * time.Millisecond

// checkpointInterval is CheckpointInterval, shortened by tests.
var checkpointInterval = CheckpointInterval

// walBackstopPages is SQLite's wal_autocheckpoint for the store's
// connections: the log size at which a committing connection checkpoints
// itself.
const walBackstopPages = 16384

// checkpointer is the background checkpoint of one store.
type checkpointer struct {
	db    *sql.DB
	every time.Duration
	wake  chan struct{} // holds one wake-up: a commit since the last run
	// catchUp is set after a background checkpoint; the writer clears it
	// and finishes the checkpoint before its next BEGIN.
	catchUp atomic.Bool
	stop    chan struct{}
	stopped sync.Once
	done    chan struct{}
	// last is the most recent background checkpoint's result, for tests.
	last atomic.Pointer[checkpointResult]
}

// checkpointResult is what PRAGMA wal_checkpoint returns: whether it was
// blocked, the pages in the log, and the pages copied back so far.
type checkpointResult struct{ busy, log, copied int }

// startCheckpointer starts the background checkpoint of db; close stops it.
func startCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	c := &checkpointer{db: db, every: every, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// committed tells the checkpointer the log grew. It never blocks.
func (c *checkpointer) committed() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		select {
		case <-c.stop:
			return
		case <-time.After(c.every):
		}
		c.round(context.Background())
	}
}

// round is one background run: two checkpoints, then the writer's turn. A
// failure is left to the next commit's run and to the backstop.
func (c *checkpointer) round(ctx context.Context) {
	if _, err := c.checkpoint(ctx); err != nil {
		return
	}
	if r, err := c.checkpoint(ctx); err == nil {
		c.last.Store(&r)
		c.catchUp.Store(true)
	}
}

// checkpoint runs one PASSIVE checkpoint: as many pages as it can copy
// without waiting for a reader or the writer.
func (c *checkpointer) checkpoint(ctx context.Context) (checkpointResult, error) {
	var r checkpointResult
	err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&r.busy, &r.log, &r.copied)
	return r, err
}

// beforeBegin runs in the writer, outside any transaction, before each
// BEGIN: after a background checkpoint it copies the pages committed since,
// so that the transaction restarts the log. An error is left to the next
// background run and the backstop.
func (c *checkpointer) beforeBegin(ctx context.Context) {
	if c.catchUp.Swap(false) {
		_, _ = c.checkpoint(ctx)
	}
}

// close stops the goroutine; SQLite checkpoints when the last connection
// closes.
func (c *checkpointer) close() {
	c.stopped.Do(func() { close(c.stop) })
	<-c.done
}
