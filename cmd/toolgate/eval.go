package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/schema"
)

type evalFlags struct {
	policy   policyFlags
	jsonl    bool
	explain  string
	noState  bool
	noWait   bool
	db       string
	auditKey string
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
			restoreGC := startupGC()
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
			opts := []toolgate.Option{toolgate.WithEngine(eng), toolgate.WithLogger(slog.Default())}
			switch {
			case f.noState:
				opts = append(opts, toolgate.WithoutState())
			case f.db != "":
				opts = append(opts, toolgate.WithDB(f.db))
			}
			if f.noWait {
				opts = append(opts, toolgate.NoWait())
			}
			if f.auditKey != "" {
				opts = append(opts, toolgate.WithAuditKey(f.auditKey))
			}
			v, err := toolgate.New(cfg, opts...)
			if err != nil {
				return withCode(exitUsage, err)
			}
			defer v.Close()
			if f.jsonl {
				// With state, the lines of one conversation are decided one
				// at a time, in order, as the conversation controls assume.
				return evalStream(cmd.Context(), v, 2*runtime.GOMAXPROCS(0), !f.noState, in, cmd.OutOrStdout(), cmd.ErrOrStderr(), restoreGC)
			}
			return evalOne(cmd.Context(), v, in, cmd.OutOrStdout(), cmd.ErrOrStderr(), f.explain)
		},
	}
	f.policy.register(cmd)
	cmd.Flags().BoolVar(&f.jsonl, "jsonl", false, "read one request per line and write one decision per line")
	cmd.Flags().StringVar(&f.explain, "explain", "", "explain the decision on stderr: 'reasons' (the rules that fired) or 'full' (OPA's trace)")
	cmd.Flags().Lookup("explain").NoOptDefVal = "reasons"
	cmd.Flags().BoolVar(&f.noState, "no-state", false, "evaluate without conversation history, agents, budgets, approvals or audit")
	cmd.Flags().StringVar(&f.db, "db", "", "SQLite state file (default: state.path from --config, else $XDG_STATE_HOME/toolgate/toolgate.db)")
	cmd.Flags().BoolVar(&f.noWait, "no-wait", false, "return pending with an approval_id instead of waiting for a person; a later eval of the same step sees the answer")
	cmd.Flags().StringVar(&f.auditKey, "audit-key", "", "PEM signing key: record every verdict in the signed audit log (default: audit.signing_key from --config)")
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

func evalOne(ctx context.Context, v *toolgate.Verifier, in io.Reader, stdout, stderr io.Writer, explain string) error {
	req, err := schema.DecodeRequest(in)
	if err != nil {
		return withCode(exitUsage, err)
	}
	switch explain {
	case "", "reasons":
	case "full":
		// OPA's trace of Tier 1, without state: tracing is for reading.
		if _, err := v.Engine().Explain(ctx, &req, nil, stderr); err != nil {
			return withCode(exitError, err)
		}
	default:
		return usageError("--explain: want reasons or full, not %q", explain)
	}
	verdict, err := v.Verify(ctx, req)
	if err != nil {
		var re *schema.RequestError
		if errors.As(err, &re) {
			return withCode(exitUsage, err)
		}
		return withCode(exitError, err)
	}
	if explain == "reasons" {
		writeExplanation(stderr, &req, &verdict.Decision)
	}
	if err := writeJSON(stdout, verdict); err != nil {
		return withCode(exitError, err)
	}
	return withCode(outcomeCode(verdict.Outcome), nil)
}

// writeExplanation prints the rules that fired, grouped by the outcome they
// asked for, in precedence order.
func writeExplanation(w io.Writer, req *schema.Request, d *schema.Decision) {
	trust := "none (untrusted)"
	if req.Agent.TrustLevel != nil {
		trust = req.Agent.TrustLevel.String()
	}
	policy := d.Policy.Bundle
	if d.Policy.Revision != "" {
		policy += " revision " + d.Policy.Revision
	}
	fmt.Fprintf(w, "decision: %s (tier %d, policy %s)\n", d.Outcome, d.Tier, policy)
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

// evalStream decides a JSONL stream on a pool of workers, writing answers
// in input order. byConversation gives each worker a queue of its own and
// sends every line of a conversation to the same one: a conversation's
// steps are decided one after the other, in order (step 2 sees step 1
// committed), and different conversations side by side, as the server
// decides concurrent requests. Otherwise the workers share one queue.
// firstAnswered, if not nil, is called once the first answer is in.
func evalStream(ctx context.Context, v *toolgate.Verifier, workers int, byConversation bool, in io.Reader, stdout, stderr io.Writer, firstAnswered func()) error {
	type job struct {
		line int
		data []byte
		out  chan answer
	}
	queues := make([]chan job, 1)
	if byConversation {
		queues = make([]chan job, workers)
	}
	for i := range queues {
		queues[i] = make(chan job, 4*workers/len(queues))
	}
	order := make(chan chan answer, 4*workers)
	invalid := 0
	errc := make(chan error, 1)

	for i := range workers {
		q := queues[i%len(queues)]
		go func() {
			for j := range q {
				j.out <- decideLine(ctx, v, j.line, j.data)
			}
		}()
	}
	go func() {
		defer close(order)
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), schema.MaxRequestBytes)
		line := 0
		for sc.Scan() {
			line++
			data := sc.Bytes()
			if len(strings.TrimSpace(string(data))) == 0 {
				continue
			}
			j := job{line: line, data: append([]byte(nil), data...), out: make(chan answer, 1)}
			order <- j.out
			queues[conversationSlot(data, len(queues))] <- j
		}
		if err := sc.Err(); err != nil {
			errc <- fmt.Errorf("read line %d: %w", line+1, err)
		}
	}()
	bw := bufio.NewWriterSize(stdout, 64<<10)
	// One writer for stdout and stderr, in input order.
	for out := range order {
		a := <-out
		if firstAnswered != nil {
			firstAnswered()
			firstAnswered = nil
		}
		if a.problem != "" {
			invalid++
			fmt.Fprint(stderr, a.problem)
		}
		bw.Write(a.json)
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

// conversationSlot is the queue, of n, for a line's conversation: the same
// for every line of one conversation_id (FNV-1a of it); a line that is not
// a request is decided anywhere, as the error it is.
func conversationSlot(line []byte, n int) int {
	if n == 1 {
		return 0
	}
	var r struct {
		Context struct {
			ConversationID string `json:"conversation_id"`
		} `json:"context"`
	}
	_ = json.Unmarshal(line, &r)
	h := fnv.New32a()
	h.Write([]byte(r.Context.ConversationID))
	return int(h.Sum32() % uint32(n))
}

// answer is one line's output: the verdict, or the error object and the
// message for stderr.
type answer struct {
	json    []byte
	problem string
}

func decideLine(ctx context.Context, v *toolgate.Verifier, line int, data []byte) answer {
	req, err := schema.ParseRequest(data)
	if err == nil {
		var d toolgate.Verdict
		d, err = v.Verify(ctx, req)
		if err == nil {
			b, _ := json.Marshal(d)
			return answer{json: append(b, '\n')}
		}
	}
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
	return answer{json: append(b, '\n'), problem: fmt.Sprintf("toolgate: line %d: %v\n", line, err)}
}
