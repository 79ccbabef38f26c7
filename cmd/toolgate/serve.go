package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/bundles"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/server"
)

type serveFlags struct {
	policy          policyFlags
	addr            string
	db              string
	auditKey        string
	maxBody         int64
	shutdownTimeout time.Duration
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API, the approvals page and metrics",
		Long: `Serve toolgate over HTTP: POST /v1/verify decides a request (the agent's token in
"Authorization: Bearer"), GET /v1/approvals and POST /v1/approvals/{id} list and answer
the calls waiting for a person, GET /v1/events streams approvals and decisions (SSE),
GET / is the approvals page, GET /metrics is Prometheus' text format.

Registration is required (agents need a token from 'toolgate agent register') unless
the config sets agents.require_registration: false. With policy.bundle an http(s) URL
the bundle is polled every policy.poll_seconds and reloaded live.
SIGINT or SIGTERM stops accepting, lets in-flight requests finish (--shutdown-timeout),
then exits 0; pending approvals stay in the database.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			server.TuneGC()
			cfg, err := f.policy.loadConfig()
			if err != nil {
				return err
			}
			if f.maxBody <= 0 {
				return usageError("--max-body: must be positive")
			}
			logger := slog.Default()
			eng, poller, err := f.engine(ctx, cfg, logger)
			if err != nil {
				return err
			}
			vopts := []toolgate.Option{toolgate.WithEngine(eng), toolgate.WithLogger(logger)}
			db := f.db
			if db == "" {
				db = cfg.StatePath()
			}
			vopts = append(vopts, toolgate.WithDB(db))
			if f.auditKey != "" {
				vopts = append(vopts, toolgate.WithAuditKey(f.auditKey))
			}
			srv, err := server.New(ctx, cfg, server.Options{
				MaxBodyBytes: f.maxBody, ShutdownTimeout: f.shutdownTimeout, Poller: poller, Logger: logger,
			}, vopts...)
			if err != nil {
				return withCode(exitError, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "toolgate: serving on http://%s (policy %s, database %s)\n", f.addr, eng.Policy().Bundle, db)
			serr := srv.ListenAndServe(ctx, f.addr)
			cerr := srv.Close()
			if serr != nil {
				return withCode(exitError, serr)
			}
			if cerr != nil {
				return withCode(exitError, cerr)
			}
			return nil
		},
	}
	f.policy.register(cmd)
	cmd.Flags().StringVar(&f.addr, "addr", server.DefaultAddr, "address to listen on (host:port)")
	cmd.Flags().StringVar(&f.db, "db", "", "SQLite state file (default: state.path from --config, else "+config.DefaultStatePath()+")")
	cmd.Flags().StringVar(&f.auditKey, "audit-key", "", "PEM private key that signs the audit log (default: audit.signing_key from --config)")
	cmd.Flags().Int64Var(&f.maxBody, "max-body", server.DefaultMaxBodyBytes, "largest request body in bytes (more: 413)")
	cmd.Flags().DurationVar(&f.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long in-flight requests may finish after SIGINT/SIGTERM")
	return cmd
}

// engine prepares the Tier 1 engine. A bundle at an http(s) URL comes with
// a poller that reloads it; its first download must succeed.
func (f *serveFlags) engine(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*engine.Engine, *bundles.Poller, error) {
	src := f.policy.bundle
	if src == "" {
		src = cfg.Policy.Bundle
	}
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		e, err := f.policy.newEngine(ctx, cfg)
		return e, nil, err
	}
	key, err := f.policy.verification(cfg)
	if err != nil {
		return nil, nil, err
	}
	var (
		eng   *engine.Engine
		first *bundle.Bundle
	)
	interval := time.Duration(cfg.Policy.PollSeconds) * time.Second
	if interval <= 0 {
		interval = time.Duration(config.DefaultPollSeconds) * time.Second
	}
	// Until the engine exists the callback keeps the first bundle; after,
	// each new one is prepared and swapped in (a bad one is refused and the
	// current one kept).
	poller := bundles.NewPoller(src, interval, key, func(ctx context.Context, b *bundle.Bundle) error {
		if eng == nil {
			first = b
			return nil
		}
		return eng.Reload(ctx, b, bundles.Name(src, b))
	}, logger)
	if err := poller.Poll(ctx); err != nil {
		return nil, nil, withCode(exitError, fmt.Errorf("policy bundle: %w", err))
	}
	opts := []engine.Option{engine.WithLogger(logger), engine.WithData(toolgate.ConfigData(cfg)), engine.WithBundle(first, bundles.Name(src, first))}
	for _, file := range append(resolveAll(cfg, cfg.Policy.Data), f.policy.data...) {
		d, err := engine.ReadDataFile(file)
		if err != nil {
			return nil, nil, withCode(exitUsage, err)
		}
		opts = append(opts, engine.WithData(d))
	}
	if eng, err = engine.New(ctx, opts...); err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	return eng, poller, nil
}
