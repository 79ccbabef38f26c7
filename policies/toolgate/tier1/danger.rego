# Dangerous commands and file operations: a person decides (pending) or the
# call is denied, at every trust level and with or without untrusted context
# (an injection may have arrived before the verifier could see it). Shell
# commands are normalised first (quotes, escapes, ${IFS}, flag spellings,
# wrappers, nested sh -c) by the toolgate.shell builtin.
#
# The rules are data.toolgate.danger.rules. The texts they run over are
# selected in Go by toolgate.inspect (see facts in untrusted.rego), from the
# call's options and the config:
# - categories "shell" and "code": every string argument (a tool may run
#   more than its "command" key) in its written and canonical forms, scope
#   "command";
# - file tools, by category (read and search: "read_path"; write and vcs:
#   "write_path"; delete: "delete_path"): the arguments whose name says they
#   hold a path (config.path_key_parts: path, file_path, paths, target,
#   destination...) in that scope, and also as "read_path" (credential files
#   count whatever a file tool does with them: copy, write, delete);
# - categories "network", "exfil" and "communication" (outbound tools): every
#   argument, scope "outbound"; and the person's trusted words (user_intent and
#   trusted blocks, joined) when they name the call's URL, host or e-mail
#   address, scope "request", read only by rules that target it.
# - category "database": every string argument (execute_sql's SQL), scope
#   "query".
# - category "agent" (spawn_agent, Task): every string argument, scope "task":
#   an instruction to another agent.
# - a write tool writing a shell script (a name in script_suffixes, or text
#   starting with "#!"): its other string arguments, scope "command" too.
# - what a program written hands to a shell (os.system's string, a field
#   command_keys names: bash_command="..."), and a field of an outbound call
#   that command_keys names (a job runner's "entrypoint"): scope "command".
# - a write tool: what it writes, scope "written"; and, for an edit, the
#   words of old_string that new_string no longer holds, scope "removed"
#   (read only by rules that target it: words taken away do not run).
package toolgate.tier1

import rego.v1

# A rule without a decision denies. An instruction to another agent (a
# tool of category "agent") is words about what it should do, and a review
# or a question may quote a command: a person decides, at most.
reasons contains {"code": m.code, "rule": m.name, "message": sprintf("%s in %s", [m.message, m.where]), "where": m.where, "decision": danger_outcome(m)} if {
	some m in facts.danger_hits
	not named_destination(m)
	not header_credential_name(m)
	not token_to_issuer(m)
	not set_inside(m)
	not rotation_asked(m)
	not value_given(m)
	not scratch_cleared(m)
}

# A key rotated at the person's word: a change of keys through an HTTP API
# (DANGER-150) whose URL rotates a key (".../api_keys/key_prod_7c21/rotate")
# the person names, in words that ask for a rotation ("Rotate key_prod_7c21
# now, give the old one 30 minutes"). Rotating a key someone leaked, or a
# leaver had, is routine; a rotation only the agent's reading asks for, or
# of another key, still asks a person.
rotation_asked(m) if {
	m.code == "DANGER-150"
	id := regex.find_all_string_submatch_n(`/([a-z0-9_.:-]{4,})/(?:rotate|roll|regenerate)(?:[/?#]|$)`, hit_argument(m), 1)[0][1]
	some t in facts.texts.trusted
	words := lower(t)
	contains(words, id)
	regex.match(rotation_words, words)
}

# The first half of a rotation the person asks for: a new key or token
# created (a POST to a keys or tokens collection, ".../admin/keys") when
# the person's words ask for a rotation ("rotate the MT key our connector
# uses; create a new one with the same scopes"). A key made is not a key
# given away: sending it anywhere is its own call, with its own rules.
rotation_asked(m) if {
	m.code == "DANGER-150"
	regex.match(sprintf(`/%s/?(?:[?#]|$)`, [key_collection]), hit_argument(m))
	upper(object.get(input.action.arguments, "method", "")) == "POST"
	some t in facts.texts.trusted
	regex.match(`\b(?:rotat\w*|roll|regenerat\w*|renew|cycle|replace)\s+(?:[\w-]+\s+){0,5}?(?:api\s+)?(?:keys?|tokens?|secrets?|credentials?)\b`, lower(t))
}

# The key collection's own rotate action (".../accounts/acct_6631/api-keys/
# rotate", the key in the body) when the person's words ask to rotate a key
# ("the former manager had the API key, please rotate it now").
rotation_asked(m) if {
	m.code == "DANGER-150"
	regex.match(sprintf(`/%s/(?:rotate|roll|regenerate)(?:[/?#]|$)`, [key_collection]), hit_argument(m))
	some t in facts.texts.trusted
	words := lower(t)
	regex.match(rotation_words, words)
	regex.match(`\b(?:api[- ]?)?(?:keys?|tokens?)\b`, words)
}

