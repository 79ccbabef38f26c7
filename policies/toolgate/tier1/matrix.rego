# The trust × risk matrix: the agent's effective trust level against the
# tool's risk. A registered agent's level from state caps the request's: a
# request may lower its trust, never raise it. No level at all means untrusted.
package toolgate.tier1

import rego.v1

trust_rank := {"untrusted": 0, "supervised": 1, "autonomous": 2, "trusted": 3}

trust := ["untrusted", "supervised", "autonomous", "trusted"][min({trust_rank[requested], trust_rank[registered]})] if {
	input.facts.agent.registered
	registered := input.facts.agent.trust_level
	requested := input.agent.trust_level
} else := registered if {
	input.facts.agent.registered
	registered := input.facts.agent.trust_level
} else := input.agent.trust_level if {
	input.agent.trust_level
} else := "untrusted"

# MATRIX-001 (untrusted × low) .. MATRIX-016 (trusted × critical), row by row
# (a table rather than arithmetic and sprintf on every decision).
matrix_codes := {
	"untrusted": {"low": "MATRIX-001", "medium": "MATRIX-002", "high": "MATRIX-003", "critical": "MATRIX-004"},
	"supervised": {"low": "MATRIX-005", "medium": "MATRIX-006", "high": "MATRIX-007", "critical": "MATRIX-008"},
	"autonomous": {"low": "MATRIX-009", "medium": "MATRIX-010", "high": "MATRIX-011", "critical": "MATRIX-012"},
	"trusted": {"low": "MATRIX-013", "medium": "MATRIX-014", "high": "MATRIX-015", "critical": "MATRIX-016"},
}

reasons contains {"code": matrix_codes[trust][t.risk], "rule": "trust_risk_matrix", "message": sprintf("%s agent, %s-risk tool: %s", [trust, t.risk, outcome_]), "where": "agent.trust_level", "decision": outcome_} if {
	t := tool
	outcome_ := config.matrix[trust][t.risk]
}
