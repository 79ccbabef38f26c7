package supervisor

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Webhook headers. The signature covers the timestamp and the body:
//
//	X-Toolgate-Signature: sha256=hex(HMAC-SHA256(secret, timestamp + "." + body))
//
// so a receiver that rejects old timestamps also rejects replays.
const (
	HeaderSignature = "X-Toolgate-Signature"
	HeaderTimestamp = "X-Toolgate-Timestamp" // Unix seconds, decimal
	HeaderEvent     = "X-Toolgate-Event"     // approval_required
	HeaderDelivery  = "X-Toolgate-Delivery"  // the approval id
)

// Defaults of WebhookOptions.
const (
	DefaultWebhookAttempts   = 3
	DefaultWebhookBackoff    = 500 * time.Millisecond
	DefaultWebhookMaxBackoff = 5 * time.Second
	DefaultWebhookTimeout    = 10 * time.Second
)

// WebhookOptions configure a WebhookNotifier.
type WebhookOptions struct {
	// URL receives a JSON POST per new approval. Required, http or https.
	URL string
	// Secret keys the HMAC-SHA256 signature. Required: an unsigned webhook
	// could be forged by anyone who can reach the receiver.
	Secret []byte
	// Client (default: a client with a 10 s timeout).
	Client *http.Client
	// MaxAttempts bounds the tries (default 3).
	MaxAttempts int
	// Backoff is the wait after the first failure, doubled after each
	// further one and capped at MaxBackoff (defaults 500 ms and 5 s).
	Backoff, MaxBackoff time.Duration
	// Now is the clock for the timestamp (default time.Now).
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// WebhookNotifier posts each new approval as JSON to a URL, signed.
type WebhookNotifier struct {
	opts WebhookOptions
}

// WebhookPayload is the JSON body a webhook receives.
type WebhookPayload struct {
	Event    string   `json:"event"` // approval_required
	Approval Approval `json:"approval"`
}

// NewWebhookNotifier checks the options and fills in defaults.
func NewWebhookNotifier(opts WebhookOptions) (*WebhookNotifier, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook: %q is not an http(s) URL", opts.URL)
	}
	if len(opts.Secret) == 0 {
		return nil, errors.New("webhook: empty signing secret")
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: DefaultWebhookTimeout}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultWebhookAttempts
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultWebhookBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultWebhookMaxBackoff
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &WebhookNotifier{opts: opts}, nil
}

// Notify posts the approval, retrying network errors, 408, 429 and 5xx
// answers with exponential backoff, at most MaxAttempts times. Any other
// answer outside 2xx is final.
func (w *WebhookNotifier) Notify(ctx context.Context, a Approval) error {
	body, err := json.Marshal(WebhookPayload{Event: EventRequired, Approval: a})
	if err != nil {
		return fmt.Errorf("webhook: encode %s: %w", a.ID, err)
	}
	var last error
	for attempt := 1; attempt <= w.opts.MaxAttempts; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(w.backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("webhook: %s: %w (after %v)", a.ID, ctx.Err(), last)
			case <-t.C:
			}
		}
		retry, err := w.post(ctx, a.ID, body)
		if err == nil {
			return nil
		}
		last = err
		w.opts.Logger.Warn("approval webhook attempt failed", "id", a.ID, "attempt", attempt, "err", err)
		if !retry {
			break
		}
	}
	return fmt.Errorf("webhook: %s: %w", a.ID, last)
}

// backoff is the wait before attempt n (n >= 2): Backoff doubled n-2 times,
// capped at MaxBackoff.
func (w *WebhookNotifier) backoff(n int) time.Duration {
	d := w.opts.Backoff
	for i := 2; i < n && d < w.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, w.opts.MaxBackoff)
}

// post makes one attempt, signed with a fresh timestamp.
func (w *WebhookNotifier) post(ctx context.Context, id string, body []byte) (retry bool, err error) {
	ts := strconv.FormatInt(w.opts.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.opts.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgate-approvals")
	req.Header.Set(HeaderEvent, EventRequired)
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(w.opts.Secret, ts, body))
	resp, err := w.opts.Client.Do(req)
	if err != nil {
		return ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return true, fmt.Errorf("receiver answered %s", resp.Status)
	default:
		return false, fmt.Errorf("receiver answered %s", resp.Status)
	}
}

// Sign returns the X-Toolgate-Signature value for a timestamp and body:
// "sha256=" and the hex HMAC-SHA256 of timestamp + "." + body.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature checks a webhook delivery as a receiver would: the
// signature must match and the timestamp must be within maxAge of now.
func VerifySignature(secret []byte, signature, timestamp string, body []byte, now time.Time, maxAge time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: bad timestamp %q", timestamp)
	}
	if age := now.Sub(time.Unix(sec, 0)); age > maxAge || age < -maxAge {
		return fmt.Errorf("webhook: timestamp %s is %v away from now", timestamp, age.Round(time.Second))
	}
	if !hmac.Equal([]byte(signature), []byte(Sign(secret, timestamp, body))) {
		return errors.New("webhook: signature does not match")
	}
	return nil
}
