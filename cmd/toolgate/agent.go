package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
)

// agentFlags are shared by the agent subcommands.
type agentFlags struct {
	db, config, output string
}

func newAgentCmd() *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Register, list, show and revoke agents; read their budgets",
		Long: "Registered agents get their trust level, tool permissions and budgets from the registry\n" +
			"(a request may lower its trust, never raise it) and authenticate with a token shown once.",
	}
	cmd.PersistentFlags().StringVar(&f.db, "db", config.DefaultStatePath(), "state database file")
	cmd.PersistentFlags().StringVar(&f.config, "config", "", "toolgate.yaml (its state.path applies unless --db is given)")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	cmd.AddCommand(newAgentRegisterCmd(f), newAgentListCmd(f), newAgentShowCmd(f), newAgentRevokeCmd(f), newAgentBudgetCmd(f))
	return cmd
}

// open checks --output and opens the database named by --db, or by the
// config's state.path when --db was not given.
func (f *agentFlags) open(cmd *cobra.Command) (*state.Store, error) {
	if f.output != "text" && f.output != "json" {
		return nil, usageError("--output: %q is not text or json", f.output)
	}
	path := f.db
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return nil, usageError("%v", err)
		}
		if !cmd.Flags().Changed("db") {
			path = cfg.StatePath()
		}
	}
	s, err := state.Open(cmd.Context(), path)
	if err != nil {
		return nil, withCode(exitError, err)
	}
	return s, nil
}

func (f *agentFlags) json() bool { return f.output == "json" }

// writeIndentedJSON prints v as indented JSON, for people reading command output.
func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// lookupError maps a failed lookup to exit 1 with a message naming the id.
func lookupError(id string, err error) error {
	if errors.Is(err, state.ErrNotFound) {
		return withCode(exitError, fmt.Errorf("no agent %q in the registry", id))
	}
	return withCode(exitError, err)
}

