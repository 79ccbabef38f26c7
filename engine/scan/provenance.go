package scan

import (
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Origin is an argument value found in untrusted text and in no trusted
// text: a sign that the call may have been steered by injected content.
type Origin struct {
	Where string // argument path, e.g. "action.arguments.recipient"
	Value string // the value as written in the argument, at most 200 bytes
	Kind  string // url | domain | email | path | iban | account | phone | id | command | value
	Block string // the Where of the first untrusted Text that contains it
}

const maxValue = 200

var (
	urlRE     = regexp.MustCompile(`(?i)\b(?:https?|ftp|wss?)://[^\s"'<>()\[\]{}]+`)
	emailRE   = regexp.MustCompile(`(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,24}\b`)
	domainRE  = regexp.MustCompile(`(?i)\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+([a-z]{2,24})\b`)
	ibanRE    = regexp.MustCompile(`\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b`)
	accountRE = regexp.MustCompile(`\b(?:0x)?[A-Za-z0-9]{8,64}\b`)
	phoneRE   = regexp.MustCompile(`(?:\+|\b)[0-9][0-9 ().-]{6,18}[0-9]\b`)
	pathRE    = regexp.MustCompile(`(?:~|\.{1,2})?/[A-Za-z0-9._~-]+(?:/[A-Za-z0-9._~-]+)*/?|\b[A-Za-z0-9._-]+/[A-Za-z0-9._/-]*\.[A-Za-z0-9]{1,6}\b`)
	ipv4RE    = regexp.MustCompile(`^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$`)
	// stampRE: a compact date (YYYYMMDD), with a time or counter after it
	// or not.
	stampRE = regexp.MustCompile(`^(?:19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])(?:[-_.T ]?[0-9]{2,6})?$`)
	// yearSerialRE: a year, then serial numbers (2023-00891, 2024-0522-00871).
	yearSerialRE = regexp.MustCompile(`^(?:19|20)[0-9]{2}-[0-9]{2,7}(?:-[0-9]{2,7})*$`)
	dateRE       = regexp.MustCompile(`^[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}|^[0-9]{1,2}[-/.][0-9]{1,2}[-/.][0-9]{2,4}`)
)

// commonTLDs are the top-level domains accepted for bare domains (URL hosts
// are always accepted); file extensions such as .txt or .go are not here.
var commonTLDs = map[string]bool{
	"com": true, "net": true, "org": true, "io": true, "co": true, "ai": true, "dev": true, "app": true,
	"info": true, "biz": true, "us": true, "uk": true, "de": true, "fr": true, "ru": true, "cn": true,
	"xyz": true, "me": true, "tv": true, "gov": true, "edu": true, "site": true, "online": true,
	"top": true, "shop": true, "cc": true, "ly": true, "gg": true, "link": true, "example": true,
	"eu": true, "ch": true, "nl": true, "es": true, "it": true, "jp": true, "in": true, "br": true,
	"ca": true, "au": true, "store": true, "tech": true, "cloud": true, "club": true, "live": true,
}

type candidate struct {
	arg, pos int
	kind     string
	value    string // as written
	key      string // what is searched: lower-case, spaces collapsed
	compact  bool   // searched in compacted text (spaces and ()-. removed)
}

// Provenance reports the values in args that occur in at least one
// untrusted text and in no trusted text, one Origin per (argument, value),
// in argument order and then in order of appearance. Candidate values are
// URLs (compared by host and path, without scheme or "www."), domains,
// e-mail addresses, paths outside the working directory (absolute, home
// or ../; see outsideProject), IBANs and phone numbers (compared without
// spaces and separators), long account-like ids, and the whole argument
// when it is 8 to 200 bytes and more than a few plain words. An e-mail
// address whose owner the trusted text names (ownerNamed), or that sent a
// message the person asks to reply to (repliesToSender), or whose display
// name in view the person wrote (displayNamed), counts as given; so does a
// path whose distinctive name, a directory above it or its home folder the
// trusted text names (pathNamed), a URL or domain whose site it names
// (siteNamed), and a URL, domain or user@host whose machine it calls by its
// short name (machineNamed). Hex hashes and commit ids are no accounts.
// Matching is case-insensitive and respects word boundaries. Every text is
// scanned once by one Aho-Corasick automaton per comparison form.
func Provenance(args []Text, trusted []string, untrusted []Text) []Origin {
	if len(untrusted) == 0 {
		return nil
	}
	var cands []candidate
	for i, a := range args {
		cands = append(cands, extract(i, a)...)
	}
	if len(cands) == 0 {
		return nil
	}
	var plainKeys, compactKeys []string
	var plainIDs, compactIDs []int
	for id, c := range cands {
		if c.compact {
			compactKeys, compactIDs = append(compactKeys, c.key), append(compactIDs, id)
		} else {
			plainKeys, plainIDs = append(plainKeys, c.key), append(plainIDs, id)
		}
	}
	plain, compact := newAC(plainKeys), newAC(compactKeys)
	find := func(text string, found func(id int)) {
		plainHit := boundedHit(text, plainKeys, func(k int) { found(plainIDs[k]) })
		if len(compactKeys) == 0 {
			plain.scan(text, plainHit)
			return
		}
		// Compacting removes the spaces that marked word edges, so
		// compact keys are found anywhere.
		scanPair(plain, compact, text, plainHit, func(k int) { found(compactIDs[k]) })
	}
	inTrusted := make([]bool, len(cands))
	for _, t := range trusted {
		find(t, func(id int) { inTrusted[id] = true })
	}
	block := make([]int, len(cands))
	for i := range block {
		block[i] = -1
	}
	for ui, t := range untrusted {
		find(t.Text, func(id int) {
			if block[id] < 0 {
				block[id] = ui
			}
		})
	}
	var hits []candidate
	var blocks []int
	view := &inView{trusted: trusted, untrusted: untrusted}
	for id, c := range cands {
		if block[id] < 0 || inTrusted[id] {
			continue
		}
		if c.kind == "path" && pathNamed(c.value, view.lowerTrusted()) || (c.kind == "url" || c.kind == "domain") && siteNamed(c.key, view.lowerTrusted()) {
			continue
		}
		if (c.kind == "url" || c.kind == "domain" || c.kind == "email") && machineNamed(c.key, view.lowerTrusted()) {
			continue
		}
		if c.kind == "phone" && phoneNamed(c.key, view) {
			continue
		}
		if c.kind == "email" && (ownerNamed(c.key, view) || displayNamed(c.key, view) || repliesToSender(c.key, view)) {
			// The person named the owner or asked for a reply: the
			// address is given, unless its domain is a look-alike of
			// another in view (brightline-analytlcs.com beside
			// brightline-analytics.com), which is how a thread is taken.
			_, domain, _ := strings.Cut(c.key, "@")
			if !lookAlike(registrable(domain), view.domains()) {
				continue
			}
		}
		hits = append(hits, c)
		blocks = append(blocks, block[id])
	}
	return originsOf(args, untrusted, hits, blocks)
}

// inView is what the waivers read of the texts in view, each form made
// once and only when a waiver asks for it: the e-mail addresses (at most 64
// from each text), and the trusted texts lower-cased and with their
// accents folded.
type inView struct {
	trusted   []string
	untrusted []Text
	read      bool
	list      []viewAddress
	regs      []string // the addresses' registrable domains, each once
	lower     []string // the trusted texts lower-cased (lowerTrusted)
	folded    []string // the trusted texts with accents folded (foldedTrusted)

	replyRead        bool
	asks, asksAll    bool     // the person asks for a reply, to all (replyAsked)
	lowerUntrustedTs []string // the untrusted texts lower-cased (lowerUntrusted)
	digits           string   // the trusted texts' digits (trustedDigits)
}

type viewAddress struct {
	words     []string // of the local part (localWords)
	domain    string
	untrusted bool
}

func (v *inView) addresses() []viewAddress {
	if v.read {
		return v.list
	}
	v.read = true
	add := func(s string, untrusted bool) {
		for _, loc := range findAll(emailRE, s, 64, strings.IndexByte(s, '@') >= 0) {
			local, domain, _ := strings.Cut(strings.ToLower(s[loc[0]:loc[1]]), "@")
			v.list = append(v.list, viewAddress{words: localWords(local), domain: domain, untrusted: untrusted})
			if r := registrable(domain); !slices.Contains(v.regs, r) {
				v.regs = append(v.regs, r)
			}
		}
	}
	for _, t := range v.trusted {
		add(t, false)
	}
	for _, u := range v.untrusted {
		add(u.Text, true)
	}
	return v.list
}

// domains returns the registrable domains of the addresses in view.
func (v *inView) domains() []string {
	v.addresses()
	return v.regs
}

// lowerTrusted returns the trusted texts lower-cased.
func (v *inView) lowerTrusted() []string {
	if v.lower == nil {
		v.lower = make([]string, len(v.trusted))
		for i, t := range v.trusted {
			v.lower[i] = strings.ToLower(t)
		}
	}
	return v.lower
}

// replyAsked reports whether the trusted text asks for a reply, and
// whether for a reply to all (repliesToSender).
func (v *inView) replyAsked() (asks, asksAll bool) {
	if !v.replyRead {
		v.replyRead = true
		for _, t := range v.trusted {
			v.asks = v.asks || replyRE.MatchString(t)
			v.asksAll = v.asksAll || replyAllRE.MatchString(t)
		}
	}
	return v.asks, v.asksAll
}

// trustedDigits returns the digits of the trusted texts, each text's run
// joined with the others' by a space.
func (v *inView) trustedDigits() string {
	if v.digits == "" {
		var b strings.Builder
		for _, t := range v.trusted {
			for i := 0; i < len(t); i++ {
				if isDigitByte(t[i]) {
					b.WriteByte(t[i])
				} else if !compactDrop[t[i]] && t[i] != '+' {
					b.WriteByte(' ')
				}
			}
			b.WriteByte(' ')
		}
		v.digits = b.String()
	}
	return v.digits
}

// lowerUntrusted returns the untrusted texts lower-cased.
func (v *inView) lowerUntrusted() []string {
	if v.lowerUntrustedTs == nil {
		v.lowerUntrustedTs = make([]string, len(v.untrusted))
		for i, u := range v.untrusted {
			v.lowerUntrustedTs[i] = strings.ToLower(u.Text)
		}
	}
	return v.lowerUntrustedTs
}

// foldedTrusted returns the trusted texts with their accents folded
// (foldAccents), as names are compared with addresses.
func (v *inView) foldedTrusted() []string {
	if v.folded == nil {
		v.folded = make([]string, len(v.trusted))
		for i, t := range v.trusted {
			v.folded[i] = foldAccents(t)
		}
	}
	return v.folded
}

// localWords splits an address's local part (lower case) into its words:
// sarah.lindqvist → sarah, lindqvist.
func localWords(local string) []string {
	return strings.FieldsFunc(local, func(r rune) bool { return r < 'a' || r > 'z' })
}

// registrable returns the part of a host a registrant owns: its last two
// labels, or three under a two-letter country code with a generic second
// level (example.co.uk).
func registrable(host string) string {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	n := 2
	if k := len(labels); k >= 3 && len(labels[k-1]) == 2 && slices.Contains([]string{"co", "com", "org", "net", "ac", "gov", "edu", "ne", "or"}, labels[k-2]) {
		n = 3
	}
	if len(labels) <= n {
		return host
	}
	return strings.Join(labels[len(labels)-n:], ".")
}

// lookAlike reports whether the registrable domain d is an edit or two
// from another of domains (its name part: one edit from five letters, two
// from ten, so that northwind and southwind stay two companies), or is the
// same name under another top-level domain.
func lookAlike(d string, domains []string) bool {
	name, tld, _ := strings.Cut(d, ".")
	for _, o := range domains {
		if o == d {
			continue
		}
		oname, otld, _ := strings.Cut(o, ".")
		if oname == name && otld != tld {
			return true
		}
		if len(name) >= 5 && len(oname) >= 5 && editDistance(name, oname) <= allowedEdits(min(len(name), len(oname))) {
			return true
		}
	}
	return false
}

func allowedEdits(n int) int {
	if n >= 10 {
		return 2
	}
	return 1
}

// editDistance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and swaps of neighbours), counted
// up to 3.
func editDistance(a, b string) int {
	if d := len(a) - len(b); d > 2 || d < -2 {
		return 3
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], 3)
}

