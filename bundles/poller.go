package bundles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// UpdateFunc receives each new verified bundle. Returning an error refuses
// the bundle (for example when it does not compile); the caller keeps
// serving the one it had.
type UpdateFunc func(ctx context.Context, b *bundle.Bundle) error

// PollerStats are the poller's counters and its current bundle.
type PollerStats struct {
	Loaded      int64 // bundles handed to the callback and accepted
	Refused     int64 // bundles refused: bad signature, unparseable, or rejected by the callback
	NotModified int64 // polls answered 304
	FetchErrors int64 // polls that got no bundle (network, non-200 status)
	Revision    string
	ETag        string
	LastError   string
}

// Poller downloads a bundle from an http(s) URL at an interval, sending
// If-None-Match with the current ETag. A 304 keeps the current bundle. A new
// bundle is verified (when a key is configured) and parsed, then handed to
// the callback; a bad one is logged, counted, and the current bundle kept.
type Poller struct {
	url      string
	interval time.Duration
	cfgErr   error
	key      *VerificationKey
	onUpdate UpdateFunc
	log      *slog.Logger
	client   *http.Client

	pollMu      sync.Mutex // serialises polls
	mu          sync.Mutex // guards the strings below, written only while polling
	etag        string
	revision    string
	lastError   string
	loaded      atomic.Int64
	refused     atomic.Int64
	notModified atomic.Int64
	fetchErrors atomic.Int64
}

// NewPoller returns a poller for url. A nil logger logs to slog.Default().
func NewPoller(url string, interval time.Duration, key *VerificationKey, onUpdate UpdateFunc, logger *slog.Logger) *Poller {
	if logger == nil {
		logger = slog.Default()
	}
	p := &Poller{url: url, interval: interval, key: key, onUpdate: onUpdate, log: logger, client: defaultClient}
	switch {
	case !isURL(url):
		p.cfgErr = fmt.Errorf("poller: %q is not an http(s) URL", url)
	case interval <= 0:
		p.cfgErr = fmt.Errorf("poller: interval %v must be positive", interval)
	case onUpdate == nil:
		p.cfgErr = errors.New("poller: no update callback")
	}
	if key != nil && p.cfgErr == nil {
		if _, err := key.VerificationConfig(); err != nil {
			p.cfgErr = fmt.Errorf("poller: %w", err)
		}
	}
	return p
}

// Stats returns a snapshot of the counters.
func (p *Poller) Stats() PollerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PollerStats{
		Loaded:      p.loaded.Load(),
		Refused:     p.refused.Load(),
		NotModified: p.notModified.Load(),
		FetchErrors: p.fetchErrors.Load(),
		Revision:    p.revision,
		ETag:        p.etag,
		LastError:   p.lastError,
	}
}

// Poll fetches once. It returns nil when the bundle was unchanged (304) or a
// new one was accepted, and the reason otherwise; the current bundle is kept
// in every case but acceptance. Call it once at start to fail when the first
// bundle cannot be had.
func (p *Poller) Poll(ctx context.Context) error {
	if p.cfgErr != nil {
		return p.cfgErr
	}
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	err := p.poll(ctx)
	p.mu.Lock()
	if err != nil {
		p.lastError = err.Error()
	} else {
		p.lastError = ""
	}
	p.mu.Unlock()
	return err
}

func (p *Poller) poll(ctx context.Context) error {
	res, err := fetch(ctx, p.client, p.url, p.etag)
	if err != nil {
		p.fetchErrors.Add(1)
		p.log.WarnContext(ctx, "bundle fetch failed; keeping the current bundle", "url", p.url, "revision", p.revision, "err", err)
		return err
	}
	if res.notModified {
		if p.etag == "" {
			p.fetchErrors.Add(1)
			return fmt.Errorf("bundle %s: 304 Not Modified without an ETag sent", p.url)
		}
		p.notModified.Add(1)
		p.log.DebugContext(ctx, "bundle not modified", "url", p.url, "etag", p.etag)
		return nil
	}
	var cfg *bundle.VerificationConfig
	if p.key != nil {
		if cfg, err = p.key.VerificationConfig(); err != nil {
			return err
		}
	}
	b, err := loadArchive(p.url, res.body, cfg)
	if err != nil {
		p.refused.Add(1)
		p.log.ErrorContext(ctx, "bundle refused; keeping the current bundle", "url", p.url, "etag", res.etag, "revision", p.revision, "err", err)
		return err
	}
	b.Etag = res.etag
	if err := p.onUpdate(ctx, b); err != nil {
		p.refused.Add(1)
		p.log.ErrorContext(ctx, "bundle rejected by its consumer; keeping the current bundle", "url", p.url, "new_revision", b.Manifest.Revision, "revision", p.revision, "err", err)
		return fmt.Errorf("bundle %s: %w", p.url, err)
	}
	p.mu.Lock()
	p.etag, p.revision = res.etag, b.Manifest.Revision
	p.mu.Unlock()
	p.loaded.Add(1)
	p.log.InfoContext(ctx, "bundle loaded", "url", p.url, "name", Name(p.url, b), "revision", p.revision, "etag", p.etag)
	return nil
}

// Run polls now (unless a bundle is already loaded) and then every interval
// until ctx is done, when it returns ctx's error. Failures are logged and
// counted, never fatal: call Poll first to make the first load fatal.
func (p *Poller) Run(ctx context.Context) error {
	if p.cfgErr != nil {
		return p.cfgErr
	}
	if p.loaded.Load() == 0 {
		_ = p.Poll(ctx)
	}
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			_ = p.Poll(ctx)
		}
	}
}
