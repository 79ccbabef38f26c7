package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/toolgate/toolgate/schema"
)

func TestAppendVerify(t *testing.T) {
	for _, keyType := range []string{KeyECDSAP256, KeyEd25519, "unsigned"} {
		t.Run(keyType, func(t *testing.T) {
			ctx := context.Background()
			db, _ := tempDB(t)
			var signer signature.Signer
			var v signature.Verifier
			if keyType != "unsigned" {
				signer, v = newKey(t, keyType)
			}
			l := fill(t, db, signer, Options{CheckpointEvery: 4}, 10)
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
			rep := mustVerify(t, db, v)
			if !rep.OK || rep.Entries != 10 || rep.Checkpoints != 3 || rep.SignaturesChecked != (v != nil) {
				t.Fatalf("report %+v, want OK with 10 entries and 3 checkpoints (4, 8, 10)", rep)
			}
			if _, err := l.Append(ctx, record(11)); !errors.Is(err, ErrNotRecorded) || !errors.Is(err, ErrClosed) {
				t.Fatalf("append after close: %v, want ErrNotRecorded and ErrClosed", err)
			}
		})
	}
}

func TestAppendedEntry(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	signer, _ := newKey(t, KeyEd25519)
	l := fill(t, db, signer, Options{}, 1)
	rec := record(3)
	long := strings.Repeat("é", 600)
	rec.Request.Action.Arguments = map[string]any{"content": long}
	rec.ApprovalID = "apr_1"
	e, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	all, err := Query(ctx, db, Filter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("query: %v, %d entries", err, len(all))
	}
	if all[0].Hash != e.PrevHash || all[0].PrevHash != GenesisHash || e.Seq != 2 {
		t.Fatalf("chain: first %s/%s, second prev %s seq %d", all[0].PrevHash, all[0].Hash, e.PrevHash, e.Seq)
	}
	got := all[1]
	if got.AgentID != "agent_0" || got.ConversationID != "conv_1" || got.Step != 4 || got.ActionType != "bash" ||
		got.Decision != schema.Pending || got.Tier != 1 || got.Bundle != "default" || got.Revision != "rev-1" ||
		got.ApprovalID != "apr_1" || len(got.Probes) != 1 || got.Probes[0].Result != "approved" || !got.Time.Equal(rec.Time) {
		t.Fatalf("entry %+v", got)
	}
	if n := len([]rune(got.ArgsPreview)); n != PreviewRunes || !strings.HasPrefix(got.ArgsPreview, `{"content":"éé`) {
		t.Fatalf("preview has %d characters: %.40q", n, got.ArgsPreview)
	}
	if bytes.Contains(got.RequestJSON, []byte("secret-token")) {
		t.Fatal("the agent's token was stored")
	}
	if !strings.HasPrefix(got.RequestDigest, "sha256:") || len(got.RequestDigest) != 71 {
		t.Fatalf("digest %q", got.RequestDigest)
	}
}

// tamper is one way to damage a log of 10 entries (checkpoints at 4, 8, 10).
type tamper struct {
	name     string
	do       func(t *testing.T, db *sql.DB)
	kind     string
	firstBad int64
	// anchoredMisses: a signature replaced on an entry a checkpoint vouches
	// for is not looked at by an anchored verification.
	anchoredMisses bool
}

func sqlExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// rewrite changes entry from with mutate and re-chains it and the entries
// after it up to to: hashes recomputed, prev_hash relinked, and re-signed with
// signer (nil: the old signatures stay).
func rewrite(t *testing.T, db *sql.DB, from, to int64, signer signature.Signer, mutate func(*row)) {
	t.Helper()
	rows, err := db.Query(`SELECT `+joinColumns()+` FROM audit_entries WHERE seq BETWEEN ? AND ? ORDER BY seq`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var rs []row
	for rows.Next() {
		cols := make([]any, len(entryColumns))
		ptrs := make([]any, len(cols))
		for i := range cols {
			ptrs[i] = &cols[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r, err := fromColumns(cols)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	rows.Close()
	mutate(&rs[0])
	prev := rs[0].prevHash
	for _, r := range rs {
		r.prevHash = prev
		d := entryDigest(&r)
		r.hash = hex.EncodeToString(d)
		if signer != nil {
			if r.signature, err = signer.SignMessage(bytes.NewReader(d)); err != nil {
				t.Fatal(err)
			}
		}
		sqlExec(t, db, `UPDATE audit_entries SET decision = ?, prev_hash = ?, hash = ?, signature = ? WHERE seq = ?`,
			r.decision, r.prevHash, r.hash, r.signature, r.seq)
		prev = r.hash
	}
}

func TestTampering(t *testing.T) {
	other, _ := newKey(t, KeyECDSAP256)
	tests := []tamper{
		{"edit a decision", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `UPDATE audit_entries SET decision = 'allow' WHERE seq = 6`)
		}, KindEdited, 6, false},
		{"edit the request", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `UPDATE audit_entries SET request_json = replace(request_json, 'echo', 'rm -rf') WHERE seq = 2`)
		}, KindEdited, 2, false},
		{"edit and recompute the hash", func(t *testing.T, db *sql.DB) {
			rewrite(t, db, 5, 5, nil, func(r *row) { r.decision = "escalate" })
		}, KindEdited, 5, false}, // entry 6 still links to the old hash
		{"edit, recompute the hash and relink the rest", func(t *testing.T, db *sql.DB) {
			rewrite(t, db, 5, 10, nil, func(r *row) { r.decision = "escalate" })
		}, KindBadSignature, 5, false}, // without the key, that is all an edit can look like
		{"edit the last entry and recompute its hash", func(t *testing.T, db *sql.DB) {
			rewrite(t, db, 10, 10, nil, func(r *row) { r.decision = "escalate" })
		}, KindEdited, 10, false}, // the closing checkpoint names the old head
		{"delete a row", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `DELETE FROM audit_entries WHERE seq = 5`)
		}, KindDeleted, 5, false},
		{"delete the first row", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `DELETE FROM audit_entries WHERE seq = 1`)
		}, KindDeleted, 1, false},
		{"delete a row and renumber", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `DELETE FROM audit_entries WHERE seq = 5`)
			sqlExec(t, db, `UPDATE audit_entries SET seq = seq - 1 WHERE seq > 5`)
		}, KindDeleted, 5, false},
		{"swap two rows", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `UPDATE audit_entries SET seq = -1 WHERE seq = 3`)
			sqlExec(t, db, `UPDATE audit_entries SET seq = 3 WHERE seq = 7`)
			sqlExec(t, db, `UPDATE audit_entries SET seq = 7 WHERE seq = -1`)
		}, KindReordered, 3, false},
		{"swap the first two rows", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `UPDATE audit_entries SET seq = -1 WHERE seq = 1`)
			sqlExec(t, db, `UPDATE audit_entries SET seq = 1 WHERE seq = 2`)
			sqlExec(t, db, `UPDATE audit_entries SET seq = 2 WHERE seq = -1`)
		}, KindReordered, 1, false},
		{"drop the tail", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `DELETE FROM audit_entries WHERE seq > 7`)
		}, KindTruncated, 8, false},
		{"drop the last entry", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `DELETE FROM audit_entries WHERE seq = 10`)
		}, KindTruncated, 10, false},
		{"replace a signature", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `UPDATE audit_entries SET signature = (SELECT signature FROM audit_entries WHERE seq = 7) WHERE seq = 6`)
		}, KindBadSignature, 6, true},
		{"remove a signature", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `UPDATE audit_entries SET signature = NULL WHERE seq = 9`)
		}, KindBadSignature, 9, true},
		{"re-sign with another key", func(t *testing.T, db *sql.DB) {
			rewrite(t, db, 3, 10, other, func(r *row) { r.decision = "escalate" })
		}, KindBadSignature, 3, false},
		{"forge a checkpoint", func(t *testing.T, db *sql.DB) {
			sqlExec(t, db, `UPDATE audit_checkpoints SET size = 3 WHERE size = 4`)
		}, KindBadSignature, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := tempDB(t)
			signer, v := newKey(t, KeyECDSAP256)
			l := fill(t, db, signer, Options{CheckpointEvery: 4}, 10)
			if err := l.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			tt.do(t, db)
			rep := mustVerify(t, db, v)
			if rep.OK || rep.Kind != tt.kind || rep.FirstBad != tt.firstBad {
				t.Fatalf("report %+v, want %q at %d", rep, tt.kind, tt.firstBad)
			}
			if rep.Detail == "" {
				t.Fatal("no detail")
			}
			rep, err := VerifyWith(context.Background(), db, v, VerifyOptions{Anchored: true})
			if err != nil {
				t.Fatal(err)
			}
			if tt.anchoredMisses {
				if !rep.OK || !rep.Anchored {
					t.Fatalf("anchored report %+v: the checkpoint should have vouched", rep)
				}
			} else if rep.OK || rep.Kind != tt.kind || rep.FirstBad != tt.firstBad {
				t.Fatalf("anchored report %+v, want %q at %d", rep, tt.kind, tt.firstBad)
			}
		})
	}
}

