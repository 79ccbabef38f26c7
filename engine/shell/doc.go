// Package shell normalises shell text so that Tier 1 rules can match what a
// command does rather than how it is spelled. It owns the tokenizer for POSIX
// shells, PowerShell and cmd, the unwrapping of nested command strings
// (sh -c, eval, $(...), backticks, powershell -Command/-EncodedCommand,
// cmd /c, xargs, watch) and the canonical form; it decides nothing: the
// danger patterns live in policies/toolgate/danger/data.json and Rego applies
// them.
//
// The canonical form of a pipeline is its simple commands joined by " | ".
// A simple command is rendered as its name (the basename of a path, lowercased,
// ".exe" removed, PowerShell aliases mapped to cmdlets), then its flags, then
// its operands, then its redirections ("> target", ">> target", "< src",
// "2>&1"), separated by single spaces. Quotes and escapes are resolved,
// $IFS spellings split words, $HOME, ${HOME}, $env:USERPROFILE and
// %USERPROFILE% become "~". Short flag clusters are split, and flags are
// sorted and made unique ("-rf", "-fr", "-r -f" all give "-f -r"); a flag that
// takes a value keeps it ("-d @file"); a small table maps common long flags to
// their short form (see commands.go) and other long flags are lowercased and
// kept. Commands whose arguments form an expression (find, go, git, java, ...)
// keep their arguments in order. Wrappers (sudo, doas, env, busybox, command,
// builtin, exec, nohup, time, nice, ionice, timeout, stdbuf, xargs, watch) are
// removed; for sudo and doas a second rendering that keeps them ("sudo -s",
// "sudo rm -f -r /") is emitted too, so privilege rules can match.
//
// Work is bounded: input is cut at 64 KiB, nested command strings are
// followed to depth 3, and the number of tokens and results is capped.
package shell
