package domain

import (
	"context"
	"time"
)

// The stored audit stream of tool calls: what the operator console's Tools
// view reads. The tool hooks emit agent.toolCalled and agent.toolReturned
// for every call; an audit sink joins the two and appends one ToolAudit.
// Like the events, a record is content-free: it never holds an argument,
// a result or an error message, only the argsHash and an error code.

// ToolAudit is one tool call as the audit stream keeps it: the
// ToolReturned event joined with its ToolCalled (content-free: never an
// argument or a result).
type ToolAudit struct {
	At         time.Time `json:"at"` // when it returned
	CallID     string    `json:"callId"`
	Tool       string    `json:"tool"`
	AgentID    string    `json:"agentId,omitempty"`
	Principal  string    `json:"principal,omitempty"` // the caller's subject
	Tenant     string    `json:"tenant,omitempty"`    // the caller's tenant ("" none)
	Transport  string    `json:"transport,omitempty"` // http | mcp | native
	Via        string    `json:"via,omitempty"`       // "" (the tool routes) | turn
	Status     string    `json:"status"`              // ok | authorization_required | error | forbidden | rate_limited
	DurationMs *int64    `json:"durationMs,omitempty"`
	ErrorCode  string    `json:"errorCode,omitempty"`
	ArgsHash   string    `json:"argsHash,omitempty"`
}

// ToolAuditQuery selects one page of the audit stream, newest first.
type ToolAuditQuery struct {
	Tenant    string // the records of this tenant ("": those with no tenant) …
	AnyTenant bool   // … unless AnyTenant: every record (a platform admin), as GrantQuery's
	Tool      string // "" any
	Status    string // "" any
	After     string // the previous page's Next; "" the first page
	Limit     int    // 1..100 (0: 50)
}

// ToolAuditPage is one page of a ToolAuditQuery.
type ToolAuditPage struct {
	Records    []ToolAudit
	Next       string  // "" on the last page; opaque, safe in a URL query
	Unreadable []error // records listed but not readable (skipped)
}

// ToolAuditLog is the stored audit stream: appended by the tool hooks'
// audit sink, read by the console. A store keeps a record for its
// retention and then drops it; a record past it is never returned.
type ToolAuditLog interface {
	AppendToolAudit(ctx context.Context, r ToolAudit) error
	QueryToolAudit(ctx context.Context, q ToolAuditQuery) (ToolAuditPage, error) // newest first
}

// DefaultToolAuditRetention is how long the audit stream keeps a record
// unless configured otherwise (AGENTAUTH_AUDIT_RETENTION).
const DefaultToolAuditRetention = 7 * 24 * time.Hour

// ToolAuditConsent is a ToolAudit's status for a call that answered
// authorization_required: it waits for the user's consent and did not do
// its work (the event says ok; the stream keeps them apart).
const ToolAuditConsent = "authorization_required"
