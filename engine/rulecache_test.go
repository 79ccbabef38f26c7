package engine

import (
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Goroutines that meet an uncompiled rule set at the same time share one
// compile: they all get the same compiled set.
func TestCompiledForConcurrentFirstUse(t *testing.T) {
	rules := ast.MustParseTerm(`[{"code": "CONC-1", "pattern": "concurrent[- ]first[- ]use", "scope": "context"}, {"code": "CONC-2", "pattern": "only once"}]`).Value
	const n = 8
	got := make([]*compiledRules, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := compiledFor(rules)
			if err != nil {
				t.Error(err)
			}
			got[i] = c
		}()
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("goroutine %d got another compiled set", i)
		}
	}
	if len(ruleSets.building) != 0 {
		t.Fatalf("building not emptied: %v", ruleSets.building)
	}
	bad := ast.MustParseTerm(`[{"code": "BAD", "pattern": "("}]`).Value
	for range 2 {
		if _, err := compiledFor(bad); err == nil {
			t.Fatal("invalid pattern compiled")
		}
	}
}
