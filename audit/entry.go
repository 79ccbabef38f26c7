package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/schema"
)

// Probe is one model call made while deciding (Tier 2 triage or Tier 3
// supervisor): who answered, what it cost, what it said.
type Probe struct {
	Tier             int     `json:"tier"`
	Provider         string  `json:"provider"`
	Model            string  `json:"model"`
	TokensIn         int     `json:"tokens_in"`
	TokensOut        int     `json:"tokens_out"`
	CostUSD          float64 `json:"cost_usd"`
	Confidence       float64 `json:"confidence"`
	Reasoning        string  `json:"reasoning,omitempty"`
	Result           string  `json:"result"` // approved, rejected, timeout, error ...
	LatencyMS        int64   `json:"latency_ms"`
	ExecutionAllowed bool    `json:"execution_allowed"`
}

// Record is what the pipeline hands to Append: one final decision.
type Record struct {
	Time       time.Time // zero: now
	Request    schema.Request
	Decision   schema.Decision // final outcome, reasons, tier, policy bundle and revision
	Probes     []Probe
	ApprovalID string
}

// Entry is one stored, chained entry of the log.
type Entry struct {
	Seq            int64           `json:"seq"`
	Time           time.Time       `json:"time"`
	AgentID        string          `json:"agent_id"`
	ConversationID string          `json:"conversation_id"`
	Step           int             `json:"step"`
	ActionType     string          `json:"action_type"`
	RequestDigest  string          `json:"request_digest"`
	ArgsPreview    string          `json:"args_preview"`
	Decision       schema.Outcome  `json:"decision"`
	Reasons        []schema.Reason `json:"reasons"`
	Tier           int             `json:"tier"`
	Bundle         string          `json:"bundle"`
	Revision       string          `json:"revision"`
	Probes         []Probe         `json:"probes"`
	ApprovalID     string          `json:"approval_id,omitempty"`
	RequestJSON    json.RawMessage `json:"request"`
	PrevHash       string          `json:"prev_hash"`
	Hash           string          `json:"hash"`
	Signature      []byte          `json:"signature,omitempty"`
}

// PreviewRunes is how many characters of the arguments' JSON an entry keeps
// in ArgsPreview.
const PreviewRunes = 512

// GenesisHash is the PrevHash of the first entry.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// timeLayout is fixed-width UTC so that stored times sort as strings and
// encode the same way every time.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// Domain-separation prefixes of the canonical encodings: an entry's
// signature can never pass for a checkpoint's, nor the reverse.
const (
	entryDomain      = "toolgate-audit-entry/v1"
	checkpointDomain = "toolgate-audit-checkpoint/v1"
)

// row is an entry exactly as stored: the canonical encoding hashes these
// strings, so any change to a stored byte changes the hash.
type row struct {
	seq           int64
	time          string
	agentID       string
	convID        string
	step          int64
	actionType    string
	requestDigest string
	argsPreview   string
	decision      string
	reasons       string // JSON array
	tier          int64
	bundle        string
	revision      string
	probes        string // JSON array
	approvalID    string
	requestJSON   string
	prevHash      string
	hash          string
	signature     []byte
}

