package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
)

// ErrTerminated: the instance was terminated; it takes no more turns.
var ErrTerminated = errors.New("engine: the instance is terminated")

// lifecycle runs op on the instance's state with the usual fence and
// retries.
func (e *Engine) lifecycle(ctx context.Context, key turn.InstanceKey, op func(r *run) error) error {
	if err := key.Validate(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		st, err := e.Store.Load(ctx, key)
		if err != nil {
			return err
		}
		err = op(&run{e: e, key: key, st: st})
		if !errors.Is(err, turn.ErrStale) || attempt >= maxStaleRetries {
			return err
		}
	}
}

// Pause holds the instance: no new turn starts and a running turn stops
// at its next step boundary; events wait in the backlog, in order.
func (e *Engine) Pause(ctx context.Context, key turn.InstanceKey) error {
	return e.lifecycle(ctx, key, func(r *run) error {
		switch r.st.Instance.Status {
		case turn.Paused:
			return nil
		case turn.Terminated:
			return ErrTerminated
		}
		return r.setStatus(ctx, turn.Paused)
	})
}

// Resume lets a paused instance run again. It changes the state only and
// queues a wake-up: the worker that takes it carries the interrupted turn
// on, then the backlog, in order (with no queue, Resume runs them
// itself).
func (e *Engine) Resume(ctx context.Context, key turn.InstanceKey) error {
	return e.lifecycle(ctx, key, func(r *run) error {
		switch r.st.Instance.Status {
		case turn.Terminated:
			return ErrTerminated
		case turn.Paused:
			if err := r.setStatus(ctx, turn.Active); err != nil {
				return err
			}
		}
		if e.Queue != nil {
			return e.Queue.Enqueue(ctx, domain.Event{
				ID: fmt.Sprintf("wake:%s:%d", key, r.st.Instance.Version), SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: key.Swarm},
				InstanceKey: key.Key, AgentName: key.Agent, Input: `{"type":"` + EventWakeup + `"}`,
				Metadata: map[string]string{MetaWake: "resume"}, EnqueuedAt: e.now(),
			})
		}
		if id := r.st.Instance.ActiveTurn; id != "" {
			return r.runTurn(ctx, id)
		}
		return r.next(ctx)
	})
}

// Terminate ends the instance: its active turn is interrupted (calls
// without a result get one) and no event runs again. The backlog is kept
// for inspection; Delete removes everything.
func (e *Engine) Terminate(ctx context.Context, key turn.InstanceKey, reason string) error {
	return e.lifecycle(ctx, key, func(r *run) error {
		if r.st.Instance.Status == turn.Terminated {
			return nil
		}
		return r.commit(ctx, func(c *turn.Commit) {
			c.Instance.Status = turn.Terminated
			id := r.st.Instance.ActiveTurn
			if id == "" {
				return
			}
			tt := r.st.Turns[id]
			r.answerUnfinished(c, &tt, "the instance was terminated before this call finished")
			r.finish(c, &tt, turn.TurnInterrupted, &turn.Failure{Code: "terminated", Message: reason})
			c.Turn = &tt
		})
	})
}

// Delete removes the instance and its history. OAuth grants are the
// OAuth store's and stay.
func (e *Engine) Delete(ctx context.Context, key turn.InstanceKey) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := e.Store.Delete(ctx, key); err != nil {
		return fmt.Errorf("engine: delete %s: %w", key, err)
	}
	return nil
}

// Inspect returns an instance's state.
// TurnEvents returns a kept turn of the instance and its events with a
// Seq greater than after (-1: all), reading only that turn.
func (e *Engine) TurnEvents(ctx context.Context, key turn.InstanceKey, turnID string, after int64) (turn.Turn, []turn.TurnEvent, error) {
	if err := key.Validate(); err != nil {
		return turn.Turn{}, nil, err
	}
	return e.Store.TurnEvents(ctx, key, turnID, after)
}

func (e *Engine) Inspect(ctx context.Context, key turn.InstanceKey) (turn.State, error) {
	if err := key.Validate(); err != nil {
		return turn.State{}, err
	}
	return e.Store.Load(ctx, key)
}

// List returns every readable instance's record (no history: Inspect one
// for it) and names the instances the store could not read.
func (e *Engine) List(ctx context.Context) ([]turn.Instance, []turn.Unreadable, error) {
	list, bad, err := e.Store.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: list instances: %w", err)
	}
	return list, bad, nil
}
