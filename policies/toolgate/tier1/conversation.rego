# Conversation controls, agents and budgets, over the facts the engine reads
# from state (input.facts). Without state a section is absent and listed in
# not_applied; these rules then say nothing.
package toolgate.tier1

import rego.v1

conversation := input.facts.conversation

step := input.context.step_number

reasons contains reason("LOOP-001", "step_limit", sprintf("step limit reached: %d approved steps (max %d)", [conversation.steps_approved, config.max_steps]), "context.step_number", "deny") if {
	conversation.steps_approved >= config.max_steps
}

reasons contains reason("LOOP-002", "step_replay", sprintf("step %d replayed: step %d is already committed", [step, conversation.last_step]), "context.step_number", "deny") if {
	step <= conversation.last_step
}

reasons contains reason("LOOP-003", "repeated_action", "the same action was approved twice in a row; a third is a loop", "action", "deny") if {
	n := count(conversation.recent)
	n >= 2
	conversation.recent[n - 1] == conversation.fingerprint
	conversation.recent[n - 2] == conversation.fingerprint
}

reasons contains reason("LOOP-004", "no_progress", sprintf("the same action on unchanged state %q for the third time in the last %d steps", [input.context.pre_action_state_hash, config.loop_window]), "context.pre_action_state_hash", "deny") if {
	input.context.pre_action_state_hash
	n := count(conversation.recent)
	window := array.slice(conversation.recent, n - config.loop_window, n)
	count([f | some f in window; f == conversation.fingerprint]) >= 2
}

reasons contains reason("LOOP-005", "step_in_flight", sprintf("step %d is already being decided for this conversation", [step]), "context.step_number", "deny") if {
	conversation.reserved
}

agent_facts := input.facts.agent

reasons contains reason("AGENT-001", "revoked_agent", sprintf("agent %q is revoked", [input.agent.id]), "agent.id", "deny") if {
	agent_facts.revoked
}

reasons contains reason("AGENT-002", "unregistered_agent", sprintf("agent %q is not registered and registration is required", [input.agent.id]), "agent.id", "deny") if {
	agent_facts.token_required
	not agent_facts.registered
}

reasons contains reason("AGENT-003", "bad_token", sprintf("agent %q presented a missing or wrong token", [input.agent.id]), "agent.token", "deny") if {
	agent_facts.token_required
	agent_facts.registered
	not agent_facts.token_valid
}

budget := input.facts.budget

cost := object.get(input.action, "cost_usd", 0)

reasons contains reason("BUDGET-001", "daily_cost", sprintf("daily cost budget exceeded: %.2f + %.2f USD over %.2f", [budget.cost_today_usd, cost, budget.max_daily_cost_usd]), "action.cost_usd", "deny") if {
	budget.max_daily_cost_usd > 0
	budget.cost_today_usd + cost > budget.max_daily_cost_usd
}

reasons contains reason("BUDGET-002", "hourly_requests", sprintf("hourly request budget exceeded: %d requests (max %d)", [budget.requests_last_hour, budget.max_requests_per_hour]), "agent.id", "deny") if {
	budget.max_requests_per_hour > 0
	budget.requests_last_hour > budget.max_requests_per_hour
}