// NamesDestination reports whether text names a place args send to: a
// URL, domain or e-mail address found in an argument, compared as
// Provenance compares values (case-insensitive, on word boundaries). It
// tells the request that asked for a call from talk about something else.
func NamesDestination(args []Text, text string) bool {
	x := &extraction{}
	for i, a := range args {
		x.arg, x.taken = i, nil // spans are offsets in this argument
		x.destinations(a.Text)
	}
	if len(x.out) == 0 {
		return false
	}
	lower := strings.ToLower(text)
	for _, c := range x.out {
		for off := 0; ; {
			i := strings.Index(lower[off:], c.key)
			if i < 0 {
				break
			}
			if start := off + i; bounded(lower, c.key, start, start+len(c.key)) {
				return true
			}
			off += i + 1
		}
	}
	return false
}

// ownerNamed reports whether the trusted texts name the owner of the
// e-mail address key: a word of its local part, three letters or more,
// written in the trusted text as a name is written, capitalised ("reply to
// Sarah" for sarah.lindqvist@example.com, "invite Dora" for
// dora@example.com). An address with a role word anywhere in its local part
// (support@, backup-receipts@) is a function's, never a person's. The
// person said whom to write to; the address is how the data spells it.
// But when the untrusted text holds another address for that name on
// another domain (greg@alder-lettings.example and
// greg.leasing@mailbox.example), the name does not say which one: a
// look-alike mailbox is how a thread's replies are stolen.
func ownerNamed(key string, view *inView) bool {
	local, domain, _ := strings.Cut(key, "@")
	words := localWords(local)
	if slices.ContainsFunc(words, func(w string) bool { return roleWords[w] }) {
		return false // a function's mailbox (backup-receipts@), not a person's
	}
	for _, w := range words {
		if len(w) >= 3 && namesWord(view.foldedTrusted(), w) {
			return !namedElsewhere(w, domain, view)
		}
		// An initial and a surname run together (mwhitfield@, jsmith@):
		// the surname, as "send the Whitfields their receipt" writes it.
		if len(w) >= 6 && namesWord(view.foldedTrusted(), w[1:]) {
			return !namedElsewhere(w, domain, view)
		}
	}
	return false
}

