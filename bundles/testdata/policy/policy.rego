package toolgate.tier1

import rego.v1

default decision := {"decision": "deny", "reasons": [{"code": "ACTION-001"}]}

decision := {"decision": "allow", "reasons": []} if {
	data.toolgate.registry.tools[input.action.type].risk == "low"
}
