package supervisor

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/toolgate/toolgate/schema"
)

func openDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// clock is a settable clock shared by the queues of one test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	path  string
	db    *sql.DB
	q     *Queue
	clock *clock
}

// newFixture opens a queue on a fresh database file. opts.Now is replaced by
// the fixture's clock; opts.PollInterval defaults to 1 ms so that waits end
// quickly once the clock moves.
func newFixture(t *testing.T, opts QueueOptions) *fixture {
	t.Helper()
	f := &fixture{path: filepath.Join(t.TempDir(), "toolgate.db"), clock: newClock()}
	f.db = openDB(t, f.path)
	t.Cleanup(func() { f.db.Close() })
	f.q = f.open(t, f.db, opts)
	return f
}

func (f *fixture) open(t *testing.T, db *sql.DB, opts QueueOptions) *Queue {
	t.Helper()
	opts.Now = f.clock.Now
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Millisecond
	}
	q, err := OpenQueue(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func request(conv string, step int, command string) schema.Request {
	lvl := schema.LevelSupervised
	return schema.Request{
		Agent:  schema.Agent{ID: "agent_abc", TrustLevel: &lvl, Token: "secret-token"},
		Action: schema.Action{Type: "bash", Arguments: map[string]any{"command": command}},
		Context: schema.Context{ConversationID: conv, StepNumber: step, Blocks: []schema.Block{
			{Trust: schema.Untrusted, Source: "tool:web_fetch", Content: "run " + command},
		}},
	}
}

var tier1 = []schema.Reason{{Code: "DANGER-001", Rule: "dangerous_command", Message: "recursive delete", Where: "action.arguments.command", Outcome: schema.Pending}}

func mustRequest(t *testing.T, q *Queue, req schema.Request) Approval {
	t.Helper()
	a, err := q.Request(context.Background(), req, tier1)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRequestStoresTheCall(t *testing.T) {
	f := newFixture(t, QueueOptions{Timeout: time.Minute})
	a := mustRequest(t, f.q, request("conv_1", 3, "rm -rf /"))
	if !ValidID(a.ID) || a.Status != StatusPending || !a.Deadline.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("new approval: %+v", a)
	}
	got, err := f.q.Get(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AgentID != "agent_abc" || got.ConversationID != "conv_1" || got.Step != 3 || got.ActionType != "bash" ||
		!got.CreatedAt.Equal(a.CreatedAt) || !got.Deadline.Equal(a.Deadline) || got.ResolvedAt != nil {
		t.Errorf("stored approval: %+v", got)
	}
	if len(got.Reasons) != 1 || got.Reasons[0] != tier1[0] {
		t.Errorf("reasons: %+v", got.Reasons)
	}
	if strings.Contains(string(got.Request), "secret-token") {
		t.Errorf("the agent's token was stored: %s", got.Request)
	}
	var req schema.Request
	if err := json.Unmarshal(got.Request, &req); err != nil || req.Action.Arguments["command"] != "rm -rf /" {
		t.Errorf("stored request %s: %v", got.Request, err)
	}
}

func TestRequestRefusesInvalid(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	req := request("", 1, "ls")
	_, err := f.q.Request(context.Background(), req, nil)
	var re *schema.RequestError
	if !errors.As(err, &re) || re.Field != "context.conversation_id" {
		t.Fatalf("err = %v, want a RequestError naming context.conversation_id", err)
	}
}

func TestResolveFirstAnswerWins(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handles    int // 1: one *sql.DB; 2: a second handle, as another process
		contenders int
	}{
		{"one handle", 1, 2},
		{"two handles", 2, 2},
		{"many contenders", 2, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, QueueOptions{})
			queues := []*Queue{f.q}
			if tc.handles == 2 {
				db2 := openDB(t, f.path)
				t.Cleanup(func() { db2.Close() })
				queues = append(queues, f.open(t, db2, QueueOptions{}))
			}
			a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
			type answer struct {
				approve bool
				by      string
				err     error
			}
			answers := make([]answer, tc.contenders)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range answers {
				answers[i] = answer{approve: i%2 == 0, by: fmt.Sprintf("person%d", i)}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, answers[i].err = queues[i%len(queues)].Resolve(context.Background(), a.ID, answers[i].approve, answers[i].by, "")
				}()
			}
			close(start)
			wg.Wait()
			var winners []answer
			for _, ans := range answers {
				switch {
				case ans.err == nil:
					winners = append(winners, ans)
				case !errors.Is(ans.err, ErrAlreadyResolved) || errors.Is(ans.err, ErrExpired):
					t.Errorf("%s: err = %v, want ErrAlreadyResolved", ans.by, ans.err)
				}
			}
			if len(winners) != 1 {
				t.Fatalf("%d winners, want exactly 1: %+v", len(winners), answers)
			}
			got, err := f.q.Get(context.Background(), a.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := StatusDenied
			if winners[0].approve {
				want = StatusApproved
			}
			if got.Status != want || got.ResolvedBy != winners[0].by || got.ResolvedAt == nil {
				t.Errorf("stored %s by %q, want %s by %q", got.Status, got.ResolvedBy, want, winners[0].by)
			}
		})
	}
}

