package server

import (
	"testing"
	"time"
)

// TestBrokerDropsSlowClients: a client that does not read is dropped once
// its buffer is full; publishing never blocks and the others keep getting
// events.
func TestBrokerDropsSlowClients(t *testing.T) {
	b := newBroker(2)
	slow, fast := b.subscribe(), b.subscribe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5 {
			b.publish(EventDecision, map[string]int{"n": i})
			<-fast.ch // the fast client keeps up
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publish blocked on a slow client")
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("the slow client was not dropped")
	}
	select {
	case <-fast.gone:
		t.Fatal("the fast client was dropped")
	default:
	}
	if got := b.dropped.Load(); got != 1 {
		t.Errorf("dropped %d, want 1", got)
	}
	if b.count() != 1 {
		t.Errorf("%d clients, want 1", b.count())
	}
	b.close()
	<-fast.gone
	if b.subscribe() != nil {
		t.Error("subscribed after close")
	}
	b.publish(EventDecision, 1) // no panic after close
}

func TestWithError(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"decision":"deny"}`, `{"error":{"code":"x","message":"m"},"decision":"deny"}`},
		{`{}`, `{"error":{"code":"x","message":"m"}}`},
	} {
		if got := string(withError([]byte(tc.in), APIError{Code: "x", Message: "m"})); got != tc.want {
			t.Errorf("withError(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
