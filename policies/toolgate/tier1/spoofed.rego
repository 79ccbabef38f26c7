# Disguised control arguments: a path, recipient, URL or command written with
# zero-width or bidi control characters, or with a word mixing Latin letters
# and Cyrillic or Greek look-alikes ("сonfig.yaml", "invoice\u202etxt.exe"),
# acts on something other than what a reader sees. It escalates for every
# tool, at every trust level, with or without untrusted context
# (facts.spoofed_arguments: ENCODED-007..011 over the arguments whose key is
# not a payload key, ENCODED-004 there for a token that percent-encodes
# letters, "cmd=%73%65%74" for "cmd=set", and ENCODED-006 there and in what a
# write tool writes for a token that spells letters or digits in backslash
# escapes, "\u0061\u006c\u0061\u0072\u006d" for "alarm"; ENCODED-001 and 003
# there for a URL query value that decodes to data, "d=UGlvdHIgTm93YWss..."
# for "Piotr Nowak,+48 601..."; over what a write tool writes, ENCODED-008
# when it holds bidi overrides or isolates, code that reads otherwise than
# it runs, and ENCODED-009 for a look-alike word inside an e-mail address,
# URL or domain).
# When a scrutinized tool has untrusted context in view, the encoded-content
# rule of untrusted.rego reports them already.
package toolgate.tier1

import rego.v1

reasons contains {"code": f.code, "rule": "spoofed_argument", "message": sprintf("%s: the argument is not what it looks like", [f.message]), "where": f.where, "decision": "escalate"} if {
	some f in facts.spoofed_arguments
	not injection_concern
}
