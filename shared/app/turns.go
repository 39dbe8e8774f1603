package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/agentauth/agentauth/shared/aws/awsconfig"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model"
	"github.com/agentauth/agentauth/shared/turn/model/bedrock"
	"github.com/agentauth/agentauth/shared/turn/model/openai"
	"github.com/agentauth/agentauth/shared/turn/origin"
)

// Turns is the turn plane of a built app: the engine on the backends'
// turn store (its lifecycle — List, Inspect, Pause, Resume, Terminate,
// Delete — is the plane's), the queue its events go through, and the
// bundle's swarms (ingress).
type Turns struct {
	*engine.Engine
	queue  domain.EventQueue
	bundle *bundle.Bundle
	// active, when set, is the bundle now (a git bundle's active revision):
	// events are routed by its swarms.
	active *activeBundle
	now    func() time.Time
	// deliverer sends turn events to their origin's Connector (nil: the
	// bundle has none).
	deliverer *origin.Deliverer
}

// swarms are the swarms events are routed by now.
func (t *Turns) swarms(ctx context.Context) map[string]*bundle.Swarm {
	if t.active != nil {
		return t.active.headOr(ctx).Swarms
	}
	return t.bundle.Swarms
}

// NewTurns is the turn plane over an engine: Post routes by b's swarms
// and queues on q.
func NewTurns(e *engine.Engine, q domain.EventQueue, b *bundle.Bundle) *Turns {
	return &Turns{Engine: e, queue: q, bundle: b, now: time.Now}
}

// buildTurns builds the engine on the backends' turn store: the bundle's
// agents and models, the tool plane's tools, the OAuth core's auth.pending
// blocks, the backends' queue for hand-overs and wake-ups. Its committed
// events feed the turn metrics and — when the bundle has Connectors —
// origin delivery on the upstream guard of uploaded http tools
// (allowPrivate: its local-development escape hatch).
func buildTurns(ctx context.Context, active *activeBundle, be *Backends, mgr *oauth.Manager, tools engine.Tools, rec metrics.TurnRecorder, allowPrivate bool, log *slog.Logger) (*Turns, error) {
	b := active.first
	models := &revisionModels{}
	if _, err := models.of(ctx, b); err != nil {
		return nil, err
	}
	e := &engine.Engine{Store: be.TurnStore, Config: bundleAgents{active: active, models: models}, Tools: tools,
		Pending: pendingBlocks{mgr}, Queue: be.Queue, Log: log}
	if active.revs != nil {
		e.Revisions = revisionBlocks{active}
	}
	t := NewTurns(e, be.Queue, b)
	t.active = active
	var deliver func(context.Context, turn.Turn, []turn.TurnEvent)
	if len(b.Connectors) > 0 {
		var err error
		if t.deliverer, err = origin.New(origin.Config{Connectors: b.Connectors, Transport: httptool.GuardedTransport(allowPrivate), Log: log}); err != nil {
			return nil, err
		}
		deliver = t.deliverer.Notify
	}
	e.Notify = chainNotify(turnMetrics(rec), deliver)
	return t, nil
}

// close stops origin delivery, sending what is queued while ctx lasts.
func (t *Turns) close(ctx context.Context) error {
	if t == nil || t.deliverer == nil {
		return nil
	}
	return t.deliverer.Close(ctx)
}

// pendingBlocks gives the engine the OAuth core's auth.pending block of
// the instance a step runs for, keyed by its whole resume target; an
// empty block is none.
type pendingBlocks struct{ m *oauth.Manager }

func (p pendingBlocks) PendingBlock(ctx context.Context, key turn.InstanceKey) (json.RawMessage, error) {
	blk, err := p.m.PendingBlock(ctx, resumeTarget(key))
	if err != nil || len(blk.Items) == 0 {
		return nil, err
	}
	return json.Marshal(blk)
}

