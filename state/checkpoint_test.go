package state

import (
	"context"
	"testing"
	"time"
)

// cycle runs one allowed request through the store: Reserve, then Commit.
func cycle(t *testing.T, s *Store, convo string, step int) {
	t.Helper()
	ctx := context.Background()
	res, _, err := s.Reserve(ctx, request("a", convo, step, "calculate", map[string]any{"n": step}, ""), ReserveOptions{})
	if err != nil || res == nil {
		t.Fatalf("Reserve: %v", err)
	}
	if err := res.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

func fastCheckpoints(t *testing.T) {
	old := checkpointInterval
	checkpointInterval = 10 * time.Millisecond
	t.Cleanup(func() { checkpointInterval = old })
}

// TestBackgroundCheckpoint: after commits, the store's own goroutine copies
// the whole log back into the database file, and the writer's connections
// leave checkpoints to it until the backstop.
func TestBackgroundCheckpoint(t *testing.T) {
	fastCheckpoints(t)
	s := openTest(t)
	for i := range 50 {
		cycle(t, s, "c", i+1)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := s.ckpt.last.Load(); r != nil && r.busy == 0 && r.log > 0 && r.copied == r.log {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no complete background checkpoint; last %+v", s.ckpt.last.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	var pages int
	if err := s.DB().QueryRow("PRAGMA wal_autocheckpoint").Scan(&pages); err != nil || pages != walBackstopPages {
		t.Errorf("wal_autocheckpoint %d (%v), want %d", pages, err, walBackstopPages)
	}
}

// TestLogStartsOverUnderLoad: with commits never pausing, each background
// checkpoint is followed by the log starting over from its beginning (the
// writer finishes the checkpoint before its next transaction), so the log
// stays small instead of growing for as long as the load lasts.
func TestLogStartsOverUnderLoad(t *testing.T) {
	fastCheckpoints(t)
	s := openTest(t)
	var (
		seen     []checkpointResult
		last     *checkpointResult
		restarts int
	)
	for i := 0; restarts < 3; i++ {
		if i == 5000 {
			t.Fatalf("log never started over in %d decisions; checkpoints %+v", i, seen)
		}
		cycle(t, s, "c", i+1)
		if r := s.ckpt.last.Load(); r != last {
			last = r
			if len(seen) > 0 && r.log < seen[len(seen)-1].log {
				restarts++
			}
			seen = append(seen, *r)
		}
	}
	for _, r := range seen {
		if r.log >= walBackstopPages {
			t.Errorf("log reached %d pages (backstop %d): %+v", r.log, walBackstopPages, seen)
		}
	}
}

// TestCloseStopsCheckpoints: Close waits for the goroutine, also when a
// checkpoint is due.
func TestCloseStopsCheckpoints(t *testing.T) {
	fastCheckpoints(t)
	s := openTest(t)
	cycle(t, s, "c", 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.ckpt.done:
	default:
		t.Fatal("checkpoint goroutine still running after Close")
	}
	if _, _, err := s.Reserve(context.Background(), request("a", "c", 2, "calculate", nil, ""), ReserveOptions{}); err == nil {
		t.Error("Reserve on a closed store succeeded")
	}
}
