package toolhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Tool error codes a call can end with before or instead of the tool's own.
const (
	// CodeTool is the default code of an error the tool raised itself.
	CodeTool = "E_TOOL"
	// CodeNotInCatalog: the tool is not in this step's catalog.
	CodeNotInCatalog = "E_TOOL_NOT_IN_CATALOG"
	// CodeTimeout: the tool did not answer within the call's time limit
	// (Call.Timeout) and was cancelled.
	CodeTimeout = "E_TOOL_TIMEOUT"
	// CodeInvalidArgs: the arguments do not match the tool's input schema.
	CodeInvalidArgs = "E_TOOL_INVALID_ARGS"
	// CodeForbidden and CodeRateLimited are the error results of the
	// verdicts forbidden and rate_limited where the caller answers with a
	// tool result rather than a status (a turn's model).
	CodeForbidden   = "E_TOOL_FORBIDDEN"
	CodeRateLimited = "E_TOOL_RATE_LIMITED"
)

// SuggestionNotInCatalog is the suggestion of an E_TOOL_NOT_IN_CATALOG
// result (Goondan's ToolError.suggestion, a SHOULD): what the model can do
// instead, and what an operator would change to offer the tool.
const SuggestionNotInCatalog = "call only the tools listed in this step's tool catalog (step.tools); " +
	"a tool is listed only when the agent's tools select it and the caller may see it"

// SuggestionNotVisible is the suggestion of an E_TOOL_NOT_IN_CATALOG
// result of a direct call (the tool routes, MCP): where the caller finds
// the tools it may call.
const SuggestionNotVisible = "call one of the tools this caller may see (GET /v1/agents/tools, or MCP tools/list); " +
	"which tools a caller sees is decided by the bundle's access policies on its claims"

// DefaultErrorMessageLimit is the spec's default errorMessageLimit (§12.3.1).
const DefaultErrorMessageLimit = 1000

// truncatedSuffix ends a message cut to its limit.
const truncatedSuffix = "... (truncated)"

// Result is a ToolResult: a tool error never escapes as an exception, it
// becomes {status: error, error: {message, name, code}} for the model.
type Result struct {
	Status string          `json:"status"` // ok | error | authorization_required
	Output json.RawMessage `json:"output,omitempty"`
	Error  *ToolError      `json:"error,omitempty"`
	// Authorization is set with status authorization_required: what the
	// user must do (the auth session and its link), never a token.
	Authorization json.RawMessage `json:"authorization,omitempty"`
}

// ResultAuthorizationRequired is the result status of a call whose tool
// needs a user's consent before it can run (its toolReturned status is ok:
// the tool ran and answered).
const ResultAuthorizationRequired = "authorization_required"

// AuthorizationRequired is what an Invoker returns when the upstream needs
// a consent first; Authorization becomes the result's authorization.
type AuthorizationRequired struct {
	Authorization json.RawMessage
}

func (*AuthorizationRequired) Error() string { return "authorization required" }

// ToolError is the error of an error result.
type ToolError struct {
	Message string `json:"message"`
	Name    string `json:"name"`
	Code    string `json:"code"`
	// Suggestion says how to recover (Goondan's ToolError.suggestion):
	// set on the hooks' own refusals where there is something to say.
	Suggestion string `json:"suggestion,omitempty"`
	// RetryAfterSeconds is set with CodeRateLimited: when a call may
	// succeed again.
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
}

// ToolError is also an error a tool returns to choose its result's name
// and code (it implements CodedError).
func (e *ToolError) Error() string { return e.Message }

// ToolErrorName implements CodedError.
func (e *ToolError) ToolErrorName() string { return e.Name }

// ToolErrorCode implements CodedError.
func (e *ToolError) ToolErrorCode() string { return e.Code }

// NewToolError is a tool error with its name, code and message.
func NewToolError(name, code, message string) *ToolError {
	return &ToolError{Name: name, Code: code, Message: message}
}

// ErrorResult turns err into an error result whose message is cut to
// limit characters (runes; ≤ 0 means the default). A cut message ends in
// "... (truncated)" and, suffix included, is exactly limit characters long;
// a limit shorter than the suffix keeps only the message's first runes.
func ErrorResult(name, code, message string, limit int) Result {
	if name == "" {
		name = "Error"
	}
	if code == "" {
		code = CodeTool
	}
	return Result{Status: "error", Error: &ToolError{Message: Truncate(message, limit), Name: name, Code: code}}
}

