// Package toolgate decides, before an AI agent runs a tool, whether the call
// may run. Tier 1 is Rego evaluated by embedded OPA (package engine); what the
// rules cannot settle goes to a cheap model (triage), a capable model
// (supervisor) and a person (approvals); every final verdict is written to a
// signed, hash-chained audit log.
//
// The wire types live in package schema and are re-exported here, so library
// users import only toolgate.
package toolgate

import "github.com/toolgate/toolgate/schema"

// Version is toolgate's version, set at build time with
// -ldflags "-X github.com/toolgate/toolgate.Version=v1.2.3".
var Version = "dev"

// The wire types, re-exported from package schema.
type (
	Request      = schema.Request
	Agent        = schema.Agent
	Action       = schema.Action
	Context      = schema.Context
	Block        = schema.Block
	TrustLevel   = schema.TrustLevel
	Decision     = schema.Decision
	Reason       = schema.Reason
	Outcome      = schema.Outcome
	Facts        = schema.Facts
	RequestError = schema.RequestError
)

// The four outcomes.
const (
	Allow    = schema.Allow
	Deny     = schema.Deny
	Escalate = schema.Escalate
	Pending  = schema.Pending
)

// DecodeRequest reads and validates one JSON request.
var DecodeRequest = schema.DecodeRequest
