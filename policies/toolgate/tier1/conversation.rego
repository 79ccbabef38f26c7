# Conversation controls, agents and budgets, over the facts the engine reads
# from state (input.facts). Without state a section is absent and listed in
# not_applied; these rules then say nothing. Each rule names its section
# (input.facts.conversation, .agent, .budget) as its first line: OPA's rule
# index then skips the rule outright when the section is absent, instead of
# evaluating its body to find that out.
package toolgate.tier1

import rego.v1

conversation := input.facts.conversation

step := input.context.step_number

reasons contains {"code": "LOOP-001", "rule": "step_limit", "message": sprintf("step limit reached: %d approved steps (max %d)", [conversation.steps_approved, config.max_steps]), "where": "context.step_number", "decision": "deny"} if {
	input.facts.conversation
	conversation.steps_approved >= config.max_steps
}

reasons contains {"code": "LOOP-002", "rule": "step_replay", "message": sprintf("step %d replayed: step %d is already committed", [step, conversation.last_step]), "where": "context.step_number", "decision": "deny"} if {
	input.facts.conversation
	step <= conversation.last_step
}

reasons contains {"code": "LOOP-003", "rule": "repeated_action", "message": "the same action was approved twice in a row; a third is a loop", "where": "action", "decision": "deny"} if {
	input.facts.conversation
	n := count(conversation.recent)
	n >= 2
	conversation.recent[n - 1] == conversation.fingerprint
	conversation.recent[n - 2] == conversation.fingerprint
}

reasons contains {"code": "LOOP-004", "rule": "no_progress", "message": sprintf("the same action on unchanged state %q for the third time in the last %d steps", [input.context.pre_action_state_hash, config.loop_window]), "where": "context.pre_action_state_hash", "decision": "deny"} if {
	input.facts.conversation
	input.context.pre_action_state_hash
	n := count(conversation.recent)
	window := array.slice(conversation.recent, n - config.loop_window, n)
	count([f | some f in window; f == conversation.fingerprint]) >= 2
}

reasons contains {"code": "LOOP-005", "rule": "step_in_flight", "message": sprintf("step %d is already being decided for this conversation", [step]), "where": "context.step_number", "decision": "deny"} if {
	input.facts.conversation
	conversation.reserved
}

agent_facts := input.facts.agent

reasons contains {"code": "AGENT-001", "rule": "revoked_agent", "message": sprintf("agent %q is revoked", [input.agent.id]), "where": "agent.id", "decision": "deny"} if {
	input.facts.agent
	agent_facts.revoked
}

reasons contains {"code": "AGENT-002", "rule": "unregistered_agent", "message": sprintf("agent %q is not registered and registration is required", [input.agent.id]), "where": "agent.id", "decision": "deny"} if {
	input.facts.agent
	agent_facts.token_required
	not agent_facts.registered
}

reasons contains {"code": "AGENT-003", "rule": "bad_token", "message": sprintf("agent %q presented a missing or wrong token", [input.agent.id]), "where": "agent.token", "decision": "deny"} if {
	input.facts.agent
	agent_facts.token_required
	agent_facts.registered
	not agent_facts.token_valid
}

budget := input.facts.budget

cost := object.get(input.action, "cost_usd", 0)

reasons contains {"code": "BUDGET-001", "rule": "daily_cost", "message": sprintf("daily cost budget exceeded: %.2f + %.2f USD over %.2f", [budget.cost_today_usd, cost, budget.max_daily_cost_usd]), "where": "action.cost_usd", "decision": "deny"} if {
	input.facts.budget
	budget.max_daily_cost_usd > 0
	budget.cost_today_usd + cost > budget.max_daily_cost_usd
}

reasons contains {"code": "BUDGET-002", "rule": "hourly_requests", "message": sprintf("hourly request budget exceeded: %d requests (max %d)", [budget.requests_last_hour, budget.max_requests_per_hour]), "where": "agent.id", "decision": "deny"} if {
	input.facts.budget
	budget.max_requests_per_hour > 0
	budget.requests_last_hour > budget.max_requests_per_hour
}
