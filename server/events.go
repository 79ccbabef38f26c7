package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/supervisor"
)

// Event types on GET /v1/events.
const (
	EventApprovalRequired = supervisor.EventRequired // an approval is waiting for a person
	EventApprovalResolved = supervisor.EventResolved // approved, denied or expired
	EventDecision         = "decision"               // a verdict returned by POST /v1/verify
)

// DecisionEvent is the data of a decision event: enough to list recent
// decisions, without the arguments (those stay in the audit log).
type DecisionEvent struct {
	Time           time.Time `json:"time"`
	AgentID        string    `json:"agent_id"`
	ConversationID string    `json:"conversation_id"`
	Step           int       `json:"step"`
	ActionType     string    `json:"action_type"`
	Decision       string    `json:"decision"`
	Tier           int       `json:"tier"`
	Codes          []string  `json:"codes"`
	ApprovalID     string    `json:"approval_id,omitempty"`
	AuditID        int64     `json:"audit_id,omitempty"`
	LatencyMS      float64   `json:"latency_ms"`
}

// writeStall bounds one write to an event stream.
const writeStall = 10 * time.Second

// broker fans events out to the SSE clients. Publishing never blocks: each
// client has a bounded buffer, and a client whose buffer is full is dropped
// (its stream ends; EventSource reconnects and the page reloads its list).
type broker struct {
	buffer int

	mu      sync.Mutex
	clients map[*sseClient]struct{}
	closed  bool
	seq     uint64

	dropped atomic.Int64
	sent    atomic.Int64
}

type sseClient struct {
	ch   chan []byte
	gone chan struct{} // closed when dropped or when the broker closes
}

func newBroker(buffer int) *broker {
	if buffer <= 0 {
		buffer = 256
	}
	return &broker{buffer: buffer, clients: map[*sseClient]struct{}{}}
}

// subscribe adds a client; nil after close.
func (b *broker) subscribe() *sseClient {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	c := &sseClient{ch: make(chan []byte, b.buffer), gone: make(chan struct{})}
	b.clients[c] = struct{}{}
	return c
}

func (b *broker) unsubscribe(c *sseClient) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.clients[c]; ok {
		delete(b.clients, c)
		close(c.gone)
	}
}

// active reports whether anyone listens, so that publishers can skip
// encoding.
func (b *broker) active() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.clients) > 0
}

func (b *broker) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.clients)
}

// publish sends one event to every client.
func (b *broker) publish(typ string, data any) {
	if !b.active() {
		return
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.seq++
	var f bytes.Buffer
	f.Grow(len(payload) + len(typ) + 32)
	f.WriteString("id: ")
	f.WriteString(strconv.FormatUint(b.seq, 10))
	f.WriteString("\nevent: ")
	f.WriteString(typ)
	f.WriteString("\ndata: ")
	f.Write(payload) // JSON has no raw newlines
	f.WriteString("\n\n")
	frame := f.Bytes()
	for c := range b.clients {
		select {
		case c.ch <- frame:
			b.sent.Add(1)
		default:
			delete(b.clients, c)
			close(c.gone)
			b.dropped.Add(1)
		}
	}
}

// close ends every stream; later subscriptions are refused.
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for c := range b.clients {
		delete(b.clients, c)
		close(c.gone)
	}
}

// onApproval is the approvals queue's OnEvent: it must not block.
func (b *broker) onApproval(e supervisor.Event) {
	b.publish(e.Type, e.Approval)
}

// serveEvents is GET /v1/events.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	c := s.events.subscribe()
	if c == nil {
		writeError(w, http.StatusServiceUnavailable, ErrCodeUnavailable, "the server is shutting down", "")
		return
	}
	defer s.events.unsubscribe(c)
	// The stream outlives the server's write timeout.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte("retry: 2000\n: connected\n\n")); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.gone:
			// Dropped (too slow) or shutting down. Deliver nothing more: a
			// dropped client reconnects and reloads.
			return
		case frame := <-c.ch:
			// A client that stops reading is cut off after writeStall
			// rather than holding a goroutine for ever.
			_ = rc.SetWriteDeadline(time.Now().Add(writeStall))
			if _, err := w.Write(frame); err != nil {
				return
			}
			// Send what else is queued in the same write burst.
			for n := len(c.ch); n > 0; n-- {
				if _, err := w.Write(<-c.ch); err != nil {
					return
				}
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-hb.C:
			_ = rc.SetWriteDeadline(time.Now().Add(writeStall))
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}
