# Tools: the registry, default deny of unknown tools, per-agent allowed and
# blocked tools, dangerous tools that need a person.
#
# A note on style, for every file of this package: each rule a decision
# enters costs OPA an evaluation of its own (a few microseconds and a dozen
# allocations), so the hot path reads input and data directly and keeps
# named rules for values several rules share (tool, risk, trust, facts).
package toolgate.tier1

import rego.v1

# tool is the registry entry for the action; MCP names (mcp__server__tool)
# fall back to the tool's own name.
tool := t if {
	t := data.toolgate.registry.tools[input.action.type]
} else := t if {
	parts := split(input.action.type, "__")
	count(parts) == 3
	parts[0] == "mcp"
	t := data.toolgate.registry.tools[parts[2]]
}

known_tool if tool

risk := t.risk if {
	t := tool
} else := "critical"

category := t.category if {
	t := tool
} else := "unknown"

reasons contains {"code": "ACTION-001", "rule": "unknown_action", "message": sprintf("unknown action type or tool %q: denied by default", [input.action.type]), "where": "action.type", "decision": "deny"} if {
	not known_tool
}

# Tool permissions: a registered agent's lists from state (the engine
# leaves a list out when it is empty: OPA's rule index then skips its rule),
# else the config's agent_tools entry for this agent id. No list, no limit.
reasons contains {"code": "TOOL-001", "rule": "blocked_tool", "message": sprintf("tool %q is blocked for agent %q", [input.action.type, input.agent.id]), "where": "action.type", "decision": "deny"} if {
	input.facts.agent.blocked_tools
	input.facts.agent.registered
	input.action.type in input.facts.agent.blocked_tools
}

reasons contains {"code": "TOOL-001", "rule": "blocked_tool", "message": sprintf("tool %q is not among agent %q's allowed tools", [input.action.type, input.agent.id]), "where": "action.type", "decision": "deny"} if {
	input.facts.agent.allowed_tools
	input.facts.agent.registered
	count(input.facts.agent.allowed_tools) > 0
	not input.action.type in input.facts.agent.allowed_tools
}

reasons contains {"code": "TOOL-001", "rule": "blocked_tool", "message": sprintf("tool %q is blocked for agent %q", [input.action.type, input.agent.id]), "where": "action.type", "decision": "deny"} if {
	not input.facts.agent.registered
	input.action.type in config.agent_tools[input.agent.id].blocked
}

reasons contains {"code": "TOOL-001", "rule": "blocked_tool", "message": sprintf("tool %q is not among agent %q's allowed tools", [input.action.type, input.agent.id]), "where": "action.type", "decision": "deny"} if {
	not input.facts.agent.registered
	allowed := config.agent_tools[input.agent.id].allowed
	count(allowed) > 0
	not input.action.type in allowed
}

reasons contains {"code": "TOOL-002", "rule": "dangerous_tool", "message": sprintf("tool %q is dangerous: a person must approve it", [input.action.type]), "where": "action.type", "decision": "pending"} if {
	tool.approval == "dangerous"
}

# A low-risk database tool is low-risk because it reads (read_database,
# query_data): a statement that writes, deletes or grants through it
# (UPDATE accounts SET balance = ..., under a comment that says "read-only
# lookup") is not what the registry rated, and a person or Tier 2 decides.
reasons contains {"code": "TOOL-003", "rule": "read_tool_writes", "message": sprintf("read tool %q given a statement that changes data in %s", [input.action.type, where]), "where": where, "decision": "escalate"} if {
	tool.category == "database"
	tool.risk == "low"
	some k, v in input.action.arguments
	is_string(v)
	regex.match(`(?is)(?:^|;)\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*(?:insert|update|delete|drop|alter|truncate|grant|revoke|create|merge|replace|upsert|rename)\s`, v)
	where := sprintf("action.arguments.%s", [k])
}