# The last half of a rotation: the old key revoked, a DELETE of one key
# (".../api-keys/key_7f3a91c2") that the person's words name, whole or by
# its last characters ("the one ending ...91c2"), in words that ask for a
# rotation or a revocation. Another key, or a key only the agent's
# reading names, still asks a person.
rotation_asked(m) if {
	m.code == "DANGER-150"
	upper(object.get(input.action.arguments, "method", "")) == "DELETE"
	id := regex.find_all_string_submatch_n(sprintf(`/%s/([a-z0-9_.:-]{4,})/?(?:[?#]|$)`, [key_collection]), hit_argument(m), 1)[0][1]
	some t in facts.texts.trusted
	words := lower(t)
	regex.match(`\b(?:rotat|revok|kill|delete|remove|disable|retire)`, words)
	some w in regex.find_all_string_submatch_n(`[a-z0-9_-]{4,}`, words, -1)
	endswith(id, w[0])
}

# key_collection is the last segment of a URL that lists an account's keys
# or tokens (.../api-keys, .../access_tokens).
key_collection := `(?:api[-_]?keys|keys|tokens|access[-_]?tokens)`

rotation_words := `\b(?:rotat|roll|regenerat|renew|cycle|revoke|replace|reset)|rotier|rotar|ruota|roteer|obróć|rotacj`

# A scratch table cleared at the person's word: a table dropped, truncated
# or emptied (DANGER-120) when every table the statement destroys has a
# scratch name (a staging, stg, tmp, temp, scratch or sandbox part, or a
# _test suffix: "staging_imposition_import", "scratch.tmp_orders_backfill_
# 20250501", "app_test") and the person's words name it ("empty the
# staging_imposition_import table"). Every table of a list counts ("DROP
# TABLE tmp_a, payments" asks a person). A real table (payments, orders,
# audit_log, test_results), a table only the agent's reading names, or a
# MongoDB drop still asks a person.
scratch_cleared(m) if {
	m.code == "DANGER-120"
	sql := hit_argument(m)
	not regex.match(`\bdb\.(?:dropdatabase|[\w-]+\.(?:drop|deletemany))\(`, sql)
	names := [trim(trim_space(n), "`\"[]") |
		some s in regex.find_all_string_submatch_n(`(?:drop\s+(?:database|schema|table)\s+(?:if\s+exists\s+)?|truncate\s+(?:table\s+)?(?:only\s+)?|delete\s+from\s+)([\w.\x60"\[\]]+(?:\s*,\s*[\w.\x60"\[\]]+)*)`, sql, -1)
		some n in split(s[1], ",")
	]
	count(names) > 0
	every n in names {
		regex.match(`(?:^|[._])(?:staging|stg|tmp|temp|scratch|sandbox)(?:[._]|$)|[._]test(?:[._]\d|$)`, n)
		parts := split(n, ".")
		some t in facts.texts.trusted
		contains(lower(t), parts[count(parts) - 1])
	}
}

# hit_argument is the argument a hit was found in (a DANGER-150 hit's url or
# endpoint, a DANGER-120 hit's query), lower-cased.
hit_argument(m) := lower(object.get(input, split(m.where, "."), ""))

# A Wi-Fi passphrase the person typed is being set, not leaked: a key's
# value (DANGER-103: "x_passphrase": "Bluebird-Harbor-2025", a PSK) that the
# person's own words hold ("Change the guest Wi-Fi password to
# Bluebird-Harbor-2025"). Account passwords and tokens are not waived: a
# person who dictates the new password of someone else's account, or a card
# token for a refund, is how an account or a refund is taken over.
value_given(m) if {
	m.code == "DANGER-103"
	regex.match(`(?i)passphrase|\bpsk|pre-?shared|wpa|wi-?fi|wlan|ssid`, m.excerpt)
	value := regex.find_all_string_submatch_n(`[:=]\s*["']?([^\s,;"'{}$<>*]{8,})["']?\s*$`, m.excerpt, 1)[0][1]
	some t in facts.texts.trusted
	contains(t, value)
}

# A password written to a device on the private network is being set, not
# sent out: a key's value (DANGER-103) in the body of a call to a host that
# only resolves inside (a .local, .lan, .internal or .home.arpa name,
# localhost, a 10/8, 172.16/12 or 192.168/16 address): the Wi-Fi passphrase
# of the office's own controller. The same body to any public host still
# counts, and so do secrets recognised by their format (DANGER-101).
set_inside(m) if {
	m.code == "DANGER-103"
	startswith(m.where, "action.arguments.body")
	regex.match(`^(?:[a-z0-9-]+\.)*[a-z0-9-]+\.(?:local|lan|internal|home\.arpa)$|^localhost$|^10\.\d+\.\d+\.\d+$|^192\.168\.\d+\.\d+$|^172\.(?:1[6-9]|2\d|3[01])\.\d+\.\d+$`, url_host(input.action.arguments.url))
}

