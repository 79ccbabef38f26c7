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

# Every string argument of a shell-like tool is treated as a command (a tool
# may run more than its "command" key), in its written and canonical forms.
danger_texts contains {"where": a.where, "text": c, "scope": "command"} if {
	category in command_categories
	some a in texts.arguments
	some c in array.concat([a.text], toolgate.shell(a.text))
}

# path_argument: an argument of a file tool whose name says it holds a path
# (path, file_path, paths, target, destination...).
path_argument(a) if {
	some part in config.path_key_parts
	contains(lower(a.key), part)
}

danger_texts contains {"where": a.where, "text": a.text, "scope": scope} if {
	scope := path_scopes[category]
	some a in texts.arguments
	path_argument(a)
}

# Credential files count whatever a file tool does with them (copy, write,
# delete), not only when it reads them.
danger_texts contains {"where": a.where, "text": a.text, "scope": "read_path"} if {
	path_scopes[category] != "read_path"
	some a in texts.arguments
	path_argument(a)
}

danger_texts contains t if {
	category in outbound_categories
	some a in texts.arguments
	t := object.union(a, {"scope": "outbound"})
}

danger_hits := toolgate.match([t | some t in danger_texts], danger_rules)

# A rule without a decision denies.
reasons contains reason(m.code, m.name, sprintf("%s in %s", [m.message, m.where]), m.where, object.get(m, "decision", "deny")) if {
	some m in danger_hits
}
