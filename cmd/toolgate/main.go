// Command toolgate decides whether an AI agent's tool call may run.
//
// Each command lives in its own file and only parses flags, calls packages and
// prints; the work lives in the packages.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Exit codes. Documented in the README; CI and agents rely on them.
const (
	exitOK       = 0 // allow, or the command succeeded
	exitError    = 1 // an internal error, or a failed check (tests, verification)
	exitUsage    = 2 // invalid input or usage; stderr names the field
	exitDeny     = 3
	exitEscalate = 4
	exitPending  = 5
)

// exitError carries an exit code out of a command.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *codeError) Unwrap() error { return e.err }

// withCode wraps err so main exits with code. A nil err with a non-zero code
// exits silently (the command printed its own result).
func withCode(code int, err error) error { return &codeError{code: code, err: err} }

func usageError(format string, a ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, a...))
}

// startupGC switches the collector off below a 1 GiB heap while a command
// builds the policy and makes its first decision: the policy's scan tables
// are built in a heap that starts at 4 MB, so the collector would run about
// twenty times before the first answer, to free memory that is garbage by
// then anyway. A command that decides once and exits (eval of one request,
// a hook call) never calls the restore function it returns; one that goes
// on deciding (eval --jsonl) calls it after its first answer. GOGC or
// GOMEMLIMIT in the environment still rule.
//
// The tests, which run every command in one process, set tuneStartupGC
// false.
func startupGC() (restore func()) {
	if !tuneStartupGC {
		return func() {}
	}
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, set := os.LookupEnv(v); set {
			return func() {}
		}
	}
	percent, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(1<<30)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

var tuneStartupGC = true

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	code := exitUsage // cobra's own errors are usage errors
	var ce *codeError
	if errors.As(err, &ce) {
		code = ce.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "toolgate:", msg)
	}
	return code
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "toolgate",
		Short:         "Decide whether an AI agent's tool call may run",
		Long:          "toolgate is a policy-as-code verifier for AI agents' tool calls: Rego rules on embedded OPA,\nthen model triage, a model supervisor and human approval for what the rules cannot settle.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(exitUsage, err) })
	root.PersistentFlags().String("log-level", "warn", "log level: debug, info, warn, error")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		lvl, _ := cmd.Flags().GetString("log-level")
		var l slog.Level
		if err := l.UnmarshalText([]byte(lvl)); err != nil {
			return usageError("--log-level: %v", err)
		}
		slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: l})))
		return nil
	}
	root.AddCommand(
		newVersionCmd(),
		newEvalCmd(),
		newTestCmd(),
		newConfigCmd(),
		newApprovalsCmd(),
		newBundleCmd(),
		newAgentCmd(),
		newAuditCmd(), newKeysCmd(),
		newHookCmd(), newMCPProxyCmd(),
		newConformanceCmd(),
		newServeCmd(),
	)
	return root
}
