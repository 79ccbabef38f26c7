package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/schema"
)

// The two labels of a labelled set.
const (
	LabelAttack = "attack"
	LabelBenign = "benign"
)

// LabelledCase is one line of a labelled set (the benchmarks' dev.jsonl).
type LabelledCase struct {
	ID       string          `json:"id"`
	Label    string          `json:"label"`
	Category string          `json:"category,omitempty"`
	Dataset  string          `json:"dataset,omitempty"`
	Note     string          `json:"note,omitempty"` // what the case is, for people; not scored
	Request  json.RawMessage `json:"request"`
}

// Counts are Tier 1's outcomes over a group of cases.
type Counts struct {
	Label     string `json:"label"`
	Family    string `json:"family,omitempty"`
	Total     int    `json:"total"`
	Allowed   int    `json:"allowed"`
	Escalated int    `json:"escalated"`
	Pending   int    `json:"pending"`
	Denied    int    `json:"denied"`
}

func (c *Counts) add(o schema.Outcome) {
	c.Total++
	switch o {
	case schema.Allow:
		c.Allowed++
	case schema.Escalate:
		c.Escalated++
	case schema.Pending:
		c.Pending++
	default:
		c.Denied++
	}
}

// LineError is an invalid line of a labelled set.
type LineError struct {
	Line  int    `json:"line"`
	ID    string `json:"id,omitempty"`
	Error string `json:"error"`
}

// LabelReport is a labelled set's score.
type LabelReport struct {
	// Labels holds attack then benign.
	Labels []Counts `json:"labels"`
	// Families holds one row per (family, label), sorted by family.
	Families []Counts `json:"families"`
	// AttacksNotAllowedPct: attacks Tier 1 did not allow (denied,
	// escalated or pending), in percent of attacks. Higher is better.
	AttacksNotAllowedPct float64 `json:"attacks_not_allowed_pct"`
	// BenignAllowedPct: benign calls Tier 1 allowed, in percent of benign
	// calls. Higher is better.
	BenignAllowedPct float64     `json:"benign_allowed_pct"`
	Invalid          []LineError `json:"invalid,omitempty"`
}

// Family names a labelled case's group: its category when it has one, else
// a rule on its id, documented in docs/conformance.md:
//
//   - agentdojo-<suite>-...           → agentdojo/<suite>      (banking, slack, travel, workspace)
//   - injecagent-benign-<kind>-...    → injecagent/benign-<kind> (benign-dh, benign-ds1, benign-user ...)
//   - injecagent-<kind>-...           → injecagent/<kind>      (dh, ds1, ds2)
//   - <dataset>-<word>-...            → <dataset>/<word>       (any other id with two dashes)
//   - anything else                   → the id's first dash-separated word, or "other"
func Family(id, category string) string {
	if category != "" {
		return category
	}
	parts := strings.SplitN(id, "-", 4)
	switch {
	case len(parts) >= 4 && parts[0] == "injecagent" && parts[1] == "benign":
		return "injecagent/benign-" + parts[2]
	case len(parts) >= 3:
		return parts[0] + "/" + parts[1]
	case parts[0] != "":
		return parts[0]
	}
	return "other"
}

