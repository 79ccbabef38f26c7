package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/schema"
)

func TestRegisterAgentStoresOnlyTheTokenHash(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, token, err := s.RegisterAgent(ctx, AgentSpec{Name: " ci-bot ", Trust: schema.LevelSupervised, BlockedTools: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.ID, "agent_") || !strings.HasPrefix(token, "tgt_") || len(token) < 40 {
		t.Errorf("id %q token %q", a.ID, token)
	}
	if a.Name != "ci-bot" || a.Revoked() || a.AllowedTools == nil {
		t.Errorf("agent %+v", a)
	}
	var stored []byte
	if err := s.DB().QueryRowContext(ctx, "SELECT token_sha256 FROM agents WHERE id = ?", a.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(token))
	if !bytes.Equal(stored, want[:]) {
		t.Error("stored value is not the token's SHA-256")
	}
	// The token itself appears nowhere in the file's tables.
	var hits int
	if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM agents WHERE instr(name || allowed_tools || blocked_tools || id, ?) > 0", token).Scan(&hits); err != nil || hits != 0 {
		t.Errorf("token found in the table: %d %v", hits, err)
	}
	if !tokenMatches(token, stored) || tokenMatches("", stored) || tokenMatches(token[:len(token)-1], stored) {
		t.Error("tokenMatches")
	}
	_, token2, _ := s.RegisterAgent(ctx, AgentSpec{Name: "other", Trust: schema.LevelUntrusted})
	if token2 == token {
		t.Error("two agents got the same token")
	}
}

func TestRegisterAgentRejectsBadSpecs(t *testing.T) {
	s := openTest(t)
	tests := []struct {
		name string
		spec AgentSpec
		want string
	}{
		{"no name", AgentSpec{Trust: 1}, "name"},
		{"bad trust", AgentSpec{Name: "x", Trust: 7}, "trust"},
		{"negative cost", AgentSpec{Name: "x", MaxDailyCostUSD: -1}, "cost"},
		{"negative rate", AgentSpec{Name: "x", MaxRequestsPerHour: -1}, "per hour"},
		{"empty tool", AgentSpec{Name: "x", AllowedTools: []string{" "}}, "tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.RegisterAgent(context.Background(), tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one about %q", err, tt.want)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Error("a bad spec is not a store failure")
			}
		})
	}
}

func TestListShowRevoke(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if list, err := s.Agents(ctx); err != nil || len(list) != 0 {
		t.Fatalf("empty registry: %v %v", list, err)
	}
	var ids []string
	for _, n := range []string{"one", "two", "three"} {
		a, _, err := s.RegisterAgent(ctx, AgentSpec{Name: n, Trust: schema.LevelAutonomous})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	list, err := s.Agents(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("Agents: %d %v", len(list), err)
	}
	if err := s.RevokeAgent(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	a, err := s.Agent(ctx, ids[1])
	if err != nil || !a.Revoked() {
		t.Fatalf("revoked agent %+v %v", a, err)
	}
	first := *a.RevokedAt
	if err := s.RevokeAgent(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Agent(ctx, ids[1]); !a.RevokedAt.Equal(first) {
		t.Error("revoking twice moved the revocation time")
	}
	if _, err := s.Agent(ctx, "agent_nope"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
		t.Errorf("unknown agent: %v", err)
	}
	if err := s.RevokeAgent(ctx, "agent_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke unknown agent: %v", err)
	}
}
