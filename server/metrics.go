package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// latencyBuckets are the upper bounds (seconds) of the decision latency
// histograms: Tier 1 lands in the first few, a person's answer in the last.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// maxCodeSeries bounds the label sets of toolgate_decisions_total: a policy
// may invent codes, and a scrape must stay small. Past it, code="other".
const maxCodeSeries = 2000

type decisionKey struct {
	decision string
	tier     int
	code     string
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	count  uint64
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(latencyBuckets, v)
	h.counts[i]++
	h.sum += v
	h.count++
}

type httpKey struct {
	route  string
	status int
}

// metrics are written by hand in Prometheus' text exposition format (0.0.4):
// a few counters, gauges and histograms need no client library.
type metrics struct {
	mu        sync.Mutex
	decisions map[decisionKey]uint64
	latency   map[int]*histogram // by tier
	http      map[httpKey]uint64
	invalid   uint64 // requests refused before a decision (400, 413)

	inFlight atomic.Int64
	start    time.Time
}

func newMetrics() *metrics {
	return &metrics{decisions: map[decisionKey]uint64{}, latency: map[int]*histogram{}, http: map[httpKey]uint64{}, start: time.Now()}
}

func (m *metrics) decision(outcome string, tier int, code string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := decisionKey{outcome, tier, code}
	if _, ok := m.decisions[k]; !ok && len(m.decisions) >= maxCodeSeries {
		k.code = "other"
	}
	m.decisions[k]++
	h := m.latency[tier]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.latency[tier] = h
	}
	h.observe(d.Seconds())
}

func (m *metrics) request(route string, status int) {
	m.mu.Lock()
	m.http[httpKey{route, status}]++
	if route == "/v1/verify" && (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge) {
		m.invalid++
	}
	m.mu.Unlock()
}

// gauges are read at scrape time.
type gauges struct {
	approvalsPending int
	approvalsErr     bool
	eventClients     int
	eventsDropped    int64
	eventsSent       int64
	bundleLoaded     int64
	bundleRefused    int64
	bundleFetchErr   int64
	poller           bool
	ready            bool
}