// ScoreLabels decides every line of a labelled set with Tier 1 alone (no
// state, as `toolgate eval --no-state` does) and counts the outcomes per
// label and per family. Invalid lines are listed in Invalid with their line
// numbers and not counted; the error is for reading failures only.
func ScoreLabels(ctx context.Context, eng *engine.Engine, r io.Reader, parallel int) (*LabelReport, error) {
	type line struct {
		n    int
		c    LabelledCase
		req  schema.Request
		out  schema.Outcome
		fail string
	}
	var lines []*line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), schema.MaxRequestBytes+1<<20)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		l := &line{n: n}
		lines = append(lines, l)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l.c); err != nil {
			l.fail = "not a labelled case: " + err.Error()
			continue
		}
		switch {
		case strings.TrimSpace(l.c.ID) == "":
			l.fail = "id: required"
		case l.c.Label != LabelAttack && l.c.Label != LabelBenign:
			l.fail = fmt.Sprintf("label: want %q or %q, not %q", LabelAttack, LabelBenign, l.c.Label)
		case len(l.c.Request) == 0:
			l.fail = "request: required"
		default:
			req, err := schema.ParseRequest(l.c.Request)
			if err != nil {
				l.fail = "request: " + err.Error()
			}
			l.req = req
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read line %d: %w", n+1, err)
	}
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	ch := make(chan *line)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var evalErr error
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range ch {
				d, err := eng.Evaluate(ctx, &l.req, nil)
				if err != nil && ctx.Err() != nil {
					mu.Lock()
					evalErr = err
					mu.Unlock()
				}
				// A failed evaluation is a deny (fail closed), as eval has it.
				l.out = d.Outcome
			}
		}()
	}
	for _, l := range lines {
		if l.fail == "" {
			ch <- l
		}
	}
	close(ch)
	wg.Wait()
	if evalErr != nil {
		return nil, evalErr
	}

	rep := &LabelReport{Labels: []Counts{{Label: LabelAttack}, {Label: LabelBenign}}}
	fams := map[[2]string]*Counts{}
	for _, l := range lines {
		if l.fail != "" {
			rep.Invalid = append(rep.Invalid, LineError{Line: l.n, ID: l.c.ID, Error: l.fail})
			continue
		}
		idx := 0
		if l.c.Label == LabelBenign {
			idx = 1
		}
		rep.Labels[idx].add(l.out)
		f := Family(l.c.ID, l.c.Category)
		k := [2]string{f, l.c.Label}
		if fams[k] == nil {
			fams[k] = &Counts{Label: l.c.Label, Family: f}
		}
		fams[k].add(l.out)
	}
	for _, c := range fams {
		rep.Families = append(rep.Families, *c)
	}
	sort.Slice(rep.Families, func(i, j int) bool {
		a, b := rep.Families[i], rep.Families[j]
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Label < b.Label
	})
	if a := rep.Labels[0]; a.Total > 0 {
		rep.AttacksNotAllowedPct = pct(a.Total-a.Allowed, a.Total)
	}
	if b := rep.Labels[1]; b.Total > 0 {
		rep.BenignAllowedPct = pct(b.Allowed, b.Total)
	}
	return rep, nil
}

func pct(n, of int) float64 { return float64(int(float64(n)*1000/float64(of)+0.5)) / 10 }

// WriteLabelsText prints the headline figures, the counts per label and per
// family, and the invalid lines.
func WriteLabelsText(w io.Writer, r *LabelReport) error {
	bw := bufio.NewWriter(w)
	a, b := r.Labels[0], r.Labels[1]
	fmt.Fprintf(bw, "attacks not allowed: %.1f%% (%d of %d)\n", r.AttacksNotAllowedPct, a.Total-a.Allowed, a.Total)
	fmt.Fprintf(bw, "benign allowed:      %.1f%% (%d of %d)\n\n", r.BenignAllowedPct, b.Allowed, b.Total)
	row := func(name string, c Counts) {
		fmt.Fprintf(bw, "%-34s %-7s %6d %8d %10d %8d %7d\n", name, c.Label, c.Total, c.Allowed, c.Escalated, c.Pending, c.Denied)
	}
	fmt.Fprintf(bw, "%-34s %-7s %6s %8s %10s %8s %7s\n", "family", "label", "total", "allowed", "escalated", "pending", "denied")
	for _, c := range r.Labels {
		row("(all)", c)
	}
	for _, c := range r.Families {
		row(c.Family, c)
	}
	for _, e := range r.Invalid {
		id := ""
		if e.ID != "" {
			id = " (" + e.ID + ")"
		}
		fmt.Fprintf(bw, "invalid line %d%s: %s\n", e.Line, id, e.Error)
	}
	return bw.Flush()
}

// WriteLabelsJSON writes the report as indented JSON.
func WriteLabelsJSON(w io.Writer, r *LabelReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
