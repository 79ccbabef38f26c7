// Package conformance owns toolgate's conformance suites: the YAML suite
// format (Load), the runner that decides every case through the real
// Verifier, each case on its own SQLite file unless it needs no state
// (Run), the reporters CI reads (text, json, junit), and the labelled-set
// scorer for benchmark JSONL files (ScoreLabels). It decides nothing itself:
// the policy does, through package toolgate; it must not change what a
// Verifier decides, write outside the temporary directory it is given, or
// touch the user's state database.
package conformance
