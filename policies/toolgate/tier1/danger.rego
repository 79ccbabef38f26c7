# Dangerous commands and file operations: a person decides (pending) or the
# call is denied, at every trust level and with or without untrusted context
# (an injection may have arrived before the verifier could see it). Shell
# commands are normalised first (quotes, escapes, ${IFS}, flag spellings,
# wrappers, nested sh -c) by the toolgate.shell builtin.
package toolgate.tier1

import rego.v1

danger_rules := data.toolgate.danger.rules

command_categories := {"shell", "code"}

path_scopes := {
	"read": "read_path",
	"search": "read_path",
	"write": "write_path",
	"vcs": "write_path",
	"delete": "delete_path",
}

outbound_categories := {"network", "exfil", "communication"}

# argument_strings yields [key, string] for the named argument, a string or
# an array of strings.
argument_strings(keys) := {[k, s] |
	some k in keys
	v := input.action.arguments[k]
	some s in strings_of(v)
}

strings_of(v) := [v] if is_string(v)

strings_of(v) := [s | some s in v; is_string(s)] if is_array(v)

danger_texts contains {"where": sprintf("action.arguments.%s", [k]), "text": c, "scope": "command"} if {
	category in command_categories
	some [k, cmd] in argument_strings(config.command_keys)
	some c in array.concat([cmd], toolgate.shell(cmd))
}

danger_texts contains {"where": sprintf("action.arguments.%s", [k]), "text": p, "scope": scope} if {
	scope := path_scopes[category]
	some [k, p] in argument_strings(config.path_keys)
}

danger_texts contains t if {
	category in outbound_categories
	some a in texts.arguments
	t := object.union(a, {"scope": "outbound"})
}

danger_hits := toolgate.match([t | some t in danger_texts], danger_rules)

danger_outcome := {r.code: r.decision | some r in danger_rules}

reasons contains reason(m.code, m.name, sprintf("%s in %s", [m.message, m.where]), m.where, object.get(danger_outcome, m.code, "deny")) if {
	some m in danger_hits
}