// The tail is dropped together with the checkpoints that vouched for it:
// only a checkpoint kept elsewhere finds it.
func TestExternalCheckpoint(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	signer, v := newKey(t, KeyEd25519)
	l := fill(t, db, signer, Options{CheckpointEvery: 4}, 10)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := LatestCheckpoint(ctx, db)
	if err != nil || cp.Size != 10 {
		t.Fatalf("latest checkpoint %+v, %v", cp, err)
	}
	data, _ := json.Marshal(cp)
	kept, err := ReadCheckpoint(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, db, v, kept); !rep.OK || rep.Checkpoints != 4 {
		t.Fatalf("intact log with its external checkpoint: %+v", rep)
	}
	sqlExec(t, db, `DELETE FROM audit_entries WHERE seq > 6`)
	sqlExec(t, db, `DELETE FROM audit_checkpoints WHERE size > 6`)
	if rep := mustVerify(t, db, v); !rep.OK {
		t.Fatalf("without the external checkpoint the cut is invisible, yet got %+v", rep)
	}
	rep := mustVerify(t, db, v, kept)
	if rep.OK || rep.Kind != KindTruncated || rep.FirstBad != 7 {
		t.Fatalf("report %+v, want truncated at 7", rep)
	}
	forged := kept
	forged.Size = 6
	if rep := mustVerify(t, db, v, forged); rep.OK || rep.Kind != KindBadSignature {
		t.Fatalf("forged external checkpoint: %+v", rep)
	}
}

func TestReadCheckpointRejects(t *testing.T) {
	for _, in := range []string{``, `{}`, `{"size":1}`, `{"size":1,"head_hash":"ab","time":"2026-01-01T00:00:00Z"}`,
		`{"size":1,"head_hash":"` + GenesisHash + `","time":"2026-01-01T00:00:00Z","extra":1}`,
		`{"size":1,"head_hash":"` + GenesisHash + `","time":"2026-01-01T00:00:00Z"} {}`} {
		if _, err := ReadCheckpoint(strings.NewReader(in)); err == nil {
			t.Errorf("ReadCheckpoint(%q) accepted", in)
		}
	}
}

func TestVerifyNoLog(t *testing.T) {
	db, _ := tempDB(t)
	if _, err := Verify(context.Background(), db, nil); !errors.Is(err, ErrNoLog) {
		t.Fatalf("verify of an empty database: %v, want ErrNoLog", err)
	}
	if _, err := Query(context.Background(), db, Filter{}); !errors.Is(err, ErrNoLog) {
		t.Fatalf("query of an empty database: %v, want ErrNoLog", err)
	}
}

