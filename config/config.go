// Package config reads toolgate.yaml: every key optional with a safe default,
// unknown keys rejected by name, secrets only named (environment variables),
// never stored in the file. It owns no state and talks to no service.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Example is a commented toolgate.yaml with every key (`toolgate config
// example`). It parses: a test checks it.
//
//go:embed example.yaml
var Example string

// Config is the whole file. The zero value of a section means its defaults.
type Config struct {
	Policy       Policy       `yaml:"policy"`
	State        State        `yaml:"state"`
	Agents       Agents       `yaml:"agents"`
	Conversation Conversation `yaml:"conversation"`
	Triage       *Triage      `yaml:"triage"`
	Supervisor   *Supervisor  `yaml:"supervisor"`
	Approvals    Approvals    `yaml:"approvals"`
	Audit        Audit        `yaml:"audit"`
	dir          string       // the file's directory; relative paths resolve against it
}

// Policy chooses and extends the Tier 1 bundle.
type Policy struct {
	// Bundle is a directory, a .tar.gz or an http(s) URL; empty means the
	// embedded default bundle.
	Bundle string `yaml:"bundle"`
	// VerificationKey is a PEM public key; when set, the bundle must carry a
	// valid signature or it is refused.
	VerificationKey string `yaml:"verification_key"`
	// PollSeconds is how often a URL bundle is polled (default 60).
	PollSeconds             int      `yaml:"poll_seconds"`
	AdditionalPatterns      []string `yaml:"additional_patterns"`
	AdditionalHighRiskTools []string `yaml:"additional_high_risk_tools"`
	// Data are extra JSON data files merged over the bundle's data.
	Data []string `yaml:"data"`
	// AllowedTools and BlockedTools per agent id, for agents not registered
	// in state.
	AgentTools map[string]AgentTools `yaml:"agent_tools"`
}

// AgentTools are per-agent tool permissions.
type AgentTools struct {
	Allowed []string `yaml:"allowed"`
	Blocked []string `yaml:"blocked"`
}

// State chooses the SQLite file.
type State struct {
	Path string `yaml:"path"`
}

// Agents controls registration.
type Agents struct {
	// RequireRegistration, when nil, defaults to false for eval and true
	// under serve.
	RequireRegistration *bool `yaml:"require_registration"`
}

// Conversation controls.
type Conversation struct {
	MaxSteps int `yaml:"max_steps"`
}

// Triage configures Tier 2. Absent: escalations stay escalate.
type Triage struct {
	BaseURL             string   `yaml:"base_url"`
	Model               string   `yaml:"model"`
	APIKeyEnv           string   `yaml:"api_key_env"`
	ConfidenceThreshold float64  `yaml:"confidence_threshold"`
	MaxProbesPerTurn    int      `yaml:"max_probes_per_turn"`
	ProbeTimeoutMS      int      `yaml:"probe_timeout_ms"`
	OnTimeout           string   `yaml:"on_timeout"`
	AlwaysProbe         []string `yaml:"always_probe"`
}

// Supervisor configures the Tier 3 model. Absent: escalations go to approvals.
type Supervisor struct {
	BaseURL   string `yaml:"base_url"`
	Model     string `yaml:"model"`
	APIKeyEnv string `yaml:"api_key_env"`
	TimeoutMS int    `yaml:"timeout_ms"`
	Paranoid  bool   `yaml:"paranoid"`
}

// Approvals configures Tier 3 human approval.
type Approvals struct {
	TimeoutSeconds int     `yaml:"timeout_seconds"`
	MaxPerHour     int     `yaml:"max_per_hour"`
	Webhook        Webhook `yaml:"webhook"`
}

// Webhook is the approval notifier.
type Webhook struct {
	URL       string `yaml:"url"`
	SecretEnv string `yaml:"secret_env"`
}

// Audit configures the signed log.
type Audit struct {
	SigningKey string `yaml:"signing_key"`
	// PassphraseEnv names the variable holding the key's passphrase.
	PassphraseEnv string `yaml:"passphrase_env"`
	// CheckpointEvery signs a checkpoint every N entries (default 100).
	CheckpointEvery int `yaml:"checkpoint_every"`
}

// Defaults.
const (
	DefaultMaxSteps            = 50
	DefaultConfidenceThreshold = 0.5
	DefaultMaxProbesPerTurn    = 10
	DefaultProbeTimeoutMS      = 5000
	DefaultSupervisorTimeoutMS = 30000
	DefaultApprovalTimeout     = 300
	DefaultApprovalsPerHour    = 10
	DefaultPollSeconds         = 60
	DefaultCheckpointEvery     = 100
)

// Load reads and validates a file. An empty path returns the defaults.
func Load(path string) (*Config, error) {
	if path == "" {
		c := &Config{}
		c.applyDefaults()
		return c, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.dir = filepath.Dir(path)
	return c, nil
}

// Parse decodes YAML, rejecting unknown keys, then validates and fills in
// defaults.
func Parse(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, err
	}
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fieldError(err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.applyDefaults()
	return c, nil
}

// fieldError rewrites yaml.v3's "field x not found in type config.T" into a
// message that names the key.
func fieldError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		if i := strings.Index(m, "field "); i >= 0 && strings.Contains(m, " not found in type") {
			key := strings.TrimSpace(m[i+len("field ") : strings.Index(m, " not found in type")])
			m = strings.TrimSpace(m[:i]) + " unknown key " + strconv(key)
		}
		msgs = append(msgs, m)
	}
	return errors.New(strings.Join(msgs, "; "))
}

