package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"
)

// The kinds of damage Verify names.
const (
	KindEdited       = "edited"        // an entry's content no longer matches its hash, or its hash was recomputed
	KindDeleted      = "deleted"       // an entry is missing from the middle of the chain
	KindReordered    = "reordered"     // an entry sits at another position than the one it was written at
	KindTruncated    = "truncated"     // entries a checkpoint vouches for are missing from the end
	KindBadSignature = "bad signature" // an entry's or checkpoint's signature does not verify with the key
)

// Report is the outcome of Verify. When OK is false, FirstBad is the first
// sequence number that cannot be trusted and Kind says what happened there;
// every entry before FirstBad verified.
type Report struct {
	Entries           int64 `json:"entries"`
	Checkpoints       int   `json:"checkpoints"`
	SignaturesChecked bool  `json:"signatures_checked"`
	Anchored          bool  `json:"anchored,omitempty"` // entry signatures checked only where no checkpoint vouches

	OK       bool   `json:"ok"`
	FirstBad int64  `json:"first_bad,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// failure is one finding; Verify reports the one with the lowest seq.
type failure struct {
	seq    int64
	kind   string
	detail string
}

func (f *failure) better(g *failure) bool {
	return g != nil && (f == nil || g.seq < f.seq)
}

// Verify checks every entry's position, hash, link to the previous entry and
// signature, and every stored checkpoint (plus the external ones given): that
// it is signed and that the log still holds the entry it names with that
// hash. With a nil verifier, signatures are not checked (hashes, links and
// checkpoint positions still are). A damaged log is not an error: it is a
// Report with OK false. Errors are for a log that cannot be read.
func Verify(ctx context.Context, db *sql.DB, v signature.Verifier, external ...Checkpoint) (Report, error) {
	return VerifyWith(ctx, db, v, VerifyOptions{Checkpoints: external})
}

// VerifyOptions tune VerifyWith.
type VerifyOptions struct {
	// Checkpoints kept outside the database that the log must still contain.
	Checkpoints []Checkpoint
	// Anchored checks entry signatures only where no signed checkpoint
	// vouches for the entry: after the last checkpoint that matches the
	// chain, and around any failure. Every hash, link and checkpoint is
	// still checked, so every entry's content is still proven (a signed head
	// commits to the whole chain before it), but a replaced or removed
	// signature on an entry a checkpoint covers goes unnoticed. It is several
	// times faster.
	Anchored bool
}

// VerifyWith is Verify with options.
func VerifyWith(ctx context.Context, db *sql.DB, v signature.Verifier, opts VerifyOptions) (Report, error) {
	external := opts.Checkpoints
	if err := requireLog(ctx, db); err != nil {
		return Report{}, err
	}
	tx, err := db.BeginTx(ctx, nil) // one snapshot for every read below
	if err != nil {
		return Report{}, fmt.Errorf("audit: verify: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	rep := Report{SignaturesChecked: v != nil, Anchored: opts.Anchored && v != nil}
	var maxSeq int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM audit_entries`).Scan(&rep.Entries, &maxSeq); err != nil {
		return Report{}, fmt.Errorf("audit: verify: %w", err)
	}
	stored, err := checkpoints(ctx, tx, false)
	if err != nil {
		return Report{}, err
	}
	type cpRef struct {
		Checkpoint
		origin string
	}
	var cps []cpRef
	for _, c := range stored {
		cps = append(cps, cpRef{c, "stored checkpoint"})
	}
	for _, c := range external {
		cps = append(cps, cpRef{c, "external checkpoint"})
	}
	rep.Checkpoints = len(cps)

	var worst *failure
	note := func(f *failure) {
		if worst.better(f) {
			worst = f
		}
	}
	bySize := map[int64][]cpRef{}
	var maxCP int64
	for _, c := range cps {
		if v != nil {
			if err := c.VerifySignature(v); err != nil {
				note(&failure{c.Size, KindBadSignature, fmt.Sprintf("%s of size %d: %v", c.origin, c.Size, err)})
				continue
			}
		}
		bySize[c.Size] = append(bySize[c.Size], c)
		maxCP = max(maxCP, c.Size)
	}

	sigs := newSigChecker(v, opts.Anchored)
	walkFail, badRow, err := walk(ctx, tx, sigs, func(seq int64, h string) (*failure, bool) {
		for _, c := range bySize[seq] {
			if c.HeadHash != h {
				return &failure{seq, KindEdited, fmt.Sprintf("%s of size %d names head %s but entry %d has hash %s", c.origin, seq, c.HeadHash, seq, h)}, false
			}
		}
		return nil, len(bySize[seq]) > 0
	})
	sigFail := sigs.wait()
	if err != nil {
		return Report{}, err
	}
	if badRow != nil {
		// An unsigned checkpoint could name any size: bound the search.
		walkFail = classifyMismatch(ctx, tx, badRow, min(max(maxSeq, maxCP)+1, maxSeq+maxReorderSearch))
	}
	// At the same seq, what the walk found (a link broken by a recomputed
	// hash) says more than the bad signature that goes with it.
	if walkFail != nil && sigFail != nil && sigFail.seq >= walkFail.seq {
		sigFail = nil
	}
	note(walkFail)
	note(sigFail)
	if walkFail == nil && maxCP > maxSeq {
		note(&failure{maxSeq + 1, KindTruncated, fmt.Sprintf("a signed checkpoint vouches for %d entries but the log ends at %d", maxCP, maxSeq)})
	}
	if worst == nil {
		rep.OK = true
		return rep, nil
	}
	rep.FirstBad, rep.Kind, rep.Detail = worst.seq, worst.kind, worst.detail
	return rep, nil
}

