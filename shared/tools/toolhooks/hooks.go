package toolhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentauth/agentauth/shared/domain"
)

// Call is one tool call as the hooks see it. Args never leave this package
// except to the tool itself; events carry only ArgsHash.
type Call struct {
	AgentID   string
	ToolName  string
	CallID    string
	Principal string
	// Tenant is the caller's tenant (domain.Principal.Tenant; "" none):
	// it goes on agent.toolCalled, so the audit stream is scoped by it.
	Tenant string
	Args   json.RawMessage
	// GrantedScopes are the caller's scopes from its verified token.
	GrantedScopes []string
	// KnownSecrets are secret values resolved for this call (tokens,
	// credentials): redacted before hashing.
	KnownSecrets []string
	// Catalog, when not nil, is the step's tool catalog; a tool outside
	// it is refused with E_TOOL_NOT_IN_CATALOG.
	Catalog []string
	// Via names what made the call when it is not the tool routes
	// (ViaTurn: a turn's step); it goes on agent.toolCalled as via.
	Via string
	// Timeout, when > 0, bounds the tool's run (a turn's call: the
	// agent's limits.toolTimeoutSeconds). The tool's context ends at the
	// deadline — an http tool's request is cancelled — and the call ends
	// then in an E_TOOL_TIMEOUT result even if the tool does not return.
	Timeout time.Duration
}

// ViaTurn is Call.Via of a call a turn's step made.
const ViaTurn = "turn"

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
	// Tenant is the caller's tenant, when it has one: our addition, so
	// that the stored audit stream is read per tenant.
	Tenant string `json:"tenant,omitempty"`
	// Transport is how the tool was reached (RFC 0064: http, mcp or
	// native), whoever made the call.
	Transport string `json:"transport"`
	// Via is what made the call, when not the tool routes ("turn"):
	// our addition, since RFC 0064's transport enum has no value for it.
	Via string `json:"via,omitempty"`
	// call is the same on both events of one call (never marshalled):
	// the audit sink joins them by it, whatever the call id.
	call *callTag
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
	// Error is set with status error (openwop's failure honesty): the
	// result's code and its message, already cut to the tool's
	// errorMessageLimit.
	Error *ReturnedError `json:"error,omitempty"`
	// Consent is set with status ok when the answer was
	// authorization_required (the call waits for the user's consent, it
	// did not do its work): our addition, since RFC 0064's status enum
	// has no value for it.
	Consent bool `json:"consent,omitempty"`
	call    *callTag
}

// callTag identifies one Invoke's pair of events in this process. Call
// ids come from callers and may repeat (two clients choosing "1"); the
// tag never does. It is not zero-sized: pointers to distinct zero-sized
// values may compare equal.
type callTag struct{ _ byte }