func TestAppendFailsReadOnly(t *testing.T) {
	ctx := context.Background()
	db, path := tempDB(t)
	signer, v := newKey(t, KeyECDSAP256)
	l := fill(t, db, signer, Options{}, 3)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ro := openDB(t, path, "mode=ro")
	l2, err := Open(ctx, ro, signer, Options{})
	if err != nil {
		t.Fatalf("open of a current read-only log: %v", err)
	}
	if _, err := l2.Append(ctx, record(3)); !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("append to a read-only database: %v, want ErrNotRecorded", err)
	}
	if rep := mustVerify(t, ro, v); !rep.OK || rep.Entries != 3 {
		t.Fatalf("after the failed append: %+v", rep)
	}
}

func TestAppendFailsFull(t *testing.T) {
	ctx := context.Background()
	db, path := tempDB(t)
	signer, v := newKey(t, KeyEd25519)
	if err := fill(t, db, signer, Options{}, 3).Close(ctx); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// max_page_count is per connection: every connection of this pool
	// sees the database as full.
	l, err := Open(ctx, openDB(t, path, fmt.Sprintf("_pragma=max_page_count(%d)", pages)), signer, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(3)
	rec.Request.Action.Arguments = map[string]any{"content": strings.Repeat("x", 64<<10)}
	_, err = l.Append(ctx, rec)
	if !errors.Is(err, ErrNotRecorded) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("append to a full database: %v, want ErrNotRecorded (full)", err)
	}
	if rep := mustVerify(t, db, v); !rep.OK || rep.Entries != 3 {
		t.Fatalf("after the failed append: %+v", rep)
	}
	d := DenyUnrecorded(rec.Decision, err)
	if d.Outcome != schema.Deny || !d.HasCode(CodeNotRecorded) || rec.Decision.HasCode(CodeNotRecorded) {
		t.Fatalf("DenyUnrecorded: %+v", d)
	}
}

func TestConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	db, path := tempDB(t)
	signer, v := newKey(t, KeyECDSAP256)
	l1, err := Open(ctx, db, signer, Options{CheckpointEvery: 50})
	if err != nil {
		t.Fatal(err)
	}
	// A second Log on its own connection pool stands for a second process.
	l2, err := Open(ctx, openDB(t, path), signer, Options{CheckpointEvery: 50})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 32, 10
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		l := l1
		if g%2 == 1 {
			l = l2
		}
		wg.Go(func() {
			for i := range each {
				if _, err := l.Append(ctx, record(g*each+i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := l1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, db, v)
	if !rep.OK || rep.Entries != goroutines*each {
		t.Fatalf("report %+v, want OK with %d entries", rep, goroutines*each)
	}
}

func TestQuery(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	fill(t, db, nil, Options{}, 12)
	tests := []struct {
		name string
		f    Filter
		want []int64
	}{
		{"all", Filter{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"agent", Filter{AgentID: "agent_1"}, []int64{2, 5, 8, 11}},
		{"conversation and decision", Filter{ConversationID: "conv_1", Decision: schema.Deny}, []int64{2, 6, 10}},
		{"tool", Filter{Tool: "web_fetch"}, []int64{3, 6, 9, 12}},
		{"code", Filter{Code: "PATTERN-004"}, []int64{5, 10}},
		{"since until", Filter{Since: t0.Add(3e9), Until: t0.Add(6e9)}, []int64{4, 5, 6}},
		{"limit", Filter{Decision: schema.Allow, Limit: 2}, []int64{1, 3}},
		{"nothing", Filter{AgentID: "nobody"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es, err := Query(ctx, db, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, e := range es {
				got = append(got, e.Seq)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("seqs %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExport(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	signer, _ := newKey(t, KeyEd25519)
	fill(t, db, signer, Options{}, 4)
	var buf bytes.Buffer
	if err := Export(ctx, db, &buf, Filter{Tool: "bash"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"decision_id", "path", "input", "result", "timestamp", "bundles", "labels",
		"seq", "hash", "prev_hash", "signature", "tier", "probes"} {
		if _, ok := got[k]; !ok {
			t.Errorf("line has no %q: %s", k, lines[0])
		}
	}
	if got["path"] != DecisionPath || got["timestamp"] != "2026-03-01T12:00:00Z" ||
		got["result"].(map[string]any)["decision"] != "allow" ||
		got["input"].(map[string]any)["action"].(map[string]any)["type"] != "bash" ||
		got["bundles"].(map[string]any)["default"].(map[string]any)["revision"] != "rev-1" {
		t.Fatalf("line %s", lines[0])
	}
	if id, _ := got["decision_id"].(string); len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Fatalf("decision_id %q is not UUID-shaped", id)
	}
}

func TestDecodeEntryRejects(t *testing.T) {
	good := func() []any {
		return []any{int64(1), "2026-03-01T12:00:00.000000000Z", "a", "c", int64(1), "bash", "sha256:x", "{}",
			"allow", "[]", int64(1), "default", "", "[]", "", `{}`, GenesisHash, "h", []byte("sig")}
	}
	if _, err := DecodeEntry(good()); err != nil {
		t.Fatalf("good row: %v", err)
	}
	tests := []struct {
		col int
		val any
	}{
		{0, "one"}, {1, "yesterday"}, {2, nil}, {4, 1.5}, {8, "maybe"}, {9, `[{"code":1}]`},
		{9, `[{"bogus":1}]`}, {13, `{`}, {15, `{"a":`}, {18, int64(3)}, {10, int64(-1)},
	}
	for _, tt := range tests {
		cols := good()
		cols[tt.col] = tt.val
		if _, err := DecodeEntry(cols); err == nil {
			t.Errorf("column %s = %#v accepted", entryColumns[tt.col], tt.val)
		}
	}
	if _, err := DecodeEntry(good()[:5]); err == nil {
		t.Error("short row accepted")
	}
}

// failingSigner fails its n-th SignMessage (counting from 1).
type failingSigner struct {
	signature.Signer
	n, calls atomic.Int64
}

func (s *failingSigner) SignMessage(msg io.Reader, opts ...signature.SignOption) ([]byte, error) {
	if s.calls.Add(1) == s.n.Load() {
		return nil, errors.New("signer unavailable")
	}
	return s.Signer.SignMessage(msg, opts...)
}

// TestSignedOffWriter: entries are signed off the writer and their
// signatures written before the COMMIT: every committed entry carries its
// signature (Append returns it), and a failed signature leaves nothing of
// its batch, fails its appends with ErrNotRecorded, and the log still
// verifies.
func TestSignedOffWriter(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	key, v := newKey(t, KeyECDSAP256)
	signer := &failingSigner{Signer: key}
	signer.n.Store(7)
	l, err := Open(ctx, db, signer, Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed, ok atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				e, err := l.Append(ctx, record(g*5+i))
				if err != nil {
					if !errors.Is(err, ErrNotRecorded) {
						t.Errorf("append: %v, want ErrNotRecorded", err)
					}
					failed.Add(1)
					continue
				}
				ok.Add(1)
				digest, _ := hex.DecodeString(e.Hash)
				if err := v.VerifySignature(bytes.NewReader(e.Signature), bytes.NewReader(digest)); err != nil {
					t.Errorf("entry %d: returned signature: %v", e.Seq, err)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() == 0 {
		t.Fatal("no append failed")
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, db, v)
	if !rep.OK || rep.Entries != ok.Load() {
		t.Fatalf("report %+v, want OK with %d entries (%d failed)", rep, ok.Load(), failed.Load())
	}
	var unsigned int
	if err := db.QueryRow(`SELECT count(*) FROM audit_entries WHERE signature IS NULL OR length(signature) = 0`).Scan(&unsigned); err != nil || unsigned != 0 {
		t.Fatalf("%d unsigned entries (%v)", unsigned, err)
	}
}
