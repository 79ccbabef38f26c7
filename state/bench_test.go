package state

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/schema"
)

// seed puts n conversations of 20 approved steps each (with their
// fingerprints) into the store, spread over 100 agent ids.
func seed(b *testing.B, s *Store, n int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UnixNano()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	for i := 0; i < n; i++ {
		agent, convo := fmt.Sprintf("agent_%d", i%100), fmt.Sprintf("conv_%d", i)
		if _, err := tx.ExecContext(ctx, `INSERT INTO conversations (agent_id, conversation_id, steps_approved, last_step, next_seq, updated_at)
			VALUES (?, ?, 20, 20, 20, ?)`, agent, convo, now); err != nil {
			b.Fatal(err)
		}
		for seq := 1; seq <= RecentWindow; seq++ {
			if _, err := tx.ExecContext(ctx, `INSERT INTO fingerprints (agent_id, conversation_id, seq, step, fingerprint, approved_at)
				VALUES (?, ?, ?, ?, ?, ?)`, agent, convo, seq, seq, Fingerprint("calculate", map[string]any{"i": i, "s": seq}, ""), now); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// busyHour gives the agent a request in each of the last 60 minutes, as a
// busy agent has: every count then reads a full hour.
func busyHour(b *testing.B, s *Store, agent, token string) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	for m := 60; m >= 1; m-- {
		req := schema.Request{
			Agent:   schema.Agent{ID: agent, Token: token},
			Action:  schema.Action{Type: "calculate", Arguments: map[string]any{"query": "1+1"}},
			Context: schema.Context{ConversationID: "earlier", StepNumber: 61 - m},
		}
		res, _, err := s.Reserve(ctx, req, ReserveOptions{Now: now.Add(-time.Duration(m) * time.Minute)})
		if err != nil {
			b.Fatal(err)
		}
		if err := res.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReserveCommit is one allowed request's round trip through state:
// Reserve (read all facts, record the request, hold the step) then Commit
// (consume the step, append the fingerprint, add the cost), sequentially, on
// a file in WAL mode with synchronous=NORMAL. A registered agent with limits
// makes the hourly window (a full hour of it) and the daily cost part of
// every cycle.
func BenchmarkReserveCommit(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		// Seeded once: testing runs the function below several times while
		// it finds b.N, each time in a new conversation.
		ctx := context.Background()
		s := openTest(b)
		seed(b, s, n)
		a, token, err := s.RegisterAgent(ctx, AgentSpec{Name: "bench", Trust: schema.LevelAutonomous,
			MaxDailyCostUSD: 1e9, MaxRequestsPerHour: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		busyHour(b, s, a.ID, token)
		round := 0
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) {
			round++
			cost := 0.001
			req := schema.Request{
				Agent:   schema.Agent{ID: a.ID, Token: token},
				Action:  schema.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}, CostUSD: &cost},
				Context: schema.Context{ConversationID: fmt.Sprintf("bench_%d", round)},
			}
			opts := ReserveOptions{RequireRegistration: true}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				req.Context.StepNumber = i + 1
				res, f, err := s.Reserve(ctx, req, opts)
				if err != nil || res == nil {
					b.Fatalf("Reserve: %v", err)
				}
				if !f.Agent.TokenValid {
					b.Fatal("token")
				}
				if err := res.Commit(ctx, cost); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}

// BenchmarkReserveRelease is a denied request: reserve then release.
func BenchmarkReserveRelease(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	seed(b, s, 10000)
	req := schema.Request{
		Agent:   schema.Agent{ID: "agent_7"},
		Action:  schema.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}},
		Context: schema.Context{ConversationID: "conv_7", StepNumber: 21},
	}
	b.ReportAllocs()
	for b.Loop() {
		res, _, err := s.Reserve(ctx, req, ReserveOptions{})
		if err != nil || res == nil {
			b.Fatal(err)
		}
		if err := res.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	args := map[string]any{"command": "go test ./...", "cwd": "/work", "env": map[string]any{"A": "1", "B": 2.5}, "timeout": 30}
	b.ReportAllocs()
	for b.Loop() {
		Fingerprint("bash", args, "")
	}
}

// BenchmarkReserveCommitParallel is BenchmarkReserveCommit from 8 goroutines
// at once (as `toolgate serve` under load): concurrent cycles' writes share
// transactions (group commit). Each goroutine has its own conversations.
func BenchmarkReserveCommitParallel(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	seed(b, s, 100)
	a, token, err := s.RegisterAgent(ctx, AgentSpec{Name: "bench", Trust: schema.LevelAutonomous,
		MaxDailyCostUSD: 1e9, MaxRequestsPerHour: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	busyHour(b, s, a.ID, token)
	var worker atomic.Int64
	b.SetParallelism(4) // 8 goroutines on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		cost := 0.001
		req := schema.Request{
			Agent:  schema.Agent{ID: a.ID, Token: token},
			Action: schema.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}, CostUSD: &cost},
		}
		for i := 0; pb.Next(); i++ {
			req.Context = schema.Context{ConversationID: fmt.Sprintf("par_%d_%d", w, i/40), StepNumber: i%40 + 1}
			res, _, err := s.Reserve(ctx, req, ReserveOptions{RequireRegistration: true})
			if err != nil || res == nil {
				b.Errorf("Reserve: %v", err)
				return
			}
			if err := res.Commit(ctx, cost); err != nil {
				b.Errorf("Commit: %v", err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}