// namesWord reports whether one of the texts (trusted, with accents
// folded: "Benoît" names benoit) writes the lower-case word w as a name:
// capitalised, as a whole word, or with an s after it, as a family is named.
func namesWord(folded []string, w string) bool {
	name := strings.ToUpper(w[:1]) + w[1:]
	for _, t := range folded {
		for off := 0; ; {
			i := strings.Index(t[off:], name)
			if i < 0 {
				break
			}
			start, end := off+i, off+i+len(name)
			if end < len(t) && t[end] == 's' { // a family: "the Whitfields"
				end++
			}
			if (start == 0 || !isLetterByte(t[start-1])) && (end == len(t) || !isLetterByte(t[end])) {
				return true
			}
			off = end
		}
	}
	return false
}

// foldAccents writes the accented Latin letters of s without their accents
// (é as e, Ö as O), as e-mail addresses do.
func foldAccents(s string) string {
	if isASCII(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if f, ok := accentFold[r]; ok {
			return f
		}
		return r
	}, s)
}

var accentFold = func() map[rune]rune {
	m := map[rune]rune{}
	for base, accented := range map[rune]string{
		'a': "àáâãäåā", 'c': "çćč", 'e': "èéêëēěę", 'i': "ìíîïī", 'n': "ñńň", 'o': "òóôõöøō",
		'u': "ùúûüūů", 'y': "ýÿ", 's': "śšş", 'z': "źżž", 'l': "ł", 'r': "ř", 'd': "ď", 't': "ť", 'g': "ğ",
		'A': "ÀÁÂÃÄÅĀ", 'C': "ÇĆČ", 'E': "ÈÉÊËĒĚĘ", 'I': "ÌÍÎÏĪİ", 'N': "ÑŃŇ", 'O': "ÒÓÔÕÖØŌ",
		'U': "ÙÚÛÜŪŮ", 'Y': "Ý", 'S': "ŚŠŞ", 'Z': "ŹŻŽ", 'L': "Ł", 'R': "Ř", 'D': "Ď", 'T': "Ť", 'G': "Ğ",
	} {
		for _, r := range accented {
			m[r] = base
		}
	}
	return m
}()

// displayNamed reports whether the person named the owner of key by the
// display name an untrusted text writes beside it ("Sophie van Dijk
// <s.vandijk@...>", "Felipe Reyes (f.reyes@...)"): a capitalised word of
// three letters or more of that name, not a role, in the trusted text. As
// for ownerNamed, another address in view for that name on another domain
// takes the waiver away.
func displayNamed(key string, view *inView) bool {
	_, domain, _ := strings.Cut(key, "@")
	for _, u := range view.untrusted {
		lower := lowerASCII(u.Text) // offsets in lower are offsets in u.Text
		for off, n := 0, 0; n < 8; n++ {
			i := strings.Index(lower[off:], key)
			if i < 0 {
				break
			}
			at := off + i
			off = at + len(key)
			before := strings.TrimRight(u.Text[max(0, at-80):at], " <(\"'")
			m := displayNameRE.FindStringSubmatch(before)
			if m == nil {
				continue
			}
			for _, w := range strings.Fields(strings.ToLower(foldAccents(m[1]))) {
				if len(w) >= 3 && !roleWords[w] && isASCII(w) && namesWord(view.foldedTrusted(), w) && !namedElsewhere(w, domain, view) {
					return true
				}
			}
		}
	}
	return false
}

