package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/console"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/skills"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
	"github.com/agentauth/agentauth/shared/turn"
)

// mountConsole serves the operator console when cfg names its OpenID
// provider: sign-in through the OAuth core's relying party, the pages
// over the same store, OAuth manager and turn plane as the API.
func (a *App) mountConsole(cfg config.Config, be *Backends, lambda bool, log *slog.Logger) error {
	cc := cfg.Console
	if cc == nil {
		return nil
	}
	base := cfg.PublicURL
	secret := cc.ClientSecret
	if cc.SecretName != "" {
		if be.Secrets == nil {
			return fmt.Errorf("console: %s: these backends resolve no secrets", config.ConsoleClientSecretRef)
		}
		s, err := be.Secrets.ResolveSecret(cc.SecretName, cc.SecretKey)
		if err != nil {
			return fmt.Errorf("console: %s: %w", config.ConsoleClientSecretRef, err)
		}
		secret = s
	}
	signIn, err := oauth.NewSignIn(oauth.SignInConfig{Issuer: cc.Issuer, ClientID: cc.ClientID, ClientSecret: secret,
		RedirectURL: base + console.Path + "auth/callback", Keys: be.StateKeys})
	if err != nil {
		return err
	}
	ccfg := console.Config{SignIn: signIn, Keys: be.StateKeys, Secure: !loopbackHTTP(base), RolesClaim: cc.RolesClaim,
		TenantClaim: tenantClaim(cfg), Grants: be.Store, Sessions: be.Store, Revoker: a.OAuth, Log: log,
		Revision: func(ctx context.Context) string { return a.active.headOr(ctx).Revision },
		Stream:   httpx.StreamLimits{Gate: a.streams}}
	if lambda {
		// Behind API Gateway a response is sent whole when it ends (the
		// Lambda proxy's writer cannot flush): the live timeline's stream
		// is buffered on purpose, answers what came within a few seconds
		// and ends, and the browser's EventSource asks again from its
		// Last-Event-ID.
		ccfg.Stream.MaxDuration = lambdaStreamWindow
		ccfg.Stream.Buffered = true
	}
	q, ok := be.Store.(domain.OperatorQueries)
	if !ok {
		return fmt.Errorf("console: the store %T answers no operator queries", be.Store)
	}
	ccfg.Queries = q
	if a.Turns != nil {
		ccfg.Turns = a.Turns
		if iq, ok := be.TurnStore.(turn.InstanceQuerier); ok {
			ccfg.Instances = iq
		}
	}
	if a.plane != nil {
		ccfg.Catalog = planeCatalog{p: a.plane, paths: claimPaths(cfg)}
	}
	ccfg.Active = a.Active
	ccfg.TurnStats = a.TurnStats
	if be.ToolAudit != nil {
		ccfg.ToolAudit = be.ToolAudit
	}
	if be.DeadLetters != nil {
		ccfg.DeadLetters = be.DeadLetters
	}
	if be.Changesets != nil {
		ccfg.History = be.Changesets.Repo
	}
	c, err := console.New(ccfg)
	if err != nil {
		return err
	}
	a.api.MountRuntime(c.Register, httpapi.Part{Name: httpapi.ConsolePart, Credential: "an operator's OpenID Connect sign-in",
		Doc: "docs/console.md", Routes: c.Patterns()})
	return nil
}

// lambdaStreamWindow is how long a console stream runs on Lambda.
const lambdaStreamWindow = 5 * time.Second

// planeCatalog is the tool plane as the console's tools page reads it;
// paths are where the skill routes read a caller's tenant and allow list.
type planeCatalog struct {
	p     *toolplane.Plane
	paths domain.ClaimPaths
}

func (c planeCatalog) CatalogTools(ctx context.Context) []console.CatalogTool {
	snap := c.p.Snapshot(ctx)
	out := make([]console.CatalogTool, 0, len(snap.Tools))
	for id, e := range snap.Tools {
		out = append(out, console.CatalogTool{ID: id, Name: e.Tool.Name, Description: e.Tool.Description, Source: e.Tool.SourceID, Tenant: e.Tenant})
	}
	return out
}

func (c planeCatalog) Explain(ctx context.Context, claims map[string]any) toolcatalog.Explanation {
	c.p.Snapshot(ctx) // brings the catalog up to the uploads now
	return c.p.Catalog().Explain(claims)
}

// ExplainSkills reads the claims as the skill routes do (the one
// principal mapping) and asks the skill index why.
func (c planeCatalog) ExplainSkills(ctx context.Context, claims map[string]any) console.SkillsExplanation {
	p := domain.NewPrincipal(claims, c.paths)
	return console.SkillsExplanation{AllowListClaim: c.paths.Skills, Tenant: p.Tenant, Allowed: p.AllowedSkills,
		Skills: c.p.Snapshot(ctx).Skills.Explain(skills.Query{TenantID: p.Tenant, AllowedSkillNames: p.AllowedSkills})}
}

// loopbackHTTP reports whether base is plain HTTP on a loopback host,
// where a browser would not send a Secure cookie back.
func loopbackHTTP(base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return false
	}
	if h := u.Hostname(); h == "localhost" || strings.HasSuffix(h, ".localhost") { // RFC 6761: loopback
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}
