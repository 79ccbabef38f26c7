package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
)

// Checkpoint is a signed statement "the log had Size entries and its last
// entry's hash was HeadHash". Keep the latest one outside the database: a log
// that no longer contains it was truncated or rewritten.
type Checkpoint struct {
	Size      int64     `json:"size"`
	HeadHash  string    `json:"head_hash"`
	Time      time.Time `json:"time"`
	Signature []byte    `json:"signature,omitempty"` // base64 in JSON
}

// VerifySignature checks the checkpoint's signature with v.
func (c Checkpoint) VerifySignature(v signature.Verifier) error {
	if len(c.Signature) == 0 {
		return errors.New("checkpoint is not signed")
	}
	return v.VerifySignature(bytes.NewReader(c.Signature), bytes.NewReader(checkpointDigest(c.Size, c.HeadHash, c.Time)))
}

// ReadCheckpoint decodes one checkpoint printed by `toolgate audit
// checkpoint`. Unknown fields and trailing data are refused.
func ReadCheckpoint(r io.Reader) (Checkpoint, error) {
	var c Checkpoint
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	if dec.More() {
		return Checkpoint{}, errors.New("checkpoint: trailing data after the object")
	}
	if c.Size < 1 || len(c.HeadHash) != 64 || c.Time.IsZero() {
		return Checkpoint{}, errors.New("checkpoint: size, head_hash and time are required")
	}
	return c, nil
}

// LatestCheckpoint returns the checkpoint of the largest size stored in db.
func LatestCheckpoint(ctx context.Context, db *sql.DB) (Checkpoint, error) {
	if err := requireLog(ctx, db); err != nil {
		return Checkpoint{}, err
	}
	cps, err := checkpoints(ctx, db, true)
	if err != nil {
		return Checkpoint{}, err
	}
	if len(cps) == 0 {
		return Checkpoint{}, errors.New("audit: no checkpoint yet")
	}
	return cps[0], nil
}

// checkpoints reads the stored checkpoints, largest first when desc.
func checkpoints(ctx context.Context, db querier, desc bool) ([]Checkpoint, error) {
	q := `SELECT size, head_hash, time, signature FROM audit_checkpoints ORDER BY size`
	if desc {
		q += ` DESC`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("audit: read checkpoints: %w", err)
	}
	defer rows.Close()
	var out []Checkpoint
	for rows.Next() {
		var c Checkpoint
		var t any
		var head any
		var sig any
		if err := rows.Scan(&c.Size, &head, &t, &sig); err != nil {
			return nil, fmt.Errorf("audit: read checkpoint: %w", err)
		}
		c.HeadHash = asString(head)
		ts := asString(t)
		// A malformed time leaves the zero time: the signature then fails.
		c.Time, _ = time.Parse(timeLayout, ts)
		c.Signature = []byte(asString(sig))
		out = append(out, c)
	}
	return out, rows.Err()
}

func asString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// requireLog reports ErrNoLog when the audit tables are missing.
func requireLog(ctx context.Context, db querier) error {
	v, err := schemaVersion(ctx, db)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if v == 0 {
		return ErrNoLog
	}
	return nil
}

// querier is what *sql.DB, *sql.Tx and *sql.Conn share.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}
