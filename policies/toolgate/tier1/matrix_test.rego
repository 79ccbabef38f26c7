package toolgate.tier1_test

import rego.v1

import data.toolgate.tier1

# One tool per risk level from the default registry.
tool_of_risk := {"low": "file_read", "medium": "api_call", "high": "database_write", "critical": "execute_code"}

expected_matrix := {
	"untrusted": {"low": "pending", "medium": "deny", "high": "deny", "critical": "deny"},
	"supervised": {"low": "allow", "medium": "pending", "high": "deny", "critical": "deny"},
	"autonomous": {"low": "allow", "medium": "allow", "high": "pending", "critical": "deny"},
	"trusted": {"low": "allow", "medium": "allow", "high": "allow", "critical": "allow"},
}

test_all_16_cells if {
	results := {[trust, risk, d.decision, code] |
		some trust, row in expected_matrix
		some risk, _ in row
		d := tier1.decision with input as req(trust, tool_of_risk[risk], {"query": "x"}, [])
		some r in d.reasons
		startswith(r.code, "MATRIX-")
		code := r.code
	}
	count(results) == 16
	every cell in results {
		cell[2] == expected_matrix[cell[0]][cell[1]]
	}
	codes_seen := {cell[3] | some cell in results}
	count(codes_seen) == 16
}

test_matrix_codes_row_major if {
	d := tier1.decision with input as req("untrusted", "file_read", {}, [])
	"MATRIX-001" in codes(d)
	d2 := tier1.decision with input as req("trusted", "execute_code", {"code": "print(1)"}, [])
	"MATRIX-016" in codes(d2)
}

test_missing_trust_is_untrusted if {
	r := json.remove(req("trusted", "api_call", {}, []), ["agent/trust_level"])
	d := tier1.decision with input as r
	d.decision == "deny"
	"MATRIX-002" in codes(d)
}

test_registered_trust_caps_request if {
	r := with_facts(req("trusted", "database_write", {}, []), {"agent": {"registered": true, "trust_level": "supervised"}})
	d := tier1.decision with input as r
	d.decision == "deny"
	"MATRIX-007" in codes(d)
}

test_request_may_lower_trust if {
	r := with_facts(req("supervised", "database_write", {}, []), {"agent": {"registered": true, "trust_level": "trusted"}})
	d := tier1.decision with input as r
	"MATRIX-007" in codes(d)
}

test_registered_trust_used_when_request_omits if {
	r := with_facts(json.remove(req("trusted", "database_write", {}, []), ["agent/trust_level"]), {"agent": {"registered": true, "trust_level": "autonomous"}})
	d := tier1.decision with input as r
	d.decision == "pending"
}

test_policy_can_change_matrix if {
	d := tier1.decision with input as req("trusted", "execute_code", {"code": "1"}, [])
		with data.toolgate.config.matrix.trusted.critical as "pending"
	d.decision == "pending"
}