func (m *metrics) write(w io.Writer, g gauges) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }

	m.mu.Lock()
	dks := make([]decisionKey, 0, len(m.decisions))
	for k := range m.decisions {
		dks = append(dks, k)
	}
	slices.SortFunc(dks, func(a, b decisionKey) int {
		return strings.Compare(fmt.Sprint(a.decision, a.tier, a.code), fmt.Sprint(b.decision, b.tier, b.code))
	})
	p("# HELP toolgate_decisions_total Verdicts returned by POST /v1/verify, by final decision, the tier that settled it, and the deciding reason code.\n")
	p("# TYPE toolgate_decisions_total counter\n")
	for _, k := range dks {
		p("toolgate_decisions_total{decision=%s,tier=\"%d\",code=%s} %d\n", quote(k.decision), k.tier, quote(k.code), m.decisions[k])
	}
	tiers := make([]int, 0, len(m.latency))
	for t := range m.latency {
		tiers = append(tiers, t)
	}
	slices.Sort(tiers)
	p("# HELP toolgate_decision_duration_seconds Time to a verdict on POST /v1/verify (a person's wait included), by the tier that settled it.\n")
	p("# TYPE toolgate_decision_duration_seconds histogram\n")
	for _, t := range tiers {
		h := m.latency[t]
		var cum uint64
		for i, ub := range latencyBuckets {
			cum += h.counts[i]
			p("toolgate_decision_duration_seconds_bucket{tier=\"%d\",le=\"%s\"} %d\n", t, strconv.FormatFloat(ub, 'g', -1, 64), cum)
		}
		cum += h.counts[len(latencyBuckets)]
		p("toolgate_decision_duration_seconds_bucket{tier=\"%d\",le=\"+Inf\"} %d\n", t, cum)
		p("toolgate_decision_duration_seconds_sum{tier=\"%d\"} %s\n", t, strconv.FormatFloat(h.sum, 'g', -1, 64))
		p("toolgate_decision_duration_seconds_count{tier=\"%d\"} %d\n", t, h.count)
	}
	hks := make([]httpKey, 0, len(m.http))
	for k := range m.http {
		hks = append(hks, k)
	}
	slices.SortFunc(hks, func(a, b httpKey) int {
		if c := strings.Compare(a.route, b.route); c != 0 {
			return c
		}
		return a.status - b.status
	})
	p("# HELP toolgate_http_requests_total HTTP requests answered, by route pattern and status code.\n")
	p("# TYPE toolgate_http_requests_total counter\n")
	for _, k := range hks {
		p("toolgate_http_requests_total{route=%s,code=\"%d\"} %d\n", quote(k.route), k.status, m.http[k])
	}
	p("# HELP toolgate_verify_invalid_total Requests to POST /v1/verify refused before a decision (400, 413).\n")
	p("# TYPE toolgate_verify_invalid_total counter\n")
	p("toolgate_verify_invalid_total %d\n", m.invalid)
	m.mu.Unlock()

	p("# HELP toolgate_verify_in_flight Requests to POST /v1/verify being decided (waiting for a person included).\n")
	p("# TYPE toolgate_verify_in_flight gauge\n")
	p("toolgate_verify_in_flight %d\n", m.inFlight.Load())
	if !g.approvalsErr {
		p("# HELP toolgate_approvals_pending Approvals waiting for a person.\n")
		p("# TYPE toolgate_approvals_pending gauge\n")
		p("toolgate_approvals_pending %d\n", g.approvalsPending)
	}
	p("# HELP toolgate_events_clients Open GET /v1/events streams.\n")
	p("# TYPE toolgate_events_clients gauge\n")
	p("toolgate_events_clients %d\n", g.eventClients)
	p("# HELP toolgate_events_sent_total Events queued to stream clients.\n")
	p("# TYPE toolgate_events_sent_total counter\n")
	p("toolgate_events_sent_total %d\n", g.eventsSent)
	p("# HELP toolgate_events_dropped_clients_total Stream clients dropped because they did not keep up.\n")
	p("# TYPE toolgate_events_dropped_clients_total counter\n")
	p("toolgate_events_dropped_clients_total %d\n", g.eventsDropped)
	if g.poller {
		p("# HELP toolgate_bundle_polls_total Bundle polls, by result.\n")
		p("# TYPE toolgate_bundle_polls_total counter\n")
		p("toolgate_bundle_polls_total{result=\"loaded\"} %d\n", g.bundleLoaded)
		p("toolgate_bundle_polls_total{result=\"refused\"} %d\n", g.bundleRefused)
		p("toolgate_bundle_polls_total{result=\"fetch_error\"} %d\n", g.bundleFetchErr)
	}
	p("# HELP toolgate_ready Whether the server is ready (engine loaded, database reachable).\n")
	p("# TYPE toolgate_ready gauge\n")
	p("toolgate_ready %d\n", b2i(g.ready))

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p("# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	p("# HELP go_memstats_heap_alloc_bytes Bytes of allocated heap objects.\n# TYPE go_memstats_heap_alloc_bytes gauge\ngo_memstats_heap_alloc_bytes %d\n", ms.HeapAlloc)
	p("# HELP go_memstats_sys_bytes Bytes obtained from the OS.\n# TYPE go_memstats_sys_bytes gauge\ngo_memstats_sys_bytes %d\n", ms.Sys)
	if rss, ok := residentBytes(); ok {
		p("# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %d\n", rss)
	}
	p("# HELP process_start_time_seconds Start time of the process since the Unix epoch.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %d\n", m.start.Unix())
	return bw.Flush()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// quote escapes a label value as the exposition format wants.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ResidentBytes is the process's resident set size, from /proc (Linux).
func residentBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// serveMetrics is GET /metrics.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	g := gauges{
		eventClients:  s.events.count(),
		eventsDropped: s.events.dropped.Load(),
		eventsSent:    s.events.sent.Load(),
		ready:         s.readiness(ctx) == nil,
	}
	if list, err := s.queue.List(ctx, "pending"); err == nil {
		g.approvalsPending = len(list)
	} else {
		g.approvalsErr = true
	}
	if s.opts.Poller != nil {
		st := s.opts.Poller.Stats()
		g.poller, g.bundleLoaded, g.bundleRefused, g.bundleFetchErr = true, st.Loaded, st.Refused, st.FetchErrors
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = s.metrics.write(w, g)
}
