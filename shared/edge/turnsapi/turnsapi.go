// Package turnsapi serves the turn plane's runtime routes — post an event
// to a swarm instance; list, inspect, pause, resume, terminate and delete
// agent instances; read a turn's events, as JSON or as a live event
// stream that follows the turn to its end — as net/http handlers mounted
// beside the OAuth runtime routes, behind the same caller auth (the
// runtime token locally, IAM in AWS). docs/turns.md lists the routes.
//
// It answers in the edge's one vocabulary (shared/edge/httpx) and maps
// the engine's errors to HTTP statuses in one place (fail). It must never
// put into a response a message other than a turn's final answer, a tool
// call's arguments or result, a queued event's content or auth context.
package turnsapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Turns is the turn plane as the routes use it (*app.Turns): Post routes
// and queues an event, the rest is the engine's instance lifecycle.
type Turns interface {
	Post(ctx context.Context, swarm, instanceKey string, in turn.Incoming) (domain.Event, error)
	// List returns the readable instances and names the unreadable ones
	// (turn.Store.List).
	List(ctx context.Context) ([]turn.Instance, []turn.Unreadable, error)
	Inspect(ctx context.Context, key turn.InstanceKey) (turn.State, error)
	// TurnEvents reads one kept turn and its events after after (the
	// events routes poll it: it reads that turn only).
	TurnEvents(ctx context.Context, key turn.InstanceKey, turnID string, after int64) (turn.Turn, []turn.TurnEvent, error)
	Pause(ctx context.Context, key turn.InstanceKey) error
	Resume(ctx context.Context, key turn.InstanceKey) error
	Terminate(ctx context.Context, key turn.InstanceKey, reason string) error
	Delete(ctx context.Context, key turn.InstanceKey) error
}

// Config wires the API.
type Config struct {
	Turns Turns
	// Caller is the runtime routes' caller auth (httpapi.BearerToken
	// locally, httpapi.GatewayAuthorized behind IAM).
	Caller httpapi.CallerAuth
	Log    *slog.Logger
	// StreamPoll is how often a turn's event stream reads the store
	// (default 200 ms): the turn may run in another process (the turn
	// function), so the store, not this process, says what is new.
	StreamPoll time.Duration
	// Stream bounds event streams: keep-alive and maximum duration
	// (httpx's defaults, 15 s and 10 min).
	Stream httpx.StreamLimits
}

// API is the turn routes.
type API struct{ cfg Config }

// New checks cfg.
func New(cfg Config) (*API, error) {
	if cfg.Turns == nil || cfg.Caller == nil {
		return nil, errors.New("turnsapi: turns and caller auth are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.StreamPoll <= 0 {
		cfg.StreamPoll = DefaultStreamPoll
	}
	if cfg.Stream.Gate == nil {
		cfg.Stream.Gate = httpx.NewStreamGate(0, 0)
	}
	return &API{cfg: cfg}, nil
}

// Route paths. An instance key is one path segment, escaped by the caller
// (url.PathEscape): it may hold '.', ':' or spaces (a Slack thread ts, a
// chat id), never '/' (turn.InstanceKey.Validate).
const (
	instancePath = "/v1/instances/{swarm}/{instanceKey}/{agent}"
	eventsPath   = "/v1/instances/{swarm}/{instanceKey}/events"
)

// eventsRoute is the turn events route (JSON, or a live stream).
const eventsRoute = "GET " + instancePath + "/turns/{turnId}/events"

// RegisterEvents adds the turn events route alone: the turn function's
// function URL serves only the live stream.
func (a *API) RegisterEvents(mux *http.ServeMux) {
	mux.Handle(eventsRoute, httpapi.RequireCaller(a.cfg.Caller, http.HandlerFunc(a.events)))
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	for pattern, h := range a.routes() {
		mux.Handle(pattern, httpapi.RequireCaller(a.cfg.Caller, h))
	}
}

// Patterns are the routes Register adds, sorted (GET / lists them).
func (a *API) Patterns() []string { return slices.Sorted(maps.Keys(a.routes())) }

// routes are the API's handlers by ServeMux pattern.
func (a *API) routes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"GET /v1/instances":                   a.list,
		"POST " + eventsPath:                  a.post,
		"GET " + instancePath:                 a.inspect,
		"DELETE " + instancePath:              a.delete,
		"POST " + instancePath + "/pause":     a.pause,
		"POST " + instancePath + "/resume":    a.resume,
		"POST " + instancePath + "/terminate": a.terminate,
		eventsRoute:                           a.events,
	}
}