// pathNamed reports whether the person named the place p: the trusted
// text names its last element, when that is distinctive ("delete
// legacy_php/ in inventory-app" for ~/repos/inventory-app/legacy_php; "the
// orderd logs" for /var/log/orderd), or a directory above it
// ("~/Library/Developer" for /Users/bea/Library/Developer/Xcode/DerivedData).
// An agent finds where a thing the person named lives; an injection that
// picks a place names one the person did not. A path that climbs (..) is
// never given this way, and names every directory has (build, logs, src,
// config...) are not distinctive, unless the distinctive directory they
// are in is named too ("the build dir in atlas-ui"). lowerTrusted are the
// trusted texts, lower-cased.
func pathNamed(p string, lowerTrusted []string) bool {
	if strings.Contains(p, "..") {
		return false
	}
	lp := strings.ToLower(p)
	dir, base := "", lp[strings.LastIndexByte(lp, '/')+1:]
	if i := strings.LastIndexByte(lp, '/'); i > 0 {
		dir = lp[strings.LastIndexByte(lp[:i], '/')+1 : i]
	}
	distinctive := len(base) >= 5 && !commonDirNames[strings.TrimPrefix(base, ".")]
	// A common name ("build", "logs") says which place once the
	// distinctive directory it is in is named beside it: "the build dir
	// in atlas-ui" is /home/dev/projects/atlas-ui/build.
	inNamedDir := !distinctive && len(base) >= 3 && len(dir) >= 5 && !commonDirNames[strings.TrimPrefix(dir, ".")]
	home := homeRelative(lp)
	folder := userFolder(home)
	for _, lt := range lowerTrusted {
		if distinctive && containsBounded(lt, base) || folder != "" && containsBounded(lt, folder) {
			return true
		}
		if inNamedDir && containsBounded(lt, dir) && containsBounded(lt, base) {
			return true
		}
		if home == "" || !strings.Contains(lt, "/") {
			continue
		}
		for _, loc := range findAll(pathRE, lt, 16, true) {
			dir := strings.TrimRight(lt[loc[0]:loc[1]], "/")
			if h := homeRelative(dir); deepEnough(h) && strings.HasPrefix(home+"/", h+"/") {
				return true
			}
		}
	}
	return false
}

// userFolder returns the standard folder of a home that the home path h is
// in or under ("downloads" for ~/Downloads/export.csv), "" for others: "in
// Downloads" names ~/Downloads as surely as the path does.
func userFolder(h string) string {
	// A root path of a user folder is one written after $HOME:
	// "$HOME/Documents/x" reads as /Documents/x.
	rest, ok := strings.CutPrefix(h, "~/")
	if !ok {
		rest, ok = strings.CutPrefix(h, "/")
	}
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	if userFolders[first] {
		return first
	}
	return ""
}

var userFolders = map[string]bool{
	"downloads": true, "documents": true, "desktop": true, "pictures": true, "photos": true,
	"movies": true, "music": true, "videos": true,
}

// siteNamed reports whether the person named the site of a URL or domain
// key (host, or host/path): its registrable name without the suffix
// ("everlane" of everlane.com, "outdoorgearhub" of
// links.e.outdoorgearhub.com, "stripe" of api.stripe.com) is a word of the
// trusted text. A look-alike (everlane-returns.com) is another name.
// Platforms where anyone publishes (github.com, docs.google.com,
// *.herokuapp.com...) name no one in particular, so naming them gives
// nothing. lowerTrusted are the trusted texts, lower-cased.
func siteNamed(key string, lowerTrusted []string) bool {
	host, _, _ := strings.Cut(key, "/")
	host, _, _ = strings.Cut(host, ":")
	name, _, _ := strings.Cut(registrable(host), ".")
	if len(name) < 3 || sharedHosts[name] {
		return false
	}
	for _, lt := range lowerTrusted {
		if containsBounded(lt, name) {
			return true
		}
	}
	return false
}

// machineNamed reports whether the person named the machine of a URL,
// domain or user@host key by its short name: the host's first label, when
// the host has a name below its registrable domain and that label is
// distinctive (a digit or a hyphen in four characters or more: "web-03" of
// deploy@web-03.int.lumahost.example, "grafana-eu" of
// grafana-eu.corp.example), is a word of the trusted text. People call
// their servers by these names; inventories and shell prompts write them
// out in full.
func machineNamed(key string, lowerTrusted []string) bool {
	host, _, _ := strings.Cut(key, "/")
	if _, after, ok := strings.Cut(host, "@"); ok {
		host = after
	}
	host, _, _ = strings.Cut(host, ":")
	label, _, _ := strings.Cut(host, ".")
	if len(label) < 4 || label == host || registrable(host) == host || !strings.ContainsAny(label, "-0123456789") {
		return false
	}
	for _, lt := range lowerTrusted {
		if containsBounded(lt, label) {
			return true
		}
	}
	return false
}

// sharedHosts are sites that host what anyone writes, uploads or publishes
// (code, pages, forms, packages, images).
var sharedHosts = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`github githubusercontent gitlab bitbucket google googleapis googleusercontent
		gstatic microsoft live office sharepoint onedrive azure azurewebsites windows amazonaws amazon
		cloudfront cloudflare workers pages vercel netlify herokuapp heroku render fly glitch replit
		ngrok webhook pipedream zapier ifttt dropbox box notion slack discord telegram pastebin
		hastebin gist medium substack wordpress blogspot tumblr wix squarespace weebly firebaseapp
		web appspot digitaloceanspaces linode ngrok-free trycloudflare surge repl typeform jotform
		forms airtable bit tinyurl t example ghcr docker quay npmjs pypi rubygems crates huggingface
		readthedocs gitbook`) {
		m[w] = true
	}
	return m
}()