func TestLaterAnswerRefused(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	ctx := context.Background()
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	if _, err := f.q.Resolve(ctx, a.ID, false, "alice", "not on prod"); err != nil {
		t.Fatal(err)
	}
	got, err := f.q.Resolve(ctx, a.ID, true, "bob", "")
	if !errors.Is(err, ErrAlreadyResolved) {
		t.Fatalf("second answer: err = %v, want ErrAlreadyResolved", err)
	}
	if got.Status != StatusDenied || got.ResolvedBy != "alice" || got.Reason != "not on prod" {
		t.Errorf("first answer not kept: %+v", got)
	}
}

func TestResolveErrors(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	ctx := context.Background()
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	absent, _ := newID()
	for _, tc := range []struct {
		name, id, by, reason string
		want                 error
	}{
		{"malformed id", "apr_../../etc", "alice", "", ErrInvalidID},
		{"empty id", "", "alice", "", ErrInvalidID},
		{"unknown id", absent, "alice", "", ErrNotFound},
		{"no approver", a.ID, "  ", "", nil},
		{"reason too long", a.ID, "alice", strings.Repeat("x", maxReasonLen+1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.q.Resolve(ctx, tc.id, true, tc.by, tc.reason)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if got, _ := f.q.Get(ctx, a.ID); got.Status != StatusPending {
		t.Errorf("a refused answer changed the approval: %+v", got)
	}
}

func TestTimeoutDenies(t *testing.T) {
	var events []Event
	var mu sync.Mutex
	f := newFixture(t, QueueOptions{Timeout: 5 * time.Second, OnEvent: func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}})
	ctx := context.Background()
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))

	f.clock.Advance(5 * time.Second) // the deadline itself is too late
	got, err := f.q.Resolve(ctx, a.ID, true, "alice", "")
	if !errors.Is(err, ErrExpired) || !errors.Is(err, ErrAlreadyResolved) {
		t.Fatalf("answer after the deadline: err = %v, want ErrExpired", err)
	}
	if got.Status != StatusExpired || got.ResolvedBy != "" || got.ResolvedAt == nil || !got.ResolvedAt.Equal(a.Deadline) {
		t.Errorf("expired approval: %+v", got)
	}
	if o, r := got.Outcome(); o != schema.Deny || r.Code != CodeApprovalTimeout {
		t.Errorf("outcome %s %s, want deny %s", o, r.Code, CodeApprovalTimeout)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0].Type != EventRequired || events[1].Type != EventResolved || events[1].Approval.Status != StatusExpired {
		t.Errorf("events: %+v", events)
	}
}