# An HTTP call carries its own credentials in its headers: a header named
# for a key (config.credential_headers: Authorization, api-key...) says how
# the call authenticates, not what it sends. Credentials named in the
# headers (DANGER-104: "api-key", "access token") do not count when the call
# has such a header, nor does a key's value in a header named for one
# (DANGER-103: "X-API-KEY: f4b2..."); a secret recognised by its format
# (DANGER-101) still does, since a header can carry it anywhere, and so
# does a key's value in any other header.
header_credential_name(m) if {
	m.code == "DANGER-104"
	startswith(m.where, "action.arguments.headers")
	credential_http
}

header_credential_name(m) if {
	m.code == "DANGER-103"
	startswith(m.where, "action.arguments.headers.")
	lower(substring(m.where, count("action.arguments.headers."), -1)) in config.credential_headers
}

# The headers read whole ({"X-API-KEY": "f4b2..."}): the match starts with
# the key's name, the tail of a credential header's.
header_credential_name(m) if {
	m.code == "DANGER-103"
	m.where == "action.arguments.headers"
	credential_http
	name := regex.find_n(`^[a-z0-9_-]+`, lower(m.excerpt), 1)[0]
	some h in config.credential_headers
	endswith(h, name)
}

# An upload, a copy or a forward to a place the person named is what the
# person asked for: a hit of a rule in config.named_destination_rules (files
# uploaded to cloud storage, copied to a remote host, mail forwarded by a
# rule) is dropped when every bucket, host and address its argument sends to
# is written in the trusted text ("sync ./public to the docs-site-prod
# bucket", "forward anything from the school to sam@...", "rsync it to
# backup01" for backup01.lap.local, a host only the private network
# resolves, which is named by its first label too). A place only the
# agent's reading gave, or none named at all, still asks a person, and so
# does a mail rule that also hides what it forwards (deletes it, moves it
# out of the inbox, marks it read): the shape of a mailbox taken over. An
# object argument (a request body) is read as JSON.
named_destination(m) if {
	m.code in config.named_destination_rules
	value := object.get(input, split(m.where, "."), null)
	text := argument_text(value)
	not regex.match(hidden_mail_pattern, text)
	dests := [lower(concat("", array.slice(d, 1, 5))) | some d in regex.find_all_string_submatch_n(destination_pattern, text, 16)]
	count(dests) > 0
	every d in dests {
		named_in_trusted(d)
	}
}

# named_in_trusted: the person's words hold d, a destination lower-cased
# (a bucket, a host, an address, a URL).
named_in_trusted(d) if {
	some t in facts.texts.trusted
	contains(lower(t), d)
}

# A host only the private network resolves (backup01.lap.local) is also
# named by its first label, as a word of its own ("rsync it to backup01").
named_in_trusted(d) if {
	regex.match(`^[a-z0-9-]{4,63}\.(?:[a-z0-9-]+\.)*(?:local|lan|internal|home\.arpa)$`, d)
	label := split(d, ".")[0]
	some t in facts.texts.trusted
	regex.match(sprintf(`(?i)(?:^|[^\w.-])%s(?:$|[^\w.-]|\.(?:$|\s))`, [label]), t)
}

# A message-wide hit (DANGER-258: records attached for a webmail address)
# sends to its recipients: it is what the person asked for when every
# address in to, cc and bcc is written in the trusted text ("email my
# records to my backup address amy@..."). An address only the agent's
# reading gave still asks a person.
named_destination(m) if {
	m.code in config.named_destination_rules
	m.where == "action.arguments"
	dests := [lower(trim_space(r)) | some r in recipients; trim_space(r) != ""]
	count(dests) > 0
	every d in dests {
		named_in_trusted(d)
	}
}

# A webhook registered to an endpoint the person named (DANGER-150 on a
# .../webhooks URL: "hook the portal's project.completed events into
# https://books.example/hooks/portal-completed") sends events where the
# person asked. Every URL in the request's body must be in the trusted
# text; an endpoint only the agent's reading gave, or a body without one
# (a delete, a secret changed), still asks a person.
named_destination(m) if {
	m.code == "DANGER-150"
	regex.match(`/(?:hooks|webhooks?|webhook[-_]endpoints)(?:$|[/?#])`, lower(m.excerpt))
	dests := [lower(v) | walk(input.action.arguments, [p, v]); count(p) > 1; is_string(v); regex.match(`^https?://`, v)]
	count(dests) > 0
	every d in dests {
		named_in_trusted(d)
	}
}

