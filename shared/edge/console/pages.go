package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/turn"
)

// pageSize is how many rows a list shows at once.
const pageSize = 50

// Grant statuses as the console shows them: one word, one colour.
const (
	stActive    = "active"
	stExpired   = "expired"
	stRevoked   = "revoked"
	stPending   = "pending"
	stCompleted = "completed"
	stFailed    = "failed"
)

// grantRow is a grant without its tokens: nothing of a token reaches a
// template, not even its sealed form.
type grantRow struct {
	ID, App, Provider, Subject, Tenant, Flow, Status string
	ScopesGranted, ScopesRequested, ScopesMissing    []string
	Created, Updated                                 time.Time
	Expires, Revoked                                 *time.Time
	RevokedReason                                    string
	Refreshable                                      bool
}

func grantRowOf(g domain.Grant, now time.Time) grantRow {
	row := grantRow{ID: g.ID, App: g.OAuthAppRef.Name, Provider: g.Provider, Subject: g.Subject, Tenant: g.Tenant, Flow: g.Flow,
		ScopesGranted: g.ScopesGranted, ScopesRequested: g.ScopesRequested, Created: g.CreatedAt, Updated: g.UpdatedAt,
		Expires: g.Token.ExpiresAt, Revoked: g.RevokedAt, RevokedReason: g.RevokedReason, Refreshable: g.Token.RefreshToken != nil}
	for _, s := range g.ScopesRequested {
		if !slices.Contains(g.ScopesGranted, s) {
			row.ScopesMissing = append(row.ScopesMissing, s)
		}
	}
	switch {
	case g.Revoked:
		row.Status = stRevoked
	case g.Token.ExpiresAt != nil && !g.Token.ExpiresAt.After(now) && g.Token.RefreshToken == nil:
		row.Status = stExpired
	default:
		row.Status = stActive
	}
	return row
}

// filter is a list's query: the values of its form's fields.
type filter map[string]string

func filterOf(r *http.Request, keys ...string) filter {
	f := filter{}
	for _, k := range keys {
		f[k] = strings.TrimSpace(r.URL.Query().Get(k))
	}
	return f
}

// match reports whether value passes the filter's key (empty: all).
func (f filter) match(key, value string) bool { return f[key] == "" || f[key] == value }

// query is the filter as a query string, for links that keep it.
func (f filter) query(extra ...string) string {
	v := url.Values{}
	for k, x := range f {
		if x != "" {
			v.Set(k, x)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v.Encode()
}

// listPage is a page of rows after a cursor.
type listPage[T any] struct {
	Rows     []T
	Total    int
	Filter   filter
	Next     string // the query of the next page; "" on the last
	Skipped  int    // unreadable records left out
	Options  map[string][]string
	Problems []string
}

// paginate cuts rows (sorted) after the cursor id.
func paginate[T any](rows []T, id func(T) string, after string, f filter) listPage[T] {
	p := listPage[T]{Total: len(rows), Filter: f}
	start := 0
	if after != "" {
		start = len(rows)
		for i, r := range rows {
			if id(r) == after {
				start = i + 1
				break
			}
		}
	}
	end := min(start+pageSize, len(rows))
	p.Rows = rows[start:end]
	if end < len(rows) {
		p.Next = f.query("after", id(rows[end-1]))
	}
	return p
}

func distinct(values []string) []string {
	slices.Sort(values)
	return slices.Compact(values)
}

func (c *Console) visibleGrants(ctx context.Context, op operator) ([]grantRow, int, error) {
	gs, bad, err := c.cfg.Grants.ListGrants(ctx)
	if err != nil {
		return nil, 0, err
	}
	now := c.cfg.Now()
	rows := make([]grantRow, 0, len(gs))
	for _, g := range gs {
		if op.sees(g.Tenant) {
			rows = append(rows, grantRowOf(g, now))
		}
	}
	slices.SortFunc(rows, func(a, b grantRow) int { return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.ID, b.ID)) })
	return rows, len(bad), nil
}

func (c *Console) grants(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	all, skipped, err := c.visibleGrants(r.Context(), op)
	if err != nil {
		return "", nil, err
	}
	f := filterOf(r, "app", "subject", "tenant", "status")
	var rows []grantRow
	opts := map[string][]string{}
	for _, g := range all {
		opts["app"] = append(opts["app"], g.App)
		opts["tenant"] = append(opts["tenant"], g.Tenant)
		if f.match("app", g.App) && f.match("subject", g.Subject) && f.match("tenant", g.Tenant) && f.match("status", g.Status) {
			rows = append(rows, g)
		}
	}
	for k, v := range opts {
		opts[k] = distinct(v)
	}
	opts["status"] = []string{stActive, stExpired, stRevoked}
	p := paginate(rows, func(g grantRow) string { return g.ID }, r.URL.Query().Get("after"), f)
	p.Skipped, p.Options = skipped, opts
	return "grants", view{Title: "Grants", Nav: "grants", Data: p}, nil
}

