package state

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/toolgate/toolgate/schema"
)

// DefaultTTL is how long an in-flight reservation holds its step when
// ReserveOptions.TTL is zero.
const DefaultTTL = 10 * time.Minute

// RecentWindow is how many approved fingerprints a conversation keeps and
// ConversationFacts.Recent shows.
const RecentWindow = 20

// ErrReservationLost is returned by Commit when the reservation no longer
// holds its step (already committed or released, or expired and taken by
// another request). The caller must not treat the action as approved.
var ErrReservationLost = errors.New("reservation no longer held")

// The names of the fact sections, as listed in schema.Facts.NotApplied.
const (
	SectionAgent        = "agent"
	SectionConversation = "conversation"
	SectionBudget       = "budget"
)

// NoFacts are the facts of an evaluation without state (--no-state): no
// section, each listed in NotApplied, so the policy says which controls did
// not apply rather than treating them as passed.
func NoFacts() schema.Facts {
	return schema.Facts{NotApplied: []string{SectionAgent, SectionConversation, SectionBudget}}
}

// ReserveOptions tune Reserve.
type ReserveOptions struct {
	// RequireRegistration sets AgentFacts.TokenRequired: the policy then
	// denies unregistered agents (AGENT-002) and bad tokens (AGENT-003).
	RequireRegistration bool
	// TTL is how long an in-flight reservation holds its step; zero means
	// DefaultTTL. An expired reservation is ignored and replaced.
	TTL time.Duration
	// Now is the time of the request; zero means time.Now.
	Now time.Time
}

// Reservation holds one conversation step while its request is in flight.
// Commit it on allow, Release it on deny. A nil *Reservation is valid: both
// are no-ops. Release after Commit is a no-op, so `defer r.Release(ctx)`
// followed by Commit on allow is the intended pattern.
type Reservation struct {
	s              *Store
	agentID, convo string
	step           int
	fingerprint    string
	holder         string
	now            time.Time // zero: time.Now at Commit

	mu   sync.Mutex
	done bool
}

// Step is the reserved step number.
func (r *Reservation) Step() int {
	if r == nil {
		return 0
	}
	return r.step
}

// Reserve reads every fact the policy needs for req (agent, conversation,
// budget), records the request in the agent's hourly window, and reserves
// the request's conversation step. When another live reservation holds the
// step, the facts say Reserved and the returned *Reservation is nil (the
// policy denies LOOP-005). All of it is one write transaction.
//
// Conversations are keyed by (agent id, conversation id): two agents using
// the same conversation id do not share steps. RequestsLastHour counts this
// request too, unless registration is required and the request fails it
// (unregistered agent or bad token): such requests are not counted. Any
// failure is an error matching ErrUnavailable: the caller must deny
// (STATE-001).
func (s *Store) Reserve(ctx context.Context, req schema.Request, opts ReserveOptions) (*Reservation, schema.Facts, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	agentID, convo, step := req.Agent.ID, req.Context.ConversationID, req.Context.StepNumber
	// The pipeline validates requests first; this guards the keys only.
	switch {
	case agentID == "":
		return nil, schema.Facts{}, &schema.RequestError{Field: "agent.id", Problem: "required"}
	case convo == "":
		return nil, schema.Facts{}, &schema.RequestError{Field: "context.conversation_id", Problem: "required"}
	case step < 1:
		return nil, schema.Facts{}, &schema.RequestError{Field: "context.step_number", Problem: "must be at least 1"}
	}
	holderBytes, err := randomBytes(16)
	if err != nil {
		return nil, schema.Facts{}, s.fail("reserve", err)
	}
	r := &Reservation{
		s: s, agentID: agentID, convo: convo, step: step,
		fingerprint: Fingerprint(req.Action.Type, req.Action.Arguments, req.Context.PreActionStateHash),
		holder:      hex.EncodeToString(holderBytes),
		now:         opts.Now,
	}
	var facts schema.Facts
	err = s.write(ctx, "reserve", func(ctx context.Context, tx *Tx) error {
		af, lim, err := agentFacts(ctx, tx, req.Agent, opts.RequireRegistration)
		if err != nil {
			return err
		}
		bf := schema.BudgetFacts{MaxRequestsPerHour: lim.maxRequestsPerHour, MaxDailyCostUSD: lim.maxDailyCost}
		// A request that fails authentication when registration is required
		// is not counted: nobody can spend another agent's hourly budget
		// by sending its id, nor fill the log with made-up ids.
		authenticated := !opts.RequireRegistration || (af.Registered && af.TokenValid)
		if err := s.prune(ctx, tx, now); err != nil {
			return err
		}
		if authenticated {
			bf.RequestsLastHour, err = countRequest(ctx, tx, agentID, now)
		} else {
			bf.RequestsLastHour, err = peekRequests(ctx, tx, agentID, now)
		}
		if err != nil {
			return err
		}
		if bf.CostTodayUSD, err = costToday(ctx, tx, agentID, now); err != nil {
			return err
		}
		cf, err := conversationFacts(ctx, tx, agentID, convo)
		if err != nil {
			return err
		}
		cf.Fingerprint = r.fingerprint
		res, err := tx.ExecContext(ctx, sqlReserve, agentID, convo, step, r.holder, now.Add(ttl).UnixNano(), now.UnixNano())
		if err != nil {
			return fmt.Errorf("reserve step: %w", err)
		}
		held, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("reserve step: %w", err)
		}
		cf.Reserved = held == 0
		facts = schema.Facts{Agent: &af, Conversation: &cf, Budget: &bf}
		return nil
	})
	if err != nil {
		return nil, schema.Facts{}, err
	}
	if facts.Conversation.Reserved {
		return nil, facts, nil
	}
	s.inFlight.Add(1)
	return r, facts, nil
}