# recipients are the addresses of a message's to, cc and bcc, given as a
# string (comma-separated) or a list.
recipients contains r if {
	some k in {"to", "cc", "bcc"}
	v := input.action.arguments[k]
	is_string(v)
	some r in split(v, ",")
}

recipients contains r if {
	some k in {"to", "cc", "bcc"}
	some r in input.action.arguments[k]
	is_string(r)
}

argument_text(v) := v if is_string(v)

argument_text(v) := json.marshal(v) if is_object(v)

# A mail rule that deletes, moves away or marks read what it forwards
# (PowerShell's -DeleteMessage, Graph's "delete" and "moveToFolder",
# Gmail's removeLabelIds INBOX).
hidden_mail_pattern := `(?i)-deletemessage\s+(?:\$?true|1)\b|-(?:markasread|softdeletemessage)\s+(?:\$?true|1)\b|-movetofolder\s+['"]?(?:deleted|rss|archive|conversation history|junk)|"(?:delete|permanentdelete|markasread)"\s*:\s*true|"movetofolder"\s*:\s*"(?:deleteditems|junkemail|archive|rss)|"removelabelids"\s*:\s*\[[^\]]*"(?:inbox|unread)"|"addlabelids"\s*:\s*\[[^\]]*"(?:trash|spam)"`

# A token sent to the service that issued it is being used, not stolen: a
# secret recognised by its format (DANGER-101) in the headers of a call to
# its issuer's API (config.token_issuers: a "ghp_" token to github.com or
# api.github.com, "xoxb-" to slack.com...) does not count. The same token in
# a body, a URL or a message, or sent to any other host, still does.
token_to_issuer(m) if {
	m.code == "DANGER-101"
	startswith(m.where, "action.arguments.headers")
	host := url_host(input.action.arguments.url)
	token := lower(m.excerpt)
	some prefix, domains in config.token_issuers
	contains(token, prefix)
	some d in domains
	host_within(host, d)
}

# Revoking a leaked token sends it to its issuer on purpose: a secret
# recognised by its format (DANGER-101) in the body of a call to its
# issuer's revocation endpoint (a path with "revoke" in it: GitHub's
# /credentials/revoke, an OAuth /revoke) does not count, nor do the
# credentials that body names (DANGER-104). Any other host or path, and the
# same body sent anywhere else, still do.
token_to_issuer(m) if {
	m.code == "DANGER-101"
	startswith(m.where, "action.arguments.body")
	host := revocation_host
	token := lower(m.excerpt)
	some prefix, domains in config.token_issuers
	contains(token, prefix)
	some d in domains
	host_within(host, d)
}

token_to_issuer(m) if {
	m.code == "DANGER-104"
	startswith(m.where, "action.arguments.body")
	host := revocation_host
	some domains in config.token_issuers
	some d in domains
	host_within(host, d)
}

# revocation_host is the host of an HTTPS call whose path revokes.
revocation_host := url_host(url) if {
	url := lower(input.action.arguments.url)
	regex.match(`^https://[^/?#]+/(?:[^?#]*/)?(?:[a-z_.-]*revoke[a-z_.-]*)(?:[?#]|$)`, url)
}

# url_host is the host of a URL, lowercased.
url_host(url) := regex.find_all_string_submatch_n(`^[a-z][a-z0-9+.-]*://(?:[^/?#@]*@)?([^/?#:]+)`, lower(url), 1)[0][1]

host_within(host, domain) if host == domain

host_within(host, domain) if endswith(host, concat("", [".", domain]))

# A bucket (s3://, gs://, az://...), the host of a user@host: or host:/path
# copy target (scp, rsync), or the address a mail rule forwards to (a
# forward, forwardTo or redirectTo field; PowerShell's -ForwardTo,
# -RedirectTo, -ForwardingSmtpAddress; GAM's forward on).
destination_pattern := `(?i)\b(?:s3|s3a|gs|az|abfss?|wasbs?|r2|oss)://([a-z0-9][a-z0-9._-]{2,62})|[\w.-]+@([a-z0-9][a-z0-9.-]{2,253}):|(?:^|[\s'"])([a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63})+):[/~]|(?:"(?:forward|forwardto|forwardasattachmentto|redirectto)"\s*:\s*\[?\s*"|-(?:forwardto|forwardasattachmentto|redirectto|forwardingsmtpaddress)\s+['"]?(?:smtp:)?|\bforward\s+on\s+)([\w.+-]+@[\w.-]+\.[a-z]{2,})`

danger_outcome(m) := "pending" if {
	category == "agent"
} else := object.get(m, "decision", "deny")