func (c *Console) grantFor(ctx context.Context, op operator, id string) (domain.Grant, error) {
	if domain.ValidateGrantID(id) != nil {
		return domain.Grant{}, errNotFound
	}
	g, err := c.cfg.Grants.GetGrant(ctx, id)
	if err != nil {
		return g, err
	}
	if !op.sees(g.Tenant) {
		return domain.Grant{}, forbidden
	}
	return g, nil
}

func (c *Console) grant(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	g, err := c.grantFor(r.Context(), op, r.PathValue("id"))
	if err != nil {
		return "", nil, err
	}
	return "grant", view{Title: "Grant " + g.OAuthAppRef.Name + " · " + g.Subject, Nav: "grants", Data: grantRowOf(g, c.cfg.Now())}, nil
}

func (c *Console) revoke(w http.ResponseWriter, r *http.Request, op operator) (string, error) {
	g, err := c.grantFor(r.Context(), op, r.PathValue("id"))
	if err != nil {
		return "", err
	}
	if g.Revoked {
		return Path + "grants/" + url.PathEscape(g.ID) + "?done=already+revoked", nil
	}
	res, err := c.cfg.Revoker.RevokeGrant(r.Context(), g.OAuthAppRef, g.Subject)
	if err != nil {
		return "", err
	}
	c.cfg.Log.InfoContext(r.Context(), "console action", "action", "revoke", "operator", op.Subject, "grantId", g.ID,
		"oauthApp", g.OAuthAppRef.Name, "providerRevocation", res.Provider)
	return Path + "grants/" + url.PathEscape(g.ID) + "?done=" + url.QueryEscape("revoked (provider revocation: "+res.Provider+")"), nil
}

// consentRow is an auth session without its sealed parts (state,
// verifier, device code).
type consentRow struct {
	ID, App, Provider, Subject, SubjectMode, Tenant, Flow, Status, Reason, ReasonText string
	Scopes                                                                            []string
	Created, Expires                                                                  time.Time
	Completed                                                                         *time.Time
	// StartedBy says what asked for the consent: an agent's turn (with
	// its instance) or a runtime request.
	StartedBy   string
	Instance    string
	InstanceURL string
}

func consentRowOf(s domain.Session) consentRow {
	row := consentRow{ID: s.ID, App: s.OAuthAppRef.Name, Provider: s.Provider, Subject: s.Subject, SubjectMode: s.SubjectMode,
		Tenant: s.Tenant, Flow: s.Flow.Type, Status: string(s.Status), Reason: s.StatusReason, ReasonText: oauth.ReasonText(s.StatusReason),
		Scopes: s.RequestedScopes, Created: s.CreatedAt, Expires: s.ExpiresAt, Completed: s.CompletedAt, StartedBy: "a runtime request"}
	if s.Status == domain.SessionExchanging {
		row.Status = stPending
	}
	if t := s.Resume.Target(); t.Validate() == nil {
		key := turn.InstanceKey{Swarm: t.SwarmRef.Name, Key: t.InstanceKey, Agent: t.AgentName}
		row.StartedBy, row.Instance, row.InstanceURL = "an agent's turn", key.String(), instancePath(key)
	}
	return row
}

func instancePath(k turn.InstanceKey) string {
	return Path + "instances/" + url.PathEscape(k.Swarm) + "/" + url.PathEscape(k.Key) + "/" + url.PathEscape(k.Agent)
}

func (c *Console) visibleConsents(ctx context.Context, op operator) ([]consentRow, int, error) {
	ss, bad, err := c.cfg.Sessions.ListSessions(ctx)
	if err != nil {
		return nil, 0, err
	}
	rows := make([]consentRow, 0, len(ss))
	for _, s := range ss {
		if op.sees(s.Tenant) {
			rows = append(rows, consentRowOf(s))
		}
	}
	slices.SortFunc(rows, func(a, b consentRow) int { return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.ID, b.ID)) })
	return rows, len(bad), nil
}

