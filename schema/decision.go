package schema

// Outcome is what a tier decided about a call.
type Outcome string

// The four outcomes. Precedence when rules disagree (decided by the policy):
// deny > pending > escalate > allow.
const (
	Allow    Outcome = "allow"
	Deny     Outcome = "deny"
	Escalate Outcome = "escalate"
	Pending  Outcome = "pending"
)

// Valid reports whether o is one of the four outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case Allow, Deny, Escalate, Pending:
		return true
	}
	return false
}

// Reason is one rule's finding. Code is stable (see the README's table);
// Where is the input path the rule matched, when it matched one.
type Reason struct {
	Code    string  `json:"code"`
	Rule    string  `json:"rule"`
	Message string  `json:"message"`
	Where   string  `json:"where,omitempty"`
	Outcome Outcome `json:"decision,omitempty"`
}

// Policy names the bundle that decided.
type Policy struct {
	Bundle   string `json:"bundle"`
	Revision string `json:"revision,omitempty"`
}

// Decision is Tier 1's answer.
type Decision struct {
	Outcome Outcome `json:"decision"`
	Risk    string  `json:"risk,omitempty"`
	// Category is the tool's category from the registry (shell, write...).
	Category string   `json:"category,omitempty"`
	Tier     int      `json:"tier"`
	Reasons  []Reason `json:"reasons"`
	Policy   Policy   `json:"policy"`
	// NotApplied lists the controls that could not be applied because no
	// state was available (for example "conversation", "budget").
	NotApplied []string `json:"not_applied,omitempty"`
	// BudgetExceeded is set when a budget rule denied the call.
	BudgetExceeded bool `json:"budget_exceeded,omitempty"`
}

// Codes returns the reason codes in order.
func (d *Decision) Codes() []string {
	out := make([]string, len(d.Reasons))
	for i, r := range d.Reasons {
		out[i] = r.Code
	}
	return out
}

// HasCode reports whether any reason carries code.
func (d *Decision) HasCode(code string) bool {
	for _, r := range d.Reasons {
		if r.Code == code {
			return true
		}
	}
	return false
}
