package toolhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Call is one tool call as the hooks see it. Args never leave this package
// except to the tool itself; events carry only ArgsHash.
type Call struct {
	AgentID   string
	ToolName  string
	CallID    string
	Principal string
	Args      json.RawMessage
	// GrantedScopes are the caller's scopes from its verified token.
	GrantedScopes []string
	// KnownSecrets are secret values resolved for this call (tokens,
	// credentials): redacted before hashing.
	KnownSecrets []string
	// Catalog, when not nil, is the step's tool catalog; a tool outside
	// it is refused with E_TOOL_NOT_IN_CATALOG.
	Catalog []string
}

// Tool is what the hooks need to know about the tool called.
type Tool struct {
	Name              string
	RequiredScopes    []string
	Transport         string // http | mcp | native
	ErrorMessageLimit int
	Schema            *jsonschema.Schema
}

// Invoker runs the tool. An error becomes an error result, never an
// exception; a CodedError sets name and code.
type Invoker func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// CodedError is implemented by errors that carry a tool error name and code.
type CodedError interface {
	error
	ToolErrorName() string
	ToolErrorCode() string
}

// Limiter is the per-(principal, tool) rate limit. It must hold across
// every process (a store-backed token bucket or GCRA in production).
type Limiter interface {
	Allow(ctx context.Context, principal, tool string) (ok bool, retryAfter time.Duration, err error)
}

// Sink receives the audit events.
type Sink interface {
	Emit(ctx context.Context, event any) error
}

// ToolCalled is the content-free agent.toolCalled event (RFC 0064 §B).
type ToolCalled struct {
	Type      string `json:"type"` // agent.toolCalled
	AgentID   string `json:"agentId"`
	ToolName  string `json:"toolName"`
	CallID    string `json:"callId"`
	ArgsHash  string `json:"argsHash"`
	Principal string `json:"principal"`
	Transport string `json:"transport"`
}

// ToolReturned is the agent.toolReturned event; DurationMs is absent when
// the tool never ran.
type ToolReturned struct {
	Type       string `json:"type"` // agent.toolReturned
	AgentID    string `json:"agentId"`
	ToolName   string `json:"toolName"`
	CallID     string `json:"callId"`
	Status     string `json:"status"` // ok | error | forbidden | rate_limited
	DurationMs *int64 `json:"durationMs,omitempty"`
}

// Outcome statuses.
const (
	StatusOK          = "ok"
	StatusError       = "error"
	StatusForbidden   = "forbidden"
	StatusRateLimited = "rate_limited"
)

// Outcome is what a call produced: both events, the result for the model
// (nil when the call was refused), and how an HTTP layer should answer.
type Outcome struct {
	ToolCalled   ToolCalled
	ToolReturned ToolReturned
	Result       *Result
	// HTTPStatus is 200, 403 (forbidden), 429 (rate limited) or 503
	// (the rate limit could not be evaluated: fail closed).
	HTTPStatus int
	RetryAfter time.Duration
	// RequiredScopes is set on a forbidden outcome (for details).
	RequiredScopes []string
}

// Hooks wrap every tool call: content-free audit, fail-closed per-tool
// authorization, per-(principal, tool) rate limit, argument validation,
// and error results cut to the tool's limit.
type Hooks struct {
	Limiter Limiter // nil: no rate limit
	Sink    Sink    // nil: events are only returned
	Log     *slog.Logger
	Now     func() time.Time
}

