// Package scan holds the text scanners behind toolgate's Tier 1 builtins:
// a pattern matcher that runs many case-insensitive RE2 rules over request
// text in one literal-prefiltered pass (Compile, RuleSet.Match), a bounded
// multi-layer decoder that reports encoded or disguised content (Decode),
// and a provenance check that finds argument values copied from untrusted
// text (Provenance). It owns only this pure, deterministic Go text work: it
// must not import OPA, read files, the network, the clock or any global
// state, and it must never panic or take more than linear time on any input;
// engine/ wraps these functions as builtins and the Rego policy decides what
// the returned facts mean.
package scan
