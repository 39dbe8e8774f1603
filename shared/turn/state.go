package turn

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn/message"
)

// Store persists agent instances. Implementations: the file store
// (local/turnfile) and DynamoDB (aws/dynamostore, Store.Turns); both run
// testkit/turnstoretest.
type Store interface {
	// Load returns the instance's state; domain.ErrNotFound when it has
	// none.
	Load(ctx context.Context, key InstanceKey) (State, error)
	// Commit applies c atomically — all of it or nothing — while the
	// stored instance version equals c.Expect (0: no instance yet);
	// otherwise ErrStale, and nothing is written.
	Commit(ctx context.Context, c Commit) error
	// List returns every instance record the store can read, and names
	// each instance it cannot (a corrupt record, a failed read) in the
	// second result, so one bad instance never hides the others. An
	// instance listed there is one Load refuses. The error is for the
	// listing as a whole (the store unreachable, ctx done).
	List(ctx context.Context) ([]Instance, []Unreadable, error)
	// Delete removes the instance and everything of it (OAuth grants are
	// not the turn store's and stay).
	Delete(ctx context.Context, key InstanceKey) error
	// TurnEvents returns one kept turn and its stored events with a Seq
	// greater than after (-1: all), without the rest of the instance: the
	// events routes and live streams poll it. domain.ErrNotFound when the
	// instance or the turn is unknown.
	TurnEvents(ctx context.Context, key InstanceKey, turnID string, after int64) (Turn, []TurnEvent, error)
}

// Unreadable is an instance Store.List could not read.
type Unreadable struct {
	// Key is the instance's key when the store could still read it (the
	// file store keeps it apart from the state); zero otherwise.
	Key InstanceKey
	// ID is the store's own name for the instance, never empty: the file
	// store's directory, the DynamoDB store's key hash (12 hex digits).
	ID string
	// Reason says what is wrong and where, safe to show an operator: never
	// stored content, a path outside the store or a secret.
	Reason string
	// Err is the store's error, for the log.
	Err error
}

// ErrStale: another writer moved the instance on since it was loaded; the
// caller reloads and decides again.
var ErrStale = fmt.Errorf("turn: the instance changed since it was read: %w", domain.ErrConflict)

// State is everything the engine reads of one instance, in one load.
type State struct {
	Instance Instance `json:"instance"`
	// Turns are the instance's recent turns by id (the active one among
	// them); Calls the tool calls of turns not yet ended, by Call.Key.
	Turns map[string]Turn `json:"turns"`
	Calls map[string]Call `json:"calls"`
	// Base is the conversation at the last turn end; Events what was
	// appended since, in Seq order.
	Base   []message.Message `json:"base"`
	Events []message.Event   `json:"events"`
	// Backlog waits for the instance: events that came during a turn or a
	// pause, in arrival order.
	Backlog []domain.Event `json:"backlog"`
	// Processed are the ids of the latest queue events handled (a
	// duplicate delivery finds its id here).
	Processed []string `json:"processed"`
	// TurnEvents are turns' events by turn id: after Load, at least the
	// events of every turn that has not ended (what the engine reads); a
	// store may leave out those of ended turns, which Store.TurnEvents
	// reads.
	TurnEvents map[string][]TurnEvent `json:"turnEvents"`
}