// Truncate cuts s to limit runes as ErrorResult does.
func Truncate(s string, limit int) string {
	if limit <= 0 {
		limit = DefaultErrorMessageLimit
	}
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	keep := limit - utf8.RuneCountInString(truncatedSuffix)
	suffix := truncatedSuffix
	if keep < 0 {
		keep, suffix = limit, ""
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == keep {
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String() + suffix
}

// ValidateArgs checks a call's arguments against the tool's compiled input
// schema before the call. A mismatch is an E_TOOL_INVALID_ARGS result whose
// message names the failing location (a JSON pointer into the arguments)
// and the rule, never an argument value.
func ValidateArgs(schema *jsonschema.Schema, args json.RawMessage) *ToolError {
	if schema == nil {
		return nil
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &ToolError{Name: "InvalidArguments", Code: CodeInvalidArgs, Message: "arguments are not valid JSON"}
	}
	err = schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ToolError{Name: "InvalidArguments", Code: CodeInvalidArgs, Message: "arguments could not be validated"}
	}
	leaf := firstLeaf(ve)
	loc := "/" + strings.Join(leaf.InstanceLocation, "/")
	if req, ok := leaf.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
		// Property names come from the schema, not the caller's values.
		return &ToolError{Name: "InvalidArguments", Code: CodeInvalidArgs,
			Message: fmt.Sprintf("arguments at %s: missing required property %q", loc, req.Missing[0])}
	}
	msg := fmt.Sprintf("arguments at %s: %s", loc, kindOf(leaf))
	if _, ok := leaf.ErrorKind.(*kind.AdditionalProperties); ok {
		// The caller's extra names are its content (the audit is content
		// free): say what the schema takes instead.
		if at := schemaAt(schema, leaf.InstanceLocation); at != nil {
			names := slices.Sorted(maps.Keys(at.Properties))
			if len(names) == 0 {
				msg += " (it takes no properties)"
			} else {
				msg += fmt.Sprintf(" (the properties it takes: %s)", strings.Join(names, ", "))
			}
		}
	}
	return &ToolError{Name: "InvalidArguments", Code: CodeInvalidArgs, Message: msg}
}

// schemaAt follows an instance location down a schema's properties: the
// schema an object there is checked against, or nil where the path leaves
// plain properties (items, pattern properties, references).
func schemaAt(s *jsonschema.Schema, location []string) *jsonschema.Schema {
	for _, seg := range location {
		if s == nil {
			return nil
		}
		s = s.Properties[seg]
	}
	if s != nil && s.Ref != nil {
		s = s.Ref
	}
	return s
}

// firstLeaf descends to the most specific cause.
func firstLeaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve
}

// kindOf names the failed rule by its keyword path (e.g. "required",
// "type"), not by the library's message, which can quote the value.
func kindOf(ve *jsonschema.ValidationError) string {
	if ve.ErrorKind == nil {
		return "does not match the schema"
	}
	kp := ve.ErrorKind.KeywordPath()
	if len(kp) == 0 {
		return "does not match the schema"
	}
	return "fails " + strings.Join(kp, "/")
}

// RefusalResult is the error result of a call the hooks refused before
// the tool ran — forbidden (who lacks a scope: "the caller", "the user
// this turn acts for") or rate limited — for the callers that answer with
// a tool result rather than a status: a turn's model, an MCP client. ok
// is false for the other verdicts, whose Outcome.Result is the answer.
func RefusalResult(out Outcome, who string, limit int) (r Result, ok bool) {
	switch out.Verdict {
	case VerdictForbidden:
		return ErrorResult("ToolForbidden", CodeForbidden,
			fmt.Sprintf("%s lacks a scope this tool requires (%s); the tool was not run", who, strings.Join(out.RequiredScopes, " ")), limit), true
	case VerdictRateLimited:
		secs := int((out.RetryAfter + time.Second - 1) / time.Second)
		if secs < 1 {
			secs = 1
		}
		r := ErrorResult("ToolRateLimited", CodeRateLimited,
			fmt.Sprintf("too many calls of this tool; retry in %d seconds; the tool was not run", secs), limit)
		r.Error.RetryAfterSeconds = secs
		return r, true
	}
	return Result{}, false
}
