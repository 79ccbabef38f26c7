// Package schema holds the wire types every tier shares: the Request an agent
// sends, the Facts the engine reads from state, the Decision Tier 1 returns and
// the typed errors for invalid requests. It is a leaf: it imports nothing from
// toolgate, so engine/, state/, triage/ and the root package can all use it.
// The root package re-exports these types; library users import toolgate.
package schema
