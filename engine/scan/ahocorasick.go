package scan

// acMachine is a byte-level Aho-Corasick automaton compiled to a dense DFA
// over byte equivalence classes: bytes that occur in no pattern share class
// 0, ASCII upper-case letters share their lower-case letter's class, and
// every white-space byte shares the class of ' ', so the table stays small
// (states × classes) while each input byte costs one table lookup and no
// branch. States are 16-bit when there are few enough of them (every rule
// set of the default policy), which halves the table and the cache lines
// the scan touches; states that end a pattern are numbered last, so the
// scan tests for a hit with one comparison.
type acMachine struct {
	class     [256]uint8
	nclass    int
	small     []uint16 // small[state*nclass+class] = next state, when states fit in 16 bits
	large     []uint32 // the same otherwise
	matchFrom uint32   // states >= matchFrom end at least one pattern
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
	if n <= 1<<16-1 {
		m.small = make([]uint16, n*m.nclass)
		fillDFA(m.small, m.nclass, order, first, next, label, fail, id, space)
	} else {
		m.large = make([]uint32, n*m.nclass)
		fillDFA(m.large, m.nclass, order, first, next, label, fail, id, space)
	}
	return m
}

func fillDFA[T uint16 | uint32](d []T, nc int, order, first, next []int32, label []uint8, fail []int32, id []uint32, space uint8) {
	for _, s := range order {
		at := int(id[s]) * nc
		row := d[at : at+nc]
		if s != 0 {
			f := int(id[fail[s]]) * nc
			copy(row, d[f:f+nc])
		}
		for t := first[s]; t >= 0; t = next[t] {
			row[label[t]] = T(id[t])
		}
		if s != 0 && space != 0 && label[s] == space {
			row[space] = T(id[s])
		}
	}
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
	if m.small != nil {
		scanDFA(m, m.small, text, hit)
	} else {
		scanDFA(m, m.large, text, hit)
	}
}

func scanDFA[T uint16 | uint32](m *acMachine, delta []T, text string, hit func(id, end int)) {
	nc := uint(m.nclass)
	class := &m.class
	from := T(m.matchFrom)
	var s T
	for i := 0; i < len(text); i++ {
		s = delta[uint(s)*nc+uint(class[text[i]])]
		if s >= from {
			m.report(uint32(s), text, i, hit)
		}
	}
}

// report passes on the patterns ending at state s after text[i], unless
// text[i] continues a run of white space (the state did not move).
func (m *acMachine) report(s uint32, text string, i int, hit func(id, end int)) {
	if i > 0 && isSpaceByte(text[i]) && isSpaceByte(text[i-1]) {
		return
	}
	k := s - m.matchFrom
	for _, id := range m.outIDs[m.outStart[k]:m.outStart[k+1]] {
		hit(int(id), i+1)
	}
}

// scanCompact reports the patterns found in compactText(text), as scan
// would, without building the compacted copy; hits carry no offsets.
func (m *acMachine) scanCompact(text string, hit func(id int)) {
	if m == nil || m.npattern == 0 || m.matchFrom == uint32(m.nstate) {
		return
	}
	if m.small != nil {
		scanCompactDFA(m, m.small, text, hit)
	} else {
		scanCompactDFA(m, m.large, text, hit)
	}
}

func scanCompactDFA[T uint16 | uint32](m *acMachine, delta []T, text string, hit func(id int)) {
	nc := uint(m.nclass)
	class := &m.class
	from := T(m.matchFrom)
	var s T
	prevSpace := false // the last byte kept was white space
	for i := 0; i < len(text); i++ {
		c := text[i]
		if compactDrop[c] {
			continue
		}
		s = delta[uint(s)*nc+uint(class[c])]
		space := isSpaceByte(c)
		if s >= from && !(space && prevSpace) {
			k := uint32(s) - m.matchFrom
			for _, id := range m.outIDs[m.outStart[k]:m.outStart[k+1]] {
				hit(int(id))
			}
		}
		prevSpace = space
	}
}

// scanPair runs a.scan(text, hitA) and b.scanCompact(text, hitB) in one
// pass, both automata stepping on each byte (their lookups overlap), when
// both have 16-bit states; otherwise one after the other. Hits of a and b
// interleave.
func scanPair(a, b *acMachine, text string, hitA func(id, end int), hitB func(id int)) {
	if a == nil || b == nil || a.small == nil || b.small == nil {
		a.scan(text, hitA)
		b.scanCompact(text, hitB)
		return
	}
	na, nb := uint(a.nclass), uint(b.nclass)
	da, db := a.small, b.small
	fa, fb := uint16(min(a.matchFrom, 1<<16-1)), uint16(min(b.matchFrom, 1<<16-1))
	var sa, sb uint16
	prevSpace := false // the last byte b kept was white space
	for i := 0; i < len(text); i++ {
		c := text[i]
		sa = da[uint(sa)*na+uint(a.class[c])]
		if sa >= fa && a.npattern > 0 {
			a.report(uint32(sa), text, i, hitA)
		}
		if compactDrop[c] {
			continue
		}
		sb = db[uint(sb)*nb+uint(b.class[c])]
		space := isSpaceByte(c)
		if sb >= fb && b.npattern > 0 && !(space && prevSpace) {
			k := uint32(sb) - b.matchFrom
			for _, id := range b.outIDs[b.outStart[k]:b.outStart[k+1]] {
				hitB(int(id))
			}
		}
		prevSpace = space
	}
}
