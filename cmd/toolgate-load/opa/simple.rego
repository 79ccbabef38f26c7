# The comparison policy for OPA's own server: the tool registry and the
# trust x risk matrix only (no toolgate builtins, no state), answering the
# same Tier 1 allow the load test asks toolgate for.
package toolgate.simple

import rego.v1

default decision := {"decision": "deny", "reasons": [{"code": "ACTION-001", "message": "unknown tool"}]}

tool := data.toolgate.registry.tools[input.action.type]

trust := object.get(input.agent, "trust_level", "untrusted")

decision := {
	"decision": data.toolgate.config.matrix[trust][tool.risk],
	"risk": tool.risk,
	"reasons": [{"code": "MATRIX", "message": sprintf("%s agent, %s-risk tool", [trust, tool.risk])}],
} if tool