// homeRelative writes an absolute or home path from the home directory
// ("~/x" for /home/bea/x, /Users/bea/x and $HOME/x) or from the root ("/etc/x"
// stays), and returns "" for other paths.
func homeRelative(p string) string {
	switch {
	case strings.HasPrefix(p, "~/"):
		return p
	case strings.HasPrefix(p, "$home/"):
		return "~" + p[len("$home"):]
	case strings.HasPrefix(p, "/home/"), strings.HasPrefix(p, "/users/"):
		rest := p[strings.IndexByte(p[1:], '/')+2:]
		if _, after, ok := strings.Cut(rest, "/"); ok {
			return "~/" + after
		}
		return ""
	case strings.HasPrefix(p, "/"):
		return p
	}
	return ""
}

// deepEnough: a directory below ~/x, or below /x/y, says where; ~/x, /var/log
// or /etc/ssh say only which part of the machine.
func deepEnough(h string) bool {
	return strings.HasPrefix(h, "~/") && strings.Count(h, "/") >= 2 || strings.Count(h, "/") >= 3
}

// containsBounded reports whether key occurs in text as a whole value.
func containsBounded(text, key string) bool {
	for off := 0; ; {
		i := strings.Index(text[off:], key)
		if i < 0 {
			return false
		}
		start, end := off+i, off+i+len(key)
		if bounded(text, key, start, end) {
			return true
		}
		off = start + 1
	}
}

// commonDirNames are directory names too common to say which place a
// person meant.
var commonDirNames = map[string]bool{
	"build": true, "builds": true, "cache": true, "caches": true, "config": true, "configs": true,
	"backup": true, "backups": true, "files": true, "logs": true, "local": true, "share": true,
	"users": true, "home": true, "data": true, "documents": true, "downloads": true, "desktop": true,
	"projects": true, "library": true, "system": true, "temp": true, "output": true, "public": true,
	"private": true, "assets": true, "static": true, "source": true, "sources": true, "scripts": true,
	"tests": true, "vendor": true, "archive": true, "uploads": true, "exports": true, "reports": true,
	"secrets": true, "credentials": true, "release": true, "releases": true, "images": true, "media": true,
}

// namedElsewhere reports whether an untrusted text holds an address on
// another domain than domain whose local part has the word w.
func namedElsewhere(w, domain string, view *inView) bool {
	return slices.ContainsFunc(view.addresses(), func(a viewAddress) bool {
		return a.untrusted && a.domain != domain && slices.Contains(a.words, w)
	})
}

// repliesToSender reports whether the person asks for a reply (reply,
// respond, answer, decline, accept, get back to...) and the address key is
// the sender of a message in the untrusted text: on a From:, Reply-To: or
// Sender: line, or the value of a "from", "sender", "reply_to",
// "requester" or "organizer" field (a Reply-To only on the From's domain). Replying to whoever wrote is what a
// reply is; an address an injection wants mail sent to sits in a
// message's text, not in its header. When the person asks to reply to all
// ("reply all", "everyone on the thread"), the addresses on a message's
// To: and Cc: lines count too.
func repliesToSender(key string, view *inView) bool {
	asks, asksAll := view.replyAsked()
	if !asks && !asksAll {
		return false
	}
	for _, lower := range view.lowerUntrusted() {
		for off := 0; ; {
			i := strings.Index(lower[off:], key)
			if i < 0 {
				break
			}
			at := off + i
			line := lower[strings.LastIndexByte(lower[:at], '\n')+1 : at]
			switch {
			case replyToRE.MatchString(line):
				// A Reply-To on another domain than the From is how a
				// look-alike steals a thread's replies: it counts only
				// when the message's From is on the same domain.
				if sameDomainSender(key, lower) {
					return true
				}
			case senderRE.MatchString(line), asksAll && recipientsRE.MatchString(line):
				return true
			}
			off = at + len(key)
		}
	}
	return false
}

// foreignFrom names a message's From: header in other languages (Von:,
// De:, Expéditeur:...), written at the start of a line.
const foreignFrom = `(?:von|de|da|van|från|fra|od|absender|remitente|exp[ée]diteur|差出人|发件人)`

var (
	replyRE    = regexp.MustCompile(`(?i)\b(?:repl(?:y|ies|ying)|respond|answer|write back|get back to|decline|accept|rsvp|(?:the )?sender|who (?:e-?mailed|wrote|messaged|texted|sent|contacted|reached out))\b|\b(?:antwort\w*|beantworte\w*|antwoord\w*|beantwoord\w*|respond[aeiíó]\w*|resp[oó]nde\w*|cont[eé]st[ae]\w*|r[eé]pond\w*|rispond\w*|svara\w*|odpowiedz\w*)|返信|返事|回复`)
	replyAllRE = regexp.MustCompile(`(?i)\brepl(?:y|ies|ying)[ -]?(?:to[ -])?all\b|\breplyall\b|\b(?:everyone|everybody|all the people|all recipients) (?:on|in) (?:the|this|that)(?: [\w-]+){0,3} (?:thread|e-?mail|chain|conversation)\b`)
	senderRE   = regexp.MustCompile(`(?:^|\s)(?:from|reply-to|sender)\s*:[^:]{0,80}$|^\s*` + foreignFrom + `\s*:[^:]{0,80}$|["'](?:from|sender|reply_?to|requester|organi[sz]er|author)["']\s*:\s*(?:\{[^{}]{0,80}?)?["']?[^"':,]{0,60}$`)
	// displayNameRE: the name written just before an address, "Sophie van
	// Dijk" of "From: Sophie van Dijk <", at most four words, each
	// capitalised but for particles (van, de, von...).
	displayNameRE = regexp.MustCompile(`(\p{Lu}[\p{L}'-]+(?:\s+(?:(?:van|von|de|der|den|da|di|del|la|le|du|dos|das|bin|al)\s+)?\p{Lu}[\p{L}'-]+){0,3})["']?$`)
	recipientsRE  = regexp.MustCompile(`^\s*(?:to|cc)\s*:[^:]{0,400}$`)
	replyToRE     = regexp.MustCompile(`(?:^|\s)reply-to\s*:[^:]{0,80}$|["']reply_?to["']\s*:\s*["']?[^"':,]{0,60}$`)
	fromLineRE    = regexp.MustCompile(`(?m)(?:^|\s)(?:from|sender)\s*:[^\n]{0,200}|^\s*` + foreignFrom + `\s*:[^\n]{0,200}|["'](?:from|sender)["']\s*:\s*["'][^"'\n]{0,200}`)
)

