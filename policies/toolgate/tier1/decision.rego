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

# decision is the entry point: data.toolgate.tier1.decision. The engine
# lists the reasons strongest first, by this same precedence, then by code.
decision := {
	"decision": outcome,
	"risk": risk,
	"category": category,
	"tier": 1,
	"reasons": reasons,
	"precedence": config.precedence,
	"not_applied": object.get(input, ["facts", "not_applied"], []),
}

outcomes := {r.decision | some r in reasons}

# outcome: the first outcome in precedence order that some reason asks for
# (most decisions have reasons of one outcome only: that one, if listed).
outcome := o if {
	count(outcomes) == 1
	some o in outcomes
	o in config.precedence
} else := [o | some o in config.precedence; o in outcomes][0]

# reason builds one reason object. The default rules write the object out in
# their heads instead ({"code", "rule", "message", "where", "decision"}): a
# function call per reason costs more than the object; your own rules may use
# either.
reason(code, rule, message, where, outcome_) := {
	"code": code,
	"rule": rule,
	"message": message,
	"where": where,
	"decision": outcome_,
}
