// Package adapters plugs toolgate into the agents that call tools: the
// pre-tool hooks of agent CLIs (Claude Code, Gemini CLI, Cursor, Codex), an
// MCP proxy that sits between an MCP client and a real MCP server, Docker's
// MCP gateway interceptor and an OpenID AuthZEN evaluation endpoint. It maps
// each foreign shape to a toolgate Request, asks a *toolgate.Verifier, and
// answers in the foreign shape, failing closed (deny) on anything it cannot
// parse or decide. It owns one table family in the state database, "hooks"
// (per-session step counters and the recent tool results kept as untrusted
// context), and must not touch the tables of state, audit or supervisor, nor
// decide anything itself: the policy does.
package adapters