// EventsAfter is a kept turn of s and its events with a Seq greater than
// after, for stores that hold the whole state (Store.TurnEvents).
func (s State) EventsAfter(turnID string, after int64) (Turn, []TurnEvent, error) {
	t, ok := s.Turns[turnID]
	if !ok {
		return Turn{}, nil, fmt.Errorf("turn %q of instance %s: %w", turnID, s.Instance.Key, domain.ErrNotFound)
	}
	var out []TurnEvent
	for _, e := range s.TurnEvents[turnID] {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return t, out, nil
}

// Bounds on what State keeps, whatever the store (Apply enforces them:
// the file store's snapshot and the DynamoDB instance item alike).
const (
	// KeepProcessed: queue event ids remembered per instance. A duplicate
	// older than that is still a no-op by the call and turn states.
	KeepProcessed = 1024
	// KeepTurns: ended turns kept with their events.
	KeepTurns = 50
)

// Commit is one atomic, version-fenced write.
type Commit struct {
	// Expect is the instance version the writer read (0: new instance);
	// Instance the record after the commit (Version = Expect + 1).
	Expect   int64    `json:"expect"`
	Instance Instance `json:"instance"`
	Turn     *Turn    `json:"turn,omitempty"`
	Calls    []Call   `json:"calls,omitempty"`
	// Messages are appended message events (their Seq from
	// Instance.NextSeq).
	Messages []message.Event `json:"messages,omitempty"`
	// Rebase replaces the base with NewBase — the fold of base and events
	// at a turn's end — and clears the events.
	Rebase  bool              `json:"rebase,omitempty"`
	NewBase []message.Message `json:"newBase,omitempty"`
	// Events are turn events to append (their Seq from Turn.NextEvent).
	Events []TurnEvent `json:"events,omitempty"`
	// BacklogPush appends to the backlog; BacklogPop takes from its head.
	BacklogPush []domain.Event `json:"backlogPush,omitempty"`
	BacklogPop  int            `json:"backlogPop,omitempty"`
	// Processed marks the queue event this commit handles.
	Processed string `json:"processed,omitempty"`
}

// Validate checks a commit on its own, before any write.
func (c Commit) Validate() error {
	if err := c.Instance.Key.Validate(); err != nil {
		return err
	}
	if c.Instance.Version != c.Expect+1 {
		return fmt.Errorf("turn: commit of version %d over %d", c.Instance.Version, c.Expect)
	}
	if c.BacklogPop < 0 {
		return errors.New("turn: negative backlog pop")
	}
	for _, cl := range c.Calls {
		if cl.ID == "" || cl.TurnID == "" {
			return errors.New("turn: a call without id or turn")
		}
	}
	for _, e := range c.Events {
		if e.TurnID == "" || e.Type == "" {
			return errors.New("turn: an event without turn or type")
		}
	}
	if c.Turn != nil && c.Turn.ID == "" {
		return errors.New("turn: a turn without id")
	}
	if !c.Rebase && len(c.NewBase) > 0 {
		return errors.New("turn: NewBase without Rebase")
	}
	return nil
}

// Apply returns s after c: the one definition of what a commit does, used
// by every store and by the engine to keep its loaded state. It checks the
// fence and the backlog; it does not modify s.
func Apply(s State, c Commit) (State, error) {
	if err := c.Validate(); err != nil {
		return s, err
	}
	if s.Instance.Version != c.Expect {
		return s, ErrStale
	}
	if c.BacklogPop > len(s.Backlog) {
		return s, fmt.Errorf("turn: commit pops %d of a backlog of %d", c.BacklogPop, len(s.Backlog))
	}
	out := State{
		Instance:   c.Instance,
		Turns:      cloneMap(s.Turns),
		Calls:      cloneMap(s.Calls),
		Base:       s.Base,
		Events:     slices.Clip(s.Events),
		Backlog:    append(slices.Clone(s.Backlog[c.BacklogPop:]), c.BacklogPush...),
		Processed:  slices.Clip(s.Processed),
		TurnEvents: make(map[string][]TurnEvent, len(s.TurnEvents)+1),
	}
	for k, v := range s.TurnEvents {
		out.TurnEvents[k] = slices.Clip(v)
	}
	if c.Turn != nil {
		out.Turns[c.Turn.ID] = *c.Turn
	}
	for _, cl := range c.Calls {
		out.Calls[cl.Key()] = cl
	}
	out.Events = append(out.Events, c.Messages...)
	for _, e := range c.Events {
		out.TurnEvents[e.TurnID] = append(out.TurnEvents[e.TurnID], e)
	}
	if c.Processed != "" && !slices.Contains(out.Processed, c.Processed) {
		out.Processed = append(out.Processed, c.Processed)
		if n := len(out.Processed) - KeepProcessed; n > 0 {
			out.Processed = slices.Clone(out.Processed[n:])
		}
	}
	if c.Rebase {
		out.Base, out.Events = slices.Clone(c.NewBase), nil
		out.forgetEnded()
	}
	return out, nil
}

// forgetEnded drops the calls of ended turns and all but the latest
// KeepTurns ended turns (a rebase happens at a turn's end).
func (s *State) forgetEnded() {
	for k, cl := range s.Calls {
		if t, ok := s.Turns[cl.TurnID]; !ok || t.Status.Ended() {
			delete(s.Calls, k)
		}
	}
	var ended []Turn
	for _, t := range s.Turns {
		if t.Status.Ended() {
			ended = append(ended, t)
		}
	}
	if len(ended) <= KeepTurns {
		return
	}
	slices.SortFunc(ended, func(a, b Turn) int { return a.StartedAt.Compare(b.StartedAt) })
	for _, t := range ended[:len(ended)-KeepTurns] {
		delete(s.Turns, t.ID)
		delete(s.TurnEvents, t.ID)
	}
}

// HasProcessed reports whether the queue event id was handled.
func (s State) HasProcessed(id string) bool { return slices.Contains(s.Processed, id) }

// NewState is the state of an instance that has none yet.
func NewState() State {
	return State{Turns: map[string]Turn{}, Calls: map[string]Call{}, TurnEvents: map[string][]TurnEvent{}}
}

func cloneMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
