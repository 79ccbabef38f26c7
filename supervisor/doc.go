// Package supervisor is Tier 3: a capable model that reviews what the earlier
// tiers could not settle, and the human approvals queue. The model (Model)
// reads the decision trail (Tier 1's reasons, the triage outcome), the user's
// intent and the context, and answers CONTINUE (allow), REORIENT (deny, with
// guidance for the agent) or PAUSE (a person decides); any failure is a
// PAUSE, never an allow. Human approvals hand a paused call to a person and
// wait for the first answer. The package owns these verdicts; it must not
// evaluate Rego, call triage, or write state or the audit log itself.
package supervisor
