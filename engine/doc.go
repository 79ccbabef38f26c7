// Package engine evaluates Tier 1: it loads a policy bundle, prepares the
// OPA query once and evaluates requests concurrently.
package engine
