package toolgate.tier1_test

import rego.v1

import data.toolgate.tier1

# req builds a request for tool with args, at a trust level, with blocks.
req(trust, tool, args, blocks) := {
	"agent": {"id": "agent_t", "trust_level": trust},
	"action": {"type": tool, "arguments": args},
	"context": {"conversation_id": "conv_t", "step_number": 3, "blocks": blocks},
	"facts": {"not_applied": ["agent", "conversation", "budget"]},
}

user(text) := {"trust": "trusted", "source": "user", "content": text}

web(text) := {"trust": "untrusted", "source": "tool:web_fetch", "content": text}

codes(d) := {r.code | some r in d.reasons}

with_facts(r, facts) := object.union(r, {"facts": facts})
