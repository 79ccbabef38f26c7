package bundles

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// FetchTimeout bounds one HTTP download of a bundle.
const FetchTimeout = 30 * time.Second

var defaultClient = &http.Client{Timeout: FetchTimeout}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

type fetched struct {
	body        []byte
	etag        string
	notModified bool
}

// fetch GETs a bundle the way OPA's bundle service does: If-None-Match with
// the current ETag, 304 meaning keep what you have.
func fetch(ctx context.Context, c *http.Client, url, etag string) (*fetched, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/gzip, application/vnd.openpolicyagent.bundles")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", url, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return &fetched{notModified: true, etag: etag}, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("bundle %s: server answered %s", url, resp.Status)
	}
	body, err := readLimited(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", url, err)
	}
	return &fetched{body: body, etag: resp.Header.Get("ETag")}, nil
}
