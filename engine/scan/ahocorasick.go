package scan

// acMachine is a byte-level Aho-Corasick automaton compiled to a dense DFA
// over byte equivalence classes: bytes that occur in no pattern share class
// 0, ASCII upper-case letters share their lower-case letter's class, and
// every white-space byte shares the class of ' ', so the table stays small
// (states × classes) while each input byte costs one table lookup and no
// branch. A state is held as the offset of its row (state × classes), so
// a step is one add and one load, with no multiply in the chain of
// dependent loads that bounds the scan's speed (a third faster than 16-bit
// state numbers, for twice the table). States that end a pattern are
// numbered last, so the scan tests for a hit with one comparison.
type acMachine struct {
	class     [256]uint8
	nclass    int
	delta     []uint32 // delta[row+class] = the next state's row, row = state × nclass
	matchFrom uint32   // states >= matchFrom end at least one pattern
	matchRow  uint32   // matchFrom's row: rows >= matchRow end a pattern
	outStart  []uint32 // outIDs[outStart[k]:outStart[k+1]]: patterns ending at state matchFrom+k
	outIDs    []int32  // (suffixes included, longest first)
	patLen    []int    // length of each pattern in bytes
	npattern  int
	nstate    int
}

// newAC builds the automaton for the given byte patterns. Patterns are
// matched exactly except for ASCII case and white space (see scan); empty
// patterns are ignored, and so are patterns the scan can never see: ones
// holding a white-space byte other than ' ', or two spaces in a row.
func newAC(patterns []string) *acMachine {
	m := &acMachine{npattern: len(patterns), patLen: make([]int, len(patterns))}
	usable := func(p string) bool {
		for i := 0; i < len(p); i++ {
			if c := p[i]; isSpaceByte(c) && (c != ' ' || i > 0 && p[i-1] == ' ') {
				return false
			}
		}
		return p != ""
	}
	// Byte classes: one per distinct byte used by any pattern, upper-case
	// ASCII letters folded to lower case. At most 256-26-5 bytes can be
	// used, so every used byte gets its own class.
	var used [256]bool
	for _, p := range patterns {
		if !usable(p) {
			continue
		}
		for i := 0; i < len(p); i++ {
			used[lowerByte(p[i])] = true
		}
	}
	m.nclass = 1
	for b := 0; b < 256; b++ {
		if used[b] {
			m.class[b] = uint8(m.nclass)
			m.nclass++
		}
	}
	for b := 'A'; b <= 'Z'; b++ {
		m.class[b] = m.class[b+'a'-'A']
	}
	space := m.class[' ']
	for _, c := range []byte("\t\n\v\f\r") {
		m.class[c] = space
	}

	// The trie, as first-child / next-sibling lists.
	size := 1
	for _, p := range patterns {
		size += len(p)
	}
	size = min(size, 1<<20) // a first guess; the slices grow past it if need be
	first, next := make([]int32, 1, size), make([]int32, 1, size)
	own, label := make([][]int32, 1, size), make([]uint8, 1, size)
	first[0], next[0] = -1, -1
	for id, p := range patterns {
		m.patLen[id] = len(p)
		if !usable(p) {
			continue
		}
		s := int32(0)
		for i := 0; i < len(p); i++ {
			c := m.class[p[i]]
			t := first[s]
			for t >= 0 && label[t] != c {
				t = next[t]
			}
			if t < 0 {
				t = int32(len(label))
				first, next, own, label = append(first, -1), append(next, first[s]), append(own, nil), append(label, c)
				first[s] = t
			}
			s = t
		}
		own[s] = append(own[s], int32(id))
	}
	n := len(label)
	m.nstate = n

	// Breadth-first order, failure links and outputs (a state's own
	// patterns, then those of its failure state).
	order := make([]int32, 1, n)
	fail := make([]int32, n)
	out := make([][]int32, n)
	for k := 0; k < len(order); k++ {
		s := order[k]
		if s != 0 {
			out[s] = own[s]
			if f := out[fail[s]]; len(f) > 0 {
				out[s] = append(own[s][:len(own[s]):len(own[s])], f...)
			}
		}
		for t := first[s]; t >= 0; t = next[t] {
			order = append(order, t)
			if s != 0 {
				f := fail[s]
				for f != 0 && childOf(first, next, label, f, label[t]) < 0 {
					f = fail[f]
				}
				if g := childOf(first, next, label, f, label[t]); g >= 0 {
					fail[t] = g
				}
			}
		}
	}

	// Numbering: states without outputs first (the root is 0), in
	// breadth-first order, then those with outputs.
	id := make([]uint32, n)
	nid := uint32(0)
	for _, s := range order {
		if len(out[s]) == 0 {
			id[s] = nid
			nid++
		}
	}
	m.matchFrom = nid
	m.outStart = make([]uint32, 1, n-int(nid)+1)
	byID := make([]int32, n)
	for _, s := range order {
		if len(out[s]) > 0 {
			id[s] = nid
			nid++
		}
		byID[id[s]] = s
	}
	for k := int(m.matchFrom); k < n; k++ {
		m.outIDs = append(m.outIDs, out[byID[k]]...)
		m.outStart = append(m.outStart, uint32(len(m.outIDs)))
	}

	// The DFA: a state's row is its failure state's row (filled before it,
	// breadth first) with its own trie edges over it. A state entered by
	// white space keeps itself on more white space: the scan sees a run of
	// white space as one ' ' (no usable pattern holds two spaces in a row).
	// Rows are addressed in 32 bits: a machine past that would need a table
	// of more than 16 GB, far beyond what any rule set or request builds.
	nc := m.nclass
	m.delta = make([]uint32, n*nc)
	m.matchRow = m.matchFrom * uint32(nc)
	for _, s := range order {
		at := int(id[s]) * nc
		row := m.delta[at : at+nc]
		if s != 0 {
			f := int(id[fail[s]]) * nc
			copy(row, m.delta[f:f+nc])
		}
		for t := first[s]; t >= 0; t = next[t] {
			row[label[t]] = id[t] * uint32(nc)
		}
		if s != 0 && space != 0 && label[s] == space {
			row[space] = uint32(at)
		}
	}
	return m
}

