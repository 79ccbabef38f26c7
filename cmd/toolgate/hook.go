package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/adapters"
	"github.com/toolgate/toolgate/schema"
)

// callerFlags name the agent an adapter speaks for.
type callerFlags struct {
	db       string
	agent    string
	trust    string
	tokenEnv string
}

func (a *callerFlags) register(cmd *cobra.Command, defaultAgent string) {
	cmd.Flags().StringVar(&a.db, "db", "", "state database (default: the config's state.path, else $XDG_STATE_HOME/toolgate/toolgate.db)")
	cmd.Flags().StringVar(&a.agent, "agent", "", "agent id in requests (default: "+defaultAgent+")")
	cmd.Flags().StringVar(&a.trust, "trust", "", "trust level in requests: untrusted, supervised, autonomous, trusted (default: the registered agent's, else untrusted)")
	cmd.Flags().StringVar(&a.tokenEnv, "token-env", "", "environment variable holding the agent's token (registered agents)")
}

func (a *callerFlags) trustLevel() (*schema.TrustLevel, error) {
	if a.trust == "" {
		return nil, nil
	}
	t, err := schema.ParseTrustLevel(a.trust)
	if err != nil {
		return nil, usageError("--trust: %v", err)
	}
	return &t, nil
}

func (a *callerFlags) token() string {
	if a.tokenEnv == "" {
		return ""
	}
	return os.Getenv(a.tokenEnv)
}

func newHookCmd() *cobra.Command {
	var pf policyFlags
	var af callerFlags
	cmd := &cobra.Command{
		Use:   "hook claude-code|gemini|cursor|codex",
		Short: "Answer an agent CLI's pre-tool hook (decide) or post-tool hook (record the result)",
		Long: `Read one hook payload on stdin and answer in the agent CLI's format on stdout.

Pre-tool events (Claude Code and Codex PreToolUse, Gemini CLI BeforeTool,
Cursor beforeShellExecution, beforeMCPExecution, beforeReadFile) are decided;
post-tool events (PostToolUse, AfterTool, afterShellExecution,
afterMCPExecution) record the tool's result as untrusted context for the
session's later calls.

Exit codes: 0 with the decision as JSON on stdout; 2 when toolgate cannot
decide (bad payload, config or state failure): every supported CLI reads exit
2 as "block the call", with the reason on stderr. Codex also gets exit 2 on a
deny, since it honours only allow and deny.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			startupGC() // one decision, then the process exits
			d, err := adapters.ParseDialect(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			if af.agent == "" {
				af.agent = string(d)
			}
			h := &adapters.Hook{Dialect: d, AgentID: af.agent, Token: af.token(), Logger: slog.Default()}
			a := func() adapters.Answer {
				ctx := cmd.Context()
				fail := h.Fail
				trust, err := af.trustLevel()
				if err != nil {
					return fail(err)
				}
				h.TrustLevel = trust
				cfg, err := pf.loadConfig()
				if err != nil {
					return fail(err)
				}
				e, err := pf.newEngine(ctx, cfg)
				if err != nil {
					return fail(err)
				}
				opts := []toolgate.Option{toolgate.WithEngine(e), toolgate.NoWait(), toolgate.WithLogger(slog.Default())}
				if af.db != "" {
					opts = append(opts, toolgate.WithDB(af.db))
				}
				v, err := toolgate.New(cfg, opts...)
				if err != nil {
					return fail(err)
				}
				defer v.Close()
				s, err := adapters.OpenSessions(ctx, v.Store())
				if err != nil {
					return fail(err)
				}
				h.Verifier, h.Sessions = v, s
				return h.Handle(ctx, cmd.InOrStdin())
			}()
			cmd.OutOrStdout().Write(a.Stdout)
			fmt.Fprint(cmd.ErrOrStderr(), a.Stderr)
			if a.Exit != 0 {
				return withCode(a.Exit, nil)
			}
			return nil
		},
	}
	pf.register(cmd)
	af.register(cmd, "the agent CLI's name")
	return cmd
}
