# The trust × risk matrix: the agent's effective trust level against the
# tool's risk. A registered agent's level from state caps the request's: a
# request may lower its trust, never raise it. No level at all means untrusted.
package toolgate.tier1

import rego.v1

trust_levels := ["untrusted", "supervised", "autonomous", "trusted"]

trust_index := {"untrusted": 0, "supervised": 1, "autonomous": 2, "trusted": 3}

requested_trust := input.agent.trust_level

registered_trust := input.facts.agent.trust_level if input.facts.agent.registered

trust := trust_levels[min({trust_index[requested_trust], trust_index[registered_trust]})] if {
	requested_trust
	registered_trust
} else := registered_trust if {
	registered_trust
} else := requested_trust if {
	requested_trust
} else := "untrusted"

matrix_outcome := config.matrix[trust][risk]

# MATRIX-001 (untrusted × low) .. MATRIX-016 (trusted × critical), row by row
# (a table rather than arithmetic and sprintf on every decision).
matrix_code := matrix_codes[trust][risk]

matrix_codes := {
	"untrusted": {"low": "MATRIX-001", "medium": "MATRIX-002", "high": "MATRIX-003", "critical": "MATRIX-004"},
	"supervised": {"low": "MATRIX-005", "medium": "MATRIX-006", "high": "MATRIX-007", "critical": "MATRIX-008"},
	"autonomous": {"low": "MATRIX-009", "medium": "MATRIX-010", "high": "MATRIX-011", "critical": "MATRIX-012"},
	"trusted": {"low": "MATRIX-013", "medium": "MATRIX-014", "high": "MATRIX-015", "critical": "MATRIX-016"},
}

reasons contains {"code": matrix_code, "rule": "trust_risk_matrix", "message": sprintf("%s agent, %s-risk tool: %s", [trust, risk, matrix_outcome]), "where": "agent.trust_level", "decision": matrix_outcome} if {
	known_tool
}
