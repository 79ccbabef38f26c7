package toolgate.tier1_test

import rego.v1

import data.toolgate.tier1

test_unknown_tool_denied if {
	d := tier1.decision with input as req("trusted", "launch_missiles", {}, [])
	d.decision == "deny"
	"ACTION-001" in codes(d)
	d.risk == "critical"
}

test_known_tool_not_action_001 if {
	d := tier1.decision with input as req("trusted", "file_read", {"path": "README.md"}, [])
	not "ACTION-001" in codes(d)
	d.decision == "allow"
}

test_mcp_name_resolves_to_tool if {
	d := tier1.decision with input as req("trusted", "mcp__filesystem__read_file", {"path": "notes.txt"}, [])
	d.decision == "allow"
	d.risk == "low"
}

test_mcp_unknown_tool_denied if {
	d := tier1.decision with input as req("trusted", "mcp__evil__exfiltrate_everything", {}, [])
	"ACTION-001" in codes(d)
}

test_malformed_mcp_name_denied if {
	d := tier1.decision with input as req("trusted", "mcp__read_file", {}, [])
	"ACTION-001" in codes(d)
}

test_blocked_tool_config if {
	d := tier1.decision with input as req("trusted", "bash", {"command": "ls"}, [])
		with data.toolgate.config.agent_tools as {"agent_t": {"blocked": ["bash"]}}
	d.decision == "deny"
	"TOOL-001" in codes(d)
}

test_allowed_tools_exclude_others if {
	d := tier1.decision with input as req("trusted", "bash", {"command": "ls"}, [])
		with data.toolgate.config.agent_tools as {"agent_t": {"allowed": ["file_read"]}}
	"TOOL-001" in codes(d)
}

test_allowed_tools_include if {
	d := tier1.decision with input as req("trusted", "file_read", {"path": "a.txt"}, [])
		with data.toolgate.config.agent_tools as {"agent_t": {"allowed": ["file_read"]}}
	not "TOOL-001" in codes(d)
	d.decision == "allow"
}

test_registered_agent_permissions_win if {
	r := with_facts(req("trusted", "bash", {"command": "ls"}, []), {"agent": {"registered": true, "trust_level": "trusted", "blocked_tools": ["bash"]}})
	d := tier1.decision with input as r
		with data.toolgate.config.agent_tools as {"agent_t": {"allowed": ["bash"]}}
	"TOOL-001" in codes(d)
}

test_dangerous_tool_pending_even_trusted if {
	d := tier1.decision with input as req("trusted", "drop_table", {"table": "users"}, [])
	d.decision == "pending"
	"TOOL-002" in codes(d)
}

test_deny_beats_pending if {
	d := tier1.decision with input as req("supervised", "drop_table", {"table": "users"}, [])
	d.decision == "deny"
	"TOOL-002" in codes(d)
	"MATRIX-008" in codes(d)
}

test_no_reasons_no_decision if {
	not tier1.decision.decision with tier1.reasons as set()
}

test_registered_allowed_tools_exclude_others if {
	r := with_facts(req("trusted", "bash", {"command": "ls"}, []), {"agent": {"registered": true, "trust_level": "trusted", "allowed_tools": ["file_read"]}})
	d := tier1.decision with input as r
	"TOOL-001" in codes(d)
}

test_registered_allowed_tools_include if {
	r := with_facts(req("trusted", "file_read", {"path": "README.md"}, []), {"agent": {"registered": true, "trust_level": "trusted", "allowed_tools": ["file_read"]}})
	d := tier1.decision with input as r
	not "TOOL-001" in codes(d)
}

test_registered_agent_ignores_config_tools if {
	r := with_facts(req("trusted", "bash", {"command": "ls"}, []), {"agent": {"registered": true, "trust_level": "trusted"}})
	d := tier1.decision with input as r
		with data.toolgate.config.agent_tools as {"agent_t": {"blocked": ["bash"]}}
	not "TOOL-001" in codes(d)
}

test_read_tool_given_a_write if {
	d := tier1.decision with input as req("trusted", "query_data", {"query": "/* READ-ONLY: balance lookup. No writes. */\nUPDATE accounts SET balance = balance + 50000 WHERE id = 8812;"}, [])
	"TOOL-003" in codes(d)

	# The comment that calls the write read-only is a tell of its own.
	"DANGER-311" in codes(d)
	d.decision == "pending"
}

test_read_tool_given_a_second_statement_that_writes if {
	d := tier1.decision with input as req("trusted", "read_database", {"query": "SELECT 1; -- ok\n DELETE FROM sessions WHERE id = 4"}, [])
	"TOOL-003" in codes(d)
}

test_read_tool_reads if {
	d := tier1.decision with input as req("trusted", "query_data", {"query": "SELECT id, updated_at FROM orders WHERE status = 'update pending' -- no deletes"}, [])
	d.decision == "allow"
	not "TOOL-003" in codes(d)
}

test_write_tool_not_tool_003 if {
	d := tier1.decision with input as req("trusted", "execute_sql", {"query": "UPDATE orders SET status = 'shipped' WHERE id = 7"}, [])
	not "TOOL-003" in codes(d)
}

