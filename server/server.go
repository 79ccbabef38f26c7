package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/bundles"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/supervisor"
)

// Defaults of Options.
const (
	DefaultAddr            = "127.0.0.1:8181"
	DefaultMaxBodyBytes    = 1 << 20
	DefaultReadTimeout     = 30 * time.Second
	DefaultIdleTimeout     = 120 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultHeartbeat       = 15 * time.Second
	DefaultEventBuffer     = 256
	// writeMargin is added to the approvals timeout to make the write
	// timeout: a verify that waits for a person must still be able to
	// answer.
	writeMargin = 30 * time.Second
)

// Options tune the server. Zero values mean the defaults.
type Options struct {
	// MaxBodyBytes caps a request body (default 1 MiB): more is 413.
	MaxBodyBytes int64
	// ReadTimeout bounds reading a request, headers and body (default 30 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds a response; default the approvals timeout plus
	// 30 s, and never less than that: a verify may wait for a person. Event
	// streams are exempt.
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections (default 120 s).
	IdleTimeout time.Duration
	// ShutdownTimeout is how long in-flight requests may take to finish
	// after SIGTERM (default 30 s). Past it, verifies still waiting for a
	// person are answered 503 with their approval id (the approval stays in
	// the database), and connections are closed.
	ShutdownTimeout time.Duration
	// Heartbeat is the interval of comments on idle event streams
	// (default 15 s).
	Heartbeat time.Duration
	// EventBuffer is each event stream's queue (default 256 events); a
	// client that falls that far behind is dropped.
	EventBuffer int
	// Poller, when set, is run while serving to reload the policy bundle.
	Poller *bundles.Poller
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Server is toolgate's HTTP API over one Verifier.
type Server struct {
	opts     Options
	verifier *toolgate.Verifier
	noWait   *toolgate.Verifier
	queue    *supervisor.Queue
	events   *broker
	metrics  *metrics
	log      *slog.Logger
	handler  http.Handler

	draining atomic.Bool
}

// New builds the Verifier from cfg in server mode (registration required
// unless the config says otherwise; state always on) with vopts added
// (toolgate.WithDB, WithEngine, WithAuditKey...), and the approvals queue
// whose events feed GET /v1/events. Close the server to close them.
func New(ctx context.Context, cfg *config.Config, opts Options, vopts ...toolgate.Option) (*Server, error) {
	if cfg == nil {
		var err error
		if cfg, err = config.Load(""); err != nil {
			return nil, err
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	approvalWait := time.Duration(cfg.Approvals.TimeoutSeconds) * time.Second
	if approvalWait <= 0 {
		approvalWait = supervisor.DefaultApprovalTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if min := approvalWait + writeMargin; opts.WriteTimeout < min {
		opts.WriteTimeout = min
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.EventBuffer <= 0 {
		opts.EventBuffer = DefaultEventBuffer
	}
	s := &Server{opts: opts, log: opts.Logger, events: newBroker(opts.EventBuffer), metrics: newMetrics()}

	// The queue needs the database the Verifier opens, and the Verifier
	// needs the queue: it gets a reference filled in just below, before
	// anything can call it.
	ref := &queueRef{}
	all := append([]toolgate.Option{toolgate.WithLogger(opts.Logger)}, vopts...)
	all = append(all, toolgate.ServeMode(), toolgate.WithApprover(ref))
	v, err := toolgate.New(cfg, all...)
	if err != nil {
		return nil, err
	}
	if v.Store() == nil {
		v.Close()
		return nil, errors.New("server: the server needs state (a database); drop WithoutState")
	}
	qo, err := supervisor.OptionsFromConfig(cfg.Approvals)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("approvals: %w", err)
	}
	qo.Logger = opts.Logger
	qo.OnEvent = s.events.onApproval
	q, err := supervisor.OpenQueue(ctx, v.Store().DB(), qo)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("approvals: %w", err)
	}
	ref.q.Store(q)
	s.verifier, s.noWait, s.queue = v, v.WithoutWaiting(), q
	s.handler = s.routes()
	return s, nil
}

// Verifier is the server's Verifier.
func (s *Server) Verifier() *toolgate.Verifier { return s.verifier }

// Approvals is the approvals queue.
func (s *Server) Approvals() *supervisor.Queue { return s.queue }

// Handler is the whole API and the page, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Close ends the event streams and closes the queue and the Verifier (the
// audit log's final checkpoint, the database). Call it after Serve returned.
func (s *Server) Close() error {
	s.draining.Store(true)
	s.events.close()
	return errors.Join(s.queue.Close(), s.verifier.Close())
}

// ListenAndServe listens on addr (host:port) and serves until ctx ends, then
// shuts down gracefully (see Serve).
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve answers on ln until ctx ends. Then it stops accepting, ends the
// event streams, and lets in-flight requests finish for up to
// Options.ShutdownTimeout; verifies still waiting for a person after that
// are answered 503 with their approval id, which stays pending in the
// database for the agent to ask about again after a restart. Serve returns
// nil after a shutdown, or the listener's error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Requests run under stop, not under ctx: a signal must let them
	// finish, and only the end of the grace period cuts them short.
	stop, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: min(s.opts.ReadTimeout, 10*time.Second),
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return stop },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	hs.RegisterOnShutdown(s.events.close)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	if p := s.opts.Poller; p != nil {
		go func() { _ = p.Run(pollCtx) }()
	}
	s.log.Info("serving", "addr", ln.Addr().String(), "policy", s.verifier.Engine().Policy().Bundle)
	select {
	case err := <-errc:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("shutting down: finishing in-flight requests", "grace", s.opts.ShutdownTimeout)
	grace, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	err := hs.Shutdown(grace)
	cancel()
	if err != nil {
		s.log.Warn("grace period over: answering the requests still waiting", "err", err)
		hardStop()
		last, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := hs.Shutdown(last); err != nil {
			_ = hs.Close()
		}
		cancel()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

// readiness is nil when the engine has a policy and the database answers.
func (s *Server) readiness(ctx context.Context) error {
	if s.draining.Load() {
		return errors.New("shutting down")
	}
	if s.verifier.Engine() == nil || s.verifier.Engine().Policy().Bundle == "" {
		return errors.New("no policy loaded")
	}
	var one int
	if err := s.verifier.Store().DB().QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	return nil
}

// queueRef is the Approver handed to the Verifier before the queue exists.
// Until it is set every call fails, and the Verifier denies: fail closed.
type queueRef struct {
	q atomic.Pointer[supervisor.Queue]
}

var errNoQueue = errors.New("approvals queue not open")

func (r *queueRef) Request(ctx context.Context, req schema.Request, reasons []schema.Reason) (supervisor.Approval, error) {
	q := r.q.Load()
	if q == nil {
		return supervisor.Approval{}, errNoQueue
	}
	return q.Request(ctx, req, reasons)
}

// waitCtxKey carries the HTTP request's own context to queueRef.Wait.
type waitCtxKey struct{}

// Wait waits under the HTTP request's context when there is one: the
// client leaving, or the end of the shutdown grace period, stops the wait
// (the Verifier then denies with the approval id) while the rest of Verify
// finishes.
func (r *queueRef) Wait(ctx context.Context, id string) (supervisor.Approval, error) {
	q := r.q.Load()
	if q == nil {
		return supervisor.Approval{}, errNoQueue
	}
	if rc, ok := ctx.Value(waitCtxKey{}).(context.Context); ok {
		ctx = rc
	}
	return q.Wait(ctx, id)
}

func (r *queueRef) FindForRequest(ctx context.Context, req schema.Request) (supervisor.Approval, bool, error) {
	q := r.q.Load()
	if q == nil {
		return supervisor.Approval{}, false, errNoQueue
	}
	return q.FindForRequest(ctx, req)
}

func (r *queueRef) MaxPerHour() int {
	if q := r.q.Load(); q != nil {
		return q.MaxPerHour()
	}
	return supervisor.DefaultMaxPerHour
}

// GCPercent is the garbage collector's target `toolgate serve` runs with
// when the GOGC environment variable is not set. Every decision allocates
// some 30 KiB in OPA; at 400 the load test (audit on) decides 2-5% more per
// second than at Go's default of 100, for about 200 MiB more resident
// memory now that the policy's scan tables make the live heap some 70 MiB
// (docs/server.md). GOGC, when set, wins.
const GCPercent = 400

// TuneGC applies GCPercent unless GOGC is set. Commands that run a server
// call it; a library embedding the server keeps its own setting.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
}
