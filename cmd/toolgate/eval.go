package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/schema"
)

type evalFlags struct {
	policy  policyFlags
	jsonl   bool
	explain string
	noState bool
}

func newEvalCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval [FILE|-]",
		Short: "Decide one request (or a JSONL stream) and print the decision as JSON",
		Long: `Decide one request read from FILE or stdin and print the decision as JSON.

Exit codes: 0 allow, 3 deny, 4 escalate, 5 pending, 2 invalid input or usage
(stderr names the field), 1 internal error. With --jsonl, each input line is
answered by one output line, in order; an invalid line is answered by
{"line": N, "error": ..., "field": ...} and named on stderr, the other lines
are still decided, and the exit code is 2 if any line was invalid, else 0.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				file, err := os.Open(args[0])
				if err != nil {
					return usageError("%v", err)
				}
				defer file.Close()
				in = file
			}
			cfg, err := f.policy.loadConfig()
			if err != nil {
				return err
			}
			eng, err := f.policy.newEngine(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if f.jsonl {
				return evalStream(cmd.Context(), eng, in, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return evalOne(cmd.Context(), eng, in, cmd.OutOrStdout(), cmd.ErrOrStderr(), f.explain)
		},
	}
	f.policy.register(cmd)
	cmd.Flags().BoolVar(&f.jsonl, "jsonl", false, "read one request per line and write one decision per line")
	cmd.Flags().StringVar(&f.explain, "explain", "", "explain the decision on stderr: 'reasons' (the rules that fired) or 'full' (OPA's trace)")
	cmd.Flags().Lookup("explain").NoOptDefVal = "reasons"
	cmd.Flags().BoolVar(&f.noState, "no-state", false, "evaluate without conversation history, agents or budgets")
	return cmd
}

func outcomeCode(o schema.Outcome) int {
	switch o {
	case schema.Allow:
		return exitOK
	case schema.Escalate:
		return exitEscalate
	case schema.Pending:
		return exitPending
	}
	return exitDeny
}

func evalOne(ctx context.Context, eng *engine.Engine, in io.Reader, stdout, stderr io.Writer, explain string) error {
	req, err := schema.DecodeRequest(in)
	if err != nil {
		return withCode(exitUsage, err)
	}
	var d schema.Decision
	switch explain {
	case "":
		d, err = eng.Evaluate(ctx, &req, nil)
	case "full":
		d, err = eng.Explain(ctx, &req, nil, stderr)
	case "reasons":
		d, err = eng.Evaluate(ctx, &req, nil)
		if err == nil {
			writeExplanation(stderr, &req, &d)
		}
	default:
		return usageError("--explain: want reasons or full, not %q", explain)
	}
	if err != nil {
		return withCode(exitError, err)
	}
	if err := writeJSON(stdout, d); err != nil {
		return withCode(exitError, err)
	}
	return withCode(outcomeCode(d.Outcome), nil)
}

// writeExplanation prints the rules that fired, grouped by the outcome they
// asked for, in precedence order.
func writeExplanation(w io.Writer, req *schema.Request, d *schema.Decision) {
	trust := "none (untrusted)"
	if req.Agent.TrustLevel != nil {
		trust = req.Agent.TrustLevel.String()
	}
	fmt.Fprintf(w, "decision: %s (tier %d, policy %s %s)\n", d.Outcome, d.Tier, d.Policy.Bundle, d.Policy.Revision)
	fmt.Fprintf(w, "action:   %s, risk %s; agent %s, trust %s\n", req.Action.Type, d.Risk, req.Agent.ID, trust)
	if len(d.NotApplied) > 0 {
		fmt.Fprintf(w, "not applied (no state): %s\n", strings.Join(d.NotApplied, ", "))
	}
	fmt.Fprintln(w, "rules that fired (precedence deny > pending > escalate > allow):")
	for _, r := range d.Reasons {
		where := ""
		if r.Where != "" {
			where = " at " + r.Where
		}
		fmt.Fprintf(w, "  %-8s %-14s %s%s\n", r.Outcome, r.Code, r.Message, where)
	}
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// evalStream decides a JSONL stream with a worker pool, writing answers in
// input order.
func evalStream(ctx context.Context, eng *engine.Engine, in io.Reader, stdout, stderr io.Writer) error {
	type job struct {
		line int
		data []byte
		out  chan []byte
	}
	stderr = &lockedWriter{w: stderr} // the workers report invalid lines concurrently
	workers := 2 * runtime.GOMAXPROCS(0)
	jobs := make(chan job, 4*workers)
	order := make(chan chan []byte, 4*workers)
	invalid := 0
	errc := make(chan error, 1)

	for range workers {
		go func() {
			for j := range jobs {
				j.out <- decideLine(ctx, eng, j.line, j.data, stderr)
			}
		}()
	}
	go func() {
		defer close(order)
		defer close(jobs)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), schema.MaxRequestBytes)
		line := 0
		for sc.Scan() {
			line++
			data := sc.Bytes()
			if len(strings.TrimSpace(string(data))) == 0 {
				continue
			}
			j := job{line: line, data: append([]byte(nil), data...), out: make(chan []byte, 1)}
			order <- j.out
			jobs <- j
		}
		if err := sc.Err(); err != nil {
			errc <- fmt.Errorf("read line %d: %w", line+1, err)
		}
	}()
	bw := bufio.NewWriterSize(stdout, 64<<10)
	for out := range order {
		b := <-out
		if strings.HasPrefix(string(b), `{"line":`) {
			invalid++
		}
		bw.Write(b)
	}
	if err := bw.Flush(); err != nil {
		return withCode(exitError, err)
	}
	select {
	case err := <-errc:
		return withCode(exitUsage, err)
	default:
	}
	if invalid > 0 {
		return withCode(exitUsage, fmt.Errorf("%d invalid line(s)", invalid))
	}
	return nil
}

func decideLine(ctx context.Context, eng *engine.Engine, line int, data []byte, stderr io.Writer) []byte {
	req, err := schema.ParseRequest(data)
	if err == nil {
		var d schema.Decision
		d, err = eng.Evaluate(ctx, &req, nil)
		if err == nil {
			b, _ := json.Marshal(d)
			return append(b, '\n')
		}
	}
	fmt.Fprintf(stderr, "toolgate: line %d: %v\n", line, err)
	e := struct {
		Line  int    `json:"line"`
		Error string `json:"error"`
		Field string `json:"field,omitempty"`
	}{Line: line, Error: err.Error()}
	var re *schema.RequestError
	if errors.As(err, &re) {
		e.Field = re.Field
	}
	b, _ := json.Marshal(e)
	return append(b, '\n')
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