// childOf returns the trie child of s on class c, or -1.
func childOf(first, next []int32, label []uint8, s int32, c uint8) int32 {
	t := first[s]
	for t >= 0 && label[t] != c {
		t = next[t]
	}
	return t
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// scan reports every occurrence of every pattern in text as (pattern id,
// end offset exclusive). ASCII letters in text match either case. Runs of
// white space in text are seen as one ' ' (patterns are built that way
// too), so a hit may be longer in text than its pattern; a hit ending in
// white space is reported at the run's first byte. It runs in time linear
// in len(text) plus the number of hits.
func (m *acMachine) scan(text string, hit func(id, end int)) {
	if m == nil || m.npattern == 0 || m.matchFrom == uint32(m.nstate) {
		return
	}
	delta, class, from := m.delta, &m.class, m.matchRow
	var s uint32
	for i := 0; i < len(text); i++ {
		s = delta[s+uint32(class[text[i]])]
		if s >= from {
			m.report(s, text, i, hit)
		}
	}
}

// report passes on the patterns ending at the state of row s after
// text[i], unless text[i] continues a run of white space (the state did
// not move).
func (m *acMachine) report(s uint32, text string, i int, hit func(id, end int)) {
	if i > 0 && isSpaceByte(text[i]) && isSpaceByte(text[i-1]) {
		return
	}
	for _, id := range m.outputs(s) {
		hit(int(id), i+1)
	}
}

// outputs are the patterns ending at the state of row s (s >= matchRow).
func (m *acMachine) outputs(s uint32) []int32 {
	k := s/uint32(m.nclass) - m.matchFrom
	return m.outIDs[m.outStart[k]:m.outStart[k+1]]
}

// scanCompact reports the patterns found in compactText(text), as scan
// would, without building the compacted copy; hits carry no offsets.
func (m *acMachine) scanCompact(text string, hit func(id int)) {
	if m == nil || m.npattern == 0 || m.matchFrom == uint32(m.nstate) {
		return
	}
	delta, class, from := m.delta, &m.class, m.matchRow
	var s uint32
	prevSpace := false // the last byte kept was white space
	for i := 0; i < len(text); i++ {
		c := text[i]
		if compactDrop[c] {
			continue
		}
		s = delta[s+uint32(class[c])]
		space := isSpaceByte(c)
		if s >= from && !(space && prevSpace) {
			for _, id := range m.outputs(s) {
				hit(int(id))
			}
		}
		prevSpace = space
	}
}

// scanPair runs a.scan(text, hitA) and b.scanCompact(text, hitB) in one
// pass, both automata stepping on each byte (their lookups overlap). Hits
// of a and b interleave.
func scanPair(a, b *acMachine, text string, hitA func(id, end int), hitB func(id int)) {
	if a == nil || b == nil {
		a.scan(text, hitA)
		b.scanCompact(text, hitB)
		return
	}
	da, db := a.delta, b.delta
	fa, fb := a.matchRow, b.matchRow // past every row of a machine without patterns
	var sa, sb uint32
	prevSpace := false // the last byte b kept was white space
	for i := 0; i < len(text); i++ {
		c := text[i]
		sa = da[sa+uint32(a.class[c])]
		if sa >= fa {
			a.report(sa, text, i, hitA)
		}
		if compactDrop[c] {
			continue
		}
		sb = db[sb+uint32(b.class[c])]
		space := isSpaceByte(c)
		if sb >= fb && !(space && prevSpace) {
			for _, id := range b.outputs(sb) {
				hitB(int(id))
			}
		}
		prevSpace = space
	}
}
