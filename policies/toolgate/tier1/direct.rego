# Direct injection: the person talking to the agent types jailbreak language
# ("MODO DESARROLLADOR ACTIVADO", "ignore your previous instructions", a
# fake [SYSTEM] block, "from now on you are DevMode"). Whoever typed it is
# trying to talk the agent out of its rules, so what they ask for next is
# not taken on trust: a call above low risk escalates (DIRECT-001), with or
# without untrusted context, at every trust level. The system prompt is not
# the person's words and is not read here.
#
# The patterns that count (config.direct_codes) are the instruction
# overrides, role hijacks, jailbreak modes and fake system markers: none of
# them is how people ask for things. Patterns that are ordinary in a
# person's own request stay out: text written as the user ("send my
# files"), text addressed to the assistant, "use the X tool", a request to
# send something to an address.
#
# Concealment (patterns of class "concealment", PATTERN-070, 072, 074-076): the person
# asks that the call be kept from the people it concerns, from security,
# audit or the record ("don't tell her", "no ticket needed", "nobody audits
# these lookups", "off the books"). Legitimate work is not hidden from its
# overseers, so a call above low risk escalates (DIRECT-002) for a person
# to look at. These patterns target the scope "person": they are read in
# the person's own words only, never in tool output or arguments, where a
# surprise party's "don't tell her!" is ordinary mail.
#
# Misuse (patterns of class "misuse", PATTERN-073 and 077): the person says
# what the call is for, and the purpose is the harm: leaving for a competitor
# and taking the clients along, learning when someone is home or where an
# ex-partner who blocked them lives, making figures look normal for an
# audit, acting because legal or risk is slow or away, an approval claimed
# to have been given verbally, a signature lifted from another document,
# data sold per record, the author of an anonymous concern sought out,
# accounts made under someone else's name, "everyone does it". The call
# escalates (DIRECT-003) whatever its risk: a read serves the purpose as
# well as a write (where an ex who blocked the person lives is read, not
# changed). The patterns, like the concealment ones, are read in the
# person's own words only.
package toolgate.tier1

import rego.v1

reasons contains {"code": "DIRECT-001", "rule": "direct_injection", "message": sprintf("the person's own message carries jailbreak language (%s): %q is not taken on trust", [m.message, input.action.type]), "where": m.where, "decision": "escalate"} if {
	some m in facts.direct_hits
	not concealment(m)
	not misuse(m)
	risk != "low"
}

reasons contains {"code": "DIRECT-002", "rule": "concealment_asked", "message": sprintf("the person asks to keep %q from the people it concerns or from the record (%s)", [input.action.type, m.excerpt]), "where": m.where, "decision": "escalate"} if {
	some m in facts.direct_hits
	concealment(m)
	risk != "low"
}

reasons contains {"code": "DIRECT-003", "rule": "misuse_stated", "message": sprintf("the person states a purpose for %q that makes it misuse (%s)", [input.action.type, m.excerpt]), "where": m.where, "decision": "escalate"} if {
	some m in facts.direct_hits
	misuse(m)
}

concealment(m) if object.get(m, "class", "") == "concealment"

misuse(m) if object.get(m, "class", "") == "misuse"
