// Command toolgate-load measures `toolgate serve` on loopback: decisions per
// second and latency percentiles at several numbers of concurrent clients,
// with the signed audit log on and off, and optionally OPA's own server on
// an equivalent policy for comparison. Each level also reports the CPU time
// the whole process (server and load generator) spent per request: times the
// rate, it shows whether the two cores or something serial bound the run.
// Every run is bounded in time and in requests, and sends traffic only to
// 127.0.0.1.
//
//	go run ./cmd/toolgate-load -clients 1,8,64 -duration 5s [-opa /tmp/opa]
package main

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/server"
	"github.com/toolgate/toolgate/state"
)

//go:embed opa
var opaPolicy embed.FS

type options struct {
	clients     []int
	duration    time.Duration
	maxRequests int
	warmup      int
	audit       string
	keyType     string
	opa         string
	breakdown   int
}

func main() {
	server.TuneGC() // as toolgate serve does
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "toolgate-load:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fl := flag.NewFlagSet("toolgate-load", flag.ContinueOnError)
	clients := fl.String("clients", "1,8,64", "comma-separated numbers of concurrent clients")
	var o options
	fl.DurationVar(&o.duration, "duration", 5*time.Second, "how long each level runs (at most 60s)")
	fl.IntVar(&o.maxRequests, "max-requests", 200000, "most requests of one level")
	fl.IntVar(&o.warmup, "warmup", 500, "requests sent before each configuration is measured")
	fl.StringVar(&o.audit, "audit", "both", "the signed audit log: on, off or both")
	fl.StringVar(&o.keyType, "key-type", audit.DefaultKeyType, "the audit key: ed25519 or ecdsa-p256 (as toolgate keys generate --type)")
	fl.StringVar(&o.opa, "opa", "", "path of an opa binary: also measure OPA's server on an equivalent policy")
	fl.IntVar(&o.breakdown, "breakdown", 2000, "sequential decisions for the per-stage timing without HTTP (0: skip)")
	cpuProfile := fl.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fl.Parse(args); err != nil {
		return err
	}
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1024 {
			return fmt.Errorf("-clients: %q is not a number from 1 to 1024", s)
		}
		o.clients = append(o.clients, n)
	}
	if o.duration <= 0 || o.duration > time.Minute {
		return errors.New("-duration: between 0 and 60s")
	}
	if err := audit.CheckKeyType(o.keyType); err != nil {
		return fmt.Errorf("-key-type: %w", err)
	}
	var audits []bool
	switch o.audit {
	case "on":
		audits = []bool{true}
	case "off":
		audits = []bool{false}
	case "both":
		audits = []bool{true, false}
	default:
		return fmt.Errorf("-audit: %q is not on, off or both", o.audit)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	gc := debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	fmt.Fprintf(out, "toolgate-load: GOMAXPROCS=%d, GC percent %d, %s per level, loopback only\n", runtime.GOMAXPROCS(0), gc, o.duration)
	results := map[string][]result{}
	for _, withAudit := range audits {
		name := "toolgate, audit on (" + o.keyType + ")"
		if !withAudit {
			name = "toolgate, audit off"
		}
		rs, err := loadToolgate(out, name, withAudit, o)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results[name] = rs
	}
	if o.opa != "" {
		rs, err := loadOPA(out, o)
		if err != nil {
			return fmt.Errorf("opa: %w", err)
		}
		for name, trs := range results {
			fmt.Fprintf(out, "\nratio %s / OPA (decisions per second):\n", name)
			for i := range trs {
				fmt.Fprintf(out, "  %3d clients: %.2f\n", trs[i].clients, trs[i].rate/rs[i].rate)
			}
		}
	}
	return nil
}

// target is what one load level sends to.
type target struct {
	addr, path string
	header     []string // "Name: value" lines besides Host and Content-Length
	body       func(worker, i int) []byte
	ok         func(status int, body []byte) bool
}

type result struct {
	clients  int
	requests int
	errors   int
	rate     float64
	p50, p99 time.Duration
	max      time.Duration
	cpu      time.Duration // CPU time of the whole process per request (load generator included), 0 if unknown
	heap     [2]uint64     // heap in use at the start and end of the level
	rss      [2]int64
}

func (r result) String() string {
	cpu := "?"
	if r.cpu > 0 {
		cpu = r.cpu.Round(time.Microsecond).String()
	}
	return fmt.Sprintf("%3d clients: %7d requests, %5d errors, %8.0f decisions/s, p50 %7s, p99 %7s, max %7s; CPU %s/request; heap %s -> %s, RSS %s -> %s",
		r.clients, r.requests, r.errors, r.rate, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.max.Round(time.Microsecond),
		cpu, mib(int64(r.heap[0])), mib(int64(r.heap[1])), mib(r.rss[0]), mib(r.rss[1]))
}

