package engine

import (
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// valueCache keeps what a builtin builds from a policy's option values (a
// rule list compiled, a verb list prepared), by value: the policy passes
// the same value on every evaluation, so each is built once. Goroutines
// that meet a value not built yet wait for one build instead of each
// building it (`toolgate eval --jsonl` and the server decide on several
// goroutines, which all meet an empty cache at first). A failed build is
// not kept. When limit values are kept (a policy that builds its options per
// request), the cache starts over.
type valueCache[T any] struct {
	limit int
	build func(ast.Value) (T, error)

	entries sync.Map // hash → []*cacheEntry[T], built values only

	mu       sync.Mutex
	size     int
	building map[int][]*cacheEntry[T]
}

type cacheEntry[T any] struct {
	v    ast.Value
	done chan struct{} // closed once out and err are set
	out  T
	err  error

	// alias is the last other value found equal to v. An engine reloaded
	// with the same data, or a second engine beside the first, passes an
	// equal value at another address on every evaluation; without the alias
	// each of those would compare the whole value again.
	alias atomic.Pointer[valueBox]
}

type valueBox struct{ v ast.Value }

func newValueCache[T any](limit int, build func(ast.Value) (T, error)) *valueCache[T] {
	return &valueCache[T]{limit: limit, build: build, building: map[int][]*cacheEntry[T]{}}
}

// get returns what build made of v, building it if needed.
func (c *valueCache[T]) get(v ast.Value) (T, error) {
	h := v.Hash()
	if e := c.lookup(h, v); e != nil {
		return e.out, nil
	}
	c.mu.Lock()
	if e := c.lookup(h, v); e != nil {
		c.mu.Unlock()
		return e.out, nil
	}
	for _, e := range c.building[h] {
		if e.v.Compare(v) == 0 {
			c.mu.Unlock()
			<-e.done
			return e.out, e.err
		}
	}
	e := &cacheEntry[T]{v: v, done: make(chan struct{})}
	c.building[h] = append(c.building[h], e)
	c.mu.Unlock()

	e.out, e.err = c.build(v)

	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(e.done)
	others := c.building[h][:0:0]
	for _, x := range c.building[h] {
		if x != e {
			others = append(others, x)
		}
	}
	if len(others) == 0 {
		delete(c.building, h)
	} else {
		c.building[h] = others
	}
	if e.err != nil {
		return e.out, e.err
	}
	if c.size >= c.limit {
		c.entries.Clear()
		c.size = 0
	}
	prev, _ := c.entries.Load(h)
	list, _ := prev.([]*cacheEntry[T])
	c.entries.Store(h, append(list[:len(list):len(list)], e))
	c.size++
	return e.out, nil
}

// prefetch starts building v on another goroutine, unless it is built:
// for a caller that will need v after another value it is building now.
func (c *valueCache[T]) prefetch(v ast.Value) {
	if c.lookup(v.Hash(), v) == nil {
		go func() { _, _ = c.get(v) }() // the caller's own get meets any error
	}
}

// lookup is v's built entry, or nil.
func (c *valueCache[T]) lookup(h int, v ast.Value) *cacheEntry[T] {
	x, ok := c.entries.Load(h)
	if !ok {
		return nil
	}
	list := x.([]*cacheEntry[T])
	for _, e := range list { // the same data value on every evaluation: no deep compare
		if e.v == v {
			return e
		}
		if a := e.alias.Load(); a != nil && a.v == v {
			return e
		}
	}
	for _, e := range list {
		if e.v.Compare(v) == 0 {
			e.alias.Store(&valueBox{v})
			return e
		}
	}
	return nil
}
