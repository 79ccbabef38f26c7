package shell

import (
	"encoding/base64"
	"slices"
	"strings"
	"unicode/utf16"
)

// wrapper describes a command that runs another command given as its operands.
type wrapper struct {
	value     string          // short options that take a value
	longValue map[string]bool // long options that take a value (without "--")
}

var wrappers = map[string]wrapper{
	"sudo":    {value: "ugpCDrtURT", longValue: set("user", "group", "prompt", "chdir", "close-from", "role", "type", "other-user", "host")},
	"doas":    {value: "uC"},
	"env":     {value: "uCS", longValue: set("unset", "chdir", "split-string")},
	"busybox": {},
	"command": {},
	"builtin": {},
	"exec":    {value: "a"},
	"nohup":   {},
	"time":    {value: "fo", longValue: set("format", "output")},
	"nice":    {value: "n", longValue: set("adjustment")},
	"ionice":  {value: "cnpPu", longValue: set("class", "classdata")},
	"timeout": {value: "sk", longValue: set("signal", "kill-after")},
	"stdbuf":  {value: "ioe", longValue: set("input", "output", "error")},
	"xargs":   {value: "aEdILnPs", longValue: set("arg-file", "delimiter", "max-args", "max-procs", "max-chars", "max-lines", "replace", "eof", "process-slot-var")},
	"watch":   {value: "nq", longValue: set("interval", "equexit")},
	// ssh HOST CMD... runs CMD through the remote user's shell.
	"ssh": {value: "BbcDEeFIiJLlmOopQRSWw"},
	// ansible HOSTS -m shell -a CMD runs CMD on every host of the pattern.
	"ansible": {},
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// spec describes how a command's arguments are canonicalised.
type spec struct {
	long      map[string]string // long option (without "--") → its short form
	value     string            // short options that take a value
	longValue map[string]bool   // long options kept as-is that take a value
	alias     map[byte]byte     // short option letters that mean another letter (rm -R → -r)
	verbatim  bool              // keep the arguments in order (an expression, or subcommands)
}

// specs is the small table of commands whose options matter to danger rules.
// A command not listed gets getopt treatment with no option taking a value.
var specs = map[string]spec{
	"rm": {long: map[string]string{"recursive": "-r", "force": "-f", "dir": "-d", "verbose": "-v"},
		alias: map[byte]byte{'R': 'r'}},
	"chmod": {long: map[string]string{"recursive": "-R", "verbose": "-v", "changes": "-c", "silent": "-f", "quiet": "-f"}},
	"chown": {long: map[string]string{"recursive": "-R", "verbose": "-v"}},
	"curl": {long: map[string]string{"data": "-d", "upload-file": "-T", "form": "-F", "header": "-H",
		"request": "-X", "output": "-o", "user": "-u", "remote-name": "-O", "silent": "-s", "location": "-L",
		"insecure": "-k", "fail": "-f", "show-error": "-S", "include": "-i", "verbose": "-v", "head": "-I",
		"cookie": "-b", "config": "-K", "user-agent": "-A", "referer": "-e", "proxy": "-x", "get": "-G"},
		value:     "dFTHXouAebcKxEwmr",
		longValue: set("data-binary", "data-raw", "data-urlencode", "data-ascii", "json", "form-string", "url", "connect-timeout", "max-time", "resolve")},
	"wget": {long: map[string]string{"output-document": "-O", "output-file": "-o", "quiet": "-q", "input-file": "-i",
		"directory-prefix": "-P", "user-agent": "-U", "execute": "-e", "no-verbose": "-nv"},
		value:     "OoiPUe",
		longValue: set("post-file", "post-data", "body-file", "body-data", "method", "header", "user", "password")},
	"nc":       {long: map[string]string{"exec": "-e", "sh-exec": "-c", "listen": "-l", "udp": "-u", "verbose": "-v"}, value: "ecpswiqxX"},
	"ncat":     {long: map[string]string{"exec": "-e", "sh-exec": "-c", "listen": "-l", "udp": "-u", "verbose": "-v"}, value: "ecpswiqxX", longValue: set("lua-exec")},
	"netcat":   {long: map[string]string{"exec": "-e", "sh-exec": "-c", "listen": "-l", "udp": "-u", "verbose": "-v"}, value: "ecpswiqxX"},
	"ssh":      {value: "bcDEeFIiJLlmOopQRSWw"},
	"scp":      {value: "cFiJlOoPS"},
	"rsync":    {value: "eBfT", longValue: set("rsh", "exclude", "include", "filter")},
	"tar":      {value: "fCT", long: map[string]string{"file": "-f", "directory": "-C", "create": "-c", "extract": "-x", "gzip": "-z"}},
	"python":   {value: "cmWX"},
	"perl":     {value: "eEIMmx"},
	"ruby":     {value: "erIE"},
	"node":     {value: "epr", long: map[string]string{"eval": "-e", "print": "-p", "require": "-r"}},
	"php":      {value: "rdBRF"},
	"crontab":  {value: "u"},
	"sed":      {value: "ef", long: map[string]string{"in-place": "-i", "expression": "-e", "file": "-f"}},
	"tee":      {long: map[string]string{"append": "-a"}},
	"chattr":   {},
	"find":     {verbatim: true},
	"certutil": {verbatim: true},
	"go":       {verbatim: true},
	"git":      {verbatim: true},
	"java":     {verbatim: true},
	"dd":       {verbatim: true},
	"test":     {verbatim: true},
	"[":        {verbatim: true},
}

// shells take a command string after -c.
var shells = set("sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "csh", "tcsh", "rbash")

// psOnlyAliases are PowerShell aliases with no common POSIX meaning: always mapped.
var psOnlyAliases = map[string]string{
	"iex": "invoke-expression", "iwr": "invoke-webrequest", "irm": "invoke-restmethod",
	"saps": "start-process", "gci": "get-childitem", "ri": "remove-item", "sal": "set-alias",
}

// psAliases are mapped only where PowerShell is evident.
var psAliases = map[string]string{
	"curl": "invoke-webrequest", "wget": "invoke-webrequest",
	"rm": "remove-item", "del": "remove-item", "erase": "remove-item", "rd": "remove-item", "rmdir": "remove-item",
	"cat": "get-content", "gc": "get-content", "type": "get-content",
	"echo": "write-output", "write": "write-output",
	"start": "start-process", "sc": "set-content", "ac": "add-content", "ni": "new-item",
	"cp": "copy-item", "copy": "copy-item", "cpi": "copy-item", "mv": "move-item", "move": "move-item", "mi": "move-item",
	"ls": "get-childitem", "dir": "get-childitem", "sp": "set-itemproperty",
}

// psParamPrefixes expands abbreviated PowerShell parameters: name and the
// shortest prefix PowerShell accepts for it.
var psParamPrefixes = []struct {
	name string
	min  int
}{{"recurse", 1}, {"force", 2}, {"literalpath", 3}}

// psValueParams are PowerShell parameters that take a value.
var psValueParams = set("path", "literalpath", "uri", "outfile", "infile", "body", "method", "filepath",
	"argumentlist", "name", "value", "destination", "headers", "propertytype", "type", "scope",
	"executionpolicy", "exclusionpath", "exclusionprocess", "action", "trigger", "taskname", "group",
	"member", "itemtype", "encoding", "credential", "computername", "scriptblock", "command", "filter", "verb")

// psLiteralValues bind to the parameter before them even when it is a switch
// (-Enabled False, -DisableRealtimeMonitoring $true).
var psLiteralValues = set("$true", "$false", "$null", "true", "false")

// winValueFlags are cmd /flags that take a value, per command.
var winValueFlags = map[string]map[string]bool{
	"schtasks": set("tn", "tr", "sc", "ru", "rp", "mo", "st", "sd", "et", "ed", "d", "m", "ri", "du", "s", "u", "p", "xml", "rl"),
	"reg":      set("v", "t", "d", "s"),
}

// renderCommand writes the canonical form of words (a command without
// wrappers) to b and normalises any command string it carries.
func (n *normalizer) renderCommand(b *strings.Builder, words []string, depth int, m mode, later *[]string, redirs []token) {
	if m == modeCmd {
		words = splitCmdSlashes(words)
	}
	name := canonName(words[0], m)
	args := words[1:]
	n.nestedStrings(name, args, depth, m, later, redirs)

	b.WriteString(collapse(name))
	switch {
	case name == "powershell" || name == "pwsh":
		renderPowerShellExe(b, args)
		return
	case m == modePS || isCmdlet(name):
		renderPS(b, args)
		return
	case specs[specKey(name)].verbatim || name == "cmd":
		for _, a := range args {
			b.WriteByte(' ')
			b.WriteString(collapse(a))
		}
		return
	}
	sp := specs[specKey(name)]
	flags := make([]string, 0, len(args))
	ops := make([]string, 0, len(args))
	winFlags := winValueFlags[name]
	endOpts := false
	for k := 0; k < len(args); k++ {
		a := args[k]
		switch {
		case endOpts || len(a) < 2:
			ops = append(ops, a)
		case m == modeCmd && isSlashFlag(a):
			f := strings.ToLower(a)
			if winFlags[f[1:]] && k+1 < len(args) {
				f += " " + args[k+1]
				k++
			}
			flags = append(flags, f)
		case a[0] != '-':
			ops = append(ops, a)
		case a == "--":
			endOpts = true
		case strings.HasPrefix(a, "--"):
			fname, val, hasVal := strings.Cut(a, "=")
			fname = strings.ToLower(fname)
			short, mapped := sp.long[fname[2:]]
			if mapped {
				fname = short
			}
			takes := sp.longValue[fname[2:]] || mapped && len(short) == 2 && strings.IndexByte(sp.value, short[1]) >= 0
			if !hasVal && takes && k+1 < len(args) {
				val, hasVal = args[k+1], true
				k++
			}
			if hasVal {
				fname += " " + val
			}
			flags = append(flags, fname)
		case singleDashLong(a, sp.value):
			// -field=admin_token (vault, terraform, Go programs): one
			// option with its value, not a cluster of -f -i -e -l -d.
			fname, val, _ := strings.Cut(a, "=")
			flags = append(flags, strings.ToLower(fname)+" "+val)
		default:
			for j := 1; j < len(a); j++ {
				c := a[j]
				if to, ok := sp.alias[c]; ok {
					c = to
				}
				if strings.IndexByte(sp.value, c) >= 0 {
					val := a[j+1:]
					if val == "" && k+1 < len(args) {
						val = args[k+1]
						k++
					}
					flags = append(flags, "-"+string(c)+" "+val)
					break
				}
				flags = append(flags, "-"+string(c))
			}
		}
	}
	slices.Sort(flags)
	prev := ""
	for _, f := range flags {
		if f == prev {
			continue
		}
		prev = f
		b.WriteByte(' ')
		b.WriteString(collapse(f))
	}
	for _, o := range ops {
		b.WriteByte(' ')
		b.WriteString(collapse(o))
	}
}

// singleDashLong reports whether a is a long option written with one dash
// and a value after "=" (-field=x, -var=y): two letters or more before the
// "=", the first not a letter that takes a value (-Dkey=v, -ovalue=x keep
// their getopt reading).
func singleDashLong(a, value string) bool {
	name, _, ok := strings.Cut(a, "=")
	if !ok || len(name) < 3 || strings.IndexByte(value, name[1]) >= 0 {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// isSlashFlag reports whether a is a cmd-style flag such as /s, /Q or /tn.
func isSlashFlag(a string) bool {
	if len(a) < 2 || len(a) > 12 || a[0] != '/' {
		return false
	}
	for i := 1; i < len(a); i++ {
		c := a[i]
		if !(isIdent(c) || c == '?' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// splitCmdSlashes handles cmd's "del/s/q" and "cmd/c" spellings.
func splitCmdSlashes(words []string) []string {
	if !strings.Contains(words[0], "/") && !anyGlued(words[1:]) {
		return words
	}
	var out []string
	if w := words[0]; strings.IndexByte(w, '/') > 0 && !strings.ContainsAny(w, `\:`) {
		j := strings.IndexByte(w, '/')
		out = append(out, w[:j])
		out = append(out, splitGlued(w[j:])...)
	} else {
		out = append(out, w)
	}
	for _, a := range words[1:] {
		out = append(out, splitGlued(a)...)
	}
	return out
}

func anyGlued(args []string) bool {
	for _, a := range args {
		if len(splitGlued(a)) > 1 {
			return true
		}
	}
	return false
}

// splitGlued splits "/s/q" into "/s" "/q"; other words are returned whole.
func splitGlued(a string) []string {
	if len(a) < 2 || a[0] != '/' || strings.Count(a, "/") < 2 {
		return []string{a}
	}
	parts := strings.Split(a[1:], "/")
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if p == "" || !isSlashFlag("/"+p) {
			return []string{a}
		}
		out = append(out, "/"+p)
	}
	return out
}

// renderPS writes PowerShell parameters (lowercased, abbreviations expanded,
// with their values) sorted, then positional arguments.
func renderPS(b *strings.Builder, args []string) {
	var flags, ops []string
	for k := 0; k < len(args); k++ {
		a := args[k]
		if len(a) < 2 || a[0] != '-' || !isIdent(a[1]) {
			ops = append(ops, a)
			continue
		}
		p, val, hasVal := strings.Cut(strings.ToLower(a[1:]), ":")
		if hasVal {
			val = a[len(p)+2:]
		}
		for _, e := range psParamPrefixes {
			if len(p) >= e.min && len(p) < len(e.name) && strings.HasPrefix(e.name, p) {
				p = e.name
			}
		}
		if !hasVal && k+1 < len(args) {
			next := strings.ToLower(args[k+1])
			if psValueParams[p] || psLiteralValues[next] {
				val, hasVal = args[k+1], true
				k++
			}
		}
		if hasVal {
			flags = append(flags, "-"+p+" "+val)
		} else {
			flags = append(flags, "-"+p)
		}
	}
	slices.Sort(flags)
	for _, f := range flags {
		b.WriteByte(' ')
		b.WriteString(collapse(f))
	}
	for _, o := range ops {
		b.WriteByte(' ')
		b.WriteString(collapse(o))
	}
}

// psExeParam maps an abbreviated powershell.exe parameter to its full name.
func psExeParam(a string) string {
	p := strings.ToLower(strings.TrimLeft(a, "-/"))
	switch {
	case p == "":
		return ""
	case p == "ec" || strings.HasPrefix("encodedcommand", p) && p[0] == 'e' && p != "ex":
		return "encodedcommand"
	case strings.HasPrefix("command", p):
		return "command"
	case p == "ep" || len(p) >= 2 && strings.HasPrefix("executionpolicy", p):
		return "executionpolicy"
	case p == "nop" || len(p) >= 3 && strings.HasPrefix("noprofile", p):
		return "noprofile"
	case p == "noni" || len(p) >= 4 && strings.HasPrefix("noninteractive", p):
		return "noninteractive"
	case p == "w" || len(p) >= 2 && strings.HasPrefix("windowstyle", p):
		return "windowstyle"
	case p == "f" || strings.HasPrefix("file", p):
		return "file"
	}
	return p
}

// renderPowerShellExe writes powershell.exe arguments in order with their
// parameter names spelled out.
func renderPowerShellExe(b *strings.Builder, args []string) {
	for k := 0; k < len(args); k++ {
		a := args[k]
		b.WriteByte(' ')
		if len(a) > 1 && (a[0] == '-' || a[0] == '/') {
			p := psExeParam(a)
			b.WriteString("-" + p)
			if p == "command" {
				if k+1 < len(args) {
					b.WriteString(" " + collapse(strings.Join(args[k+1:], " ")))
				}
				return
			}
			continue
		}
		b.WriteString(collapse(a))
	}
}

// decodePSEncoded decodes a -EncodedCommand value: base64 of UTF-16LE text.
func decodePSEncoded(s string) (string, bool) {
	s = strings.TrimSpace(s)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "=")); err != nil {
			return "", false
		}
	}
	if len(raw) < 2 {
		return "", false
	}
	u := make([]uint16, len(raw)/2)
	for i := range u {
		u[i] = uint16(raw[2*i]) | uint16(raw[2*i+1])<<8
	}
	return string(utf16.Decode(u)), true
}

// nestedStrings finds the command strings a command runs and normalises them
// one level deeper, appending the results to later.
func (n *normalizer) nestedStrings(name string, args []string, depth int, m mode, later *[]string, redirs []token) {
	if depth >= maxDepth {
		return
	}
	sub := func(src string, sm mode) {
		_, all := n.source(src, depth+1, sm)
		*later = append(*later, all...)
	}
	switch {
	case shells[name]:
		if s, ok := shellScript(args); ok {
			sub(s, modePosix)
		}
		for _, r := range redirs {
			switch {
			case r.text == "<<" || r.text == "<<-":
				sub(r.body, modePosix)
			case r.text == "<<<":
				sub(r.target, modePosix)
			}
		}
	case name == "eval" || name == "source" && len(args) > 0 && strings.HasPrefix(args[0], "<("):
		if name == "eval" {
			sub(strings.Join(args, " "), modePosix)
		}
	case name == "su" || name == "runuser":
		for k, a := range args {
			switch {
			case (a == "-c" || a == "--command") && k+1 < len(args):
				sub(args[k+1], modePosix)
			case strings.HasPrefix(a, "--command="):
				sub(a[len("--command="):], modePosix)
			}
		}
	case name == "powershell" || name == "pwsh":
		for k := 0; k < len(args); k++ {
			a := args[k]
			if len(a) < 2 || a[0] != '-' && a[0] != '/' {
				continue
			}
			switch psExeParam(a) {
			case "command":
				if k+1 < len(args) {
					sub(strings.Join(args[k+1:], " "), modePS)
				}
				return
			case "encodedcommand":
				if k+1 < len(args) {
					if s, ok := decodePSEncoded(args[k+1]); ok {
						sub(s, modePS)
					}
				}
				return
			}
		}
		// powershell "Remove-Item ..." with no parameter runs its arguments.
		if len(args) > 0 && args[0] != "" && args[0][0] != '-' && args[0][0] != '/' {
			sub(strings.Join(args, " "), modePS)
		}
	case name == "cmd":
		for k, a := range args {
			if l := strings.ToLower(a); l == "/c" || l == "/k" || l == "/r" {
				sub(strings.Join(args[k+1:], " "), modeCmd)
				return
			}
		}
	case name == "find":
		for k := 0; k < len(args); k++ {
			if a := args[k]; a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir" {
				end := k + 1
				for end < len(args) && args[end] != ";" && args[end] != "+" {
					end++
				}
				if end > k+1 {
					var b strings.Builder
					n.renderCommand(&b, args[k+1:end], depth+1, m, later, nil)
					*later = append(*later, b.String())
				}
				k = end
			}
		}
	case name == "invoke-expression":
		if len(args) > 0 {
			sub(strings.Join(args, " "), modePS)
		}
	}
}

// shellScript returns the command string of "sh [options] -c STRING".
func shellScript(args []string) (string, bool) {
	sawC := false
	for k := 0; k < len(args); k++ {
		a := args[k]
		switch {
		case a == "--":
			if sawC && k+1 < len(args) {
				return args[k+1], true
			}
			return "", false
		case len(a) > 1 && (a[0] == '-' || a[0] == '+') && !strings.HasPrefix(a, "--"):
			if strings.ContainsRune(a[1:], 'c') && a[0] == '-' {
				sawC = true
			}
			if strings.ContainsRune(a[1:], 'o') && k+1 < len(args) { // -o option
				k++
			}
		case strings.HasPrefix(a, "--"):
			// --norc, --login ...
		default:
			if sawC {
				return a, true
			}
			return "", false
		}
	}
	return "", false
}

// psVerbs are PowerShell verbs; "Verb-Noun" marks PowerShell text.
var psVerbs = set("get", "set", "new", "remove", "invoke", "start", "stop", "add", "copy", "move", "out",
	"write", "convertto", "convertfrom", "import", "export", "clear", "disable", "enable", "register",
	"unregister", "test", "restart", "expand", "compress", "rename", "resolve", "format", "mount",
	"install", "uninstall", "enter", "select", "foreach", "where")

// detectMode guesses whether a top-level line is PowerShell or cmd, in one
// pass over its words: PowerShell if it has $env:, iex/iwr/irm or a
// Verb-Noun cmdlet; cmd if it has a drive path (C:\), %USERPROFILE% and the
// like, or starts with a cmd-only command.
func detectMode(s string) mode {
	var buf [16]byte
	cmd := false
	first := true
	for i := 0; i < len(s); {
		c := s[i]
		if !isLetter(c) {
			if c == '%' && i+1 < len(s) {
				if j := strings.IndexByte(s[i+1:], '%'); j > 0 && j < 16 {
					switch strings.ToLower(s[i+1 : i+1+j]) {
					case "userprofile", "appdata", "systemroot", "windir", "homepath", "temp", "programdata":
						cmd = true
					}
				}
			}
			if c != '`' && c != ' ' && c != '\t' {
				first = false
			}
			i++
			continue
		}
		j := i
		for j < len(s) && (isLetter(s[j]) || s[j] == '`') {
			j++
		}
		word := s[i:j]
		if len(word) <= len(buf) {
			n := 0
			for k := 0; k < len(word); k++ {
				if word[k] != '`' {
					buf[n] = word[k] | 0x20
					n++
				}
			}
			w := buf[:n]
			var prev, next byte
			if i > 0 {
				prev = s[i-1]
			}
			if j < len(s) {
				next = s[j]
			}
			switch {
			case string(w) == "env" && prev == '$' && next == ':':
				return modePS
			case (string(w) == "iex" || string(w) == "iwr" || string(w) == "irm") && !isIdent(prev) && !isIdent(next) && prev != '-' && next != '-':
				return modePS
			case next == '-' && j+1 < len(s) && isLetter(s[j+1]) && prev != '-' && prev != '/' && prev != '.' && prev != '_' && psVerbs[string(w)]:
				return modePS
			case n == 1 && next == ':' && j+1 < len(s) && s[j+1] == '\\' && !isIdent(prev):
				cmd = true
			case first && cmdFirstWords[string(w)]:
				cmd = true
			}
		}
		first = false
		i = j
	}
	if cmd {
		return modeCmd
	}
	return modePosix
}

// cmdFirstWords are commands that only cmd.exe runs.
var cmdFirstWords = set("cmd", "del", "erase", "rd", "format", "reg", "schtasks", "vssadmin", "bcdedit",
	"wevtutil", "icacls", "takeown", "wmic", "netsh", "certutil", "bitsadmin", "attrib", "robocopy", "xcopy")

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// isCmdlet reports whether name is a PowerShell Verb-Noun.
func isCmdlet(name string) bool {
	verb, noun, ok := strings.Cut(name, "-")
	return ok && noun != "" && psVerbs[verb] && !strings.ContainsAny(noun, "-/.")
}

// hasWord reports whether w occurs in s delimited by non-identifier characters.
func hasWord(s, w string) bool {
	for off := 0; ; {
		j := strings.Index(s[off:], w)
		if j < 0 {
			return false
		}
		j += off
		if (j == 0 || !isIdent(s[j-1])) && (j+len(w) == len(s) || !isIdent(s[j+len(w)])) {
			return true
		}
		off = j + 1
	}
}
