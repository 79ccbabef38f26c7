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

# The danger texts are selected in Go by toolgate.inspect (see untrusted.rego),
# from the data above and the config: every string argument of a shell-like
# tool (a tool may run more than its "command" key) in its written and
# canonical forms (scope "command"); for file tools, the arguments whose name
# says they hold a path (config.path_key_parts: path, file_path, paths,
# target, destination...) in their category's path scope, and also as
# "read_path" (credential files count whatever a file tool does with them:
# copy, write, delete); and every argument of an outbound tool (scope
# "outbound").
danger_hits := facts.danger_hits

# A rule without a decision denies.
reasons contains {"code": m.code, "rule": m.name, "message": sprintf("%s in %s", [m.message, m.where]), "where": m.where, "decision": object.get(m, "decision", "deny")} if {
	some m in danger_hits
}
