package supervisor

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
)

var testSecret = []byte("s3cret-for-tests")

// delivery is one request the test receiver saw.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a webhook endpoint on loopback that answers with the given
// status codes in turn (200 once they run out) and records every delivery.
type receiver struct {
	mu         sync.Mutex
	statuses   []int
	deliveries []delivery
	srv        *httptest.Server
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.deliveries = append(r.deliveries, delivery{req.Header.Clone(), body})
		code := http.StatusOK
		if len(r.statuses) > 0 {
			code, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) seen() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.deliveries...)
}

func newTestWebhook(t *testing.T, url string) *WebhookNotifier {
	t.Helper()
	w, err := NewWebhookNotifier(WebhookOptions{URL: url, Secret: testSecret,
		Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var sampleApproval = Approval{ID: "apr_AAAAAAAAAAAAAAAAAAAAAA", AgentID: "agent_abc", ConversationID: "conv_1", Step: 3,
	ActionType: "bash", Request: json.RawMessage(`{"action":{"type":"bash"}}`), Status: StatusPending,
	CreatedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), Deadline: time.Date(2025, 3, 1, 12, 5, 0, 0, time.UTC)}

func TestWebhookRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		attempts int
		ok       bool
	}{
		{"first try", nil, 1, true},
		{"fails twice then succeeds", []int{503, 500}, 3, true},
		{"too many requests is retried", []int{429}, 2, true},
		{"always failing stops at the bound", []int{500, 502, 503, 504, 500}, 3, false},
		{"client error is final", []int{400}, 1, false},
		{"unauthorized is final", []int{401}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t, tc.statuses...)
			err := newTestWebhook(t, r.srv.URL).Notify(context.Background(), sampleApproval)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			seen := r.seen()
			if len(seen) != tc.attempts {
				t.Fatalf("%d attempts, want %d", len(seen), tc.attempts)
			}
			for i, d := range seen {
				if err := VerifySignature(testSecret, d.header.Get(HeaderSignature), d.header.Get(HeaderTimestamp), d.body, time.Now(), 5*time.Minute); err != nil {
					t.Errorf("attempt %d: %v", i+1, err)
				}
			}
		})
	}
}

func TestWebhookUnreachable(t *testing.T) {
	r := newReceiver(t)
	url := r.srv.URL
	r.srv.Close() // nothing listens there any more
	if err := newTestWebhook(t, url).Notify(context.Background(), sampleApproval); err == nil {
		t.Fatal("delivery to a closed port succeeded")
	}
}

