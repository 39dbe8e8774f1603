// Package turntools is the tool plane as the turn engine sees it (the
// engine.Tools port): a step's catalog is the Agent's tool selection ∩
// what the turn's principal may see, and a call runs through the same
// tool hooks as the tool routes' POST /v1/tools/invoke — catalog check,
// fail-closed scopes, rate limit per (principal, tool), content-free audit
// events, error results cut to the tool's limit — marked via "turn".
//
// The turn's principal is built from turn.auth (domain.TurnAuth.Principal)
// by the rules the tool routes apply to a JWT; the runtime that posted
// the turn's event vouches for it. A refusal (forbidden, rate limited,
// limit unavailable) and a tool's own error become a tool result for the
// model, never a Go error; a consent the tool needs parks the call, and
// the auth session's resume target names that call.
//
// It must never put a token or a raw argument in an outcome, an event or
// a log line: tokens stay inside httptool's request, arguments inside the
// hooks.
package turntools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/tools/discovery"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Config wires the adapter. The Agents come from the Plane's bundle (its
// snapshot holds each Agent's selection), so a turn's tools and the tool
// routes' answer from one bundle revision and one set of uploads.
type Config struct {
	Plane *toolplane.Plane
	Hooks *toolhooks.Hooks
	// Runner runs tools of transport http; nil: they end in
	// E_TOOL_TRANSPORT_UNSUPPORTED.
	Runner *httptool.Runner
	// Native are implementations of native tools by manifest tool id.
	Native map[string]toolhooks.Invoker
	// TenantClaim, SkillsClaim and SubjectsClaim are the claim paths of the
	// tool routes (AGENTAUTH_TENANT_CLAIM, …); empty: the defaults.
	TenantClaim, SkillsClaim, SubjectsClaim string
	Metrics                                 metrics.Recorder
	Log                                     *slog.Logger
	// Bundles gives the bundle at a revision: a step's tools come from the
	// revision its step.config loaded (a changeset may have moved the
	// active one since). nil: the plane's current bundle.
	Bundles func(ctx context.Context, rev string) (*bundle.Bundle, error)
	// Builtins are the tools agentauth implements itself (the changeset
	// tools), offered beside the plane's and run through the same hooks.
	Builtins Builtins
}

// Builtin is a tool agentauth itself implements.
type Builtin struct {
	Spec       model.ToolSpec
	Schema     *jsonschema.Schema
	Idempotent bool
	// Run runs a call for turn t; the events it returns are recorded with
	// the call's result. An error becomes the call's error result (a
	// toolhooks.CodedError sets its code).
	Run func(ctx context.Context, t turn.Turn, args json.RawMessage) (json.RawMessage, []engine.Event, error)
}

// Builtins says which builtins a turn's agent has at its step's revision.
type Builtins interface {
	For(ctx context.Context, t turn.Turn) ([]Builtin, error)
}

// builtinErrorLimit bounds a builtin's error message: a rejected bundle's
// problems are worth reading whole.
const builtinErrorLimit = 4000

// Tools implements engine.Tools. Safe for concurrent use.
type Tools struct {
	cfg   Config
	paths domain.ClaimPaths
}

var _ engine.Tools = (*Tools)(nil)