func newAgentRegisterCmd(f *agentFlags) *cobra.Command {
	var (
		name, trust  string
		allow, block []string
		spec         state.AgentSpec
	)
	cmd := &cobra.Command{
		Use:   "register --name NAME --trust LEVEL",
		Short: "Register an agent and print its id and token (the token is shown only once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lvl, err := schema.ParseTrustLevel(trust)
			if err != nil {
				return usageError("--trust: %v", err)
			}
			spec.Name, spec.Trust, spec.AllowedTools, spec.BlockedTools = name, lvl, allow, block
			if err := spec.Validate(); err != nil {
				return usageError("%v", err)
			}
			s, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			a, token, err := s.RegisterAgent(cmd.Context(), spec)
			if err != nil {
				return withCode(exitError, err)
			}
			out := cmd.OutOrStdout()
			if f.json() {
				return writeIndentedJSON(out, struct {
					AgentID string `json:"agent_id"`
					Token   string `json:"token"`
				}{a.ID, token})
			}
			fmt.Fprintf(out, "agent_id: %s\ntoken:    %s\n", a.ID, token)
			fmt.Fprintln(cmd.ErrOrStderr(), "The token is shown only this once: store it now. Requests send it as agent.token.")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "a name for people (required)")
	fl.StringVar(&trust, "trust", "", "trust level: untrusted, supervised, autonomous, trusted or 0..3 (required)")
	fl.StringArrayVar(&allow, "allow-tool", nil, "a tool the agent may use (repeatable; none given: every tool the policy allows)")
	fl.StringArrayVar(&block, "block-tool", nil, "a tool the agent may never use (repeatable)")
	fl.Float64Var(&spec.MaxDailyCostUSD, "max-daily-cost-usd", 0, "daily cost limit in USD (0: none)")
	fl.IntVar(&spec.MaxRequestsPerHour, "max-requests-per-hour", 0, "requests per sliding hour (0: none)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("trust")
	return cmd
}

func newAgentListCmd(f *agentFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List registered agents, revoked ones included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			agents, err := s.Agents(cmd.Context())
			if err != nil {
				return withCode(exitError, err)
			}
			if f.json() {
				if agents == nil {
					agents = []state.Agent{}
				}
				return writeIndentedJSON(cmd.OutOrStdout(), agents)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tTRUST\tSTATUS\tCREATED")
			for _, a := range agents {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, a.Name, a.Trust, status(a), a.CreatedAt.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
}

func status(a state.Agent) string {
	if a.Revoked() {
		return "revoked"
	}
	return "active"
}

func newAgentShowCmd(f *agentFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one agent's registry entry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			a, err := s.Agent(cmd.Context(), args[0])
			if err != nil {
				return lookupError(args[0], err)
			}
			if f.json() {
				return writeIndentedJSON(cmd.OutOrStdout(), a)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 1, ' ', 0)
			fmt.Fprintf(tw, "id:\t%s\n", a.ID)
			fmt.Fprintf(tw, "name:\t%s\n", a.Name)
			fmt.Fprintf(tw, "trust:\t%s\n", a.Trust)
			fmt.Fprintf(tw, "status:\t%s\n", status(a))
			fmt.Fprintf(tw, "allowed tools:\t%s\n", list(a.AllowedTools, "(any the policy allows)"))
			fmt.Fprintf(tw, "blocked tools:\t%s\n", list(a.BlockedTools, "(none)"))
			fmt.Fprintf(tw, "max daily cost:\t%s\n", limit(a.MaxDailyCostUSD != 0, fmt.Sprintf("$%g", a.MaxDailyCostUSD)))
			fmt.Fprintf(tw, "max requests/hour:\t%s\n", limit(a.MaxRequestsPerHour != 0, fmt.Sprint(a.MaxRequestsPerHour)))
			fmt.Fprintf(tw, "created:\t%s\n", a.CreatedAt.Format(time.RFC3339))
			if a.RevokedAt != nil {
				fmt.Fprintf(tw, "revoked:\t%s\n", a.RevokedAt.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
}

func list(s []string, empty string) string {
	if len(s) == 0 {
		return empty
	}
	return strings.Join(s, ", ")
}

func limit(set bool, v string) string {
	if !set {
		return "none"
	}
	return v
}

func newAgentRevokeCmd(f *agentFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an agent: its requests are denied from now on (AGENT-001)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.RevokeAgent(cmd.Context(), args[0]); err != nil {
				return lookupError(args[0], err)
			}
			a, err := s.Agent(cmd.Context(), args[0])
			if err != nil {
				return lookupError(args[0], err)
			}
			if f.json() {
				return writeIndentedJSON(cmd.OutOrStdout(), struct {
					AgentID   string     `json:"agent_id"`
					RevokedAt *time.Time `json:"revoked_at"`
				}{a.ID, a.RevokedAt})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s) at %s\n", a.ID, a.Name, a.RevokedAt.Format(time.RFC3339))
			return nil
		},
	}
}

func newAgentBudgetCmd(f *agentFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "budget ID",
		Short: "Show an agent's requests in the last hour and cost today (UTC) against its limits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			ctx := cmd.Context()
			if _, err := s.Agent(ctx, args[0]); err != nil {
				return lookupError(args[0], err)
			}
			b, err := s.Budget(ctx, args[0], time.Now())
			if err != nil {
				return withCode(exitError, err)
			}
			if f.json() {
				return writeIndentedJSON(cmd.OutOrStdout(), struct {
					AgentID string `json:"agent_id"`
					schema.BudgetFacts
				}{args[0], b})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 1, ' ', 0)
			fmt.Fprintf(tw, "requests last hour:\t%d of %s\n", b.RequestsLastHour, limit(b.MaxRequestsPerHour != 0, fmt.Sprint(b.MaxRequestsPerHour)))
			fmt.Fprintf(tw, "cost today (UTC):\t$%.4f of %s\n", b.CostTodayUSD, limit(b.MaxDailyCostUSD != 0, fmt.Sprintf("$%g", b.MaxDailyCostUSD)))
			return tw.Flush()
		},
	}
}