// walk reads the entries in order and checks positions, hashes and links,
// queueing signatures to sigs. It stops at the first failure. A row whose
// content does not match its hash is returned as badRow for classification.
func walk(ctx context.Context, tx *sql.Tx, sigs *sigChecker, atCheckpoint func(int64, string) (*failure, bool)) (*failure, *row, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+joinColumns()+` FROM audit_entries ORDER BY seq`)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: verify: %w", err)
	}
	defer rows.Close()
	cols := make([]any, len(entryColumns))
	ptrs := make([]any, len(cols))
	for i := range cols {
		ptrs[i] = &cols[i]
	}
	expect, prevHash := int64(1), GenesisHash
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, fmt.Errorf("audit: verify: entry %d: %w", expect, err)
		}
		r, convErr := fromColumns(cols)
		switch {
		case r.seq > expect:
			if expect == r.seq-1 {
				return &failure{expect, KindDeleted, fmt.Sprintf("entry %d is missing", expect)}, nil, nil
			}
			return &failure{expect, KindDeleted, fmt.Sprintf("entries %d to %d are missing", expect, r.seq-1)}, nil, nil
		case r.seq < expect:
			return &failure{expect, KindEdited, fmt.Sprintf("entry %d has sequence number %d", expect, r.seq)}, nil, nil
		case convErr != nil:
			return &failure{expect, KindEdited, fmt.Sprintf("entry %d: %v", expect, convErr)}, nil, nil
		}
		digest := entryDigest(&r)
		if hex.EncodeToString(digest) != r.hash {
			return nil, &r, nil
		}
		if r.prevHash != prevHash {
			return &failure{expect - 1, KindEdited, fmt.Sprintf("entry %d links to %s, not to entry %d's hash %s: entry %d was rewritten", expect, r.prevHash, expect-1, prevHash, expect-1)}, nil, nil
		}
		sigs.check(r.seq, digest, r.signature)
		f, anchored := atCheckpoint(r.seq, r.hash)
		if f != nil {
			return f, nil, nil
		}
		if anchored {
			sigs.anchor()
		}
		expect, prevHash = expect+1, r.hash
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("audit: verify: %w", err)
	}
	return nil, nil, nil
}

func joinColumns() string {
	var b bytes.Buffer
	for i, c := range entryColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c)
	}
	return b.String()
}

