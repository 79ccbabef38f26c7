package toolgate_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
)

// BenchmarkSettle is the writes of one allowed Tier 1 decision under
// `toolgate serve` with the signed audit log on, without the policy: Reserve
// (one write job), then the step's commit and its signed audit entry in one
// job, as Verifier.settle does. "parallel" runs it from 8 goroutines, whose
// jobs share transactions (group commit): its cycles/s is the ceiling the
// single writer puts on decisions/s.
func BenchmarkSettle(b *testing.B) {
	for _, par := range []int{1, 4} {
		name := "sequential"
		if par > 1 {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			s, err := state.Open(ctx, filepath.Join(dir, "toolgate.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			keyPath, _, err := audit.GenerateKey(dir, audit.KeyECDSAP256, "")
			if err != nil {
				b.Fatal(err)
			}
			signer, err := audit.LoadSigner(keyPath, "")
			if err != nil {
				b.Fatal(err)
			}
			write := func(ctx context.Context, fn func(context.Context, audit.Querier) error) error {
				return s.Write(ctx, "audit", func(ctx context.Context, tx *state.Tx, _ func(func())) error { return fn(ctx, tx) })
			}
			log, err := audit.Open(ctx, s.DB(), signer, audit.Options{Write: write})
			if err != nil {
				b.Fatal(err)
			}
			defer log.Close(ctx)
			a, token, err := s.RegisterAgent(ctx, state.AgentSpec{Name: "bench", Trust: schema.LevelAutonomous,
				MaxDailyCostUSD: 1e9, MaxRequestsPerHour: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			var worker atomic.Int64
			cpu0 := cpuTime()
			b.ResetTimer()
			b.SetParallelism(par)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := worker.Add(1)
				req := schema.Request{
					Agent:  schema.Agent{ID: a.ID, Token: token},
					Action: schema.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}},
				}
				d := schema.Decision{Outcome: schema.Allow, Risk: "low", Tier: 1,
					Reasons: []schema.Reason{{Code: "MATRIX-005", Rule: "matrix", Message: "low risk", Outcome: schema.Allow}}}
				for i := 0; pb.Next(); i++ {
					req.Context = schema.Context{ConversationID: fmt.Sprintf("c_%d_%d", w, i/40), StepNumber: i%40 + 1}
					res, _, err := s.Reserve(ctx, req, state.ReserveOptions{RequireRegistration: true})
					if err != nil || res == nil {
						b.Errorf("Reserve: %v", err)
						return
					}
					err = s.Write(ctx, "settle", func(ctx context.Context, tx *state.Tx, onCommit func(func())) error {
						if err := res.CommitIn(ctx, tx, onCommit, 0); err != nil {
							return err
						}
						_, err := log.AppendIn(ctx, tx, audit.Record{Request: req, Decision: d})
						return err
					})
					if err != nil {
						b.Errorf("settle: %v", err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			// The process's CPU time per cycle: less noisy than the rate on
			// a shared machine, and what bounds the rate once the writer
			// is no longer the serial bottleneck.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