// PruneEvery is how often (by the requests' time) Reserve removes what no
// request reads any more: the minutes of the hourly windows that have left
// the hour, and reservations a crashed process left over a day ago. Nothing
// depends on them being gone (an expired reservation is replaced, a count
// never reads a minute out of its window), so this is housekeeping, done
// once per interval rather than on every request.
const PruneEvery = time.Minute

// prune removes, at most once per PruneEvery (or when the clock went
// back), the minutes that have left every hourly window and reservations
// older than a day. It runs in Reserve's transaction: if that rolls back,
// the next interval prunes.
func (s *Store) prune(ctx context.Context, tx *Tx, now time.Time) error {
	last, t := s.lastPrune.Load(), now.UnixNano()
	if last != 0 && t >= last && t-last < int64(PruneEvery) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, sqlPruneMinutes, firstMinute(now)); err != nil {
		return fmt.Errorf("prune request counts: %w", err)
	}
	// Reservations left by a crashed process: gone after a day.
	if _, err := tx.ExecContext(ctx, sqlPruneReservations, now.Add(-24*time.Hour).UnixNano()); err != nil {
		return fmt.Errorf("prune reservations: %w", err)
	}
	s.lastPrune.Store(t)
	return nil
}

// The hourly window is kept in minutes: requests are counted per agent and
// minute (Unix time / 60), and the requests of the last hour are those of
// the current minute and the 60 before it. A request therefore leaves the
// count between 60 and 61 minutes after it was made: never early (a limit
// is never lifted before the hour is over), at most a minute late: the
// price of at most 61 rows per agent instead of one per request.

// minute is t's minute in the window's terms.
func minute(t time.Time) int64 { return t.Unix() / 60 }

// firstMinute is the oldest minute in the hourly window ending at now.
func firstMinute(now time.Time) int64 { return minute(now) - 60 }

// countRequest records a request in the agent's hourly window and returns
// the window's count, this request included.
func countRequest(ctx context.Context, tx *Tx, agentID string, now time.Time) (int, error) {
	if _, err := tx.ExecContext(ctx, sqlCountMinute, agentID, minute(now)); err != nil {
		return 0, fmt.Errorf("record request: %w", err)
	}
	return peekRequests(ctx, tx, agentID, now)
}

// peekRequests reads the agent's hourly count without recording anything.
func peekRequests(ctx context.Context, q querier, agentID string, now time.Time) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, sqlSumMinutes, agentID, firstMinute(now)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count requests: %w", err)
	}
	return n, nil
}

// limits are a registered agent's budget limits (zero: none).
type limits struct {
	maxDailyCost       float64
	maxRequestsPerHour int
}

