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

// An equal value at another address (an engine reloaded with the same data)
// gets what the first was built into, without a second build, and is then
// found by address: the alias spares a deep compare on every evaluation.
func TestValueCacheEqualValueElsewhere(t *testing.T) {
	builds := 0
	c := newValueCache(4, func(v ast.Value) (int, error) { builds++; return v.(*ast.Array).Len(), nil })
	const src = `[{"code": "A-1", "pattern": "x"}, {"code": "A-2", "pattern": "y"}]`
	first, second := ast.MustParseTerm(src).Value, ast.MustParseTerm(src).Value
	if first == second {
		t.Fatal("the two values share an address; the test needs two")
	}
	for _, v := range []ast.Value{first, second, second, first} {
		if n, err := c.get(v); err != nil || n != 2 {
			t.Fatalf("get = %d, %v; want 2", n, err)
		}
	}
	if builds != 1 {
		t.Fatalf("%d builds, want 1", builds)
	}
	e := c.lookup(second.Hash(), second)
	if a := e.alias.Load(); a == nil || a.v != second {
		t.Fatalf("alias = %v, want the second value", a)
	}
}

// prefetch builds a value once, on another goroutine: a get that follows
// waits for that build instead of starting its own, and a prefetch of a
// built value builds nothing.
func TestValueCachePrefetch(t *testing.T) {
	var mu sync.Mutex
	builds := 0
	release := make(chan struct{})
	c := newValueCache(4, func(v ast.Value) (int, error) {
		mu.Lock()
		builds++
		mu.Unlock()
		<-release
		return v.(*ast.Array).Len(), nil
	})
	v := ast.MustParseTerm(`["a", "b", "c"]`).Value
	c.prefetch(v)
	done := make(chan int)
	go func() {
		n, err := c.get(v)
		if err != nil {
			t.Error(err)
		}
		done <- n
	}()
	close(release)
	if n := <-done; n != 3 {
		t.Fatalf("get = %d, want 3", n)
	}
	c.prefetch(v)
	if n, err := c.get(v); err != nil || n != 3 {
		t.Fatalf("get = %d, %v; want 3", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if builds != 1 {
		t.Fatalf("%d builds, want 1", builds)
	}
}