// ReturnedError is what a failed call's toolReturned says about it.
type ReturnedError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ToolReturned statuses (the event's wire values).
const (
	StatusOK          = "ok"
	StatusError       = "error"
	StatusForbidden   = "forbidden"
	StatusRateLimited = "rate_limited"
)

// Verdict is how the hooks ended a call. The caller maps it to its own
// answer (the HTTP edge to a status code, a turn to a tool result): the
// hooks never speak HTTP.
type Verdict string

// Verdicts.
const (
	// VerdictOK: the tool ran and Result is its answer (status ok or
	// authorization_required).
	VerdictOK Verdict = "ok"
	// VerdictError: the call ended in an error result — not in the
	// catalog, invalid arguments, the tool's own error — and Result is
	// the answer.
	VerdictError Verdict = "error"
	// VerdictForbidden: a required scope is missing; the tool never ran
	// and RequiredScopes lists what it needs.
	VerdictForbidden Verdict = "forbidden"
	// VerdictRateLimited: the caller's bucket for the tool is empty; the
	// tool never ran; retry after RetryAfter.
	VerdictRateLimited Verdict = "rate_limited"
	// VerdictUnavailable: the rate limit could not be checked, so the call
	// was refused (fail closed); Result says so.
	VerdictUnavailable Verdict = "unavailable"
)

// Outcome is what a call produced: both events, the result for the model
// (nil when the call was refused) and the verdict.
type Outcome struct {
	Verdict      Verdict
	ToolCalled   ToolCalled
	ToolReturned ToolReturned
	Result       *Result
	// RetryAfter is set with VerdictRateLimited.
	RetryAfter time.Duration
	// RequiredScopes is set with VerdictForbidden (for details).
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
	var out Outcome
	hash, herr := ArgsHash(call.Args, call.KnownSecrets)
	tag := &callTag{}
	out.ToolCalled = ToolCalled{Type: "agent.toolCalled", AgentID: call.AgentID, ToolName: call.ToolName, CallID: call.CallID,
		ArgsHash: hash, Principal: call.Principal, Tenant: call.Tenant, Transport: tool.Transport, Via: call.Via, call: tag}
	out.ToolReturned = ToolReturned{Type: "agent.toolReturned", AgentID: call.AgentID, ToolName: call.ToolName, CallID: call.CallID, call: tag}
	h.emit(ctx, log, out.ToolCalled)
	finish := func(v Verdict, res *Result) Outcome {
		out.Verdict, out.ToolReturned.Status, out.Result = v, string(v), res
		if v == VerdictUnavailable {
			out.ToolReturned.Status = StatusError // the event knows four statuses
		}
		if out.ToolReturned.Status == StatusError && res != nil && res.Error != nil {
			out.ToolReturned.Error = &ReturnedError{Code: res.Error.Code, Message: res.Error.Message}
		}
		out.ToolReturned.Consent = res != nil && res.Status == ResultAuthorizationRequired
		h.emit(ctx, log, out.ToolReturned)
		return out
	}

	// Outside the catalog first: a caller who may not see a tool learns
	// nothing about it (not even its required scopes).
	if call.Catalog != nil && !slices.Contains(call.Catalog, call.ToolName) {
		msg, suggestion := fmt.Sprintf("tool %q is not in this step's catalog", call.ToolName), SuggestionNotInCatalog
		if call.Via != ViaTurn {
			// A direct call (the tool routes, MCP) has no step: its
			// catalog is what the caller may see.
			msg, suggestion = fmt.Sprintf("tool %q is not among the tools this caller may see", call.ToolName), SuggestionNotVisible
		}
		// The nearest name the caller may see, never one it may not.
		if near := domain.Suggest(call.ToolName, call.Catalog); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		r := ErrorResult("ToolNotInCatalog", CodeNotInCatalog, msg, tool.ErrorMessageLimit)
		r.Error.Suggestion = suggestion
		return finish(VerdictError, &r)
	}
	if !authorized(tool.RequiredScopes, call.GrantedScopes) {
		out.RequiredScopes = append([]string{}, tool.RequiredScopes...)
		return finish(VerdictForbidden, nil)
	}
	if h.Limiter != nil {
		ok, retry, err := h.Limiter.Allow(ctx, call.Principal, call.ToolName)
		if err != nil {
			log.ErrorContext(ctx, "rate limit unavailable; call refused", "toolName", call.ToolName, "err", err)
			r := ErrorResult("RateLimitUnavailable", "E_TOOL_RATE_LIMIT_UNAVAILABLE", "the rate limit could not be checked; the tool was not run", tool.ErrorMessageLimit)
			return finish(VerdictUnavailable, &r)
		}
		if !ok {
			out.RetryAfter = retry
			return finish(VerdictRateLimited, nil)
		}
	}
	if herr != nil {
		r := ErrorResult("InvalidArguments", CodeInvalidArgs, "arguments are not valid JSON", tool.ErrorMessageLimit)
		return finish(VerdictError, &r)
	}
	if te := ValidateArgs(tool.Schema, call.Args); te != nil {
		r := ErrorResult(te.Name, te.Code, te.Message, tool.ErrorMessageLimit)
		return finish(VerdictError, &r)
	}

	start := now()
	output, timedOut, err := runWithin(ctx, call.Timeout, run, call.Args)
	d := now().Sub(start).Milliseconds()
	out.ToolReturned.DurationMs = &d
	if timedOut {
		log.WarnContext(ctx, "tool call timed out; cancelled", "toolName", call.ToolName, "callId", call.CallID, "timeout", call.Timeout.String())
		r := ErrorResult("ToolTimeout", CodeTimeout, timeoutMessage(call.Timeout), tool.ErrorMessageLimit)
		return finish(VerdictError, &r)
	}
	var pending *AuthorizationRequired
	if errors.As(err, &pending) {
		// Not an error: the tool needs a user's consent first, and the
		// caller gets the link as the call's result.
		return finish(VerdictOK, &Result{Status: ResultAuthorizationRequired, Authorization: pending.Authorization})
	}
	if err != nil {
		name, code := "Error", CodeTool
		if ce, ok := err.(CodedError); ok {
			name, code = ce.ToolErrorName(), ce.ToolErrorCode()
		}
		r := ErrorResult(name, code, scrubKnown(err.Error(), call.KnownSecrets), tool.ErrorMessageLimit)
		return finish(VerdictError, &r)
	}
	return finish(VerdictOK, &Result{Status: StatusOK, Output: output})
}

// scrubKnown replaces the call's known secrets in a tool's error message:
// an upstream that echoes the bearer token back must not put it in the
// model's history or the toolReturned event.
func scrubKnown(msg string, known []string) string {
	for _, k := range known {
		if k != "" {
			msg = strings.ReplaceAll(msg, k, Redacted)
		}
	}
	return msg
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

// errTimeout is the cause of a tool's context ended by Call.Timeout,
// telling it from the caller's own cancellation.
var errTimeout = errors.New("the tool call's time limit passed")

// runWithin runs the tool with a context that ends after limit (no limit
// when ≤ 0). It returns at the deadline even when the tool does not: a
// tool that ignores its context is abandoned (its goroutine ends when
// the tool returns; its answer is dropped). timedOut is set when the
// limit ended the call — the tool had not answered, or answered with an
// error after its context ended (an http tool's cancelled request).
func runWithin(ctx context.Context, limit time.Duration, run Invoker, args json.RawMessage) (out json.RawMessage, timedOut bool, err error) {
	if limit <= 0 {
		out, err = safeRun(ctx, run, args)
		return out, false, err
	}
	tctx, cancel := context.WithTimeoutCause(ctx, limit, errTimeout)
	defer cancel()
	type answer struct {
		out json.RawMessage
		err error
	}
	done := make(chan answer, 1) // the tool never blocks on it, abandoned or not
	go func() {
		o, e := safeRun(tctx, run, args)
		done <- answer{o, e}
	}()
	select {
	case a := <-done:
		return a.out, a.err != nil && errors.Is(context.Cause(tctx), errTimeout), a.err
	case <-tctx.Done():
		if !errors.Is(context.Cause(tctx), errTimeout) {
			// The caller's context ended (a shutdown): the tool's own
			// answer, as without a limit.
			a := <-done
			return a.out, false, a.err
		}
		return nil, true, nil
	}
}

// timeoutMessage is an E_TOOL_TIMEOUT result's message: the limit, and
// that the call may have acted before it was stopped.
func timeoutMessage(limit time.Duration) string {
	l := limit.String()
	if limit%time.Second == 0 {
		l = fmt.Sprintf("%d s", limit/time.Second)
	}
	return fmt.Sprintf("the tool did not answer within its time limit of %s (the agent's limits.toolTimeoutSeconds) and was cancelled; "+
		"it may have had an effect before it was stopped", l)
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