func agentFacts(ctx context.Context, q querier, ag schema.Agent, required bool) (schema.AgentFacts, limits, error) {
	af := schema.AgentFacts{TokenRequired: required}
	a, hash, err := scanAgent(q.QueryRowContext(ctx, sqlAgent, ag.ID))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return af, limits{}, nil
	case err != nil:
		return af, limits{}, fmt.Errorf("read agent: %w", err)
	}
	trust := a.Trust
	af.Registered = true
	af.Revoked = a.Revoked()
	af.TrustLevel = &trust
	af.AllowedTools = a.AllowedTools
	af.BlockedTools = a.BlockedTools
	af.TokenValid = tokenMatches(ag.Token, hash)
	return af, limits{maxDailyCost: a.MaxDailyCostUSD, maxRequestsPerHour: a.MaxRequestsPerHour}, nil
}

// budgetFacts reads the budget for Budget, with the statements Reserve
// uses.
func budgetFacts(ctx context.Context, q querier, agentID string, l limits, now time.Time) (schema.BudgetFacts, error) {
	bf := schema.BudgetFacts{MaxRequestsPerHour: l.maxRequestsPerHour, MaxDailyCostUSD: l.maxDailyCost}
	n, err := peekRequests(ctx, q, agentID, now)
	if err != nil {
		return bf, err
	}
	bf.RequestsLastHour = n
	if bf.CostTodayUSD, err = costToday(ctx, q, agentID, now); err != nil {
		return bf, err
	}
	return bf, nil
}

// costToday reads the agent's cost on now's UTC day, 0 if it has none.
func costToday(ctx context.Context, q querier, agentID string, now time.Time) (float64, error) {
	var cost float64
	switch err := q.QueryRowContext(ctx, sqlDailyCost, agentID, day(now)).Scan(&cost); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, fmt.Errorf("read daily cost: %w", err)
	}
	return cost, nil
}

// day is the UTC calendar day budgets are kept by.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func conversationFacts(ctx context.Context, q querier, agentID, convo string) (schema.ConversationFacts, error) {
	cf := schema.ConversationFacts{Recent: []string{}}
	switch err := q.QueryRowContext(ctx, sqlConversation, agentID, convo).Scan(&cf.StepsApproved, &cf.LastStep); {
	case errors.Is(err, sql.ErrNoRows):
		return cf, nil
	case err != nil:
		return cf, fmt.Errorf("read conversation: %w", err)
	}
	rows, err := q.QueryContext(ctx, sqlRecent, agentID, convo, RecentWindow)
	if err != nil {
		return cf, fmt.Errorf("read fingerprints: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fp string
		if err := rows.Scan(&fp); err != nil {
			return cf, fmt.Errorf("read fingerprints: %w", err)
		}
		cf.Recent = append(cf.Recent, fp)
	}
	if err := rows.Err(); err != nil {
		return cf, fmt.Errorf("read fingerprints: %w", err)
	}
	for i, j := 0, len(cf.Recent)-1; i < j; i, j = i+1, j-1 {
		cf.Recent[i], cf.Recent[j] = cf.Recent[j], cf.Recent[i]
	}
	return cf, nil
}

// Commit consumes the step after an allow: steps_approved + 1, last_step
// raised to the step, the fingerprint appended to the conversation's recent
// ones, and costUSD added to the agent's spend for the day. It fails with
// ErrReservationLost when the reservation no longer holds the step, and
// with an error matching ErrUnavailable when the store fails.
func (r *Reservation) Commit(ctx context.Context, costUSD float64) error {
	if r == nil {
		return nil
	}
	if costUSD < 0 || math.IsNaN(costUSD) || math.IsInf(costUSD, 0) {
		return fmt.Errorf("commit: cost %v: must be a finite number, zero or more", costUSD)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return fmt.Errorf("commit step %d: already committed or released: %w", r.step, ErrReservationLost)
	}
	err := r.s.write(ctx, "commit", func(ctx context.Context, tx *Tx) error {
		return r.commit(ctx, tx, costUSD)
	})
	if err != nil && !errors.Is(err, ErrReservationLost) {
		return err // the transaction rolled back: the reservation still holds
	}
	r.finish()
	return err
}