// sameDomainSender reports whether lower (a message, lower case) has a From:
// or Sender: line (or field) with an address on the domain of key.
func sameDomainSender(key, lower string) bool {
	at := strings.LastIndexByte(key, '@')
	if at < 0 {
		return false
	}
	domain := key[at:] // "@example.com"
	for _, line := range fromLineRE.FindAllString(lower, 8) {
		for off := 0; ; {
			i := strings.Index(line[off:], domain)
			if i < 0 {
				break
			}
			end := off + i + len(domain)
			if end == len(line) || !(isAlnum(line[end]) || line[end] == '.' || line[end] == '-') {
				return true
			}
			off = end
		}
	}
	return false
}

// roleWords are local-part words that name a function, not a person:
// "Support" or "Billing" in the person's words does not say which support
// desk's address to trust.
var roleWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`info support admin administrator contact contacts hello help
		helpdesk team sales jobs job careers career mail email noreply reply office service services
		billing security accounts account finance ops press media news newsletter marketing legal
		compliance privacy abuse postmaster webmaster root enquiries inquiries feedback orders order
		shop store payments payment pay invoice invoices notifications notification alerts alert bot
		system test user users customer customers client clients partner partners vendor vendors
		registration register submissions submit events booking bookings reservations travel hr
		it dev devops engineering data backup backups archive export reports report audit verify
		updates update external secure collector hiring recruiting accounting treasury payroll
		receipts receipt statements statement exports notices notice sync vault inbox mailbox forms
		apply applications drop dropbox uploads upload intake desk archives relay
		manifest manifests records documents docs claims operations logistics dispatch shipping
		certificates`) {
		m[w] = true
	}
	return m
}()

// originsOf removes redundant hits and builds the Origins: a value
// contained in a longer found value of the same argument goes, except that
// a whole-argument value goes instead when a specific value found in it
// covers at least half of it; repeats go too.
func originsOf(args []Text, untrusted []Text, hits []candidate, blocks []int) []Origin {
	isWhole := func(c candidate) bool { return c.kind == "value" || c.kind == "command" }
	drop := make([]bool, len(hits))
	for i, h := range hits {
		for j, o := range hits {
			if i == j || o.arg != h.arg {
				continue
			}
			switch {
			case isWhole(h) && !isWhole(o) && 2*len(o.key) >= len(h.key):
				drop[i] = true
			case isWhole(o) && !isWhole(h) && 2*len(h.key) >= len(o.key):
				// h stands for the whole value
			case len(o.key) > len(h.key) && strings.Contains(o.key, h.key):
				drop[i] = true
			}
		}
	}
	var out []Origin
	seen := map[[2]string]bool{}
	for i, h := range hits {
		k := [2]string{args[h.arg].Where, h.key}
		if drop[i] || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, Origin{Where: args[h.arg].Where, Value: clip(h.value, maxValue), Kind: h.kind, Block: untrusted[blocks[i]].Where})
	}
	return out
}

// boundedHit returns a scan callback that reports keys found in text
// where they do not continue a word on either side.
func boundedHit(text string, keys []string, found func(k int)) func(k, end int) {
	return func(k, end int) {
		if bounded(text, keys[k], end-len(keys[k]), end) {
			found(k)
		}
	}
}

// bounded reports whether key, found in text at [start,end), does not
// continue a word on either side. A key with a space in it is only
// checked at its end: white space collapsed by the scanner makes its true
// start unknown.
func bounded(text, key string, start, end int) bool {
	if end < len(text) && isWordByte(text[end]) && isWordByte(text[end-1]) {
		return false
	}
	return strings.ContainsAny(key, " ") || start <= 0 || !isWordByte(text[start-1]) || !isWordByte(text[start])
}

// isWordByte: bytes that continue a value (so "pay.example" is not found
// in "evil-pay.example").
func isWordByte(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

// compactText drops spaces and the separators ( ) - . so that IBANs and
// phone numbers compare however they are grouped.
func compactText(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; !compactDrop[c] {
			b = append(b, c)
		}
	}
	return string(b)
}

// compactDrop: the bytes compactText drops.
var compactDrop = func() (t [256]bool) {
	for _, c := range []byte(" \t\n\r()-.") {
		t[c] = true
	}
	return t
}()

// extraction collects candidate values, one argument at a time: arg and
// taken describe the argument being read.
type extraction struct {
	arg   int
	out   []candidate
	taken [][]int // its URL and e-mail spans: no domains or paths inside them
}

func (x *extraction) add(pos int, kind, value, key string, compact bool) {
	key = collapseSpace(strings.ToLower(strings.TrimSpace(key)))
	if len(key) < 4 || len(value) > 4*maxValue {
		return
	}
	x.out = append(x.out, candidate{arg: x.arg, pos: pos, kind: kind, value: value, key: key, compact: compact})
}

func (x *extraction) inside(loc []int) bool {
	for _, t := range x.taken {
		if loc[0] >= t[0] && loc[1] <= t[1] {
			return true
		}
	}
	return false
}

// extract returns the candidate values of one argument, in order.
func extract(arg int, a Text) []candidate {
	x := &extraction{arg: arg}
	x.destinations(a.Text)
	x.others(a)
	sort.SliceStable(x.out, func(i, j int) bool { return x.out[i].pos < x.out[j].pos })
	return x.out
}

