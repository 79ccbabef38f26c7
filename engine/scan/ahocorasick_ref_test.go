package scan

// refAC is the byte-class Aho-Corasick automaton toolgate used before the
// compact one in ahocorasick.go (int32 states, [][]int outputs, white
// space collapsed by a branch in the scan loop). It stays here as the
// reference the compact automaton must agree with.
type refAC struct {
	class    [256]uint8
	nclass   int
	delta    []int32 // delta[state*nclass+class] = next state
	out      [][]int // out[state] = pattern ids ending here (suffixes included)
	patLen   []int   // length of each pattern in bytes
	npattern int
}

// newAC builds the automaton for the given byte patterns. Patterns are
// matched exactly (callers lowercase both sides). Empty patterns are ignored.
func newRefAC(patterns []string) *refAC {
	m := &refAC{npattern: len(patterns), patLen: make([]int, len(patterns))}
	// Byte classes: one per distinct byte used by any pattern.
	var used [256]bool
	for _, p := range patterns {
		for i := 0; i < len(p); i++ {
			used[p[i]] = true
		}
	}
	m.nclass = 1
	for b := 0; b < 256; b++ {
		if used[b] && m.nclass < 256 {
			m.class[b] = uint8(m.nclass)
			m.nclass++
		}
	}
	// Upper-case ASCII letters share their lower-case letter's class, so
	// text is matched case-insensitively without lowering it first.
	for b := 'A'; b <= 'Z'; b++ {
		m.class[b] = m.class[b+'a'-'A']
	}
	// Trie with goto in the dense table (-1 = absent while building).
	nc := m.nclass
	newState := func() int32 {
		for i := 0; i < nc; i++ {
			m.delta = append(m.delta, -1)
		}
		m.out = append(m.out, nil)
		return int32(len(m.out) - 1)
	}
	newState() // root = 0
	for id, p := range patterns {
		m.patLen[id] = len(p)
		if p == "" {
			continue
		}
		s := int32(0)
		for i := 0; i < len(p); i++ {
			c := int(m.class[p[i]])
			next := m.delta[int(s)*nc+c]
			if next < 0 {
				next = newState()
				m.delta[int(s)*nc+c] = next
			}
			s = next
		}
		m.out[s] = append(m.out[s], id)
	}
	// Breadth-first failure links, resolved into the DFA table.
	fail := make([]int32, len(m.out))
	queue := make([]int32, 0, len(m.out))
	for c := 0; c < nc; c++ {
		if t := m.delta[c]; t < 0 {
			m.delta[c] = 0
		} else {
			fail[t] = 0
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if f := fail[s]; len(m.out[f]) > 0 {
			m.out[s] = append(m.out[s], m.out[f]...)
		}
		for c := 0; c < nc; c++ {
			t := m.delta[int(s)*nc+c]
			if t < 0 {
				m.delta[int(s)*nc+c] = m.delta[int(fail[s])*nc+c]
				continue
			}
			fail[t] = m.delta[int(fail[s])*nc+c]
			queue = append(queue, t)
		}
	}
	return m
}

// scan reports every occurrence of every pattern in text as (pattern id,
// end offset exclusive). Patterns are lower-case and ASCII letters in text
// match either case. Runs of white space in text are seen as one ' '
// (patterns are built that way too), so a hit may be longer in text than
// its pattern. It runs in time linear in len(text) plus the number of hits.
func (m *refAC) scan(text string, hit func(id, end int)) {
	if m == nil || m.npattern == 0 {
		return
	}
	nc := int32(m.nclass)
	delta, class, out := m.delta, &m.class, m.out
	s := int32(0)
	space := int32(class[' '])
	prevSpace := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if isSpaceByte(c) {
			if prevSpace {
				continue
			}
			prevSpace = true
			s = delta[s*nc+space]
		} else {
			prevSpace = false
			s = delta[s*nc+int32(class[c])]
		}
		if s != 0 && out[s] != nil {
			for _, id := range out[s] {
				hit(id, i+1)
			}
		}
	}
}
