package elsewhere

import rego.v1

x := 1
