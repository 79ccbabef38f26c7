package state

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/schema"
)

func request(agent, convo string, step int, action string, args map[string]any, stateHash string) schema.Request {
	r := schema.Request{
		Agent:   schema.Agent{ID: agent},
		Action:  schema.Action{Type: action, Arguments: args},
		Context: schema.Context{ConversationID: convo, StepNumber: step, PreActionStateHash: stateHash},
	}
	if stateHash != "" {
		r.Context.StateSource = "git_tree"
	}
	return r
}

var t0 = time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)

// loop003 is what the policy decides from the facts: the same fingerprint
// approved twice in a row.
func loop003(f schema.Facts) bool {
	r := f.Conversation.Recent
	n := len(r)
	return n >= 2 && r[n-1] == f.Conversation.Fingerprint && r[n-2] == f.Conversation.Fingerprint
}

func count(list []string, fp string) int {
	n := 0
	for _, x := range list {
		if x == fp {
			n++
		}
	}
	return n
}

func TestWalkThrough(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	calc := map[string]any{"query": "2+2"}
	steps := []struct {
		step     int
		action   string
		args     map[string]any
		commit   bool // what the policy decided
		check    func(t *testing.T, f schema.Facts)
		lastStep int
	}{
		{1, "calculate", calc, true, func(t *testing.T, f schema.Facts) {
			if len(f.Conversation.Recent) != 0 || f.Conversation.LastStep != 0 {
				t.Errorf("new conversation has history: %+v", f.Conversation)
			}
		}, 1},
		{2, "calculate", calc, true, func(t *testing.T, f schema.Facts) {
			if loop003(f) {
				t.Error("LOOP-003 facts after one approval")
			}
		}, 2},
		{3, "calculate", calc, false, func(t *testing.T, f schema.Facts) {
			if !loop003(f) {
				t.Errorf("want Recent ending with this fingerprint twice: %+v", f.Conversation)
			}
		}, 2},
		{3, "verify_logic", map[string]any{"query": "x > 1"}, true, func(t *testing.T, f schema.Facts) {
			if loop003(f) || f.Conversation.LastStep != 2 || f.Conversation.StepsApproved != 2 {
				t.Errorf("retry of step 3 with another action: %+v", f.Conversation)
			}
		}, 3},
		{1, "calculate", calc, false, func(t *testing.T, f schema.Facts) {
			if f.Conversation.LastStep < 1 {
				t.Errorf("replay of step 1 not visible: last_step %d", f.Conversation.LastStep)
			}
		}, 3},
	}
	for i, st := range steps {
		now := t0.Add(time.Duration(i) * time.Second)
		res, f, err := s.Reserve(ctx, request("agent_a", "conv_1", st.step, st.action, st.args, ""), ReserveOptions{Now: now})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if res == nil || f.Conversation.Reserved {
			t.Fatalf("step %d: not reserved", i)
		}
		if f.Conversation.Fingerprint != Fingerprint(st.action, st.args, "") {
			t.Errorf("step %d: fingerprint %s", i, f.Conversation.Fingerprint)
		}
		st.check(t, f)
		if st.commit {
			err = res.Commit(ctx, 0)
		} else {
			err = res.Release(ctx)
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		cf, err := s.Conversation(ctx, "agent_a", "conv_1")
		if err != nil {
			t.Fatal(err)
		}
		if cf.LastStep != st.lastStep {
			t.Errorf("step %d: last_step %d, want %d", i, cf.LastStep, st.lastStep)
		}
	}
	cf, _ := s.Conversation(ctx, "agent_a", "conv_1")
	want := []string{Fingerprint("calculate", calc, ""), Fingerprint("calculate", calc, ""), Fingerprint("verify_logic", map[string]any{"query": "x > 1"}, "")}
	if strings.Join(cf.Recent, ",") != strings.Join(want, ",") || cf.StepsApproved != 3 {
		t.Errorf("history %+v, want %v and 3 steps", cf, want)
	}
}

func TestLoop004Facts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	h1, h2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	args := map[string]any{"path": "README.md"}
	// read on h1, edit, read on h1 again, edit, read on h1: the third read on
	// the same unchanged state is what LOOP-004 catches.
	plan := []struct {
		action, hash string
	}{{"read_file", h1}, {"write_file", h1}, {"read_file", h1}, {"write_file", h2}, {"read_file", h1}}
	for i, p := range plan {
		res, f, err := s.Reserve(ctx, request("a", "c", i+1, p.action, args, p.hash), ReserveOptions{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			if got := count(f.Conversation.Recent, f.Conversation.Fingerprint); got != 2 {
				t.Errorf("prior approvals of the same action on the same state = %d, want 2 (third is denied)", got)
			}
			if loop003(f) {
				t.Error("not consecutive: LOOP-003 must not apply")
			}
			res.Release(ctx)
			break
		}
		if err := res.Commit(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The same action on another state is another fingerprint.
	if Fingerprint("read_file", args, h1) == Fingerprint("read_file", args, h2) {
		t.Error("state hash does not change the fingerprint")
	}
}

func TestRecentKeepsTheLastTwenty(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var all []string
	for i := 1; i <= 25; i++ {
		args := map[string]any{"i": i}
		all = append(all, Fingerprint("calculate", args, ""))
		res, _, err := s.Reserve(ctx, request("a", "c", i, "calculate", args, ""), ReserveOptions{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Commit(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	_, f, err := s.Reserve(ctx, request("a", "c", 26, "calculate", nil, ""), ReserveOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.Conversation.Recent, ",") != strings.Join(all[5:], ",") {
		t.Errorf("Recent is not the last 20 oldest first: %d items", len(f.Conversation.Recent))
	}
	if f.Conversation.StepsApproved != 25 || f.Conversation.LastStep != 25 {
		t.Errorf("conversation %+v", f.Conversation)
	}
}

func TestConcurrentReserveOneWinner(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		winners  []*Reservation
		reserved int
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			res, f, err := s.Reserve(ctx, request("a", "c", 7, "calculate", map[string]any{"i": i}, ""), ReserveOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("Reserve: %v", err)
			case res != nil && !f.Conversation.Reserved:
				winners = append(winners, res)
			case res == nil && f.Conversation.Reserved:
				reserved++
			default:
				t.Errorf("inconsistent: reservation %v, facts reserved %v", res != nil, f.Conversation.Reserved)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 || reserved != n-1 {
		t.Fatalf("%d live reservations and %d saw Reserved, want 1 and %d", len(winners), reserved, n-1)
	}
	if err := winners[0].Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	cf, _ := s.Conversation(ctx, "a", "c")
	if cf.StepsApproved != 1 || cf.LastStep != 7 {
		t.Errorf("conversation %+v", cf)
	}
}

func TestReservationLifecycle(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	req := request("a", "c", 1, "calculate", map[string]any{"query": "2+2"}, "")
	opts := ReserveOptions{Now: t0, TTL: time.Minute}

	// inFlight counts the reservations held, for the writer's linger.
	inFlight := func(want int64) {
		t.Helper()
		if got := s.inFlight.Load(); got != want {
			t.Errorf("%d reservations in flight, want %d", got, want)
		}
	}
	first, _, err := s.Reserve(ctx, req, opts)
	if err != nil || first == nil {
		t.Fatalf("Reserve: %v %v", first, err)
	}
	inFlight(1)
	// In flight: a second request on the step sees Reserved and gets a nil,
	// no-op reservation.
	second, f, err := s.Reserve(ctx, req, opts)
	if err != nil || second != nil || !f.Conversation.Reserved {
		t.Fatalf("second Reserve: %v %+v %v", second, f.Conversation, err)
	}
	if err := second.Commit(ctx, 1); err != nil {
		t.Errorf("nil Commit: %v", err)
	}
	if err := second.Release(ctx); err != nil {
		t.Errorf("nil Release: %v", err)
	}
	inFlight(1)
	// Released: the step is free again and nothing was consumed.
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if err := first.Commit(ctx, 0); !errors.Is(err, ErrReservationLost) {
		t.Errorf("Commit after Release: %v, want ErrReservationLost", err)
	}
	inFlight(0)
	third, f, err := s.Reserve(ctx, req, opts)
	if err != nil || third == nil || f.Conversation.StepsApproved != 0 {
		t.Fatalf("Reserve after Release: %v %+v %v", third, f.Conversation, err)
	}
	// Expired: a later request replaces the reservation, and the old holder
	// can no longer commit.
	later := opts
	later.Now = t0.Add(2 * time.Minute)
	fourth, f, err := s.Reserve(ctx, req, later)
	if err != nil || fourth == nil || f.Conversation.Reserved {
		t.Fatalf("Reserve after expiry: %v %+v %v", fourth, f.Conversation, err)
	}
	inFlight(2)
	if err := third.Commit(ctx, 0); !errors.Is(err, ErrReservationLost) {
		t.Errorf("Commit of a replaced reservation: %v, want ErrReservationLost", err)
	}
	inFlight(1)
	if err := fourth.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := fourth.Release(ctx); err != nil {
		t.Errorf("Release after Commit: %v", err)
	}
	if err := fourth.Commit(ctx, 0); !errors.Is(err, ErrReservationLost) {
		t.Errorf("second Commit: %v, want ErrReservationLost", err)
	}
	inFlight(0)
	cf, _ := s.Conversation(ctx, "a", "c")
	if cf.StepsApproved != 1 || len(cf.Recent) != 1 {
		t.Errorf("conversation %+v, want one step consumed", cf)
	}
	if err := fourth.Commit(ctx, -1); err == nil {
		t.Error("negative cost accepted")
	}
	// Inside a write of the caller's: settled once that commits, and not
	// when it rolls back.
	for i, settle := range []func(*Reservation, context.Context, *Tx, func(func())) error{
		func(r *Reservation, ctx context.Context, tx *Tx, on func(func())) error {
			return r.CommitIn(ctx, tx, on, 0)
		},
		func(r *Reservation, ctx context.Context, tx *Tx, on func(func())) error {
			return r.ReleaseIn(ctx, tx, on)
		},
	} {
		r, _, err := s.Reserve(ctx, request("a", "c", 2+i, "calculate", nil, ""), opts)
		if err != nil || r == nil {
			t.Fatalf("Reserve: %v %v", r, err)
		}
		errUndo := errors.New("undo")
		err = s.Write(ctx, "test", func(ctx context.Context, tx *Tx, on func(func())) error {
			if err := settle(r, ctx, tx, on); err != nil {
				return err
			}
			return errUndo
		})
		if !errors.Is(err, errUndo) {
			t.Fatalf("Write: %v", err)
		}
		inFlight(1)
		if err := s.Write(ctx, "test", func(ctx context.Context, tx *Tx, on func(func())) error {
			return settle(r, ctx, tx, on)
		}); err != nil {
			t.Fatal(err)
		}
		inFlight(0)
	}
}

func TestConversationsAreKeyedByAgent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	res, _, err := s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, f, err := s.Reserve(ctx, request("b", "c", 1, "calculate", nil, ""), ReserveOptions{})
	if err != nil || other == nil || f.Conversation.Reserved {
		t.Fatalf("agent b blocked by agent a's conversation: %+v %v", f.Conversation, err)
	}
	res.Commit(ctx, 0)
	other.Release(ctx)
}

func TestAgentFacts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, token, err := s.RegisterAgent(ctx, AgentSpec{Name: "builder", Trust: schema.LevelAutonomous,
		AllowedTools: []string{"bash", "read_file"}, BlockedTools: []string{"web_fetch"}, MaxDailyCostUSD: 5, MaxRequestsPerHour: 100})
	if err != nil {
		t.Fatal(err)
	}
	revoked, rtoken, err := s.RegisterAgent(ctx, AgentSpec{Name: "old", Trust: schema.LevelTrusted})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAgent(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		agent    schema.Agent
		required bool
		want     schema.AgentFacts
	}{
		{"registered, right token", schema.Agent{ID: a.ID, Token: token}, true,
			schema.AgentFacts{Registered: true, TokenRequired: true, TokenValid: true}},
		{"registered, wrong token", schema.Agent{ID: a.ID, Token: token + "x"}, true,
			schema.AgentFacts{Registered: true, TokenRequired: true}},
		{"registered, another agent's token", schema.Agent{ID: a.ID, Token: rtoken}, true,
			schema.AgentFacts{Registered: true, TokenRequired: true}},
		{"registered, no token", schema.Agent{ID: a.ID}, true,
			schema.AgentFacts{Registered: true, TokenRequired: true}},
		{"registered, registration optional", schema.Agent{ID: a.ID, Token: token}, false,
			schema.AgentFacts{Registered: true, TokenValid: true}},
		{"revoked", schema.Agent{ID: revoked.ID, Token: rtoken}, true,
			schema.AgentFacts{Registered: true, Revoked: true, TokenRequired: true, TokenValid: true}},
		{"unregistered, required", schema.Agent{ID: "stranger", Token: token}, true,
			schema.AgentFacts{TokenRequired: true}},
		{"unregistered, optional", schema.Agent{ID: "stranger"}, false, schema.AgentFacts{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request("", "conv", i+1, "bash", nil, "")
			req.Agent = tt.agent
			res, f, err := s.Reserve(ctx, req, ReserveOptions{RequireRegistration: tt.required, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release(ctx)
			got := *f.Agent
			if got.Registered != tt.want.Registered || got.Revoked != tt.want.Revoked ||
				got.TokenRequired != tt.want.TokenRequired || got.TokenValid != tt.want.TokenValid {
				t.Errorf("facts %+v, want %+v", got, tt.want)
			}
			if !got.Registered {
				if got.TrustLevel != nil || f.Budget.MaxDailyCostUSD != 0 || f.Budget.MaxRequestsPerHour != 0 {
					t.Errorf("unregistered agent has registry facts: %+v %+v", got, *f.Budget)
				}
				return
			}
			if tt.agent.ID == a.ID {
				if got.TrustLevel == nil || *got.TrustLevel != schema.LevelAutonomous ||
					strings.Join(got.AllowedTools, ",") != "bash,read_file" || strings.Join(got.BlockedTools, ",") != "web_fetch" {
					t.Errorf("registry facts %+v", got)
				}
				if f.Budget.MaxDailyCostUSD != 5 || f.Budget.MaxRequestsPerHour != 100 {
					t.Errorf("budget limits %+v", *f.Budget)
				}
			}
		})
	}
}

func TestFactsJSON(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	_, f, err := s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	// A new conversation's recent list is [] rather than null, so the policy
	// can count over it.
	if !strings.Contains(string(b), `"recent":[]`) {
		t.Errorf("facts JSON %s", b)
	}
	nf := NoFacts()
	if nf.Agent != nil || nf.Conversation != nil || nf.Budget != nil || len(nf.NotApplied) != 3 {
		t.Errorf("NoFacts %+v", nf)
	}
}

func TestBudget(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, _, err := s.RegisterAgent(ctx, AgentSpec{Name: "b", Trust: schema.LevelSupervised, MaxDailyCostUSD: 1, MaxRequestsPerHour: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Requests at 10:00, 10:20, 10:40 (each committed with a cost), then
	// reads at several times.
	for i, cost := range []float64{0.25, 0.5, 0.125} {
		now := t0.Add(time.Duration(i) * 20 * time.Minute)
		res, f, err := s.Reserve(ctx, request(a.ID, "c", i+1, "calculate", nil, ""), ReserveOptions{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if f.Budget.RequestsLastHour != i+1 {
			t.Errorf("request %d: requests_last_hour %d (this one included)", i+1, f.Budget.RequestsLastHour)
		}
		if err := res.Commit(ctx, cost); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		at       time.Time
		requests int
		cost     float64
	}{
		{"just after", t0.Add(41 * time.Minute), 3, 0.875},
		{"first request slides out", t0.Add(61 * time.Minute), 2, 0.875},
		{"all out of the hour", t0.Add(101 * time.Minute), 0, 0.875},
		{"next UTC day", time.Date(2026, 3, 15, 0, 0, 1, 0, time.UTC), 0, 0},
		{"same instant in another zone", t0.Add(41 * time.Minute).In(time.FixedZone("X", 13*3600)), 3, 0.875},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := s.Budget(ctx, a.ID, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			if b.RequestsLastHour != tt.requests || b.CostTodayUSD != tt.cost || b.MaxRequestsPerHour != 3 || b.MaxDailyCostUSD != 1 {
				t.Errorf("budget %+v, want %d requests and $%v", b, tt.requests, tt.cost)
			}
		})
	}
	// A denied request still counts against the hourly window; its cost does not.
	res, f, err := s.Reserve(ctx, request(a.ID, "c", 4, "calculate", nil, ""), ReserveOptions{Now: t0.Add(50 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if f.Budget.RequestsLastHour != 4 || f.Budget.RequestsLastHour <= f.Budget.MaxRequestsPerHour {
		t.Errorf("fourth request in the hour: %+v (policy denies BUDGET-002 when over the limit)", *f.Budget)
	}
	res.Release(ctx)
	b, _ := s.Budget(ctx, a.ID, t0.Add(50*time.Minute))
	if b.RequestsLastHour != 4 || b.CostTodayUSD != 0.875 {
		t.Errorf("after a released request: %+v", b)
	}
	// Two hours later the window is empty: the running count starts again
	// at this request, and the idle hour's rows are gone.
	res, f, err = s.Reserve(ctx, request(a.ID, "c", 4, "calculate", nil, ""), ReserveOptions{Now: t0.Add(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	res.Release(ctx)
	if f.Budget.RequestsLastHour != 1 {
		t.Errorf("first request after an idle hour: requests_last_hour %d, want 1", f.Budget.RequestsLastHour)
	}
	var rows int
	if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM request_minutes").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("request_minutes keeps %d rows, want this minute's", rows)
	}
	// Unknown agents: no limits.
	if b, err := s.Budget(ctx, "nobody", t0); err != nil || b != (schema.BudgetFacts{}) {
		t.Errorf("unknown agent budget %+v, %v", b, err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", "toolgate.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a, token, err := s.RegisterAgent(ctx, AgentSpec{Name: "keeper", Trust: schema.LevelSupervised, MaxDailyCostUSD: 2})
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		res, _, err := s.Reserve(ctx, request(a.ID, "conv", step, "calculate", map[string]any{"s": step}, ""), ReserveOptions{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Commit(ctx, 0.5); err != nil {
			t.Fatal(err)
		}
	}
	inflight, _, err := s.Reserve(ctx, request(a.ID, "conv", 4, "calculate", nil, ""), ReserveOptions{Now: t0})
	if err != nil || inflight == nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Agent(ctx, a.ID)
	if err != nil || got.Name != "keeper" || got.MaxDailyCostUSD != 2 || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("agent after reopen: %+v %v (want %+v)", got, err, a)
	}
	req := request(a.ID, "conv", 4, "calculate", nil, "")
	req.Agent.Token = token
	_, f, err := s.Reserve(ctx, req, ReserveOptions{Now: t0, RequireRegistration: true})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Agent.TokenValid || f.Conversation.StepsApproved != 3 || f.Conversation.LastStep != 3 || len(f.Conversation.Recent) != 3 {
		t.Errorf("facts after reopen: %+v %+v", *f.Agent, *f.Conversation)
	}
	if !f.Conversation.Reserved {
		t.Error("the in-flight reservation of step 4 was lost")
	}
	if f.Budget.CostTodayUSD != 1.5 || f.Budget.RequestsLastHour != 5 {
		t.Errorf("budget after reopen: %+v", *f.Budget)
	}
}

// TestHourlyWindowEdges: a request is counted until the end of the minute
// an hour after its own (60 to 61 minutes), never less than an hour.
func TestHourlyWindowEdges(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	made := t0.Add(30 * time.Second) // 10:00:30
	res, _, err := s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{Now: made})
	if err != nil {
		t.Fatal(err)
	}
	res.Release(ctx)
	for _, tt := range []struct {
		at   time.Duration // after t0
		want int
	}{
		{30 * time.Second, 1},
		{59*time.Minute + 59*time.Second, 1},
		{60*time.Minute + 30*time.Second, 1}, // exactly an hour old
		{60*time.Minute + 59*time.Second, 1}, // a minute late at most
		{61 * time.Minute, 0},
		{-time.Minute, 1}, // the clock went back: still counted
	} {
		b, err := s.Budget(ctx, "a", t0.Add(tt.at))
		if err != nil {
			t.Fatal(err)
		}
		if b.RequestsLastHour != tt.want {
			t.Errorf("at 10:00 + %v: requests_last_hour %d, want %d", tt.at, b.RequestsLastHour, tt.want)
		}
	}
}

// TestHourlyWindowBounds: whatever the spacing of requests, the count
// Reserve returns is at least the exact count of the hour ending now (a
// limit is never lifted early) and at most that of the 61 minutes ending
// now; Budget reads the same count without adding to it.
func TestHourlyWindowBounds(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var made []time.Time
	exact := func(now time.Time, d time.Duration) int {
		n := 0
		for _, m := range made {
			if m.After(now.Add(-d)) && !m.After(now) {
				n++
			}
		}
		return n
	}
	now := t0
	for i := range 300 {
		// Mostly seconds apart, sometimes most of an hour or more.
		switch r := rng.IntN(20); {
		case r == 0:
			now = now.Add(time.Duration(rng.Int64N(int64(90 * time.Minute))))
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(40 * time.Second))))
		}
		res, f, err := s.Reserve(ctx, request("a", "c", i+1, "calculate", nil, ""), ReserveOptions{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		res.Release(ctx)
		made = append(made, now)
		got := f.Budget.RequestsLastHour
		if lo, hi := exact(now, time.Hour), exact(now, 61*time.Minute); got < lo || got > hi {
			t.Fatalf("request %d at %s: requests_last_hour %d, want %d..%d", i+1, now.Format(time.TimeOnly), got, lo, hi)
		}
		b, err := s.Budget(ctx, "a", now)
		if err != nil {
			t.Fatal(err)
		}
		if b.RequestsLastHour != got {
			t.Fatalf("request %d: Budget reads %d, Reserve returned %d", i+1, b.RequestsLastHour, got)
		}
	}
}

// With registration required, requests that fail it do not spend the named
// agent's hourly budget.
func TestUnauthenticatedRequestsAreNotCounted(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, token, err := s.RegisterAgent(ctx, AgentSpec{Name: "victim", Trust: schema.LevelAutonomous, MaxRequestsPerHour: 2})
	if err != nil {
		t.Fatal(err)
	}
	send := func(id, tok string, step int, required bool) schema.BudgetFacts {
		t.Helper()
		req := request(id, "c", step, "calculate", nil, "")
		req.Agent.Token = tok
		res, f, err := s.Reserve(ctx, req, ReserveOptions{RequireRegistration: required, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		res.Release(ctx)
		return *f.Budget
	}
	if b := send(a.ID, token, 1, true); b.RequestsLastHour != 1 {
		t.Fatalf("authenticated request: %+v", b)
	}
	for i := 0; i < 5; i++ {
		if b := send(a.ID, "tgt_forged", 1, true); b.RequestsLastHour != 1 {
			t.Errorf("forged request %d: requests_last_hour %d, want 1 (not counted)", i, b.RequestsLastHour)
		}
		send("made_up_"+string(rune('a'+i)), "", 1, true)
	}
	if b := send(a.ID, token, 2, true); b.RequestsLastHour != 2 {
		t.Errorf("next authenticated request: %+v, want 2", b)
	}
	// Without required registration, every request counts.
	if b := send(a.ID, "", 3, false); b.RequestsLastHour != 3 {
		t.Errorf("optional registration: %+v, want 3", b)
	}
	var rows int
	if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM request_minutes WHERE agent_id LIKE 'made_up_%'").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("made-up ids logged: %d %v", rows, err)
	}
}

func TestReserveRefusesMissingKeys(t *testing.T) {
	s := openTest(t)
	for _, req := range []schema.Request{
		request("", "c", 1, "x", nil, ""),
		request("a", "", 1, "x", nil, ""),
		request("a", "c", 0, "x", nil, ""),
	} {
		var re *schema.RequestError
		if _, _, err := s.Reserve(context.Background(), req, ReserveOptions{}); !errors.As(err, &re) {
			t.Errorf("%+v: error %v, want a *schema.RequestError", req.Context, err)
		}
	}
}

// TestPeriodicPrune: the minutes that have left every hourly window and
// day-old reservations are removed by the first Reserve once PruneEvery has
// passed since the last prune, and a count is the same whether or not its
// old minutes were pruned yet.
func TestPeriodicPrune(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	count := func(q string) int {
		t.Helper()
		var n int
		if err := s.DB().QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	reserve := func(agent string, step int, at time.Time) (*Reservation, schema.Facts) {
		t.Helper()
		res, f, err := s.Reserve(ctx, request(agent, "c", step, "calculate", nil, ""), ReserveOptions{Now: at, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return res, f
	}
	// a's reservation is left behind, as by a crashed process.
	reserve("a", 1, t0)
	res, _ := reserve("b", 1, t0.Add(time.Second))
	res.Release(ctx)
	if n := count("SELECT count(*) FROM request_minutes"); n != 1+1 {
		t.Fatalf("%d minutes counted, want a's and b's", n)
	}
	// Two hours later (the last prune was at t0) the idle agents' minutes
	// go, but not yet the reservation: it has not been expired for a day.
	res, f := reserve("c", 1, t0.Add(2*time.Hour))
	res.Release(ctx)
	if f.Budget.RequestsLastHour != 1 {
		t.Errorf("c: requests_last_hour %d, want 1", f.Budget.RequestsLastHour)
	}
	if n := count("SELECT count(*) FROM request_minutes WHERE agent_id IN ('a', 'b')"); n != 0 {
		t.Errorf("idle agents' minutes kept: %d", n)
	}
	if n := count("SELECT count(*) FROM reservations"); n != 1 {
		t.Errorf("%d reservations, want a's", n)
	}
	// c goes idle. d's request prunes at 14:59:30, when c's minute (14:00)
	// is still in the window; within PruneEvery of that, c's next request
	// at 15:01:10 finds its 14:00 minute unpruned, and does not count it.
	at := t0.Add(2*time.Hour + 59*time.Minute + 30*time.Second)
	res, _ = reserve("d", 1, at)
	res.Release(ctx)
	if n := count("SELECT count(*) FROM request_minutes WHERE agent_id = 'c'"); n != 1 {
		t.Fatalf("c's minutes: %d rows, want 1", n)
	}
	res, f = reserve("c", 2, at.Add(100*time.Second))
	res.Release(ctx)
	if f.Budget.RequestsLastHour != 1 {
		t.Errorf("c after an idle hour: requests_last_hour %d, want 1", f.Budget.RequestsLastHour)
	}
	// A day after it expired the left-over reservation goes too.
	res, _ = reserve("e", 1, t0.Add(26*time.Hour))
	res.Release(ctx)
	if n := count("SELECT count(*) FROM reservations"); n != 0 {
		t.Errorf("%d reservations, want none", n)
	}
	if n := count("SELECT count(*) FROM request_minutes"); n != 1 {
		t.Errorf("%d minutes counted, want e's", n)
	}
}