func TestWebhookBackoffBounded(t *testing.T) {
	w, err := NewWebhookNotifier(WebhookOptions{URL: "http://127.0.0.1:1/", Secret: testSecret,
		MaxAttempts: 8, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, d := range want {
		if got := w.backoff(i + 2); got != d*time.Millisecond {
			t.Errorf("wait before attempt %d = %v, want %v", i+2, got, d*time.Millisecond)
		}
	}
}

func TestWebhookPayloadAndSignature(t *testing.T) {
	r := newReceiver(t)
	if err := newTestWebhook(t, r.srv.URL).Notify(context.Background(), sampleApproval); err != nil {
		t.Fatal(err)
	}
	d := r.seen()[0]
	// What a receiver computes by hand, as docs/approvals.md shows.
	m := hmac.New(sha256.New, testSecret)
	m.Write([]byte(d.header.Get(HeaderTimestamp) + "." + string(d.body)))
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); d.header.Get(HeaderSignature) != want {
		t.Errorf("signature %q, want %q", d.header.Get(HeaderSignature), want)
	}
	if d.header.Get("Content-Type") != "application/json" || d.header.Get(HeaderEvent) != EventRequired || d.header.Get(HeaderDelivery) != sampleApproval.ID {
		t.Errorf("headers: %v", d.header)
	}
	var p WebhookPayload
	if err := json.Unmarshal(d.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Event != EventRequired || p.Approval.ID != sampleApproval.ID || p.Approval.ActionType != "bash" || !p.Approval.Deadline.Equal(sampleApproval.Deadline) {
		t.Errorf("payload: %+v", p)
	}
}

func TestVerifySignature(t *testing.T) {
	now := time.Unix(1_740_000_000, 0)
	ts := "1740000000"
	body := []byte(`{"event":"approval_required"}`)
	good := Sign(testSecret, ts, body)
	for _, tc := range []struct {
		name, sig, ts string
		body          []byte
		secret        []byte
		ok            bool
	}{
		{"valid", good, ts, body, testSecret, true},
		{"other secret", good, ts, body, []byte("other"), false},
		{"body changed", good, ts, []byte(`{"event":"approval_resolved"}`), testSecret, false},
		{"timestamp changed", good, "1740000001", body, testSecret, false},
		{"replayed later", Sign(testSecret, "1739990000", body), "1739990000", body, testSecret, false},
		{"not a number", good, "yesterday", body, testSecret, false},
		{"empty", "", ts, body, testSecret, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifySignature(tc.secret, tc.sig, tc.ts, tc.body, now, 5*time.Minute)
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestNewWebhookNotifierRefuses(t *testing.T) {
	for _, tc := range []WebhookOptions{
		{URL: "", Secret: testSecret},
		{URL: "ftp://example.invalid/", Secret: testSecret},
		{URL: "http://127.0.0.1/hook"},
	} {
		if _, err := NewWebhookNotifier(tc); err == nil {
			t.Errorf("accepted %+v", tc)
		}
	}
}

// The whole path: configuration → queue → signed webhook, with failures that
// neither block the request nor approve anything.
func TestQueueNotifiesThroughWebhook(t *testing.T) {
	r := newReceiver(t, 503)
	t.Setenv("TEST_APPROVAL_WEBHOOK_SECRET", string(testSecret))
	opts, err := OptionsFromConfig(config.Approvals{TimeoutSeconds: 60, MaxPerHour: 3,
		Webhook: config.Webhook{URL: r.srv.URL, SecretEnv: "TEST_APPROVAL_WEBHOOK_SECRET"}})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Timeout != time.Minute || opts.MaxPerHour != 3 || opts.Notifier == nil {
		t.Fatalf("options: %+v", opts)
	}
	opts.Notifier.(*WebhookNotifier).opts.Backoff = time.Millisecond
	f := newFixture(t, opts)
	f.clock.t = time.Now().UTC() // the webhook deadline is real time
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	f.q.Close()
	seen := r.seen()
	if len(seen) != 2 {
		t.Fatalf("%d deliveries, want 2 (one 503, one retry)", len(seen))
	}
	var p WebhookPayload
	if err := json.Unmarshal(seen[1].body, &p); err != nil || p.Approval.ID != a.ID {
		t.Fatalf("payload %s: %v", seen[1].body, err)
	}
	if strings.Contains(string(seen[1].body), "secret-token") {
		t.Error("the agent's token was sent to the webhook")
	}
	if got, _ := f.q.Get(context.Background(), a.ID); got.Status != StatusPending {
		t.Errorf("after notifying: %+v", got)
	}
}

func TestOptionsFromConfigNeedsSecret(t *testing.T) {
	t.Setenv("TEST_EMPTY_SECRET", "")
	_, err := OptionsFromConfig(config.Approvals{Webhook: config.Webhook{URL: "http://127.0.0.1:9/hook", SecretEnv: "TEST_EMPTY_SECRET"}})
	if err == nil || !strings.Contains(err.Error(), "TEST_EMPTY_SECRET") {
		t.Fatalf("err = %v, want one naming the variable", err)
	}
	opts, err := OptionsFromConfig(config.Approvals{})
	if err != nil || opts.Notifier != nil {
		t.Fatalf("no webhook: %+v, %v", opts, err)
	}
}