// New checks cfg.
func New(cfg Config) (*Tools, error) {
	if cfg.Plane == nil || cfg.Hooks == nil {
		return nil, errors.New("turntools: plane and hooks are required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Nop{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Tools{cfg: cfg, paths: domain.ClaimPaths{Tenant: cfg.TenantClaim, Skills: cfg.SkillsClaim, Subjects: cfg.SubjectsClaim}.WithDefaults()}, nil
}

// routeTurn names a turn's resolutions in the agent_* metrics.
const routeTurn = "turn"

// view is what a turn's principal may use now: the manifest entries of
// the tools the agent selects that the principal's policies show it
// (tenant tools only for its own tenant), in tool id order.
type view struct {
	principal domain.Principal
	snap      *toolplane.Snapshot
	entries   []discovery.ToolManifestEntry
}

// see resolves t's view at the plane's current snapshot. A turn whose
// principal is nobody (no sub claim, no actor) sees nothing; an agent the
// bundle does not have is an error.
func (x *Tools) see(ctx context.Context, t turn.Turn) (view, error) {
	v := view{principal: t.Auth.Principal(x.paths), snap: x.cfg.Plane.Snapshot(ctx)} // picks up other processes' uploads
	if x.cfg.Bundles != nil && t.BundleRevision != "" && t.BundleRevision != v.snap.BundleRevision() {
		b, err := x.cfg.Bundles(ctx, t.BundleRevision)
		if err != nil {
			return v, fmt.Errorf("turntools: bundle revision %s: %w", t.BundleRevision, err)
		}
		v.snap = x.cfg.Plane.SnapshotAt(ctx, b)
	}
	sel, ok := v.snap.Agents[t.Instance.Agent]
	if !ok {
		return v, fmt.Errorf("turntools: agent %q is not in the bundle", t.Instance.Agent)
	}
	if v.principal.Subject == "" || len(sel) == 0 {
		return v, nil
	}
	start := time.Now()
	res := x.cfg.Plane.CatalogOf(v.snap).Resolve(v.principal.Claims, toolcatalog.Options{}) // policies may match any claim
	x.cfg.Metrics.Resolution(ctx, metrics.Resolution{Denied: len(res.Access.GroupIDs) == 0, Tools: len(res.Manifest),
		Duration: time.Since(start), Cached: res.Cached, Route: routeTurn})
	for _, e := range res.Manifest {
		if sel[e.ToolID] {
			v.entries = append(v.entries, e)
		}
	}
	return v, nil
}

// Catalog is the step's tools, by the names the model sees (the tool
// routes' manifest names). Two visible tools of one name are offered
// once: a call of that name is refused as ambiguous, and it counts as
// idempotent only if both are.
func (x *Tools) Catalog(ctx context.Context, t turn.Turn) ([]engine.Tool, error) {
	v, err := x.see(ctx, t)
	if err != nil {
		return nil, err
	}
	var out []engine.Tool
	at := map[string]int{}
	builtins, err := x.builtins(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, b := range builtins {
		at[b.Spec.Name] = len(out)
		out = append(out, engine.Tool{Spec: b.Spec, Idempotent: b.Idempotent})
	}
	for _, e := range v.entries {
		if _, builtin := builtinNamed(builtins, e.Name); builtin {
			continue // agentauth's own tool of that name is offered
		}
		idem := false
		if en, ok := v.snap.Tools[e.ToolID]; ok {
			idem = en.Tool.Idempotent
		}
		if i, dup := at[e.Name]; dup {
			out[i].Idempotent = out[i].Idempotent && idem
			continue
		}
		at[e.Name] = len(out)
		out = append(out, engine.Tool{Spec: model.ToolSpec{Name: e.Name, Description: e.Description, InputSchema: e.InputSchema}, Idempotent: idem})
	}
	return out, nil
}

// Invoke runs one call through the tool hooks. The hooks' catalog is the
// step's (in.Catalog) ∩ what the principal may see now, so a tool taken
// away since the step began (a policy, an upload deleted) is refused with
// E_TOOL_NOT_IN_CATALOG, also when a parked call resumes.
func (x *Tools) Invoke(ctx context.Context, in engine.Invocation) engine.Outcome {
	builtins, err := x.builtins(ctx, in.Turn)
	if err != nil {
		x.cfg.Log.WarnContext(ctx, "builtin tools unavailable", "turnId", in.Turn.ID, "traceId", in.Turn.TraceID, "err", err)
	}
	if b, ok := builtinNamed(builtins, in.Call.Tool); ok {
		return x.invokeBuiltin(ctx, in, b)
	}
	v, err := x.see(ctx, in.Turn)
	if err != nil {
		x.cfg.Log.WarnContext(ctx, "tool call refused: the turn's agent has no tools here", "turnId", in.Turn.ID, "traceId", in.Turn.TraceID, "err", err)
	}
	catalog := []string{} // never nil: a nil catalog would skip the check
	var ids []string
	for _, e := range v.entries {
		if !slices.Contains(in.Catalog, e.Name) {
			continue
		}
		if !slices.Contains(catalog, e.Name) {
			catalog = append(catalog, e.Name)
		}
		if e.Name == in.Call.Tool {
			ids = append(ids, e.ToolID)
		}
	}
	p := v.principal
	resume := in.Resume
	tool, run := v.snap.Invocable(in.Call.Tool, ids, func(id string, e toolplane.Entry) toolhooks.Invoker {
		switch e.Tool.Transport {
		case bundle.TransportHTTP:
			if x.cfg.Runner != nil {
				// The agent's limit, through the call's context, bounds
				// the request instead of the runner's own timeout.
				return x.cfg.Runner.CallInvoker(e.Tool, httptool.Call{Auth: p.TurnAuth, Tenant: e.Tenant != "", Resume: &resume,
					IdempotencyKey: in.IdempotencyKey, CallerLimit: true, Via: domain.StartedByTurn})
			}
		case bundle.TransportNative:
			return x.cfg.Native[id]
		}
		return nil
	})
	out := x.cfg.Hooks.Invoke(ctx, toolhooks.Call{
		AgentID: in.Turn.Instance.Agent, ToolName: in.Call.Tool, CallID: in.Call.ID, Principal: p.Subject, Tenant: p.Tenant,
		Args: in.Call.Args, GrantedScopes: p.Scopes, Catalog: catalog, Via: toolhooks.ViaTurn,
		Timeout: toolTimeout(v.snap, in.Turn.Instance.Agent),
	}, tool, run)
	return outcome(out, tool.ErrorMessageLimit)
}

// toolTimeout is how long one call of the agent's may run: its
// limits.toolTimeoutSeconds at the plane's bundle (the bundle the engine
// resolved the agent from), the bundle's default for an agent it lacks.
// The hooks enforce it on every tool kind through the call's context.
func toolTimeout(snap *toolplane.Snapshot, agent string) time.Duration {
	if d := snap.ToolTimeouts[agent]; d > 0 {
		return d
	}
	return bundle.DefaultToolTimeout
}

// outcome maps the hooks' verdict to the engine's outcome — the one
// mapping for turns, as toolsapi's hookStatus is for the routes. Every
// refusal becomes an error result the model can read; a verdict this
// does not know is an error result too, never a call let through.
func outcome(out toolhooks.Outcome, limit int) engine.Outcome {
	switch out.Verdict {
	case toolhooks.VerdictOK:
		switch {
		case out.Result == nil:
		case out.Result.Status == toolhooks.ResultAuthorizationRequired:
			var a httptool.Authorization
			if json.Unmarshal(out.Result.Authorization, &a) != nil || a.AuthSessionID == "" {
				// Nothing would ever resume a call parked on no session.
				return errorOutcome(toolhooks.ErrorResult("AuthError", httptool.CodeAuth, "the tool needs the user's consent but named no auth session", limit))
			}
			return engine.Outcome{Kind: engine.OutcomeAuthorizationRequired, Result: resultJSON(*out.Result), AuthSession: a.AuthSessionID, AuthorizationURL: a.AuthorizationURL}
		default:
			return engine.Outcome{Kind: engine.OutcomeOK, Result: resultJSON(*out.Result)}
		}
	case toolhooks.VerdictError, toolhooks.VerdictUnavailable:
		if out.Result != nil {
			return errorOutcome(*out.Result)
		}
	case toolhooks.VerdictForbidden, toolhooks.VerdictRateLimited:
		r, _ := toolhooks.RefusalResult(out, "the user this turn acts for", limit)
		return errorOutcome(r)
	}
	return errorOutcome(toolhooks.ErrorResult("Internal", toolhooks.CodeTool, "the tool hooks ended the call without a result", limit))
}

func errorOutcome(r toolhooks.Result) engine.Outcome {
	return engine.Outcome{Kind: engine.OutcomeError, Result: resultJSON(r)}
}

// resultJSON is the result as the model reads it; a consent link keeps
// its '&' rather than \u0026.
func resultJSON(r toolhooks.Result) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil { // an output that is no JSON: cannot come from the hooks
		r = toolhooks.ErrorResult("Internal", toolhooks.CodeTool, "the tool's result could not be encoded", 0)
		buf.Reset()
		_ = enc.Encode(r)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// builtins are the builtins of t's agent at its step's revision.
func (x *Tools) builtins(ctx context.Context, t turn.Turn) ([]Builtin, error) {
	if x.cfg.Builtins == nil {
		return nil, nil
	}
	return x.cfg.Builtins.For(ctx, t)
}

func builtinNamed(bs []Builtin, name string) (Builtin, bool) {
	for _, b := range bs {
		if b.Spec.Name == name {
			return b, true
		}
	}
	return Builtin{}, false
}

// invokeBuiltin runs a builtin through the tool hooks like any tool:
// catalog (the step's), schema, rate limit, content-free audit.
func (x *Tools) invokeBuiltin(ctx context.Context, in engine.Invocation, b Builtin) engine.Outcome {
	catalog := []string{}
	if slices.Contains(in.Catalog, b.Spec.Name) {
		catalog = append(catalog, b.Spec.Name)
	}
	p := in.Turn.Auth.Principal(x.paths)
	var events []engine.Event
	run := func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		out, evs, err := b.Run(ctx, in.Turn, args)
		events = evs
		return out, err
	}
	out := x.cfg.Hooks.Invoke(ctx, toolhooks.Call{
		AgentID: in.Turn.Instance.Agent, ToolName: in.Call.Tool, CallID: in.Call.ID, Principal: p.Subject, Tenant: p.Tenant,
		Args: in.Call.Args, GrantedScopes: p.Scopes, Catalog: catalog, Via: toolhooks.ViaTurn, Timeout: bundle.DefaultToolTimeout,
	}, toolhooks.Tool{Name: b.Spec.Name, Transport: bundle.TransportNative, ErrorMessageLimit: builtinErrorLimit, Schema: b.Schema}, run)
	o := outcome(out, builtinErrorLimit)
	o.Events = events
	return o
}