// newRow builds the stored form of a record (everything but seq, prev_hash,
// hash and signature, which the chain assigns).
func newRow(r Record, now time.Time) (row, error) {
	t := r.Time
	if t.IsZero() {
		t = now
	}
	req := r.Request
	req.Agent.Token = "" // a credential: never stored
	reqJSON, err := marshal(req)
	if err != nil {
		return row{}, fmt.Errorf("encode request: %w", err)
	}
	args, err := marshal(req.Action.Arguments)
	if err != nil {
		return row{}, fmt.Errorf("encode arguments: %w", err)
	}
	reasons := r.Decision.Reasons
	if reasons == nil {
		reasons = []schema.Reason{}
	}
	reasonsJSON, err := marshal(reasons)
	if err != nil {
		return row{}, fmt.Errorf("encode reasons: %w", err)
	}
	probes := r.Probes
	if probes == nil {
		probes = []Probe{}
	}
	probesJSON, err := marshal(probes)
	if err != nil {
		return row{}, fmt.Errorf("encode probes: %w", err)
	}
	sum := sha256.Sum256(reqJSON)
	return row{
		time:          t.UTC().Format(timeLayout),
		agentID:       req.Agent.ID,
		convID:        req.Context.ConversationID,
		step:          int64(req.Context.StepNumber),
		actionType:    req.Action.Type,
		requestDigest: "sha256:" + hex.EncodeToString(sum[:]),
		argsPreview:   preview(args, PreviewRunes),
		decision:      string(r.Decision.Outcome),
		reasons:       string(reasonsJSON),
		tier:          int64(r.Decision.Tier),
		bundle:        r.Decision.Policy.Bundle,
		revision:      r.Decision.Policy.Revision,
		probes:        string(probesJSON),
		approvalID:    r.ApprovalID,
		requestJSON:   string(reqJSON),
	}, nil
}

// marshal is json.Marshal without HTML escaping and without the trailing
// newline. Map keys come out sorted, so equal values encode equally.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// preview returns the first n characters of b (never a split character).
func preview(b []byte, n int) string {
	i, count := 0, 0
	for i < len(b) && count < n {
		_, size := utf8.DecodeRune(b[i:])
		i += size
		count++
	}
	return string(b[:i])
}

// canonicalEncoder writes the canonical encoding: the domain string, then
// each field as an 8-byte big-endian length followed by its bytes.
type canonicalEncoder struct {
	h   hash.Hash
	buf [8]byte
}

func (c *canonicalEncoder) field(s string) {
	binary.BigEndian.PutUint64(c.buf[:], uint64(len(s)))
	c.h.Write(c.buf[:])
	c.h.Write([]byte(s)) //nolint:staticcheck // the compiler avoids the copy
}

// prefixState hashes every field of r except seq, which comes last, so that
// the verifier can try other positions cheaply (see entryHashAt).
func prefixState(r *row) hash.Hash {
	c := canonicalEncoder{h: sha256.New()}
	c.field(entryDomain)
	c.field(r.time)
	c.field(r.agentID)
	c.field(r.convID)
	c.field(strconv.FormatInt(r.step, 10))
	c.field(r.actionType)
	c.field(r.requestDigest)
	c.field(r.argsPreview)
	c.field(r.decision)
	c.field(r.reasons)
	c.field(strconv.FormatInt(r.tier, 10))
	c.field(r.bundle)
	c.field(r.revision)
	c.field(r.probes)
	c.field(r.approvalID)
	c.field(r.requestJSON)
	c.field(r.prevHash)
	return c.h
}

// finish appends seq to a prefix state and returns the digest.
func finish(h hash.Hash, seq int64) []byte {
	c := canonicalEncoder{h: h}
	c.field(strconv.FormatInt(seq, 10))
	return h.Sum(nil)
}

// entryDigest is SHA-256 over the canonical encoding of r: every stored
// field except hash and signature.
func entryDigest(r *row) []byte { return finish(prefixState(r), r.seq) }

// checkpointDigest is SHA-256 over the canonical encoding of a checkpoint.
func checkpointDigest(size int64, headHash string, t time.Time) []byte {
	c := canonicalEncoder{h: sha256.New()}
	c.field(checkpointDomain)
	c.field(strconv.FormatInt(size, 10))
	c.field(headHash)
	c.field(t.UTC().Format(timeLayout))
	return c.h.Sum(nil)
}

