package schema

// Facts are what the engine knows beyond the request: read from state before
// evaluation and given to the policy as input.facts, so the rules stay pure.
// A nil section means that control has no state behind it; its name is then
// listed in NotApplied and the policy says so in the decision.
type Facts struct {
	Agent        *AgentFacts        `json:"agent,omitempty"`
	Conversation *ConversationFacts `json:"conversation,omitempty"`
	Budget       *BudgetFacts       `json:"budget,omitempty"`
	NotApplied   []string           `json:"not_applied,omitempty"`
}

// AgentFacts describe a registered agent.
type AgentFacts struct {
	Registered   bool        `json:"registered"`
	Revoked      bool        `json:"revoked,omitempty"`
	TrustLevel   *TrustLevel `json:"trust_level,omitempty"`
	AllowedTools []string    `json:"allowed_tools,omitempty"`
	BlockedTools []string    `json:"blocked_tools,omitempty"`
	// TokenRequired is set when registration is required; TokenValid says
	// whether the request's token matched.
	TokenRequired bool `json:"token_required,omitempty"`
	TokenValid    bool `json:"token_valid,omitempty"`
}

// ConversationFacts describe the conversation's approved history.
type ConversationFacts struct {
	// StepsApproved counts the steps consumed so far.
	StepsApproved int `json:"steps_approved"`
	// LastStep is the highest committed step number (0 when none).
	LastStep int `json:"last_step"`
	// Fingerprint is this request's action fingerprint.
	Fingerprint string `json:"fingerprint"`
	// Recent holds the fingerprints of the last approved steps, oldest
	// first, at most 20.
	Recent []string `json:"recent"`
	// Reserved is set when another request holds this step in flight.
	Reserved bool `json:"reserved,omitempty"`
}

// BudgetFacts describe an agent's spending against its limits. A zero limit
// means no limit.
type BudgetFacts struct {
	RequestsLastHour   int     `json:"requests_last_hour"`
	MaxRequestsPerHour int     `json:"max_requests_per_hour,omitempty"`
	CostTodayUSD       float64 `json:"cost_today_usd"`
	MaxDailyCostUSD    float64 `json:"max_daily_cost_usd,omitempty"`
}