// resumeTarget is the resume target of instance key: the one the engine
// names when a call parks on consent (a Swarm ref of the key's swarm, the
// instance key, the agent), so a step reads exactly the consents its own
// instance parked on, never those of another swarm with the same
// instance key and Agent name.
func resumeTarget(key turn.InstanceKey) domain.ResumeTarget {
	return domain.ResumeTarget{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: key.Swarm}, InstanceKey: key.Key, AgentName: key.Agent}
}

// Incoming is an event posted to a swarm instance (turn.Incoming, so
// that the HTTP edge can name it).
type Incoming = turn.Incoming

// ErrUnknownSwarm: the bundle has no such swarm.
var ErrUnknownSwarm = turn.ErrUnknownSwarm

// Post routes an event to its agent by the swarm's ingress rules and
// queues it for the instance. The queue deduplicates by ID.
//
// An instance that is terminated runs nothing again, so an event for it
// is refused here, where the caller hears it, and nothing is queued: the
// error is engine.ErrTerminated and the event names the instance the
// rules picked (its agent), so that the caller can say which. Only an
// event accepted before a terminate lands reaches the engine's
// "recorded, not run" path.
func (t *Turns) Post(ctx context.Context, swarm, instanceKey string, in Incoming) (domain.Event, error) {
	sw, ok := t.swarms(ctx)[swarm]
	if !ok {
		return domain.Event{}, fmt.Errorf("swarm %q: %w", swarm, ErrUnknownSwarm)
	}
	if in.Type == "" {
		in.Type = engine.EventUserInput
	}
	agent := in.Agent
	if agent == "" {
		agent = sw.Route(in.Type, in.Properties)
	} else if !slices.Contains(sw.Agents, agent) {
		return domain.Event{}, fmt.Errorf("agent %q is not one of swarm %s's agents (%v): %w", agent, swarm, sw.Agents, domain.ErrInvalidID)
	}
	key := turn.InstanceKey{Swarm: swarm, Key: instanceKey, Agent: agent}
	if err := key.Validate(); err != nil {
		return domain.Event{}, err
	}
	st, err := t.Inspect(ctx, key)
	switch {
	case err == nil && st.Instance.Status == turn.Terminated:
		return domain.Event{SwarmRef: sw.Ref(), InstanceKey: instanceKey, AgentName: agent},
			fmt.Errorf("post to instance %s: %w", key, engine.ErrTerminated)
	case err != nil && !errors.Is(err, domain.ErrNotFound):
		return domain.Event{}, fmt.Errorf("post to instance %s: read its status: %w", key, err)
	}
	if in.ID == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		in.ID = "ev-" + hex.EncodeToString(b)
	} else {
		in.ID = ScopedEventID(key, in.ID)
	}
	input, _ := json.Marshal(map[string]string{"type": in.Type, "text": in.Text})
	ev := domain.Event{ID: in.ID, SwarmRef: sw.Ref(), InstanceKey: instanceKey, AgentName: agent, Input: string(input),
		Origin: in.Origin, Auth: in.Auth, Metadata: map[string]string{"eventType": in.Type}, EnqueuedAt: t.now().UTC()}
	if err := t.queue.Enqueue(ctx, ev); err != nil {
		return domain.Event{}, fmt.Errorf("queue event: %w", err)
	}
	return ev, nil
}

// ScopedEventID is the queued id of an event a caller posted with id: the
// id scoped to the instance, "<id>@<12 hex digits of the instance key's
// SHA-256>". A caller's id deduplicates a retried post to one instance;
// the queues deduplicate across all of them (an SQS FIFO queue's
// deduplication ids are queue-wide, like the file queue's ids), so
// without the scope two conversations that both post "msg-1" would lose
// the second.
func ScopedEventID(key turn.InstanceKey, id string) string {
	sum := sha256.Sum256([]byte(key.String()))
	return id + "@" + hex.EncodeToString(sum[:6])
}

