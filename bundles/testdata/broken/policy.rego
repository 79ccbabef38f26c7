package toolgate.tier1

import rego.v1

decision := {"decision": "allow" if {
