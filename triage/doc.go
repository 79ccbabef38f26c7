// Package triage is Tier 2: it asks a cheap model on any OpenAI-compatible
// endpoint whether a tool call that Tier 1 escalated appears to be influenced
// by instructions in the untrusted content the agent read, and turns the
// answer into an Outcome that either lets the pipeline proceed or escalates.
// Every failure (unparseable answer, timeout, endpoint error, probe limit)
// becomes an Outcome that does not allow, except a probe timeout when the
// configuration says on_timeout: allow. It owns the prompt, the answer's
// schema, the retry and the per-turn probe counter; it must not decide the
// final verdict, touch state or the audit log, or call the supervisor.
package triage
