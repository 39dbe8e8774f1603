package turn

import (
	"errors"

	"github.com/agentauth/agentauth/shared/domain"
)

// Incoming is an event posted to a swarm instance from outside (a
// connector, the HTTP API, the CLI): the turn plane routes it to one of
// the swarm's agents and queues it. It lives here, not with the plane
// that posts it, so that edges can name it.
type Incoming struct {
	// ID deduplicates (a retried post is queued once); "" for a new one.
	ID string
	// Type is the event type (user.input, system.wakeup, …).
	Type string
	Text string
	// Agent, when set, must be one of the swarm's agents; else the
	// swarm's ingress rules route the event.
	Agent      string
	Properties map[string]string
	Origin     map[string]any
	Auth       domain.TurnAuth
}

// ErrUnknownSwarm: the bundle has no such swarm.
var ErrUnknownSwarm = errors.New("no such swarm in the bundle")
