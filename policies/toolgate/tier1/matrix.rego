# The trust × risk matrix: the agent's effective trust level against the
# tool's risk. A registered agent's level from state caps the request's: a
# request may lower its trust, never raise it. No level at all means untrusted.
package toolgate.tier1

import rego.v1

trust_levels := ["untrusted", "supervised", "autonomous", "trusted"]

trust_index := {"untrusted": 0, "supervised": 1, "autonomous": 2, "trusted": 3}

risk_index := {"low": 0, "medium": 1, "high": 2, "critical": 3}

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

# MATRIX-001 (untrusted × low) .. MATRIX-016 (trusted × critical), row by row.
matrix_code := sprintf("MATRIX-%03d", [((trust_index[trust] * 4) + risk_index[risk]) + 1])

reasons contains reason(matrix_code, "trust_risk_matrix", sprintf("%s agent, %s-risk tool: %s", [trust, risk, matrix_outcome]), "agent.trust_level", matrix_outcome) if {
	known_tool
}