// FaultEnv arms crash injection in the test build (-tags faultinject,
// faults_on.go; make deploy-local builds the turn function so; a
// production build ignores it, faults_off.go): "<point>:<marker file>".
// At the point the process exits with status 3 — as a Lambda killed
// mid-step would, with nothing after it committed — unless the marker file
// exists; it creates the file first, so the fault fires once per marker.
// Points:
//
//	exit-after-tool   a tool call ran, its result is not committed
//	exit-after-model  the model answered, its answer is not committed
const FaultEnv = "AGENTAUTH_FAULT"

// bundleAgents resolves an instance's agent at the bundle's revision
// (engine.Config): its model, prompt and limits.
type bundleAgents struct {
	active *activeBundle
	models *revisionModels
}

// Agent is step.config, the Safe Point: the active revision now (a
// changeset committed during the previous step is in it).
func (c bundleAgents) Agent(ctx context.Context, key turn.InstanceKey) (engine.Agent, string, error) {
	b, err := c.active.head(ctx)
	if err != nil {
		return engine.Agent{}, "", fmt.Errorf("the active bundle revision: %w", err)
	}
	models, err := c.models.of(ctx, b)
	if err != nil {
		return engine.Agent{}, "", fmt.Errorf("bundle revision %s: %w", b.Revision, err)
	}
	sw, ok := b.Swarms[key.Swarm]
	if !ok {
		return engine.Agent{}, "", fmt.Errorf("swarm %q: %w", key.Swarm, ErrUnknownSwarm)
	}
	if !slices.Contains(sw.Agents, key.Agent) {
		return engine.Agent{}, "", fmt.Errorf("agent %q is not one of swarm %s's agents", key.Agent, key.Swarm)
	}
	ag := b.Agents[key.Agent]
	m, ok := models[ag.ModelRef.Name]
	if !ok {
		return engine.Agent{}, "", fmt.Errorf("model %s of agent %s is not built", ag.ModelRef, ag.Name)
	}
	var peers []string
	for _, name := range sw.Agents {
		if name != key.Agent {
			peers = append(peers, name)
		}
	}
	return engine.Agent{Model: m, ModelName: ag.ModelRef.Name, SystemPrompt: ag.SystemPrompt, MaxSteps: sw.StepLimit(ag),
		MaxToolCallsPerStep: ag.MaxToolCallsPerStep, ToolTimeout: ag.ToolTimeout, Peers: peers}, b.Revision, nil
}

// buildModels builds an adapter per Model of the bundle, each behind the
// retry policy of its spec.
func buildModels(ctx context.Context, b *bundle.Bundle, client *http.Client) (map[string]model.Model, error) {
	out := make(map[string]model.Model, len(b.Models))
	for name, m := range b.Models {
		var adapter model.Model
		var err error
		switch m.Provider {
		case bundle.ModelProviderOpenAI:
			adapter, err = openai.New(openai.Config{BaseURL: m.Endpoint, APIKey: m.APIKey, Model: m.ModelID, MaxTokens: m.MaxTokens,
				Temperature: m.Temperature, Timeout: m.RequestTimeout, HTTPClient: client})
		case bundle.ModelProviderBedrock:
			brt, cerr := bedrock.NewClient(ctx, awsconfig.LoadDefault, m.Region, m.Endpoint)
			if cerr != nil {
				return nil, fmt.Errorf("Model/%s: %w", name, cerr)
			}
			adapter, err = bedrock.New(brt, bedrock.Config{ModelID: m.ModelID, MaxTokens: m.MaxTokens, Temperature: m.Temperature, Timeout: m.RequestTimeout})
		default:
			err = fmt.Errorf("provider %q", m.Provider)
		}
		if err != nil {
			return nil, fmt.Errorf("Model/%s: %w", name, err)
		}
		p := model.DefaultRetryPolicy
		p.MaxRetries = m.MaxRetries
		out[name] = model.WithRetry(adapter, p)
	}
	return out, nil
}