// Handler serves the routes alone, with request ids, a JSON 405 (with
// Allow) for a route asked with another method and a JSON 404 for
// anything else (as httpapi serves them when they are mounted there).
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	a.Register(mux)
	mux.Handle("/", httpx.Unmatched(mux))
	return httpx.Observe(a.cfg.Log, mux)
}

// Error codes of these routes (with httpx's).
const (
	CodeInstanceTerminated = "instanceTerminated"
	CodeConflict           = "conflict"
)

// fail maps an error of the turn plane to its answer: the one place that
// does. A 4xx message is the key's or the plane's own validation message,
// which names the field and never holds a request body.
func (a *API) fail(w http.ResponseWriter, r *http.Request, key turn.InstanceKey, err error) {
	switch {
	case errors.Is(err, domain.ErrInvalidID):
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, err.Error())
	case errors.Is(err, turn.ErrUnknownSwarm):
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, "no swarm "+strconv.Quote(key.Swarm)+" in the bundle")
	case errors.Is(err, domain.ErrNotFound):
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, "no instance "+strconv.Quote(key.String()))
	case errors.Is(err, engine.ErrTerminated):
		httpx.WriteError(w, r, http.StatusConflict, CodeInstanceTerminated, "instance "+strconv.Quote(key.String())+" is terminated: it runs nothing again (delete it to start the conversation over)")
	case errors.Is(err, domain.ErrConflict):
		httpx.WriteError(w, r, http.StatusConflict, CodeConflict, "instance "+strconv.Quote(key.String())+" kept changing while this request ran; retry")
	default:
		a.cfg.Log.ErrorContext(r.Context(), "turn route failed", "route", r.Pattern, "instance", key.String(), "err", err)
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "")
	}
}

// instanceKey is the instance the path names, checked.
func (a *API) instanceKey(w http.ResponseWriter, r *http.Request) (turn.InstanceKey, bool) {
	key := turn.InstanceKey{Swarm: r.PathValue("swarm"), Key: r.PathValue("instanceKey"), Agent: r.PathValue("agent")}
	if err := key.Validate(); err != nil {
		a.fail(w, r, key, err)
		return key, false
	}
	return key, true
}

// eventRequest is the body of POST …/events. Auth is decoded as the
// domain's TurnAuth, so the fields it has are the fields accepted.
type eventRequest struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Text       string            `json:"text"`
	Agent      string            `json:"agent"`
	Properties map[string]string `json:"properties"`
	Origin     map[string]any    `json:"origin"`
	Auth       *domain.TurnAuth  `json:"auth"`
}

// eventPrefix namespaces the ids callers give, so that no posted event
// can take the id of one agentauth queues itself (an auth.granted's
// session id, a wake-up, a continuation) and be deduplicated against it.
const eventPrefix = "in:"

var (
	// callerID: an SQS deduplication id's characters, with room for the
	// prefix.
	callerID  = regexp.MustCompile(`^[!-~]{1,120}$`)
	eventType = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	// internalTypes are queued by agentauth only: the OAuth callback and
	// sweep (a consent's outcome), the OAuth core (a grant revoked after
	// its provider refused it), the engine (a hand-over, a delegation
	// to a peer and its result back). Posted, they would make the engine
	// resume or answer what no caller may: an agent.delegate, say, has
	// the engine queue its result to whichever agent its origin names.
	// system.wakeup stays postable (an ingress rule may match it; the
	// engine's own wake-up is marked by metadata a post cannot set), as
	// do a connector's types and tool.completion.
	internalTypes = []string{engine.EventAuthGranted, engine.EventAuthExpired, engine.EventAuthRevoked, engine.EventContinuation,
		engine.EventDelegate, engine.EventDelegationResult}
	// internalOrigin are the origin keys the engine writes on a delegation
	// (engine/delegate.go: delegatedFrom, delegationTurnId,
	// delegationEventId) and reads back to return its result.
	internalOrigin = []string{"delegatedFrom", "delegationTurnId", "delegationEventId"}
)

