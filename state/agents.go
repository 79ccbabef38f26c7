package state

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/toolgate/toolgate/schema"
)

// AgentSpec is what registering an agent records.
type AgentSpec struct {
	Name               string
	Trust              schema.TrustLevel
	AllowedTools       []string // empty: every tool the policy allows
	BlockedTools       []string
	MaxDailyCostUSD    float64 // 0: no limit
	MaxRequestsPerHour int     // 0: no limit
}

// Agent is a registered agent. Its token is never stored, only its SHA-256.
type Agent struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Trust              schema.TrustLevel `json:"trust_level"`
	AllowedTools       []string          `json:"allowed_tools"`
	BlockedTools       []string          `json:"blocked_tools"`
	MaxDailyCostUSD    float64           `json:"max_daily_cost_usd"`
	MaxRequestsPerHour int               `json:"max_requests_per_hour"`
	CreatedAt          time.Time         `json:"created_at"`
	RevokedAt          *time.Time        `json:"revoked_at,omitempty"`
}

// Revoked reports whether the agent has been revoked.
func (a Agent) Revoked() bool { return a.RevokedAt != nil }

// Validate checks a spec before it is stored.
func (sp AgentSpec) Validate() error {
	if strings.TrimSpace(sp.Name) == "" {
		return errors.New("agent name: required")
	}
	if sp.Trust < schema.LevelUntrusted || sp.Trust > schema.LevelTrusted {
		return fmt.Errorf("agent trust level: %d is not 0..3", int(sp.Trust))
	}
	if sp.MaxDailyCostUSD < 0 || math.IsNaN(sp.MaxDailyCostUSD) || math.IsInf(sp.MaxDailyCostUSD, 0) {
		return errors.New("max daily cost: must be a finite number, zero or more")
	}
	if sp.MaxRequestsPerHour < 0 {
		return errors.New("max requests per hour: must not be negative")
	}
	for _, t := range append(append([]string{}, sp.AllowedTools...), sp.BlockedTools...) {
		if strings.TrimSpace(t) == "" {
			return errors.New("tool names: empty name")
		}
	}
	return nil
}

// RegisterAgent stores a new agent and returns it with its token. The token
// is shown this once: only its SHA-256 is kept.
func (s *Store) RegisterAgent(ctx context.Context, spec AgentSpec) (Agent, string, error) {
	if err := spec.Validate(); err != nil {
		return Agent{}, "", err
	}
	idBytes, err := randomBytes(12)
	if err != nil {
		return Agent{}, "", fmt.Errorf("register agent: %w", err)
	}
	tokBytes, err := randomBytes(32)
	if err != nil {
		return Agent{}, "", fmt.Errorf("register agent: %w", err)
	}
	token := "tgt_" + base64.RawURLEncoding.EncodeToString(tokBytes)
	a := Agent{
		ID:                 "agent_" + hex.EncodeToString(idBytes),
		Name:               strings.TrimSpace(spec.Name),
		Trust:              spec.Trust,
		AllowedTools:       nonNil(spec.AllowedTools),
		BlockedTools:       nonNil(spec.BlockedTools),
		MaxDailyCostUSD:    spec.MaxDailyCostUSD,
		MaxRequestsPerHour: spec.MaxRequestsPerHour,
		CreatedAt:          time.Now().UTC().Truncate(time.Microsecond),
	}
	allowed, _ := json.Marshal(a.AllowedTools)
	blocked, _ := json.Marshal(a.BlockedTools)
	hash := tokenHash(token)
	err = s.write(ctx, "register agent", func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO agents (id, name, trust, allowed_tools, blocked_tools,
			max_daily_cost_usd, max_requests_per_hour, token_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.Name, int(a.Trust), string(allowed), string(blocked), a.MaxDailyCostUSD, a.MaxRequestsPerHour,
			hash[:], a.CreatedAt.UnixNano())
		return err
	})
	if err != nil {
		return Agent{}, "", err
	}
	return a, token, nil
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, nil
}

func nonNil(s []string) []string {
	out := make([]string, 0, len(s))
	for _, t := range s {
		out = append(out, strings.TrimSpace(t))
	}
	return out
}

func tokenHash(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// tokenMatches compares the token's SHA-256 with the stored one in constant
// time. An empty token never matches.
func tokenMatches(token string, stored []byte) bool {
	if token == "" || len(stored) != sha256.Size {
		return false
	}
	h := tokenHash(token)
	return subtle.ConstantTimeCompare(h[:], stored) == 1
}

const agentColumns = `id, name, trust, allowed_tools, blocked_tools, max_daily_cost_usd,
	max_requests_per_hour, created_at, revoked_at, token_sha256`

type rowScanner interface{ Scan(...any) error }

func scanAgent(r rowScanner) (Agent, []byte, error) {
	var (
		a                Agent
		trust            int
		allowed, blocked string
		created          int64
		revoked          sql.NullInt64
		hash             []byte
	)
	if err := r.Scan(&a.ID, &a.Name, &trust, &allowed, &blocked, &a.MaxDailyCostUSD,
		&a.MaxRequestsPerHour, &created, &revoked, &hash); err != nil {
		return Agent{}, nil, err
	}
	a.Trust = schema.TrustLevel(trust)
	if err := json.Unmarshal([]byte(allowed), &a.AllowedTools); err != nil {
		return Agent{}, nil, fmt.Errorf("agent %s: allowed_tools: %w", a.ID, err)
	}
	if err := json.Unmarshal([]byte(blocked), &a.BlockedTools); err != nil {
		return Agent{}, nil, fmt.Errorf("agent %s: blocked_tools: %w", a.ID, err)
	}
	a.CreatedAt = time.Unix(0, created).UTC()
	if revoked.Valid {
		t := time.Unix(0, revoked.Int64).UTC()
		a.RevokedAt = &t
	}
	return a, hash, nil
}

func getAgent(ctx context.Context, q querier, id string) (Agent, []byte, error) {
	a, hash, err := scanAgent(q.QueryRowContext(ctx, sqlAgent, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Agent{}, nil, fmt.Errorf("agent %q: %w", id, ErrNotFound)
	}
	return a, hash, err
}

// Agent returns one registered agent, or an error matching ErrNotFound.
func (s *Store) Agent(ctx context.Context, id string) (Agent, error) {
	a, _, err := getAgent(ctx, s.db, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Agent{}, s.fail("read agent", err)
	}
	return a, err
}

// Agents lists every registered agent, revoked ones included, oldest first.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+agentColumns+" FROM agents ORDER BY created_at, id")
	if err != nil {
		return nil, s.fail("list agents", err)
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		a, _, err := scanAgent(rows)
		if err != nil {
			return nil, s.fail("list agents", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list agents", err)
	}
	return out, nil
}

// RevokeAgent marks the agent revoked: from then on the policy denies its
// requests (AGENT-001). Revoking twice keeps the first time. An unknown id is
// ErrNotFound.
func (s *Store) RevokeAgent(ctx context.Context, id string) error {
	return s.write(ctx, "revoke agent", func(ctx context.Context, tx *Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE agents SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?", time.Now().UnixNano(), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("agent %q: %w", id, ErrNotFound)
		}
		return nil
	})
}