func (c *Console) consents(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	all, skipped, err := c.visibleConsents(r.Context(), op)
	if err != nil {
		return "", nil, err
	}
	f := filterOf(r, "app", "status", "reason")
	var rows []consentRow
	opts := map[string][]string{}
	for _, s := range all {
		opts["app"] = append(opts["app"], s.App)
		if s.Reason != "" {
			opts["reason"] = append(opts["reason"], s.Reason)
		}
		if f.match("app", s.App) && f.match("status", s.Status) && f.match("reason", s.Reason) {
			rows = append(rows, s)
		}
	}
	for k, v := range opts {
		opts[k] = distinct(v)
	}
	opts["status"] = []string{stPending, stCompleted, stFailed, string(domain.SessionExpired)}
	p := paginate(rows, func(s consentRow) string { return s.ID }, r.URL.Query().Get("after"), f)
	p.Skipped, p.Options = skipped, opts
	return "consents", view{Title: "Consents", Nav: "consents", Data: p}, nil
}

func (c *Console) consent(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	id := r.PathValue("id")
	if domain.ValidateSessionID(id) != nil {
		return "", nil, errNotFound
	}
	s, err := c.cfg.Sessions.GetSession(r.Context(), id)
	if err != nil {
		return "", nil, err
	}
	if !op.sees(s.Tenant) {
		return "", nil, forbidden
	}
	return "consent", view{Title: "Consent " + s.OAuthAppRef.Name + " · " + s.Subject, Nav: "consents", Data: consentRowOf(s)}, nil
}

// overviewData is the overview's figures.
type overviewData struct {
	Grants         map[string]int
	GrantsTotal    int
	Consents24h    map[string]int
	FailedByReason []reasonCount
	Instances      map[string]int
	InstancesTotal int
	Parked         int
	Turns          bool
	Platform       bool
	Problems       []string
	// DeadLetters is how many events failed every attempt (-1: not shown).
	DeadLetters int
}

type reasonCount struct {
	Reason, Text string
	Count        int
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	ctx := r.Context()
	d := overviewData{Grants: map[string]int{}, Consents24h: map[string]int{}, Instances: map[string]int{}, Turns: c.cfg.Turns != nil, Platform: op.Platform, DeadLetters: -1}
	if c.cfg.DeadLetters != nil && op.Platform {
		_, n, err := c.cfg.DeadLetters.ListDeadLetters(ctx, 1)
		if err != nil {
			return "", nil, err
		}
		d.DeadLetters = n
	}
	grants, skipped, err := c.visibleGrants(ctx, op)
	if err != nil {
		return "", nil, err
	}
	if skipped > 0 {
		d.Problems = append(d.Problems, fmt.Sprintf("%d grants could not be read", skipped))
	}
	for _, g := range grants {
		d.Grants[g.Status]++
	}
	d.GrantsTotal = len(grants)
	consents, skipped, err := c.visibleConsents(ctx, op)
	if err != nil {
		return "", nil, err
	}
	if skipped > 0 {
		d.Problems = append(d.Problems, fmt.Sprintf("%d consents could not be read", skipped))
	}
	since := c.cfg.Now().Add(-24 * time.Hour)
	reasons := map[string]int{}
	for _, s := range consents {
		if s.Created.Before(since) {
			continue
		}
		d.Consents24h[s.Status]++
		if s.Status == stFailed || s.Status == string(domain.SessionExpired) {
			reasons[cmp.Or(s.Reason, s.Status)]++
		}
	}
	for reason, n := range reasons {
		d.FailedByReason = append(d.FailedByReason, reasonCount{Reason: reason, Text: oauth.ReasonText(reason), Count: n})
	}
	slices.SortFunc(d.FailedByReason, func(a, b reasonCount) int { return cmp.Or(b.Count-a.Count, cmp.Compare(a.Reason, b.Reason)) })
	if c.cfg.Turns != nil && op.Platform {
		insts, bad, err := c.cfg.Turns.List(ctx)
		if err != nil {
			return "", nil, err
		}
		if len(bad) > 0 {
			d.Problems = append(d.Problems, fmt.Sprintf("%d agent instances could not be read", len(bad)))
		}
		for _, in := range insts {
			d.Instances[string(in.Status)]++
		}
		d.InstancesTotal = len(insts)
		for _, s := range consents {
			if s.Status == stPending && s.Instance != "" {
				d.Parked++
			}
		}
	}
	return "overview", view{Title: "Overview", Nav: "overview", Data: d}, nil
}

// tenantOfClaims is the tenant claims name at path (tenant_id by
// default).
func tenantOfClaims(claims map[string]any, path string) string {
	t, _ := domain.ClaimText(claims, cmp.Or(path, domain.DefaultTenantClaim))
	return t
}

func asError[T error](err error, target *T) bool { return errors.As(err, target) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
