package toolgate.tier1_test

import rego.v1

import data.toolgate.tier1

# reason(...) builds the same object the default rules write out.
test_reason_helper if {
	tier1.reason("X-001", "custom", "a message", "action.type", "deny") == {"code": "X-001", "rule": "custom", "message": "a message", "where": "action.type", "decision": "deny"}
}

test_custom_reason_takes_part if {
	d := tier1.decision with input as req("trusted", "file_read", {"path": "notes.md"}, [])
		with tier1.reasons as {tier1.reason("X-001", "custom", "m", "action.type", "pending")}
	d.decision == "pending"
}
