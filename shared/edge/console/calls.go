package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/agentauth/agentauth/shared/domain"
)

// callRow is one tool call of the audit stream: content-free (never an
// argument or a result).
type callRow struct {
	domain.ToolAudit
	Duration string
}

// calls is the audit stream of tool calls, newest first: a tenant admin's
// tenant, or every tenant (a platform admin's filter picks one).
func (c *Console) calls(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if c.cfg.ToolAudit == nil {
		return "", nil, forbidden
	}
	ctx := r.Context()
	f := filterOf(r, "tool", "status", "tenant")
	q := domain.ToolAuditQuery{Tool: f["tool"], Status: f["status"], After: r.URL.Query().Get("after"), Limit: pageSize}
	q.Tenant, q.AnyTenant = tenantScope(op, f)
	page, err := c.cfg.ToolAudit.QueryToolAudit(ctx, q)
	if errors.Is(err, domain.ErrInvalidID) {
		return "", nil, errNotFound
	}
	if err != nil {
		return "", nil, err
	}
	p := listPage[callRow]{Filter: f, Skipped: len(page.Unreadable), Tenant: op.Platform,
		Options: map[string][]string{"status": {"ok", domain.ToolAuditConsent, "error", "forbidden", "rate_limited"}}}
	for _, rec := range page.Records {
		if !op.sees(rec.Tenant) {
			continue
		}
		row := callRow{ToolAudit: rec}
		if rec.DurationMs != nil {
			row.Duration = strconv.FormatInt(*rec.DurationMs, 10) + " ms"
		}
		p.Rows = append(p.Rows, row)
	}
	if page.Next != "" {
		p.Next = f.query("after", page.Next)
	}
	c.logUnreadable(ctx, "tool calls", page.Unreadable)
	return "calls", view{Title: "Tool calls", Nav: "calls", Data: p}, nil
}
