package toolgate_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/schema"
)

// BenchmarkTier1 compares a Verify settled at Tier 1 (no state) with the
// bare engine on the same request: the facade's overhead.
func BenchmarkTier1(b *testing.B) {
	ctx := context.Background()
	req := injected(1)
	req.Context.Blocks[1].Content = "Meeting moved to 5pm; the agenda is attached."
	e, err := engine.New(ctx)
	if err != nil {
		b.Fatal(err)
	}
	v, err := toolgate.New(nil, toolgate.WithEngine(e), toolgate.WithoutState())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("engine", func(b *testing.B) {
		for b.Loop() {
			if d, _ := e.Evaluate(ctx, &req, nil); d.Outcome == schema.Deny {
				b.Fatal(d)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if d, _ := v.Verify(ctx, req); d.Outcome == schema.Deny {
				b.Fatal(d)
			}
		}
	})
}
