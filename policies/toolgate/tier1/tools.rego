# Tools: the registry, default deny of unknown tools, per-agent allowed and
# blocked tools, dangerous tools that need a person.
package toolgate.tier1

import rego.v1

registry := data.toolgate.registry.tools

action_type := input.action.type

# tool is the registry entry for the action; MCP names (mcp__server__tool)
# fall back to the tool's own name.
tool := registry[action_type]

tool := registry[mcp_tool] if {
	not registry[action_type]
	mcp_tool := mcp_tool_name
}

mcp_tool_name := parts[2] if {
	parts := split(action_type, "__")
	count(parts) == 3
	parts[0] == "mcp"
}

known_tool if tool

risk := tool.risk if known_tool

else := "critical"

category := tool.category if known_tool

else := "unknown"

reasons contains {"code": "ACTION-001", "rule": "unknown_action", "message": sprintf("unknown action type or tool %q: denied by default", [action_type]), "where": "action.type", "decision": "deny"} if {
	not known_tool
}

# Tool permissions: the registered agent's (from state), else the config's
# agent_tools entry for this agent id.
agent_tools := {"allowed": object.get(input.facts.agent, "allowed_tools", []), "blocked": object.get(input.facts.agent, "blocked_tools", [])} if {
	input.facts.agent.registered
}

else := object.get(config.agent_tools, input.agent.id, {})

reasons contains {"code": "TOOL-001", "rule": "blocked_tool", "message": sprintf("tool %q is blocked for agent %q", [action_type, input.agent.id]), "where": "action.type", "decision": "deny"} if {
	action_type in object.get(agent_tools, "blocked", [])
}

reasons contains {"code": "TOOL-001", "rule": "blocked_tool", "message": sprintf("tool %q is not among agent %q's allowed tools", [action_type, input.agent.id]), "where": "action.type", "decision": "deny"} if {
	allowed := object.get(agent_tools, "allowed", [])
	count(allowed) > 0
	not action_type in allowed
}

reasons contains {"code": "TOOL-002", "rule": "dangerous_tool", "message": sprintf("tool %q is dangerous: a person must approve it", [action_type]), "where": "action.type", "decision": "pending"} if {
	tool.approval == "dangerous"
}
