// Package state owns toolgate's SQLite database: the file itself (opening it
// with WAL, a busy timeout and versioned migrations per component), the agent
// registry with hashed tokens, conversation steps and their reservations,
// action fingerprints, and per-agent budgets (requests per hour, cost per
// day). It reads the facts the policy needs and records what the pipeline
// decided; it decides nothing itself (the Rego policy does) and it must not
// touch the tables of other packages (audit/, supervisor/), which share the
// file through DB and Migrate. Every failure of the store is an error that
// matches ErrUnavailable, so callers fail closed.
package state