// CommitIn is Commit inside fn's transaction of Store.Write: the step is
// consumed when that transaction commits (and counts as committed from then
// on). When the reservation no longer holds the step it writes nothing and
// returns ErrReservationLost, and the transaction may go on.
func (r *Reservation) CommitIn(ctx context.Context, tx *Tx, onCommit func(func()), costUSD float64) error {
	if r == nil {
		return nil
	}
	if costUSD < 0 || math.IsNaN(costUSD) || math.IsInf(costUSD, 0) {
		return fmt.Errorf("commit: cost %v: must be a finite number, zero or more", costUSD)
	}
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done {
		return fmt.Errorf("commit step %d: already committed or released: %w", r.step, ErrReservationLost)
	}
	err := r.commit(ctx, tx, costUSD)
	if err == nil || errors.Is(err, ErrReservationLost) {
		onCommit(r.settled)
	}
	return err
}

// ReleaseIn is Release inside fn's transaction of Store.Write.
func (r *Reservation) ReleaseIn(ctx context.Context, tx *Tx, onCommit func(func())) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done {
		return nil
	}
	if _, err := tx.ExecContext(ctx, sqlDropReservation, r.agentID, r.convo, r.step, r.holder); err != nil {
		return fmt.Errorf("release step: %w", err)
	}
	onCommit(r.settled)
	return nil
}

func (r *Reservation) settled() {
	r.mu.Lock()
	r.finish()
	r.mu.Unlock()
}

// finish marks the reservation committed or released, once; r.mu is held.
func (r *Reservation) finish() {
	if !r.done {
		r.done = true
		r.s.inFlight.Add(-1)
	}
}

// commit consumes the step in tx; ErrReservationLost means nothing was
// written.
func (r *Reservation) commit(ctx context.Context, tx *Tx, costUSD float64) error {
	now := r.now
	if now.IsZero() {
		now = time.Now()
	}
	res, err := tx.ExecContext(ctx, sqlDropReservation, r.agentID, r.convo, r.step, r.holder)
	if err != nil {
		return fmt.Errorf("drop reservation: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("commit step %d: expired and taken by another request: %w", r.step, ErrReservationLost)
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, sqlConsume, r.agentID, r.convo, r.step, now.UnixNano()).Scan(&seq); err != nil {
		return fmt.Errorf("consume step: %w", err)
	}
	if _, err := tx.ExecContext(ctx, sqlAddFingerprint, r.agentID, r.convo, seq, r.step, r.fingerprint, now.UnixNano()); err != nil {
		return fmt.Errorf("record fingerprint: %w", err)
	}
	if seq > RecentWindow {
		if _, err := tx.ExecContext(ctx, sqlPruneFingerprints, r.agentID, r.convo, seq-RecentWindow); err != nil {
			return fmt.Errorf("prune fingerprints: %w", err)
		}
	}
	if costUSD > 0 {
		if _, err := tx.ExecContext(ctx, sqlAddCost, r.agentID, day(now), costUSD); err != nil {
			return fmt.Errorf("add cost: %w", err)
		}
	}
	return nil
}

// Release gives the step back after a deny: nothing is consumed and the agent
// may retry the step with another action. Releasing twice, or after Commit,
// does nothing.
func (r *Reservation) Release(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	err := r.s.write(ctx, "release", func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx, sqlDropReservation, r.agentID, r.convo, r.step, r.holder)
		return err
	})
	if err != nil {
		return err
	}
	r.finish()
	return nil
}

// Budget reads an agent's spending: requests in the hour before now and cost
// on now's UTC day, with the registry's limits (zero, no limit, for an agent
// that is not registered).
func (s *Store) Budget(ctx context.Context, agentID string, now time.Time) (schema.BudgetFacts, error) {
	if now.IsZero() {
		now = time.Now()
	}
	var l limits
	a, _, err := getAgent(ctx, s.db, agentID)
	switch {
	case err == nil:
		l = limits{maxDailyCost: a.MaxDailyCostUSD, maxRequestsPerHour: a.MaxRequestsPerHour}
	case !errors.Is(err, ErrNotFound):
		return schema.BudgetFacts{}, s.fail("read budget", err)
	}
	bf, err := budgetFacts(ctx, s.db, agentID, l, now)
	if err != nil {
		return schema.BudgetFacts{}, s.fail("read budget", err)
	}
	return bf, nil
}

// Conversation reads a conversation's approved history (without a
// fingerprint for a new request), for inspection and tests.
func (s *Store) Conversation(ctx context.Context, agentID, conversationID string) (schema.ConversationFacts, error) {
	cf, err := conversationFacts(ctx, s.db, agentID, conversationID)
	if err != nil {
		return cf, s.fail("read conversation", err)
	}
	return cf, nil
}