func mib(b int64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

func loadToolgate(out io.Writer, name string, withAudit bool, o options) ([]result, error) {
	dir, err := os.MkdirTemp("", "toolgate-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg, err := config.Load("")
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	vopts := []toolgate.Option{toolgate.WithDB(filepath.Join(dir, "toolgate.db"))}
	if withAudit {
		key, _, err := audit.GenerateKey(filepath.Join(dir, "keys"), o.keyType, "")
		if err != nil {
			return nil, err
		}
		vopts = append(vopts, toolgate.WithAuditKey(key))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := server.New(ctx, cfg, server.Options{Logger: logger}, vopts...)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	agent, token, err := srv.Verifier().Store().RegisterAgent(ctx, state.AgentSpec{Name: "load", Trust: schema.LevelSupervised})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	sent := 0
	if o.breakdown > 0 {
		if err := breakdown(ctx, out, name, srv.Verifier(), agent.ID, token, o.breakdown); err != nil {
			return nil, err
		}
		sent += o.breakdown // each one is audited too
	}
	var run atomic.Int64 // distinct conversations across levels
	prefix := fmt.Sprintf(`{"agent":{"id":%q},"action":{"type":"calculate","arguments":{"query":"2+2"}},"context":{"conversation_id":"`, agent.ID)
	t := target{
		addr:   ln.Addr().String(),
		path:   "/v1/verify",
		header: []string{"Authorization: Bearer " + token, "Content-Type: application/json"},
		body: func(worker, i int) []byte {
			return []byte(prefix + "r" + strconv.FormatInt(run.Load(), 10) + "w" + strconv.Itoa(worker) + "i" + strconv.Itoa(i) + `","step_number":1}}`)
		},
		ok: func(status int, body []byte) bool {
			return status == http.StatusOK && bytes.HasPrefix(body, []byte(`{"decision":"allow"`))
		},
	}
	fmt.Fprintf(out, "\n%s (POST /v1/verify, Tier 1 allow, state on):\n", name)
	run.Add(1)
	w, err := level(t, 8, 8, time.Minute, o.warmup)
	if err != nil {
		return nil, err
	}
	sent += w.requests
	var rs []result
	for _, c := range o.clients {
		run.Add(1)
		r, err := level(t, c, c, o.duration, o.maxRequests)
		if err != nil {
			return nil, err
		}
		sent += r.requests
		fmt.Fprintln(out, " ", r)
		rs = append(rs, r)
	}
	cancel()
	if err := <-served; err != nil {
		return nil, err
	}
	var rows int
	if withAudit {
		if err := srv.Verifier().Store().DB().QueryRow(`SELECT count(*) FROM audit_entries`).Scan(&rows); err != nil {
			return nil, fmt.Errorf("count audit rows: %w", err)
		}
		fmt.Fprintf(out, "  audit rows %d, requests %d: %s\n", rows, sent, map[bool]string{true: "equal", false: "DIFFERENT"}[rows == sent])
		if rows != sent {
			return rs, fmt.Errorf("audit rows %d != requests %d", rows, sent)
		}
	}
	return rs, nil
}

// breakdown times the stages of one decision without HTTP, sequentially:
// the engine alone, then the whole Verify (state and, when on, audit).
func breakdown(ctx context.Context, out io.Writer, name string, v *toolgate.Verifier, agent, token string, n int) error {
	req := func(i int) schema.Request {
		return schema.Request{
			Agent:   schema.Agent{ID: agent, Token: token},
			Action:  schema.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}},
			Context: schema.Context{ConversationID: "breakdown" + strconv.Itoa(i), StepNumber: 1},
		}
	}
	start := time.Now()
	for i := range n {
		r := req(i)
		if _, err := v.Engine().Evaluate(ctx, &r, nil); err != nil {
			return err
		}
	}
	eval := time.Since(start) / time.Duration(n)
	start = time.Now()
	for i := range n {
		vd, err := v.Verify(ctx, req(i))
		if err != nil {
			return err
		}
		if vd.Outcome != schema.Allow {
			return fmt.Errorf("breakdown: %s %v", vd.Outcome, vd.Codes())
		}
	}
	verify := time.Since(start) / time.Duration(n)
	fmt.Fprintf(out, "\n%s, stages without HTTP (%d sequential decisions): engine.Evaluate %s, Verify %s (state and audit: %s)\n",
		name, n, eval.Round(time.Microsecond), verify.Round(time.Microsecond), (verify - eval).Round(time.Microsecond))
	return nil
}

// level runs clients workers for at most d and at most max requests.
func level(t target, clients, workersLabel int, d time.Duration, max int) (result, error) {
	var (
		count   atomic.Int64
		errs    atomic.Int64
		mu      sync.Mutex
		lats    []time.Duration
		firstEr atomic.Value
	)
	heap0, rss0 := memory()
	cpu0 := processCPU()
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			c := newClient(t.addr, t.path, t.header, 30*time.Second)
			defer c.close()
			local := make([]time.Duration, 0, 4096)
			for i := 0; ; i++ {
				if count.Add(1) > int64(max) || time.Now().After(deadline) {
					count.Add(-1)
					break
				}
				body := t.body(w, i)
				t0 := time.Now()
				status, b, err := c.post(body)
				if err != nil {
					errs.Add(1)
					firstEr.CompareAndSwap(nil, err.Error())
					continue
				}
				local = append(local, time.Since(t0))
				if !t.ok(status, b) {
					errs.Add(1)
					firstEr.CompareAndSwap(nil, fmt.Sprintf("status %d: %.200s", status, b))
				}
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	runtime.GC()
	heap1, rss1 := memory()
	slices.Sort(lats)
	r := result{clients: workersLabel, requests: int(count.Load()), errors: int(errs.Load()),
		heap: [2]uint64{heap0, heap1}, rss: [2]int64{rss0, rss1}}
	if len(lats) > 0 {
		if cpu0 > 0 {
			r.cpu = cpu / time.Duration(len(lats))
		}
		r.rate = float64(len(lats)) / elapsed.Seconds()
		r.p50 = lats[len(lats)/2]
		r.p99 = lats[min(len(lats)-1, len(lats)*99/100)]
		r.max = lats[len(lats)-1]
	}
	if r.errors > 0 {
		return r, fmt.Errorf("%d errors at %d clients; first: %v", r.errors, clients, firstEr.Load())
	}
	return r, nil
}

func memory() (uint64, int64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var rss int64
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return ms.HeapInuse, rss
}

// loadOPA starts `opa run --server` on loopback with the comparison policy
// and the default bundle's registry and matrix, and measures it the same way.
func loadOPA(out io.Writer, o options) ([]result, error) {
	dir, err := os.MkdirTemp("", "toolgate-load-opa-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rego, err := fs.ReadFile(opaPolicy, "opa/simple.rego")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"simple.rego": rego}
	for _, p := range []string{"toolgate/registry/data.json", "toolgate/config/data.json"} {
		b, err := fs.ReadFile(policies.FS, p)
		if err != nil {
			return nil, err
		}
		files[p] = b
	}
	for p, b := range files {
		full := filepath.Join(dir, "bundle", p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.opa, "run", "--server", "--addr", addr, "--skip-version-check",
		"--log-level", "error", "--bundle", filepath.Join(dir, "bundle"))
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	up := false
	for range 100 {
		if res, err := http.Get("http://" + addr + "/health?bundles"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				up = true
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !up {
		return nil, errors.New("opa did not become healthy in 10 s")
	}
	t := target{
		addr:   addr,
		path:   "/v1/data/toolgate/simple/decision",
		header: []string{"Content-Type: application/json"},
		body: func(worker, i int) []byte {
			return []byte(`{"input":{"agent":{"id":"agent_load","trust_level":"supervised"},"action":{"type":"calculate","arguments":{"query":"2+2"}},"context":{"conversation_id":"w` +
				strconv.Itoa(worker) + "i" + strconv.Itoa(i) + `","step_number":1}}}`)
		},
		ok: func(status int, body []byte) bool {
			return status == http.StatusOK && bytes.Contains(body, []byte(`"decision":"allow"`))
		},
	}
	fmt.Fprintf(out, "\nOPA %s (POST /v1/data/toolgate/simple/decision, registry + matrix only, no state, no audit; memory and CPU figures are this process's, not OPA's):\n", opaVersion(o.opa))
	if _, err := level(t, 8, 8, time.Minute, o.warmup); err != nil {
		return nil, err
	}
	var rs []result
	for _, c := range o.clients {
		r, err := level(t, c, c, o.duration, o.maxRequests)
		if err != nil {
			return nil, err
		}
		fmt.Fprintln(out, " ", r)
		rs = append(rs, r)
	}
	return rs, nil
}

func opaVersion(bin string) string {
	b, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "(version unknown)"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Version: "); ok {
			return v
		}
	}
	return ""
}
