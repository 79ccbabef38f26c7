# Conversation controls, agents and budgets, over the facts the engine reads
# from state (input.facts). Without state a section is absent and listed in
# not_applied; these rules then say nothing. Each rule names, as its first
# line, the part of the facts it needs (the section, or a flag or limit the
# engine leaves out when it is false or zero: revoked, token_required,
# reserved, max_daily_cost_usd, max_requests_per_hour): OPA's rule index
# then skips the rule outright when that part is absent, instead of
# evaluating its body to find that out.
package toolgate.tier1

import rego.v1

reasons contains {"code": "LOOP-001", "rule": "step_limit", "message": sprintf("step limit reached: %d approved steps (max %d)", [input.facts.conversation.steps_approved, config.max_steps]), "where": "context.step_number", "decision": "deny"} if {
	input.facts.conversation
	input.facts.conversation.steps_approved >= config.max_steps
}

reasons contains {"code": "LOOP-002", "rule": "step_replay", "message": sprintf("step %d replayed: step %d is already committed", [input.context.step_number, input.facts.conversation.last_step]), "where": "context.step_number", "decision": "deny"} if {
	input.facts.conversation
	input.context.step_number <= input.facts.conversation.last_step
}

reasons contains {"code": "LOOP-003", "rule": "repeated_action", "message": "the same action was approved twice in a row; a third is a loop", "where": "action", "decision": "deny"} if {
	input.facts.conversation
	is_array(input.facts.conversation.recent) # a caller's facts may leave it null: no history
	n := count(input.facts.conversation.recent)
	n >= 2
	input.facts.conversation.recent[n - 1] == input.facts.conversation.fingerprint
	input.facts.conversation.recent[n - 2] == input.facts.conversation.fingerprint
}

reasons contains {"code": "LOOP-004", "rule": "no_progress", "message": sprintf("the same action on unchanged state %q for the third time in the last %d steps", [input.context.pre_action_state_hash, config.loop_window]), "where": "context.pre_action_state_hash", "decision": "deny"} if {
	input.context.pre_action_state_hash
	input.facts.conversation
	is_array(input.facts.conversation.recent)
	n := count(input.facts.conversation.recent)
	window := array.slice(input.facts.conversation.recent, n - config.loop_window, n)
	count([f | some f in window; f == input.facts.conversation.fingerprint]) >= 2
}

reasons contains {"code": "LOOP-005", "rule": "step_in_flight", "message": sprintf("step %d is already being decided for this conversation", [input.context.step_number]), "where": "context.step_number", "decision": "deny"} if {
	input.facts.conversation.reserved
}

reasons contains {"code": "AGENT-001", "rule": "revoked_agent", "message": sprintf("agent %q is revoked", [input.agent.id]), "where": "agent.id", "decision": "deny"} if {
	input.facts.agent.revoked
}

reasons contains {"code": "AGENT-002", "rule": "unregistered_agent", "message": sprintf("agent %q is not registered and registration is required", [input.agent.id]), "where": "agent.id", "decision": "deny"} if {
	input.facts.agent.token_required
	not input.facts.agent.registered
}

reasons contains {"code": "AGENT-003", "rule": "bad_token", "message": sprintf("agent %q presented a missing or wrong token", [input.agent.id]), "where": "agent.token", "decision": "deny"} if {
	input.facts.agent.token_required
	input.facts.agent.registered
	not input.facts.agent.token_valid
}

reasons contains {"code": "BUDGET-001", "rule": "daily_cost", "message": sprintf("daily cost budget exceeded: %.2f + %.2f USD over %.2f", [input.facts.budget.cost_today_usd, object.get(input.action, "cost_usd", 0), input.facts.budget.max_daily_cost_usd]), "where": "action.cost_usd", "decision": "deny"} if {
	input.facts.budget.max_daily_cost_usd
	input.facts.budget.max_daily_cost_usd > 0
	input.facts.budget.cost_today_usd + object.get(input.action, "cost_usd", 0) > input.facts.budget.max_daily_cost_usd
}

reasons contains {"code": "BUDGET-002", "rule": "hourly_requests", "message": sprintf("hourly request budget exceeded: %d requests (max %d)", [input.facts.budget.requests_last_hour, input.facts.budget.max_requests_per_hour]), "where": "agent.id", "decision": "deny"} if {
	input.facts.budget.max_requests_per_hour
	input.facts.budget.max_requests_per_hour > 0
	input.facts.budget.requests_last_hour > input.facts.budget.max_requests_per_hour
}
