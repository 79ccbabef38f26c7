package main

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/adapters"
	"github.com/toolgate/toolgate/supervisor"
)

func newMCPProxyCmd() *cobra.Command {
	var pf policyFlags
	var af callerFlags
	var name, onEscalate, conversation string
	var hideUnknown bool
	cmd := &cobra.Command{
		Use:   "mcp-proxy [flags] -- COMMAND [ARGS...]",
		Short: "Serve MCP on stdio, forwarding to a real MCP server and deciding every tools/call first",
		Long: `Start COMMAND as an MCP server (stdio) and serve MCP on stdin/stdout, forwarding
every message. Each tools/call is decided first, as action type
mcp__<server>__<tool> (server: --name, else the server's serverInfo name):
denied calls never reach the server and are answered with a tool result marked
isError whose text is the reason. Escalated and pending calls are denied
(--on-escalate deny) or wait for a person in the approvals queue
(--on-escalate ask). A tool listed without an input schema is denied (MCP-001).
Results of allowed calls are recorded as untrusted context for later calls of
the session. tools/list hides the tools the agent may never call.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if onEscalate != adapters.EscalateDeny && onEscalate != adapters.EscalateAsk {
				return usageError("--on-escalate: want deny or ask, not %q", onEscalate)
			}
			trust, err := af.trustLevel()
			if err != nil {
				return err
			}
			cfg, err := pf.loadConfig()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			e, err := pf.newEngine(ctx, cfg)
			if err != nil {
				return err
			}
			opts := []toolgate.Option{toolgate.WithEngine(e), toolgate.WithLogger(slog.Default())}
			if onEscalate == adapters.EscalateDeny {
				opts = append(opts, toolgate.NoWait())
			}
			if af.db != "" {
				opts = append(opts, toolgate.WithDB(af.db))
			}
			v, err := toolgate.New(cfg, opts...)
			if err != nil {
				return withCode(exitError, err)
			}
			defer v.Close()
			s, err := adapters.OpenSessions(ctx, v.Store())
			if err != nil {
				return withCode(exitError, err)
			}
			if af.agent == "" {
				af.agent = "mcp-proxy"
			}
			if conversation == "" {
				b := make([]byte, 8)
				if _, err := rand.Read(b); err != nil {
					return withCode(exitError, err)
				}
				conversation = "mcp-" + hex.EncodeToString(b)
			}
			p := &adapters.Proxy{Verifier: v, Sessions: s, Server: name, AgentID: af.agent, TrustLevel: trust,
				Token: af.token(), Conversation: conversation, OnEscalate: onEscalate, HideUnknown: hideUnknown, Logger: slog.Default()}
			if onEscalate == adapters.EscalateAsk {
				qo, err := supervisor.OptionsFromConfig(cfg.Approvals)
				if err != nil {
					return withCode(exitUsage, err)
				}
				qo.Logger = slog.Default()
				q, err := supervisor.OpenQueue(ctx, v.Store().DB(), qo)
				if err != nil {
					return withCode(exitError, err)
				}
				defer q.Close()
				p.Asker = q
			}
			child := exec.CommandContext(ctx, args[0], args[1:]...)
			child.Stderr = os.Stderr
			client := &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}}
			if err := p.Run(ctx, client, &mcp.CommandTransport{Command: child}); err != nil {
				return withCode(exitError, err)
			}
			return nil
		},
	}
	pf.register(cmd)
	af.register(cmd, "mcp-proxy")
	cmd.Flags().StringVar(&name, "name", "", "server name in action types (default: the server's serverInfo name)")
	cmd.Flags().StringVar(&onEscalate, "on-escalate", adapters.EscalateDeny, "escalate and pending: deny, or ask (wait for a person in the approvals queue)")
	cmd.Flags().StringVar(&conversation, "conversation", "", "conversation id (default: a new one per proxy process)")
	cmd.Flags().BoolVar(&hideUnknown, "hide-unknown", false, "hide from tools/list the tools the registry does not know")
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