// internalOriginKey is the first of the engine's origin keys origin
// holds ("" for none).
func internalOriginKey(origin map[string]any) string {
	for _, k := range internalOrigin {
		if _, set := origin[k]; set {
			return k
		}
	}
	return ""
}

// invalidName names the first of the instance's names that is not UTF-8:
// stored so, it is listed with U+FFFD and then cannot be addressed.
func invalidName(swarm, instanceKey, agent string) string {
	for _, n := range []struct{ field, v string }{{"swarm", swarm}, {"instanceKey", instanceKey}, {"agent", agent}} {
		if !utf8.ValidString(n.v) {
			return n.field
		}
	}
	return ""
}

func (a *API) post(w http.ResponseWriter, r *http.Request) {
	key := turn.InstanceKey{Swarm: r.PathValue("swarm"), Key: r.PathValue("instanceKey")}
	var req eventRequest
	if !httpx.DecodeJSON(w, r, httpx.DefaultMaxBody, &req) {
		return
	}
	if req.Type == "" {
		req.Type = engine.EventUserInput
	}
	if f := invalidName(key.Swarm, key.Key, req.Agent); f != "" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, f+" is not valid UTF-8")
		return
	}
	var problem string
	switch {
	case req.Auth == nil:
		problem = `"auth" is required: {"actor"?, "subjects"?}, who the turn acts for ({} for no one)`
	case req.ID != "" && !callerID.MatchString(req.ID):
		problem = `"id" must be 1 to 120 printable ASCII characters without spaces`
	case !eventType.MatchString(req.Type):
		problem = `"type" must be 1 to 64 letters, digits, '.', '_', ':' or '-'`
	case slices.Contains(internalTypes, req.Type):
		problem = `"type" ` + req.Type + ` is queued by agentauth itself, never posted`
	case internalOriginKey(req.Origin) != "":
		problem = `"origin.` + internalOriginKey(req.Origin) + `" is set by agentauth itself (agents.delegate), never posted`
	case req.Type == engine.EventUserInput && req.Text == "":
		problem = `"text" is required for a user.input event`
	}
	if problem != "" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "request body: "+problem)
		return
	}
	if req.ID != "" {
		req.ID = eventPrefix + req.ID
	}
	ev, err := a.cfg.Turns.Post(r.Context(), key.Swarm, key.Key, turn.Incoming{ID: req.ID, Type: req.Type, Text: req.Text,
		Agent: req.Agent, Properties: req.Properties, Origin: req.Origin, Auth: *req.Auth})
	if errors.Is(err, engine.ErrTerminated) {
		// Nothing was queued. The answer names the instance the ingress
		// rules picked and the way out, which a message to a terminated
		// conversation's key needs more than a pause does.
		key.Agent = ev.AgentName
		httpx.WriteError(w, r, http.StatusConflict, CodeInstanceTerminated, terminatedPost(key))
		return
	}
	if err != nil {
		a.fail(w, r, key, err)
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, map[string]string{"eventId": ev.ID, "swarm": key.Swarm, "instanceKey": ev.InstanceKey, "agent": ev.AgentName})
}

// terminatedPost is the message of a post refused because its instance
// is terminated: deleting the instance, by the route or the CLI, starts
// the conversation over on the same key.
func terminatedPost(key turn.InstanceKey) string {
	seg := func(s string) string {
		switch s {
		case ".":
			return "%2E"
		case "..":
			return "%2E%2E"
		}
		return url.PathEscape(s)
	}
	word := func(s string) string {
		if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@-") == "" {
			return s
		}
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return "instance " + strconv.Quote(key.String()) + " is terminated: the event was not queued. Deleting the instance starts the conversation over on its key: " +
		"DELETE /v1/instances/" + seg(key.Swarm) + "/" + seg(key.Key) + "/" + seg(key.Agent) +
		", or agentauth instances delete --swarm " + word(key.Swarm) + " --instance " + word(key.Key) + " --agent " + word(key.Agent)
}