// Invoke runs call through the hooks and, when allowed, the tool.
func (h *Hooks) Invoke(ctx context.Context, call Call, tool Tool, run Invoker) Outcome {
	now := h.Now
	if now == nil {
		now = time.Now
	}
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := Outcome{HTTPStatus: 200}
	hash, herr := ArgsHash(call.Args, call.KnownSecrets)
	out.ToolCalled = ToolCalled{Type: "agent.toolCalled", AgentID: call.AgentID, ToolName: call.ToolName, CallID: call.CallID,
		ArgsHash: hash, Principal: call.Principal, Transport: tool.Transport}
	out.ToolReturned = ToolReturned{Type: "agent.toolReturned", AgentID: call.AgentID, ToolName: call.ToolName, CallID: call.CallID}
	h.emit(ctx, log, out.ToolCalled)
	finish := func(status string, res *Result) Outcome {
		out.ToolReturned.Status, out.Result = status, res
		h.emit(ctx, log, out.ToolReturned)
		return out
	}

	// Outside the catalog first: a caller who may not see a tool learns
	// nothing about it (not even its required scopes).
	if call.Catalog != nil && !slices.Contains(call.Catalog, call.ToolName) {
		r := ErrorResult("ToolNotInCatalog", CodeNotInCatalog, fmt.Sprintf("tool %q is not in this step's catalog", call.ToolName), tool.ErrorMessageLimit)
		return finish(StatusError, &r)
	}
	if !authorized(tool.RequiredScopes, call.GrantedScopes) {
		out.HTTPStatus, out.RequiredScopes = 403, append([]string{}, tool.RequiredScopes...)
		return finish(StatusForbidden, nil)
	}
	if h.Limiter != nil {
		ok, retry, err := h.Limiter.Allow(ctx, call.Principal, call.ToolName)
		if err != nil {
			log.ErrorContext(ctx, "rate limit unavailable; call refused", "toolName", call.ToolName, "err", err)
			out.HTTPStatus = 503
			r := ErrorResult("RateLimitUnavailable", "E_TOOL_RATE_LIMIT_UNAVAILABLE", "the rate limit could not be checked; the tool was not run", tool.ErrorMessageLimit)
			return finish(StatusError, &r)
		}
		if !ok {
			out.HTTPStatus, out.RetryAfter = 429, retry
			return finish(StatusRateLimited, nil)
		}
	}
	if herr != nil {
		r := ErrorResult("InvalidArguments", CodeInvalidArgs, "arguments are not valid JSON", tool.ErrorMessageLimit)
		return finish(StatusError, &r)
	}
	if te := ValidateArgs(tool.Schema, call.Args); te != nil {
		r := ErrorResult(te.Name, te.Code, te.Message, tool.ErrorMessageLimit)
		return finish(StatusError, &r)
	}

	start := now()
	output, err := safeRun(ctx, run, call.Args)
	d := now().Sub(start).Milliseconds()
	out.ToolReturned.DurationMs = &d
	var pending *AuthorizationRequired
	if errors.As(err, &pending) {
		// Not an error: the tool needs a user's consent first, and the
		// caller gets the link as the call's result.
		return finish(StatusOK, &Result{Status: ResultAuthorizationRequired, Authorization: pending.Authorization})
	}
	if err != nil {
		name, code := "Error", CodeTool
		if ce, ok := err.(CodedError); ok {
			name, code = ce.ToolErrorName(), ce.ToolErrorCode()
		}
		r := ErrorResult(name, code, err.Error(), tool.ErrorMessageLimit)
		return finish(StatusError, &r)
	}
	return finish(StatusOK, &Result{Status: StatusOK, Output: output})
}

// authorized fails closed: every required scope must be granted.
func authorized(required, granted []string) bool {
	for _, s := range required {
		if !slices.Contains(granted, s) {
			return false
		}
	}
	return true
}

// safeRun turns a tool's panic into an error: a tool error never escapes.
func safeRun(ctx context.Context, run Invoker, args json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("tool panicked")
		}
	}()
	if run == nil {
		return nil, fmt.Errorf("tool has no implementation")
	}
	return run(ctx, args)
}

func (h *Hooks) emit(ctx context.Context, log *slog.Logger, ev any) {
	if h.Sink == nil {
		return
	}
	if err := h.Sink.Emit(ctx, ev); err != nil {
		log.ErrorContext(ctx, "audit event not emitted", "err", err)
	}
}
