// Package engine evaluates Tier 1: it loads a policy bundle, prepares the
// OPA query once and evaluates requests concurrently.
//
// Cost of a decision: the text scanning runs in Go (engine/scan,
// engine/shell), gathered for the default policy in one builtin call,
// toolgate.inspect; what remains is OPA evaluating the rules, roughly one
// to a few microseconds per rule it enters, so most of a decision's fixed
// cost is the number of rules the policy evaluates, not the size of the
// context. The input is built as an AST value directly (InputValue) and the
// decision is read from the result's AST, without a JSON round trip either
// way. BenchmarkEvaluate and BenchmarkBaseline (the same checks in plain
// Go) measure it.
package engine