// instanceView is an instance's record as the routes show it.
type instanceView struct {
	Swarm       string `json:"swarm"`
	InstanceKey string `json:"instanceKey"`
	Agent       string `json:"agent"`
	Status      string `json:"status"`
	// ActiveTurn is the id of the turn that holds the instance; absent
	// when it is idle.
	ActiveTurn string    `json:"activeTurn,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

func viewInstance(in turn.Instance) instanceView {
	return instanceView{Swarm: in.Key.Swarm, InstanceKey: in.Key.Key, Agent: in.Key.Agent, Status: string(in.Status),
		ActiveTurn: in.ActiveTurn, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt}
}

// unreadableView names an instance the store could not read: its key
// when the store still knows it, the store's id for it, and a reason
// that holds no stored content.
type unreadableView struct {
	Swarm       string `json:"swarm,omitempty"`
	InstanceKey string `json:"instanceKey,omitempty"`
	Agent       string `json:"agent,omitempty"`
	ID          string `json:"id"`
	Reason      string `json:"reason"`
}

// list answers 200 with the instances the store could read in data and
// the ones it could not in unreadable (always an array), so one bad
// instance never hides the others.
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	list, bad, err := a.cfg.Turns.List(r.Context())
	if err != nil {
		a.fail(w, r, turn.InstanceKey{}, err)
		return
	}
	out := make([]instanceView, 0, len(list))
	for _, in := range list {
		out = append(out, viewInstance(in))
	}
	unreadable := make([]unreadableView, 0, len(bad))
	for _, u := range bad {
		attrs := []any{"route", r.Pattern, "id", u.ID, "err", u.Err}
		if u.Key != (turn.InstanceKey{}) {
			attrs = append(attrs, "instance", u.Key.String())
		}
		a.cfg.Log.WarnContext(r.Context(), "instance unreadable", attrs...)
		unreadable = append(unreadable, unreadableView{Swarm: u.Key.Swarm, InstanceKey: u.Key.Key, Agent: u.Key.Agent, ID: u.ID, Reason: u.Reason})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"data": out, "unreadable": unreadable})
}

// turnView is a turn without its conversation: counters, outcome and the
// final answer. Its auth context, origin and tool calls stay out.
type turnView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// InputEventID is the id of the event the turn handles (the posted
	// event's eventId): how a caller that posted one finds its turn.
	InputEventID   string        `json:"inputEventId"`
	InputType      string        `json:"inputType"`
	TraceID        string        `json:"traceId"`
	BundleRevision string        `json:"bundleRevision,omitempty"`
	Steps          int           `json:"steps"`
	ToolCalls      int           `json:"toolCalls"`
	Errors         int           `json:"errors"`
	Usage          model.Usage   `json:"usage"`
	Error          *turn.Failure `json:"error,omitempty"`
	StartedAt      time.Time     `json:"startedAt"`
	EndedAt        *time.Time    `json:"endedAt,omitempty"`
	FinalAnswer    string        `json:"finalAnswer,omitempty"`
}

func viewTurn(t turn.Turn) turnView {
	return turnView{ID: t.ID, Status: string(t.Status), InputEventID: t.InputEventID, InputType: t.InputType, TraceID: t.TraceID, BundleRevision: t.BundleRevision,
		Steps: t.Steps, ToolCalls: t.ToolCalls, Errors: t.Errors, Usage: t.Usage, Error: t.Error,
		StartedAt: t.StartedAt, EndedAt: t.EndedAt, FinalAnswer: t.Final}
}

// inspectView is GET …/{agent}.
type inspectView struct {
	instanceView
	ActiveTurn *turnView `json:"activeTurn,omitempty"`
	// Backlog counts the events waiting for the instance (their content
	// is not shown).
	Backlog int `json:"backlog"`
	// RecentTurns are the kept turns, newest first.
	RecentTurns []turnView `json:"recentTurns"`
}

func (a *API) inspect(w http.ResponseWriter, r *http.Request) {
	key, ok := a.instanceKey(w, r)
	if !ok {
		return
	}
	st, err := a.cfg.Turns.Inspect(r.Context(), key)
	if err != nil {
		a.fail(w, r, key, err)
		return
	}
	out := inspectView{instanceView: viewInstance(st.Instance), Backlog: len(st.Backlog), RecentTurns: []turnView{}}
	for _, t := range st.Turns {
		out.RecentTurns = append(out.RecentTurns, viewTurn(t))
	}
	slices.SortFunc(out.RecentTurns, func(x, y turnView) int {
		if c := y.StartedAt.Compare(x.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(y.ID, x.ID)
	})
	if t, ok := st.Turns[st.Instance.ActiveTurn]; ok {
		v := viewTurn(t)
		out.ActiveTurn = &v
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// lifecycle runs op on the path's instance and answers with its record
// after it.
func (a *API) lifecycle(w http.ResponseWriter, r *http.Request, op func(context.Context, turn.InstanceKey) error) {
	key, ok := a.instanceKey(w, r)
	if !ok {
		return
	}
	if err := op(r.Context(), key); err != nil {
		a.fail(w, r, key, err)
		return
	}
	st, err := a.cfg.Turns.Inspect(r.Context(), key)
	if err != nil {
		a.fail(w, r, key, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, viewInstance(st.Instance))
}

func (a *API) pause(w http.ResponseWriter, r *http.Request)  { a.lifecycle(w, r, a.cfg.Turns.Pause) }
func (a *API) resume(w http.ResponseWriter, r *http.Request) { a.lifecycle(w, r, a.cfg.Turns.Resume) }

// maxReason bounds a termination reason (it is kept with the turn).
const maxReason = 1000

// defaultReason is the reason of a terminate without one.
const defaultReason = "terminated through the API"

func (a *API) terminate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	// The body is optional: none is no reason.
	if r.ContentLength != 0 && !httpx.DecodeJSON(w, r, httpx.DefaultMaxBody, &req) {
		return
	}
	if len(req.Reason) > maxReason {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, fmt.Sprintf(`request body: "reason" is longer than %d bytes`, maxReason))
		return
	}
	if req.Reason == "" {
		req.Reason = defaultReason
	}
	a.lifecycle(w, r, func(ctx context.Context, key turn.InstanceKey) error {
		return a.cfg.Turns.Terminate(ctx, key, req.Reason)
	})
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	key, ok := a.instanceKey(w, r)
	if !ok {
		return
	}
	if err := a.cfg.Turns.Delete(r.Context(), key); err != nil {
		a.fail(w, r, key, err)
		return
	}
	// The instance's history is gone; the OAuth grants its tools used are
	// the OAuth store's, shared with the subject's other instances.
	httpx.WriteJSON(w, http.StatusOK, map[string]bool{"deleted": true, "oauthGrantsKept": true})
}

// events answers a turn's events after a seq: as JSON, or, when the
// request accepts text/event-stream, as an event stream that follows the
// turn until it ends (stream.go).
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	key, ok := a.instanceKey(w, r)
	if !ok {
		return
	}
	stream := httpx.WantsEventStream(r)
	after, problem := afterSeq(r, stream)
	if problem != "" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, problem)
		return
	}
	id := r.PathValue("turnId")
	t, evs, err := a.cfg.Turns.TurnEvents(r.Context(), key, id, after)
	if errors.Is(err, domain.ErrNotFound) {
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound,
			fmt.Sprintf("no turn %q in instance %q (the latest %d ended turns are kept)", id, key.String(), turn.KeepTurns))
		return
	}
	if err != nil {
		a.fail(w, r, key, err)
		return
	}
	if stream {
		a.streamEvents(w, r, key, t, evs, after)
		return
	}
	if evs == nil {
		evs = []turn.TurnEvent{} // [] in JSON
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"data": evs})
}
