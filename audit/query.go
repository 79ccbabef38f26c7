package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/toolgate/toolgate/schema"
)

// Filter selects entries. Empty fields match everything. Since is inclusive,
// Until exclusive.
type Filter struct {
	AgentID        string
	ConversationID string
	Decision       schema.Outcome
	Tool           string // action type
	Code           string // any reason carries this code
	Since, Until   time.Time
	Limit          int // 0: no limit
}

func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		conds = append(conds, cond)
		args = append(args, arg)
	}
	if f.AgentID != "" {
		add("agent_id = ?", f.AgentID)
	}
	if f.ConversationID != "" {
		add("conversation_id = ?", f.ConversationID)
	}
	if f.Decision != "" {
		add("decision = ?", string(f.Decision))
	}
	if f.Tool != "" {
		add("action_type = ?", f.Tool)
	}
	if f.Code != "" {
		add("EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(reasons) THEN reasons ELSE '[]' END) WHERE json_extract(value, '$.code') = ?)", f.Code)
	}
	if !f.Since.IsZero() {
		add("time >= ?", f.Since.UTC().Format(timeLayout))
	}
	if !f.Until.IsZero() {
		add("time < ?", f.Until.UTC().Format(timeLayout))
	}
	q := ""
	if len(conds) > 0 {
		q = " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY seq"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return q, args
}

// each calls fn for every entry the filter selects, in sequence order.
func each(ctx context.Context, db *sql.DB, f Filter, fn func(Entry) error) error {
	if err := requireLog(ctx, db); err != nil {
		return err
	}
	where, args := f.where()
	rows, err := db.QueryContext(ctx, `SELECT `+joinColumns()+` FROM audit_entries`+where, args...)
	if err != nil {
		return fmt.Errorf("audit: query: %w", err)
	}
	defer rows.Close()
	cols := make([]any, len(entryColumns))
	ptrs := make([]any, len(cols))
	for i := range cols {
		ptrs[i] = &cols[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("audit: query: %w", err)
		}
		e, err := DecodeEntry(cols)
		if err != nil {
			return fmt.Errorf("audit: query: %w (run `toolgate audit verify`)", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: query: %w", err)
	}
	return nil
}

// Query returns the entries the filter selects, in sequence order. It does
// not verify them: run Verify for that.
func Query(ctx context.Context, db *sql.DB, f Filter) ([]Entry, error) {
	var out []Entry
	err := each(ctx, db, f, func(e Entry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// DecisionPath is the path of every exported decision: the Tier 1 entry
// point, as OPA would log it.
const DecisionPath = "toolgate/tier1/decision"

// DecisionLog is one exported line: OPA's decision-log fields followed by
// toolgate's own.
type DecisionLog struct {
	DecisionID string                       `json:"decision_id"`
	Path       string                       `json:"path"`
	Input      json.RawMessage              `json:"input"`
	Result     DecisionResult               `json:"result"`
	Timestamp  string                       `json:"timestamp"`
	Bundles    map[string]map[string]string `json:"bundles,omitempty"`
	Labels     map[string]string            `json:"labels"`

	Seq       int64   `json:"seq"`
	Hash      string  `json:"hash"`
	PrevHash  string  `json:"prev_hash"`
	Signature []byte  `json:"signature,omitempty"`
	Tier      int     `json:"tier"`
	Probes    []Probe `json:"probes"`
}

// DecisionResult is the exported decision.
type DecisionResult struct {
	Decision   schema.Outcome  `json:"decision"`
	Tier       int             `json:"tier"`
	Reasons    []schema.Reason `json:"reasons"`
	Policy     schema.Policy   `json:"policy"`
	ApprovalID string          `json:"approval_id,omitempty"`
}

// ToDecisionLog maps an entry to an OPA-style decision-log line. The
// decision_id is the entry's hash shaped as a UUID (its first 16 bytes), so
// it is stable across exports.
func ToDecisionLog(e Entry) DecisionLog {
	d := DecisionLog{
		DecisionID: decisionID(e.Hash),
		Path:       DecisionPath,
		Input:      e.RequestJSON,
		Result: DecisionResult{
			Decision:   e.Decision,
			Tier:       e.Tier,
			Reasons:    e.Reasons,
			Policy:     schema.Policy{Bundle: e.Bundle, Revision: e.Revision},
			ApprovalID: e.ApprovalID,
		},
		Timestamp: e.Time.UTC().Format(time.RFC3339Nano),
		Labels:    map[string]string{"app": "toolgate"},
		Seq:       e.Seq,
		Hash:      e.Hash,
		PrevHash:  e.PrevHash,
		Signature: e.Signature,
		Tier:      e.Tier,
		Probes:    e.Probes,
	}
	if e.Bundle != "" {
		d.Bundles = map[string]map[string]string{e.Bundle: {"revision": e.Revision}}
	}
	if d.Result.Reasons == nil {
		d.Result.Reasons = []schema.Reason{}
	}
	if d.Probes == nil {
		d.Probes = []Probe{}
	}
	return d
}

func decisionID(h string) string {
	if len(h) < 32 {
		return h
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Export writes the selected entries as JSON lines, one DecisionLog each.
func Export(ctx context.Context, db *sql.DB, w io.Writer, f Filter) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return each(ctx, db, f, func(e Entry) error {
		if err := enc.Encode(ToDecisionLog(e)); err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		return nil
	})
}