// destinations adds the places s sends to: URLs (and their hosts),
// e-mail addresses and domains.
//
// Each regexp runs only when s holds what every match of it needs: these
// small regexps cost microseconds per call even on short text.
func (x *extraction) destinations(s string) {
	for _, loc := range findAll(urlRE, s, 16, strings.Contains(s, "://")) {
		u := strings.TrimRight(s[loc[0]:loc[1]], ".,;:!?")
		x.taken = append(x.taken, []int{loc[0], loc[0] + len(u)})
		rest := u[strings.Index(u, "://")+3:]
		host, path, _ := strings.Cut(rest, "/")
		host = strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(host), "www."), ".")
		if path = strings.TrimSuffix(path, "/"); path != "" {
			x.add(loc[0], "url", u, host+"/"+path, false)
		} else {
			x.add(loc[0], "url", u, host, false)
		}
		x.add(loc[0], "domain", host, host, false)
	}
	for _, loc := range findAll(emailRE, s, 16, strings.IndexByte(s, '@') >= 0) {
		x.taken = append(x.taken, loc)
		x.add(loc[0], "email", s[loc[0]:loc[1]], s[loc[0]:loc[1]], false)
	}
	var domains [][]int
	if strings.IndexByte(s, '.') >= 0 {
		domains = domainRE.FindAllStringSubmatchIndex(s, 16)
	}
	for _, m := range domains {
		if x.inside(m[:2]) || !commonTLDs[strings.ToLower(s[m[2]:m[3]])] || m[0] > 0 && (s[m[0]-1] == '/' || s[m[0]-1] == '\\') {
			continue // not a domain, or a name in a path (/Applications/LibreOffice.app)
		}
		d := strings.TrimPrefix(strings.ToLower(s[m[0]:m[1]]), "www.")
		x.add(m[0], "domain", s[m[0]:m[1]], d, false)
	}
}

// others adds the rest: paths, IBANs, account-like ids, phone numbers, and
// the whole argument when it is more than a few plain words.
func (x *extraction) others(a Text) {
	s := a.Text
	for _, loc := range findAll(pathRE, s, 16, strings.IndexByte(s, '/') >= 0) {
		// A trailing slash names the same directory: "mv ~/Private/* /tmp"
		// takes ~/Private from "move the files in ~/Private".
		p := strings.TrimRight(s[loc[0]:loc[1]], "/")
		if x.inside(loc) || len(p) < 5 || strings.Count(p, "/") == 0 || dateRE.MatchString(p) || !outsideProject(s[:loc[0]], p) || pseudoFiles[p] {
			continue
		}
		x.add(loc[0], "path", p, p, false)
	}
	for _, loc := range findAll(ibanRE, s, 8, hasIBANStart(s)) {
		v := s[loc[0]:loc[1]]
		if !ibanCountries[v[:2]] {
			continue // a flight, booking or product code (CA0088124577)
		}
		x.add(loc[0], "iban", v, compactText(v), true)
	}
	for _, loc := range findAll(accountRE, s, 16, hasRun(s, 8, isAlnum)) {
		v := s[loc[0]:loc[1]]
		if x.inside(loc) || countDigits(v) < 5 || dateRE.MatchString(v) || stampRE.MatchString(v) || hexDigest(v) {
			continue
		}
		if ibanRE.MatchString(v) && ibanCountries[v[:2]] {
			continue // already an IBAN
		}
		// An account or mobile-money number of digits alone is written
		// grouped as often as not ("0712 345 678", "1234 5678 90"): it is
		// compared compacted, like an IBAN.
		x.add(loc[0], "account", v, v, countDigits(v) == len(v))
	}
	for _, loc := range findAll(phoneRE, s, 8, hasRun(s, 8, isPhoneByte)) {
		v := strings.TrimSpace(s[loc[0]:loc[1]])
		c := compactText(v)
		if x.inside(loc) || countDigits(c) < 8 || dateRE.MatchString(v) || !strings.ContainsAny(v, " ()-.+") {
			continue // plain digit runs are accounts, not phones
		}
		if stampRE.MatchString(v) {
			continue // a date and time (20240613-0600), as snapshot and build names carry them
		}
		if yearSerialRE.MatchString(v) {
			// A year's case, file or change number (2023-00891,
			// CAB-2025-0611): an id, not a phone, but as telling.
			x.add(loc[0], "id", v, c, true)
			continue
		}
		if ipv4RE.MatchString(v) {
			continue // an IP address (192.168.8.1) is no phone number
		}
		if end := loc[1]; end+1 < len(s) && s[end] == '/' && isDigitByte(s[end+1]) {
			continue // the head of a longer number (a CNPJ: 27.418.905/0001-62)
		}
		x.add(loc[0], "phone", v, c, true)
	}
	// A git remote is a name for a URL: a push to one that the untrusted
	// text set up ("git remote add mirror https://...") sends the code
	// where that text chose. The name is searched with what defines it.
	if strings.HasSuffix(a.Where, ".remote") && remoteNameRE.MatchString(s) {
		x.add(0, "remote", s, "remote add "+s, false)
	}
	for _, m := range findAllSub(gitPushRE, s, 4, strings.Contains(s, "push")) {
		x.add(m[2], "remote", s[m[2]:m[3]], "remote add "+s[m[2]:m[3]], false)
	}
	if v := strings.TrimSpace(s); len(v) >= 8 && len(v) <= maxValue && !plainWords(v) && !dateRE.MatchString(v) && !coveredBy(x.out, v) {
		kind := "value"
		if strings.HasSuffix(a.Where, ".command") || strings.HasSuffix(a.Where, ".cmd") || strings.HasSuffix(a.Where, ".script") {
			kind = "command"
		}
		x.add(len(s), kind, v, v, false)
	}
}

// pseudoFiles name no place: every shell writes 2>/dev/null.
var pseudoFiles = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/stdin": true, "/dev/stdout": true, "/dev/stderr": true, "/dev/tty": true}