func TestWaitEndsAtDeadline(t *testing.T) {
	f := newFixture(t, QueueOptions{Timeout: 5 * time.Second})
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	done := make(chan Approval)
	go func() {
		got, err := f.q.Wait(context.Background(), a.ID)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	f.clock.Advance(6 * time.Second)
	if got := <-done; got.Status != StatusExpired {
		t.Fatalf("Wait returned %+v, want expired", got)
	}
}

func TestWaitWokenInProcess(t *testing.T) {
	// A poll interval of an hour: only the in-process signal can end the wait.
	f := newFixture(t, QueueOptions{PollInterval: time.Hour, Timeout: 2 * time.Hour})
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	done := make(chan Approval)
	go func() {
		got, err := f.q.Wait(context.Background(), a.ID)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	if _, err := f.q.Resolve(context.Background(), a.ID, true, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.Status != StatusApproved || got.ResolvedBy != "alice" {
		t.Fatalf("Wait returned %+v", got)
	}
}

func TestWaitSeesAnotherProcess(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	db2 := openDB(t, f.path)
	t.Cleanup(func() { db2.Close() })
	other := f.open(t, db2, QueueOptions{})
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	done := make(chan Approval)
	go func() {
		got, err := f.q.Wait(context.Background(), a.ID)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	if _, err := other.Resolve(context.Background(), a.ID, false, "bob", "no"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if o, r := got.Outcome(); o != schema.Deny || r.Code != CodeApprovalDenied || !strings.Contains(r.Message, "bob: no") {
		t.Fatalf("Wait returned %+v → %s %+v", got, o, r)
	}
}

func TestWaitContextEnds(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := f.q.Wait(ctx, a.ID)
	if !errors.Is(err, context.Canceled) || got.Status != StatusPending || got.ID != a.ID {
		t.Fatalf("Wait = %+v, %v; want the pending approval and context.Canceled", got, err)
	}
}

func TestRestartKeepsPending(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	a := mustRequest(t, f.q, request("conv_1", 4, "rm -rf /"))
	f.q.Close()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}

	db := openDB(t, f.path)
	t.Cleanup(func() { db.Close() })
	q := f.open(t, db, QueueOptions{})
	pending, err := q.List(context.Background(), StatusPending)
	if err != nil || len(pending) != 1 || pending[0].ID != a.ID {
		t.Fatalf("after restart: %+v, %v", pending, err)
	}
	if _, err := q.Resolve(context.Background(), a.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	got, err := q.Wait(context.Background(), a.ID)
	if err != nil || got.Status != StatusApproved {
		t.Fatalf("Wait after restart: %+v, %v", got, err)
	}
}

func TestMigrateTwice(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	if err := migrateApprovals(context.Background(), f.db); err != nil {
		t.Fatalf("second migration: %v", err)
	}
	if _, err := f.db.Exec(`UPDATE approvals_meta SET value = 99 WHERE key = 'schema_version'`); err != nil {
		t.Fatal(err)
	}
	if err := migrateApprovals(context.Background(), f.db); err == nil {
		t.Fatal("a newer schema was accepted")
	}
}

type countingNotifier struct {
	calls atomic.Int32
	err   error
}

func (n *countingNotifier) Notify(context.Context, Approval) error {
	n.calls.Add(1)
	return n.err
}

func TestHourlyLimit(t *testing.T) {
	n := &countingNotifier{}
	var events atomic.Int32
	f := newFixture(t, QueueOptions{MaxPerHour: 10, Notifier: n, OnEvent: func(e Event) {
		if e.Type == EventRequired {
			events.Add(1)
		}
	}})
	ctx := context.Background()
	for i := 1; i <= 10; i++ {
		mustRequest(t, f.q, request("conv_1", i, "rm -rf /"))
		f.clock.Advance(time.Minute)
	}
	_, err := f.q.Request(ctx, request("conv_1", 11, "rm -rf /"), tier1)
	if !errors.Is(err, ErrRateLimited) {
		t.Fatalf("11th request: err = %v, want ErrRateLimited", err)
	}
	if r := RateLimitedReason(f.q.MaxPerHour()); r.Code != CodeApprovalRateLimited || r.Outcome != schema.Deny {
		t.Errorf("rate limit reason %+v", r)
	}
	f.q.Close()
	all, err := f.q.List(ctx, "all")
	if err != nil || len(all) != 10 {
		t.Errorf("%d approvals stored (%v), want 10", len(all), err)
	}
	if _, found, _ := f.q.FindByStep(ctx, "conv_1", 11); found {
		t.Error("the refused request was stored")
	}
	if c := n.calls.Load(); c != 10 {
		t.Errorf("notifier called %d times, want 10", c)
	}
	if c := events.Load(); c != 10 {
		t.Errorf("%d approval_required events, want 10", c)
	}
	// The first prompt leaves the window after an hour.
	f.clock.Advance(51 * time.Minute)
	if _, err := f.q.Request(ctx, request("conv_1", 12, "rm -rf /"), tier1); err != nil {
		t.Errorf("an hour later: %v", err)
	}
}

func TestHourlyLimitConcurrent(t *testing.T) {
	f := newFixture(t, QueueOptions{MaxPerHour: 5})
	db2 := openDB(t, f.path)
	t.Cleanup(func() { db2.Close() })
	queues := []*Queue{f.q, f.open(t, db2, QueueOptions{MaxPerHour: 5})}
	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := queues[i%2].Request(context.Background(), request("conv_1", i+1, "rm -rf /"), tier1)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrRateLimited):
				limited.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 || limited.Load() != 15 {
		t.Fatalf("%d created, %d limited; want 5 and 15", ok.Load(), limited.Load())
	}
}

func TestNotificationFailureDoesNotApprove(t *testing.T) {
	n := &countingNotifier{err: errors.New("receiver down")}
	f := newFixture(t, QueueOptions{Notifier: n, Timeout: time.Minute})
	a := mustRequest(t, f.q, request("conv_1", 1, "rm -rf /"))
	f.q.Close() // the notification has been attempted
	if n.calls.Load() != 1 {
		t.Fatalf("notifier called %d times", n.calls.Load())
	}
	got, err := f.q.Get(context.Background(), a.ID)
	if err != nil || got.Status != StatusPending {
		t.Fatalf("after a failed notification: %+v, %v", got, err)
	}
	f.clock.Advance(2 * time.Minute)
	got, err = f.q.Wait(context.Background(), a.ID)
	if o, _ := got.Outcome(); err != nil || o != schema.Deny {
		t.Fatalf("after the deadline: %s (%+v, %v), want deny", o, got, err)
	}
}

func TestFindByStep(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	ctx := context.Background()
	if _, found, err := f.q.FindByStep(ctx, "conv_1", 2); found || err != nil {
		t.Fatalf("empty queue: found=%v err=%v", found, err)
	}
	req := request("conv_1", 2, "rm -rf /tmp/x")
	a := mustRequest(t, f.q, req)
	mustRequest(t, f.q, request("conv_2", 2, "rm -rf /tmp/x"))
	got, found, err := f.q.FindByStep(ctx, "conv_1", 2)
	if err != nil || !found || got.ID != a.ID || !got.Pending() {
		t.Fatalf("pending: %+v found=%v err=%v", got, found, err)
	}
	if _, err := f.q.Resolve(ctx, a.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	got, found, err = f.q.FindByStep(ctx, "conv_1", 2)
	if o, r := got.Outcome(); err != nil || !found || o != schema.Allow || r.Code != CodeApprovalGranted || !strings.Contains(r.Message, "alice") {
		t.Fatalf("approved: %+v → %s %+v (found=%v err=%v)", got, o, r, found, err)
	}
	if !got.SameAction(req) {
		t.Error("SameAction false for the same call")
	}
	if got.SameAction(request("conv_1", 2, "rm -rf /")) {
		t.Error("SameAction true for other arguments")
	}
	if _, found, _ := f.q.FindByStep(ctx, "conv_1", 3); found {
		t.Error("found an approval for another step")
	}
}

func TestFindForRequest(t *testing.T) {
	f := newFixture(t, QueueOptions{})
	ctx := context.Background()
	asked := request("conv_1", 2, "rm -rf /tmp/x")
	a := mustRequest(t, f.q, asked)
	f.clock.Advance(time.Second)
	other := mustRequest(t, f.q, request("conv_1", 2, "rm -rf /")) // newer, same step
	if _, err := f.q.Resolve(ctx, a.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	otherAgent := request("conv_1", 2, "rm -rf /tmp/x")
	otherAgent.Agent.ID = "agent_other"
	for _, tc := range []struct {
		name  string
		req   schema.Request
		want  string
		found bool
	}{
		{"the same call", asked, a.ID, true},
		{"the same call, token differs", func() schema.Request { r := asked; r.Agent.Token = "other"; return r }(), a.ID, true},
		{"another command at the step", request("conv_1", 2, "rm -rf /"), other.ID, true},
		{"a command never asked", request("conv_1", 2, "ls"), "", false},
		{"another agent", otherAgent, "", false},
		{"another step", request("conv_1", 3, "rm -rf /tmp/x"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := f.q.FindForRequest(ctx, tc.req)
			if err != nil || found != tc.found || got.ID != tc.want {
				t.Errorf("FindForRequest = %s found=%v err=%v; want %q found=%v", got.ID, found, err, tc.want, tc.found)
			}
		})
	}
}

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   schema.Outcome
		code   string
	}{
		{StatusApproved, schema.Allow, CodeApprovalGranted},
		{StatusDenied, schema.Deny, CodeApprovalDenied},
		{StatusExpired, schema.Deny, CodeApprovalTimeout},
		{StatusPending, schema.Pending, ""},
		{"", schema.Deny, CodeApprovalTimeout},
		{"garbage", schema.Deny, CodeApprovalTimeout},
	} {
		t.Run(tc.status, func(t *testing.T) {
			o, r := Approval{ID: "apr_x", Status: tc.status, ResolvedBy: "alice"}.Outcome()
			if o != tc.want || r.Code != tc.code || r.Outcome != tc.want {
				t.Errorf("Outcome() = %s %+v, want %s %s", o, r, tc.want, tc.code)
			}
		})
	}
}

func TestListAndGet(t *testing.T) {
	f := newFixture(t, QueueOptions{Timeout: time.Minute})
	ctx := context.Background()
	a := mustRequest(t, f.q, request("conv_1", 1, "a"))
	f.clock.Advance(time.Second)
	b := mustRequest(t, f.q, request("conv_1", 2, "b"))
	if _, err := f.q.Resolve(ctx, a.ID, false, "alice", ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		status string
		want   []string
	}{
		{"all", []string{b.ID, a.ID}},
		{"", []string{b.ID, a.ID}},
		{StatusPending, []string{b.ID}},
		{StatusDenied, []string{a.ID}},
		{StatusApproved, nil},
	} {
		got, err := f.q.List(ctx, tc.status)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range got {
			ids = append(ids, x.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
			t.Errorf("List(%q) = %v, want %v", tc.status, ids, tc.want)
		}
	}
	if _, err := f.q.List(ctx, "maybe"); err == nil {
		t.Error("List accepted an unknown status")
	}
	if _, err := f.q.Get(ctx, "nope"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Get(nope) = %v, want ErrInvalidID", err)
	}
}

func TestValidID(t *testing.T) {
	id, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{id, true},
		{"apr_AAAAAAAAAAAAAAAAAAAA-_", true},
		{"apr_AAAAAAAAAAAAAAAAAAAA-", false},
		{"apr_AAAAAAAAAAAAAAAAAAAA/_", false},
		{"xyz_AAAAAAAAAAAAAAAAAAAA-_", false},
		{"", false},
		{"apr_AAAAAAAAAAAAAAAAAAAA'; DROP TABLE approvals; --", false},
	} {
		if got := ValidID(tc.id); got != tc.want {
			t.Errorf("ValidID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

func BenchmarkRequestResolve(b *testing.B) {
	db := openDB(b, filepath.Join(b.TempDir(), "toolgate.db"))
	defer db.Close()
	// An hour passes between calls, as the hourly limit keeps the window
	// small in real use (at most max_per_hour rows).
	c := newClock()
	q, err := OpenQueue(context.Background(), db, QueueOptions{Now: c.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	req := request("conv_1", 1, "rm -rf /")
	ctx := context.Background()
	for b.Loop() {
		c.Advance(time.Hour)
		a, err := q.Request(ctx, req, tier1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := q.Resolve(ctx, a.ID, true, "alice", ""); err != nil {
			b.Fatal(err)
		}
	}
}