// fromColumns turns the values a row scan produced (any of int64, float64,
// string, []byte, nil, time.Time) into a row. It never panics: a value of the
// wrong kind is an error naming the column.
func fromColumns(cols []any) (row, error) {
	var r row
	if len(cols) != len(entryColumns) {
		return r, fmt.Errorf("want %d columns, got %d", len(entryColumns), len(cols))
	}
	var errs []error
	i64 := func(i int) int64 {
		if v, ok := cols[i].(int64); ok {
			return v
		}
		errs = append(errs, fmt.Errorf("column %s: not an integer (%T)", entryColumns[i], cols[i]))
		return 0
	}
	str := func(i int) string {
		switch v := cols[i].(type) {
		case string:
			return v
		case []byte:
			return string(v)
		}
		errs = append(errs, fmt.Errorf("column %s: not text (%T)", entryColumns[i], cols[i]))
		return ""
	}
	r.seq = i64(0)
	r.time = str(1)
	r.agentID = str(2)
	r.convID = str(3)
	r.step = i64(4)
	r.actionType = str(5)
	r.requestDigest = str(6)
	r.argsPreview = str(7)
	r.decision = str(8)
	r.reasons = str(9)
	r.tier = i64(10)
	r.bundle = str(11)
	r.revision = str(12)
	r.probes = str(13)
	r.approvalID = str(14)
	r.requestJSON = str(15)
	r.prevHash = str(16)
	r.hash = str(17)
	switch v := cols[18].(type) {
	case []byte:
		r.signature = append([]byte(nil), v...)
	case string:
		r.signature = []byte(v)
	case nil:
	default:
		errs = append(errs, fmt.Errorf("column signature: not a blob (%T)", v))
	}
	return r, errors.Join(errs...)
}

// entryColumns are the stored columns, in scan order.
var entryColumns = []string{
	"seq", "time", "agent_id", "conversation_id", "step", "action_type",
	"request_digest", "args_preview", "decision", "reasons", "tier", "bundle",
	"revision", "probes", "approval_id", "request_json", "prev_hash", "hash",
	"signature",
}

// decode parses a stored row into an Entry. It never panics; malformed
// content is an error.
func (r *row) decode() (Entry, error) {
	e := Entry{
		Seq:            r.seq,
		AgentID:        r.agentID,
		ConversationID: r.convID,
		ActionType:     r.actionType,
		RequestDigest:  r.requestDigest,
		ArgsPreview:    r.argsPreview,
		Decision:       schema.Outcome(r.decision),
		Bundle:         r.bundle,
		Revision:       r.revision,
		ApprovalID:     r.approvalID,
		PrevHash:       r.prevHash,
		Hash:           r.hash,
		Signature:      r.signature,
	}
	t, err := time.Parse(timeLayout, r.time)
	if err != nil {
		return e, fmt.Errorf("entry %d: time: %w", r.seq, err)
	}
	e.Time = t
	if r.step < 0 || r.step > 1<<31-1 || r.tier < 0 || r.tier > 1<<31-1 {
		return e, fmt.Errorf("entry %d: step or tier out of range", r.seq)
	}
	e.Step, e.Tier = int(r.step), int(r.tier)
	if !e.Decision.Valid() {
		return e, fmt.Errorf("entry %d: unknown decision %q", r.seq, r.decision)
	}
	if err := strictUnmarshal(r.reasons, &e.Reasons); err != nil {
		return e, fmt.Errorf("entry %d: reasons: %w", r.seq, err)
	}
	if err := strictUnmarshal(r.probes, &e.Probes); err != nil {
		return e, fmt.Errorf("entry %d: probes: %w", r.seq, err)
	}
	if !json.Valid([]byte(r.requestJSON)) {
		return e, fmt.Errorf("entry %d: request is not valid JSON", r.seq)
	}
	e.RequestJSON = json.RawMessage(r.requestJSON)
	return e, nil
}

func strictUnmarshal(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// DecodeEntry parses one stored entry given its column values in the order
// of the audit_entries table (seq, time, agent_id, conversation_id, step,
// action_type, request_digest, args_preview, decision, reasons, tier, bundle,
// revision, probes, approval_id, request_json, prev_hash, hash, signature).
// It never panics; it is what Query and Verify use.
func DecodeEntry(cols []any) (Entry, error) {
	r, err := fromColumns(cols)
	if err != nil {
		return Entry{}, err
	}
	return r.decode()
}