// outsideProject reports whether the path p, found in text after before,
// names a place outside the project an agent works in: under a home
// directory (~/..., $HOME/...), above the working directory (../...) or
// absolute, but not the tail of a relative name ("/feature/x" of
// "origin/feature/x") or of a glob ("/dist" of "~/code/*/dist", whose
// head is a path of its own). Relative paths (tests/test_api.py, ./scripts/x.sh)
// are what agents take from test reports, listings and build logs all day;
// injected text that means harm points at absolute or home paths, since it
// cannot know the working directory.
func outsideProject(before, p string) bool {
	switch {
	case strings.HasPrefix(p, "~"), strings.HasPrefix(p, ".."):
		return true
	case !strings.HasPrefix(p, "/"):
		return false
	case before == "" || !isWordByte(before[len(before)-1]) && !strings.ContainsRune("*?]}", rune(before[len(before)-1])):
		return true
	}
	lb := strings.ToLower(before)
	return strings.HasSuffix(lb, "$home") || strings.HasSuffix(lb, "${home}")
}

var (
	remoteNameRE = regexp.MustCompile(`^[A-Za-z0-9][\w.-]{0,62}$`)
	gitPushRE    = regexp.MustCompile(`\bgit\s+push\s+(?:--?[\w-]+(?:=\S+)?\s+)*([A-Za-z0-9][\w.-]{0,62})(?:\s|$)`)
)

// findAllSub is re.FindAllStringSubmatchIndex(s, n) when may holds, else
// nil; may must hold whenever re matches s.
func findAllSub(re *regexp.Regexp, s string, n int, may bool) [][]int {
	if !may {
		return nil
	}
	return re.FindAllStringSubmatchIndex(s, n)
}

// findAll is re.FindAllStringIndex(s, n) when may holds, else nil; may
// must hold whenever re matches s.
func findAll(re *regexp.Regexp, s string, n int, may bool) [][]int {
	if !may {
		return nil
	}
	return re.FindAllStringIndex(s, n)
}

// hasIBANStart reports two upper-case ASCII letters followed by two
// digits, which every ibanRE match starts with.
func hasIBANStart(s string) bool {
	for i := 0; i+3 < len(s); i++ {
		if isUpperByte(s[i]) && isUpperByte(s[i+1]) && isDigitByte(s[i+2]) && isDigitByte(s[i+3]) {
			return true
		}
	}
	return false
}

// hasRun reports n bytes in a row of s for which in holds (accountRE
// needs 8 letters or digits; phoneRE 8 bytes of [0-9 ().-]).
func hasRun(s string, n int, in func(byte) bool) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if !in(s[i]) {
			run = 0
		} else if run++; run >= n {
			return true
		}
	}
	return false
}

func isUpperByte(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigitByte(c byte) bool { return '0' <= c && c <= '9' }
func isPhoneByte(c byte) bool {
	return isDigitByte(c) || c == ' ' || c == '(' || c == ')' || c == '.' || c == '-'
}

// coveredBy reports whether one candidate is (almost) the whole value v, so
// v adds nothing as a candidate of its own.
func coveredBy(cands []candidate, v string) bool {
	for _, c := range cands {
		if 2*len(c.value) >= len(v) {
			return true
		}
	}
	return false
}

// hexDigest reports whether s is hex digits with a letter after a digit
// and no 0x: a hash, checksum or commit id (9f3c2a1e..., a sha256), which
// names no account. A wallet is written 0x..., an account number in
// digits, perhaps after a prefix of letters (ACC77120934).
func hexDigest(s string) bool {
	digit, mixed := false, false
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		switch {
		case 'a' <= c && c <= 'f':
			mixed = mixed || digit
		case isDigitByte(s[i]):
			digit = true
		default:
			return false
		}
	}
	return mixed
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if '0' <= s[i] && s[i] <= '9' {
			n++
		}
	}
	return n
}

// plainWords reports a value made only of letters, spaces and light
// punctuation in at most three words: ordinary wording, not an identifier.
func plainWords(s string) bool {
	for _, r := range s {
		if !(r == ' ' || r == ',' || r == '.' || r == '\'' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || r >= 0x80) {
			return false
		}
	}
	return len(strings.Fields(s)) <= 3
}

// ibanCountries are the countries whose accounts have IBANs (ISO 13616,
// with the countries that use one only partly): two capitals and two
// digits in front of any other code (a flight's CA0088124577, a
// product's US12...) make no IBAN.
var ibanCountries = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range strings.Fields(`AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR GB GE GI
		GL GR GT HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT MU NI NL NO OM PK PL PS PT QA RO RS
		RU SA SC SD SE SI SK SM SO ST SV TL TN TR UA VA VG XK YE DZ AO BJ BF CM CV CF CG CI GA GQ GW IR KM MA MG ML MZ NE SN
		TD TG HN`) {
		m[c] = true
	}
	return m
}()

// phoneNamed reports whether the person wrote the phone number key (its
// compacted form, "+15550162") without its country code: "text Mr.
// Alvarez on WhatsApp (555-0162)". The trusted text must hold the number's
// digits but for at most three leading ones, and at least seven of them,
// as one run (spaces, brackets, dots and dashes between them do not
// count).
func phoneNamed(key string, view *inView) bool {
	var digits []byte
	for i := 0; i < len(key); i++ {
		if isDigitByte(key[i]) {
			digits = append(digits, key[i])
		}
	}
	n := max(7, len(digits)-3)
	if len(digits) < n {
		return false
	}
	tail := string(digits[len(digits)-n:])
	trusted := view.trustedDigits()
	for off := 0; ; {
		i := strings.Index(trusted[off:], tail)
		if i < 0 {
			return false
		}
		at := off + i
		if end := at + len(tail); end == len(trusted) || !isDigitByte(trusted[end]) {
			return true // the run ends where the number does
		}
		off = at + 1
	}
}
