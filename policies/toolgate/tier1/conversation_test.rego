package toolgate.tier1_test

import rego.v1

import data.toolgate.tier1

conv(steps, last, fp, recent) := {"conversation": {"steps_approved": steps, "last_step": last, "fingerprint": fp, "recent": recent}}

calc := req("trusted", "calculate", {"query": "2+2"}, [])

test_first_step_allowed if {
	d := tier1.decision with input as with_facts(calc, conv(0, 0, "f1", []))
	d.decision == "allow"
}

test_step_limit if {
	d := tier1.decision with input as with_facts(calc, conv(50, 2, "f1", []))
	"LOOP-001" in codes(d)
	d.decision == "deny"
}

test_step_limit_from_config if {
	d := tier1.decision with input as with_facts(calc, conv(5, 2, "f1", []))
		with data.toolgate.config.max_steps as 5
	"LOOP-001" in codes(d)
}

test_replay if {
	d := tier1.decision with input as with_facts(calc, conv(3, 3, "f1", ["a", "b", "c"]))
	"LOOP-002" in codes(d)
}

test_third_repeat_denied if {
	d := tier1.decision with input as with_facts(calc, conv(2, 2, "f1", ["f1", "f1"]))
	"LOOP-003" in codes(d)
	d.decision == "deny"
}

test_second_repeat_allowed if {
	d := tier1.decision with input as with_facts(calc, conv(1, 2, "f1", ["f0", "f1"]))
	not "LOOP-003" in codes(d)
	d.decision == "allow"
}

test_null_recent_is_no_history if {
	f := {"conversation": {"steps_approved": 1, "last_step": 1, "fingerprint": "f1", "recent": null}}
	d := tier1.decision with input as with_facts(with_state_hash(calc), f)
	d.decision == "allow"
	not "LOOP-003" in codes(d)
	not "LOOP-004" in codes(d)
}

with_state_hash(r) := json.patch(r, [
	{"op": "add", "path": "/context/pre_action_state_hash", "value": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
	{"op": "add", "path": "/context/state_source", "value": "git_tree"},
])

test_no_progress_loop if {
	d := tier1.decision with input as with_facts(with_state_hash(calc), conv(4, 2, "fs", ["fs", "x", "fs", "y"]))
	"LOOP-004" in codes(d)
	not "LOOP-003" in codes(d)
}

test_no_progress_outside_window if {
	recent := array.concat(["fs", "fs"], [sprintf("x%d", [i]) | some i in numbers.range(1, 19)])
	d := tier1.decision with input as with_facts(with_state_hash(calc), conv(21, 2, "fs", recent))
	not "LOOP-004" in codes(d)
}

test_no_progress_needs_state_hash if {
	d := tier1.decision with input as with_facts(calc, conv(4, 2, "fs", ["fs", "x", "fs", "y"]))
	not "LOOP-004" in codes(d)
}

test_step_in_flight if {
	f := {"conversation": {"steps_approved": 0, "last_step": 0, "fingerprint": "f", "recent": [], "reserved": true}}
	d := tier1.decision with input as with_facts(calc, f)
	"LOOP-005" in codes(d)
}

test_revoked_agent if {
	d := tier1.decision with input as with_facts(calc, {"agent": {"registered": true, "revoked": true, "trust_level": "trusted"}})
	"AGENT-001" in codes(d)
	d.decision == "deny"
}

test_unregistered_when_required if {
	d := tier1.decision with input as with_facts(calc, {"agent": {"registered": false, "token_required": true}})
	"AGENT-002" in codes(d)
}

test_bad_token if {
	d := tier1.decision with input as with_facts(calc, {"agent": {"registered": true, "trust_level": "trusted", "token_required": true, "token_valid": false}})
	"AGENT-003" in codes(d)
}

test_good_token if {
	d := tier1.decision with input as with_facts(calc, {"agent": {"registered": true, "trust_level": "trusted", "token_required": true, "token_valid": true}})
	d.decision == "allow"
}

test_daily_cost_budget if {
	r := json.patch(calc, [{"op": "add", "path": "/action/cost_usd", "value": 2}])
	d := tier1.decision with input as with_facts(r, {"budget": {"cost_today_usd": 9, "max_daily_cost_usd": 10, "requests_last_hour": 1}})
	"BUDGET-001" in codes(d)
	d.decision == "deny"
}

test_daily_cost_within if {
	d := tier1.decision with input as with_facts(calc, {"budget": {"cost_today_usd": 9, "max_daily_cost_usd": 10, "requests_last_hour": 1}})
	not "BUDGET-001" in codes(d)
	d.decision == "allow"
}

test_hourly_requests if {
	d := tier1.decision with input as with_facts(calc, {"budget": {"cost_today_usd": 0, "requests_last_hour": 11, "max_requests_per_hour": 10}})
	"BUDGET-002" in codes(d)
}

test_not_applied_reported if {
	d := tier1.decision with input as calc
	d.not_applied == ["agent", "conversation", "budget"]
}
