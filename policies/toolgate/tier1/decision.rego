# METADATA
# title: toolgate Tier 1
# description: |
#   The deterministic tier. Every rule adds reasons, each carrying the outcome
#   it asks for; the decision is the outcome of highest precedence among them
#   (data.toolgate.config.precedence: deny > pending > escalate > allow by
#   default). A call no rule speaks for has no reasons and no decision: the
#   engine treats an undefined decision as deny.
package toolgate.tier1

import rego.v1

config := data.toolgate.config

# decision is the entry point: data.toolgate.tier1.decision.
decision := {
	"decision": outcome,
	"risk": risk,
	"category": category,
	"tier": 1,
	"reasons": ordered_reasons,
	"not_applied": not_applied,
	"budget_exceeded": budget_exceeded,
}

# rank orders outcomes by precedence: 0 is the strongest.
rank := {o: i | some i, o in config.precedence}

outcome := config.precedence[min({rank[r.decision] | some r in reasons})]

# Reasons strongest first, then by code.
ordered_reasons := [r | some pair in sort([[rank[r.decision], r.code, r] | some r in reasons]); r := pair[2]]

not_applied := object.get(input, ["facts", "not_applied"], [])

default budget_exceeded := false

budget_exceeded if {
	some r in reasons
	startswith(r.code, "BUDGET-")
}

# reason builds one reason object.
reason(code, rule, message, where, outcome_) := {
	"code": code,
	"rule": rule,
	"message": message,
	"where": where,
	"decision": outcome_,
}