// maxReorderSearch bounds how far past the last entry classifyMismatch looks
// for an entry's original position.
const maxReorderSearch = 1 << 20

// classifyMismatch names what happened to an entry whose content does not
// match its stored hash: if the content matches its hash at another position
// it was moved (reordered, or renumbered after a deletion); otherwise it was
// edited. limit bounds the positions tried.
func classifyMismatch(ctx context.Context, tx *sql.Tx, r *row, limit int64) *failure {
	edited := &failure{r.seq, KindEdited, fmt.Sprintf("entry %d does not match its hash", r.seq)}
	state, err := prefixState(r).(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return edited
	}
	for o := int64(1); o <= limit; o++ {
		if o == r.seq {
			continue
		}
		if o%4096 == 0 && ctx.Err() != nil {
			return edited
		}
		h := sha256.New()
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			return edited
		}
		if hex.EncodeToString(finish(h, o)) != r.hash {
			continue
		}
		prevExists := o == 1 && r.prevHash == GenesisHash
		if !prevExists {
			var n int
			err := tx.QueryRowContext(ctx, `SELECT count(*) FROM audit_entries WHERE hash = ?`, r.prevHash).Scan(&n)
			prevExists = err == nil && n > 0
		}
		if prevExists {
			return &failure{r.seq, KindReordered, fmt.Sprintf("position %d holds entry %d", r.seq, o)}
		}
		return &failure{r.seq, KindDeleted, fmt.Sprintf("position %d holds entry %d, renumbered: the entry before it is gone", r.seq, o)}
	}
	return edited
}

// sigChecker verifies entry signatures on all CPUs while the walk goes on,
// remembering the lowest failing seq. When anchored, it holds the entries
// since the last matching checkpoint back and drops them when the next
// checkpoint vouches for them.
type sigChecker struct {
	v        signature.Verifier
	anchored bool
	pending  []sigJob
	jobs     chan sigJob
	wg       sync.WaitGroup
	mu       sync.Mutex
	worst    *failure
}

type sigJob struct {
	seq    int64
	digest []byte
	sig    []byte
}

// maxPending bounds what an anchored check holds back in memory; past it,
// the entries are checked.
const maxPending = 4096

func newSigChecker(v signature.Verifier, anchored bool) *sigChecker {
	s := &sigChecker{v: v, anchored: anchored}
	if v == nil {
		return s
	}
	s.jobs = make(chan sigJob, 1024)
	for range runtime.GOMAXPROCS(0) {
		s.wg.Go(func() {
			for j := range s.jobs {
				if err := verifyEntrySig(s.v, j.digest, j.sig); err != nil {
					s.mu.Lock()
					if s.worst.better(&failure{j.seq, "", ""}) {
						s.worst = &failure{j.seq, KindBadSignature, fmt.Sprintf("entry %d: %v", j.seq, err)}
					}
					s.mu.Unlock()
				}
			}
		})
	}
	return s
}

func verifyEntrySig(v signature.Verifier, digest, sig []byte) error {
	if len(sig) == 0 {
		return errors.New("not signed")
	}
	return v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(digest))
}

func (s *sigChecker) check(seq int64, digest, sig []byte) {
	switch {
	case s.v == nil:
	case s.anchored:
		s.pending = append(s.pending, sigJob{seq, digest, sig})
		if len(s.pending) >= maxPending {
			s.flush()
		}
	default:
		s.jobs <- sigJob{seq, digest, sig}
	}
}

// anchor drops the held-back entries: a checkpoint vouches for them.
func (s *sigChecker) anchor() { s.pending = s.pending[:0] }

func (s *sigChecker) flush() {
	for _, j := range s.pending {
		s.jobs <- j
	}
	s.pending = s.pending[:0]
}

func (s *sigChecker) wait() *failure {
	if s.v == nil {
		return nil
	}
	s.flush()
	close(s.jobs)
	s.wg.Wait()
	return s.worst
}
