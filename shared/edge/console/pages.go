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
	// stFailing: a grant not revoked whose last refreshes failed.
	stFailing = "refresh failing"
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
	// RefreshFailures are the refreshes that failed in a row since the
	// last success, with the last one's reason code and time.
	RefreshFailures    int
	LastRefreshError   string
	LastRefreshFailure *time.Time
}

func grantRowOf(g domain.Grant, now time.Time) grantRow {
	row := grantRow{ID: g.ID, App: g.OAuthAppRef.Name, Provider: g.Provider, Subject: g.Subject, Tenant: g.Tenant, Flow: g.Flow,
		ScopesGranted: g.ScopesGranted, ScopesRequested: g.ScopesRequested, Created: g.CreatedAt, Updated: g.UpdatedAt,
		Expires: g.Token.ExpiresAt, Revoked: g.RevokedAt, RevokedReason: g.RevokedReason, Refreshable: g.Token.RefreshToken != nil,
		RefreshFailures: g.RefreshFailures, LastRefreshError: g.LastRefreshError, LastRefreshFailure: g.LastRefreshFailedAt}
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

// listPage is one page of a list: its rows, the filter it was read with,
// and the query of the next page ("" on the last).
type listPage[T any] struct {
	Rows    []T
	Filter  filter
	Next    string
	Skipped int // unreadable records left out (the server's log names them)
	Options map[string][]string
	// Tenant: the operator may pick a tenant (a platform admin).
	Tenant bool
}

// noTenant is the tenant filter's value for records without a tenant.
const noTenant = "(none)"

// tenantScope is the tenant part of a query: a tenant admin's own tenant
// whatever the filter says; a platform admin's filter (empty: every
// tenant; noTenant: the records without one).
func tenantScope(op operator, f filter) (tenant string, any bool) {
	switch {
	case !op.Platform:
		return op.Tenant, false
	case f["tenant"] == "":
		return "", true
	case f["tenant"] == noTenant:
		return "", false
	}
	return f["tenant"], false
}

// appNames are the bundle's OAuthApps, the app filter's choices.
func (c *Console) appNames(ctx context.Context) []string {
	if c.cfg.Active == nil {
		return nil
	}
	b, err := c.cfg.Active(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for name := range b.OAuthApps {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (c *Console) grants(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	ctx := r.Context()
	f := filterOf(r, "app", "subject", "tenant", "status")
	q := domain.GrantQuery{App: f["app"], Subject: f["subject"], After: r.URL.Query().Get("after"), Limit: pageSize}
	q.Tenant, q.AnyTenant = tenantScope(op, f)
	switch f["status"] {
	case stActive:
		q.Revoked = new(false)
	case stRevoked:
		q.Revoked = new(true)
	}
	page, err := c.cfg.Queries.QueryGrants(ctx, q)
	if errors.Is(err, domain.ErrInvalidID) {
		return "", nil, errNotFound // a cursor that is not one
	}
	if err != nil {
		return "", nil, err
	}
	p := listPage[grantRow]{Filter: f, Skipped: len(page.Unreadable), Tenant: op.Platform,
		Options: map[string][]string{"app": c.appNames(ctx), "status": {stActive, stRevoked}}}
	now := c.cfg.Now()
	for _, g := range page.Grants {
		if op.sees(g.Tenant) { // the store scoped the query; this is the second line
			p.Rows = append(p.Rows, grantRowOf(g, now))
		}
	}
	if page.Next != "" {
		p.Next = f.query("after", page.Next)
	}
	c.logUnreadable(ctx, "grants", page.Unreadable)
	return "grants", view{Title: "Grants", Nav: "grants", Data: p}, nil
}

// logUnreadable names the records a list left out.
func (c *Console) logUnreadable(ctx context.Context, what string, errs []error) {
	for _, err := range errs {
		c.cfg.Log.WarnContext(ctx, "console list: a record could not be read", "list", what, "err", err)
	}
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
		Scopes: s.RequestedScopes, Created: s.CreatedAt, Expires: s.ExpiresAt, Completed: s.CompletedAt, StartedBy: startedBy(s.StartedBy)}
	if s.Status == domain.SessionExchanging {
		row.Status = stPending
	}
	if t := s.Resume.Target(); t.Validate() == nil {
		key := turn.InstanceKey{Swarm: t.SwarmRef.Name, Key: t.InstanceKey, Agent: t.AgentName}
		if s.StartedBy == "" {
			row.StartedBy = startedBy(domain.StartedByTurn)
		}
		row.Instance, row.InstanceURL = key.String(), instancePath(key)
	}
	return row
}

// startedBy says in words which edge started a consent.
func startedBy(via string) string {
	switch via {
	case domain.StartedByTurn:
		return "an agent's turn"
	case domain.StartedByTool:
		return "a tool call (tool routes)"
	case domain.StartedByMCP:
		return "a tool call over MCP"
	case domain.StartedByREST:
		return "the token route"
	}
	return "a runtime request"
}

func instancePath(k turn.InstanceKey) string {
	return Path + "instances/" + url.PathEscape(k.Swarm) + "/" + url.PathEscape(k.Key) + "/" + url.PathEscape(k.Agent)
}

func (c *Console) consents(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	ctx := r.Context()
	f := filterOf(r, "app", "status", "reason", "tenant")
	q := domain.SessionQuery{App: f["app"], Status: domain.SessionStatus(f["status"]), Reason: f["reason"],
		After: r.URL.Query().Get("after"), Limit: pageSize}
	q.Tenant, q.AnyTenant = tenantScope(op, f)
	page, err := c.cfg.Queries.QuerySessions(ctx, q)
	if errors.Is(err, domain.ErrInvalidID) {
		return "", nil, errNotFound
	}
	if err != nil {
		return "", nil, err
	}
	p := listPage[consentRow]{Filter: f, Skipped: len(page.Unreadable), Tenant: op.Platform, Options: map[string][]string{
		"app":    c.appNames(ctx),
		"status": {stPending, string(domain.SessionExchanging), stCompleted, stFailed, string(domain.SessionExpired)},
		"reason": reasons,
	}}
	for _, s := range page.Sessions {
		if op.sees(s.Tenant) {
			p.Rows = append(p.Rows, consentRowOf(s))
		}
	}
	if page.Next != "" {
		p.Next = f.query("after", page.Next)
	}
	c.logUnreadable(ctx, "consents", page.Unreadable)
	return "consents", view{Title: "Consents", Nav: "consents", Data: p}, nil
}

// reasons are the failure reasons a consent may end with (the reason
// filter's choices).
var reasons = []string{oauth.ReasonMissingState, oauth.ReasonInvalidState, oauth.ReasonSessionNotFound, oauth.ReasonSessionAlreadyUsed,
	oauth.ReasonSessionExpired, oauth.ReasonWrongCallback, oauth.ReasonProviderError, oauth.ReasonMissingCode,
	oauth.ReasonTokenExchangeFailed, oauth.ReasonTokenExchangeTimeout, oauth.ReasonSubjectMismatch, oauth.ReasonSubjectUnverifiable, oauth.ReasonInternal}

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
	GrantsCapped   bool
	ConsentsCapped bool
	// InstancesCapped: a status's count reached Cap.
	InstancesCapped bool
	Cap             int
	Consents24h     map[string]int
	FailedByReason  []reasonCount
	Instances       map[string]int
	InstancesTotal  int
	Parked          int
	Turns           bool
	Platform        bool
	Problems        []string
	// DeadLetters is how many events failed every attempt (-1: not shown).
	DeadLetters int
	// Health is each backend's check (platform admins).
	Health []healthCheck
	// Hours are the last 24 hours' ended turns (platform admins).
	Hours *hoursChart
}

// hoursChart is the overview's turns per hour: one bar per hour, its
// height scaled to the busiest hour.
type hoursChart struct {
	Bars                      []hourBar
	Completed, Failed, Parked int
	ParkedTime                string
	Max                       int
}

type hourBar struct {
	Hour                 time.Time
	Completed, Failed    int
	OKPct, FailPct       int // heights in percent of the busiest hour
	Label, ParkedSummary string
}

// chartOf draws hours: percent heights (so the CSS needs no inline
// style: the classes h0 … h100 in steps of 5), totals, parked time.
func chartOf(hours []turn.HourStats) *hoursChart {
	c := &hoursChart{}
	var parked float64
	for _, h := range hours {
		c.Max = max(c.Max, h.Completed+h.Failed)
	}
	for _, h := range hours {
		b := hourBar{Hour: h.Hour, Completed: h.Completed, Failed: h.Failed,
			Label: h.Hour.UTC().Format("15:04") + " UTC: " + itoa(int64(h.Completed)) + " completed, " + itoa(int64(h.Failed)) + " failed"}
		if c.Max > 0 {
			b.OKPct = step5(h.Completed * 100 / c.Max)
			b.FailPct = step5(h.Failed * 100 / c.Max)
		}
		if h.Parked > 0 {
			b.ParkedSummary = itoa(int64(h.Parked)) + " parked, " + (time.Duration(h.ParkedSeconds * float64(time.Second))).Round(time.Second).String() + " waiting"
			b.Label += ", " + b.ParkedSummary
		}
		c.Completed += h.Completed
		c.Failed += h.Failed
		c.Parked += h.Parked
		parked += h.ParkedSeconds
		c.Bars = append(c.Bars, b)
	}
	c.ParkedTime = time.Duration(parked * float64(time.Second)).Round(time.Second).String()
	return c
}

// step5 rounds a percentage up to a multiple of 5 (a bar that has a turn
// is never invisible).
func step5(p int) int {
	if p <= 0 {
		return 0
	}
	return min(100, (p+4)/5*5)
}

type reasonCount struct {
	Reason, Text string
	Count        int
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	ctx := r.Context()
	d := overviewData{Grants: map[string]int{}, Consents24h: map[string]int{}, Instances: map[string]int{}, Turns: c.cfg.Turns != nil,
		Platform: op.Platform, DeadLetters: -1, Cap: overviewCap}
	if c.cfg.DeadLetters != nil && op.Platform {
		_, n, err := c.cfg.DeadLetters.ListDeadLetters(ctx, 1)
		if err != nil {
			return "", nil, err
		}
		d.DeadLetters = n
	}
	if op.Platform {
		d.Health = c.health(ctx)
		if c.cfg.TurnStats != nil {
			to := c.cfg.Now().UTC().Truncate(time.Hour).Add(time.Hour)
			hours, err := c.cfg.TurnStats.Hours(ctx, to.Add(-24*time.Hour), to)
			if err != nil {
				c.cfg.Log.WarnContext(ctx, "console: turns per hour not read", "err", err)
				d.Problems = append(d.Problems, "the turns per hour could not be read")
			} else {
				d.Hours = chartOf(hours)
			}
		}
	}
	tenant, any := tenantScope(op, filter{})
	active, revoked, capped, err := c.cfg.Queries.CountGrants(ctx, tenant, any, overviewCap)
	if err != nil {
		return "", nil, err
	}
	d.Grants[stActive], d.Grants[stRevoked], d.GrantsCapped = active, revoked, capped
	failing, fcapped, err := c.cfg.Queries.CountFailingGrants(ctx, tenant, any, overviewCap)
	if err != nil {
		return "", nil, err
	}
	d.Grants[stFailing], d.GrantsCapped = failing, d.GrantsCapped || fcapped
	// The last 24 h of consents, newest first, up to the cap.
	reasonCounts := map[string]int{}
	q := domain.SessionQuery{Tenant: tenant, AnyTenant: any, Since: c.cfg.Now().Add(-24 * time.Hour), Limit: 100}
	for seen := 0; ; {
		page, err := c.cfg.Queries.QuerySessions(ctx, q)
		if err != nil {
			return "", nil, err
		}
		for _, s := range page.Sessions {
			row := consentRowOf(s)
			d.Consents24h[row.Status]++
			if row.Status == stFailed || row.Status == string(domain.SessionExpired) {
				reasonCounts[cmp.Or(row.Reason, row.Status)]++
			}
			if row.Status == stPending && row.Instance != "" {
				d.Parked++
			}
		}
		if len(page.Unreadable) > 0 {
			d.Problems = append(d.Problems, fmt.Sprintf("%d consents could not be read", len(page.Unreadable)))
		}
		seen += len(page.Sessions)
		if page.Next == "" {
			break
		}
		if seen >= overviewCap {
			d.ConsentsCapped = true
			break
		}
		q.After = page.Next
	}
	for reason, n := range reasonCounts {
		d.FailedByReason = append(d.FailedByReason, reasonCount{Reason: reason, Text: oauth.ReasonText(reason), Count: n})
	}
	slices.SortFunc(d.FailedByReason, func(a, b reasonCount) int { return cmp.Or(b.Count-a.Count, cmp.Compare(a.Reason, b.Reason)) })
	if c.cfg.Instances != nil && op.Platform {
		for _, st := range []turn.InstanceStatus{turn.Active, turn.Paused, turn.Terminated} {
			n, capped, err := c.countInstances(ctx, st)
			if err != nil {
				return "", nil, err
			}
			d.Instances[string(st)] = n
			d.InstancesTotal += n
			d.InstancesCapped = d.InstancesCapped || capped
		}
	}
	return "overview", view{Title: "Overview", Nav: "overview", Data: d}, nil
}

// overviewCap bounds what the overview counts of one kind: past it the
// figure reads "N+", so the page costs the same at any size.
const overviewCap = 1000

// instancePages bounds the pages of instances the overview reads per
// status. Status is a filter the instance index does not key, and a page
// of the file store reads each instance's state: counting to overviewCap
// would read a thousand states per status on every overview, so past
// two pages the figure reads "N+".
const instancePages = 2

// countInstances counts the instances of one status, up to instancePages
// pages of 100.
func (c *Console) countInstances(ctx context.Context, st turn.InstanceStatus) (int, bool, error) {
	q := turn.InstanceQuery{Status: st, Limit: 100}
	n := 0
	for range instancePages {
		page, err := c.cfg.Instances.QueryInstances(ctx, q)
		if err != nil {
			return 0, false, err
		}
		n += len(page.Instances)
		if page.Next == "" {
			return n, false, nil
		}
		q.After = page.Next
	}
	return n, true, nil
}

// tenantOfClaims is the tenant claims name at path (tenant_id by
// default).
func tenantOfClaims(claims map[string]any, path string) string {
	t, _ := domain.ClaimText(claims, cmp.Or(path, domain.DefaultTenantClaim))
	return t
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