func strconv(s string) string { return `"` + s + `"` }

// Validate checks values that have a fixed range.
func (c *Config) Validate() error {
	if c.Conversation.MaxSteps < 0 {
		return errors.New("conversation.max_steps: must not be negative")
	}
	if t := c.Triage; t != nil {
		if err := checkEndpoint("triage", t.BaseURL, t.Model); err != nil {
			return err
		}
		if t.ConfidenceThreshold < 0 || t.ConfidenceThreshold > 1 {
			return errors.New("triage.confidence_threshold: must be between 0 and 1")
		}
		if t.MaxProbesPerTurn < 0 || t.ProbeTimeoutMS < 0 {
			return errors.New("triage: max_probes_per_turn and probe_timeout_ms must not be negative")
		}
		switch t.OnTimeout {
		case "", "escalate", "deny", "allow":
		default:
			return fmt.Errorf("triage.on_timeout: %q is not escalate, deny or allow", t.OnTimeout)
		}
		for _, cat := range t.AlwaysProbe {
			if strings.TrimSpace(cat) == "" {
				return errors.New("triage.always_probe: empty category")
			}
		}
	}
	if s := c.Supervisor; s != nil {
		if err := checkEndpoint("supervisor", s.BaseURL, s.Model); err != nil {
			return err
		}
		if s.TimeoutMS < 0 {
			return errors.New("supervisor.timeout_ms: must not be negative")
		}
	}
	if c.Approvals.TimeoutSeconds < 0 || c.Approvals.MaxPerHour < 0 {
		return errors.New("approvals: timeout_seconds and max_per_hour must not be negative")
	}
	if u := c.Approvals.Webhook.URL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") {
			return fmt.Errorf("approvals.webhook.url: %q is not an http(s) URL", u)
		}
	}
	if c.Audit.CheckpointEvery < 0 {
		return errors.New("audit.checkpoint_every: must not be negative")
	}
	if c.Policy.PollSeconds < 0 {
		return errors.New("policy.poll_seconds: must not be negative")
	}
	return nil
}

func checkEndpoint(section, base, model string) error {
	if base == "" {
		return fmt.Errorf("%s.base_url: required", section)
	}
	if p, err := url.Parse(base); err != nil || (p.Scheme != "http" && p.Scheme != "https") {
		return fmt.Errorf("%s.base_url: %q is not an http(s) URL", section, base)
	}
	if model == "" {
		return fmt.Errorf("%s.model: required", section)
	}
	return nil
}

func (c *Config) applyDefaults() {
	if c.Conversation.MaxSteps == 0 {
		c.Conversation.MaxSteps = DefaultMaxSteps
	}
	if t := c.Triage; t != nil {
		if t.ConfidenceThreshold == 0 {
			t.ConfidenceThreshold = DefaultConfidenceThreshold
		}
		if t.MaxProbesPerTurn == 0 {
			t.MaxProbesPerTurn = DefaultMaxProbesPerTurn
		}
		if t.ProbeTimeoutMS == 0 {
			t.ProbeTimeoutMS = DefaultProbeTimeoutMS
		}
		if t.OnTimeout == "" {
			t.OnTimeout = "escalate"
		}
	}
	if s := c.Supervisor; s != nil && s.TimeoutMS == 0 {
		s.TimeoutMS = DefaultSupervisorTimeoutMS
	}
	if c.Approvals.TimeoutSeconds == 0 {
		c.Approvals.TimeoutSeconds = DefaultApprovalTimeout
	}
	if c.Approvals.MaxPerHour == 0 {
		c.Approvals.MaxPerHour = DefaultApprovalsPerHour
	}
	if c.Policy.PollSeconds == 0 {
		c.Policy.PollSeconds = DefaultPollSeconds
	}
	if c.Audit.CheckpointEvery == 0 {
		c.Audit.CheckpointEvery = DefaultCheckpointEvery
	}
}

// Resolve makes a path from the file relative to the file's directory.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) || c.dir == "" || strings.Contains(p, "://") {
		return p
	}
	return filepath.Join(c.dir, p)
}

// Secret reads the environment variable a section names; empty name, empty
// value.
func Secret(env string) string {
	if env == "" {
		return ""
	}
	return os.Getenv(env)
}

// RequireRegistration resolves agents.require_registration with the default
// of the mode (true under serve).
func (c *Config) RequireRegistration(serve bool) bool {
	if c.Agents.RequireRegistration != nil {
		return *c.Agents.RequireRegistration
	}
	return serve
}

// DefaultStatePath is $XDG_STATE_HOME/toolgate/toolgate.db, or
// ~/.local/state/toolgate/toolgate.db.
func DefaultStatePath() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "."
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "toolgate", "toolgate.db")
}

// StatePath is state.path resolved, or the default.
func (c *Config) StatePath() string {
	if c.State.Path != "" {
		return c.Resolve(c.State.Path)
	}
	return DefaultStatePath()
}
