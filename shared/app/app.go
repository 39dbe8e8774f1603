// Package app is agentauth's one composition root: configuration and
// backends in, handlers and sweeps out. The Lambda entry
// (shared/edge/lambdaentry), `agentauth serve` and `agentauth bench` all
// call Build; nothing else assembles the object graph (bundle → OAuth
// manager → runtime and callback routes → tool plane).
//
// It reads no environment (shared/config does) and holds no logic of its
// own beyond choosing implementations.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/agentauth/agentauth/shared/aws/awsbackends"
	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/bundleapi"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/edge/mcpapi"
	"github.com/agentauth/agentauth/shared/edge/toolsapi"
	"github.com/agentauth/agentauth/shared/edge/turnsapi"
	"github.com/agentauth/agentauth/shared/local/auditfile"
	"github.com/agentauth/agentauth/shared/local/embedded"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/changesettools"
	"github.com/agentauth/agentauth/shared/turn/turntools"
)

// Backends are the stores, sealers and queue a process runs on: the
// embedded set in one home directory, or the AWS set.
type Backends struct {
	Store   domain.Store
	Tenants domain.TenantStore
	// GrantSealer seals grants (KMS envelope encryption in AWS);
	// SessionSealer sessions, state and PKCE verifiers.
	GrantSealer, SessionSealer domain.Sealer
	Queue                      domain.EventQueue
	StateKeys                  [][]byte
	Secrets                    bundle.SecretResolver
	// ToolLimiter builds the tool rate limiter that holds across
	// processes (files under the home, or items on the table).
	ToolLimiter func(ratelimit.Limits) (toolhooks.Limiter, error)
	// Describe says where the backends are, for the start line.
	Describe string
	// TurnStore holds agent instances (nil: the turn plane is off on
	// these backends).
	TurnStore turn.Store
	// TurnStats counts ended turns by hour (the console's turns per
	// hour; nil: not counted): the turn store's own (turnfile, or the
	// table's items).
	TurnStats turn.TurnStats
	// Changesets are a git bundle's backends (nil: a plain directory,
	// loaded as it is, with no changeset tools). Locally the entry point
	// opens them (bundlerepo.OpenLocal: the bundle directory's repository,
	// records under the home) — not Build, so the Lambda functions, which
	// open the AWS ones, do not link the local git storage.
	Changesets *Changesets
	// DeadLetters lists and redrives the events that failed every
	// delivery attempt (nil: none configured, as on AWS without
	// AGENTAUTH_DEAD_LETTER_QUEUE_URL).
	DeadLetters domain.DeadLetters
	// ToolAudit is the stored audit stream of tool calls, content-free
	// (the home's files, or the table's items): the tool hooks append
	// to it, the console's Tools view reads it. Build sets it to the
	// configured retention, or nil when AGENTAUTH_AUDIT_RETENTION is 0.
	ToolAudit domain.ToolAuditLog
}

// FromEmbedded wraps a home's embedded backends; secretsDir resolves
// secretRef values.
func FromEmbedded(h *embedded.Backends, secretsDir string) *Backends {
	be := &Backends{Store: h.Store, Tenants: h.Store, GrantSealer: h.Keyring, SessionSealer: h.Keyring, Queue: h.Queue,
		StateKeys: h.Keyring.DerivedKeys("state"), Secrets: bundle.DirSecrets{Dir: secretsDir}, ToolLimiter: h.ToolLimiter,
		Describe: "home " + h.Home + ", key " + h.Keyring.CurrentID(), TurnStore: h.Turns, TurnStats: h.Turns, DeadLetters: h.DeadLetters}
	be.ToolAudit = auditfile.New(filepath.Join(h.Home, "audit", "tools"), 0)
	return be
}

// FromAWS wraps the opened AWS backends.
func FromAWS(b *awsbackends.Backends) *Backends {
	be := &Backends{Store: b.Store, Tenants: b.Store, GrantSealer: b.GrantSealer, SessionSealer: b.SessionSealer, Queue: b.Queue,
		StateKeys: b.StateKeys(), Secrets: b.Secrets, ToolLimiter: b.ToolLimiter, Describe: "table " + b.Table,
		TurnStore: b.TurnStore(), TurnStats: b.Store.TurnStats(), DeadLetters: b.DeadLetters}
	be.ToolAudit = b.Store.ToolAudit(0)
	if b.BundleRepo != nil {
		be.Changesets = &Changesets{Repo: b.BundleRepo, Records: b.BundleRecords, Describe: b.BundleWhere}
	}
	return be
}

// OpenBackends opens the AWS backends when cfg.AWS is set, else the
// embedded ones in cfg.Home (creating the master key on a fresh home).
// counter, when set, counts every AWS call.
func OpenBackends(ctx context.Context, cfg config.Config, counter *awscount.Counter) (*Backends, error) {
	if cfg.AWS != nil {
		b, err := OpenAWS(ctx, *cfg.AWS, counter)
		if err != nil {
			return nil, err
		}
		return FromAWS(b), nil
	}
	h, err := OpenEmbedded(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	return FromEmbedded(h, cfg.LocalSecrets()), nil
}

// OpenEmbedded opens the embedded backends in cfg.Home with the
// configured event queue's dedup window (create: the master key may be
// created on a fresh home). agentauth serve, bench and the admin commands
// open their home through it, so the window is wired here only.
func OpenEmbedded(ctx context.Context, cfg config.Config, create bool) (*embedded.Backends, error) {
	return embedded.Open(ctx, cfg.Home, cfg.MasterKey.Reveal(), create, embedded.WithQueueDedupWindow(cfg.QueueDedupWindow))
}

// OpenAWS opens the AWS backends a names (also for `agentauth keys
// rewrap`).
func OpenAWS(ctx context.Context, a config.AWS, counter *awscount.Counter) (*awsbackends.Backends, error) {
	s := awsbackends.Settings{Table: a.Table, KMSKeyID: a.KMSKeyID, QueueURL: a.QueueURL, DeadLetterQueueURL: a.DeadLetterQueueURL,
		SessionKeysSecret: a.SessionKeysSecret, SecretPrefix: a.SecretPrefix, TurnBucket: a.TurnBucket}
	if a.BundleRepo != nil {
		s.BundleBucket, s.BundlePrefix = a.BundleRepo.Bucket, a.BundleRepo.Prefix
	}
	return awsbackends.Open(ctx, s, counter)
}

// Options are what the entry point knows and the environment does not.
type Options struct {
	// RuntimeAuth authenticates runtime callers: a bearer token locally,
	// httpapi.GatewayAuthorized behind API Gateway's IAM authorizer; nil
	// refuses every runtime caller (admin commands that serve nothing).
	RuntimeAuth httpapi.CallerAuth
	// Lambda: the process freezes between invocations, so nothing can
	// poll a device code in the background; device-code apps are refused.
	Lambda bool
	// Function names the process in EMF metrics ("serve", "tools", …).
	Function string
	// MetricsOut receives EMF metric lines (stdout).
	MetricsOut io.Writer
	// Native tool implementations by tool id (optional).
	Native map[string]toolhooks.Invoker
	// Version is the build's version, for GET /; "" reads the module
	// version Go stamped into the build.
	Version string
}

// App is a built agentauth: its bundle, OAuth manager and handlers.
type App struct {
	// Bundle is the bundle loaded at start (a git bundle's active revision
	// then; see Active for the one now).
	Bundle *bundle.Bundle
	// Changesets runs changesets of a git bundle (nil for a plain
	// directory).
	Changesets *changeset.Manager
	active     *activeBundle
	plane      *toolplane.Plane
	OAuth      *oauth.Manager
	// Tools is nil when the tool routes are off (no AGENTAUTH_JWKS_URL).
	Tools *toolsapi.API
	// Turns is nil when the bundle has no Swarm or the backends keep no
	// turns.
	Turns *Turns
	// TurnStats counts the turns that ended by hour (Backends.TurnStats;
	// nil when the backends keep none): what the console's overview reads.
	TurnStats turn.TurnStats
	api       *httpapi.Server
	log       *slog.Logger
	// limiter is the tool rate limiter when its state needs sweeping
	// (files; DynamoDB items expire by TTL).
	limiter sweeper
	// turnRoutes are the turn routes (nil without turns).
	turnRoutes *turnsapi.API
	// streams caps the event streams of every stream route.
	streams *httpx.StreamGate
	// audit appends the tool calls to Backends.ToolAudit (nil: not
	// stored); auditSweep removes what is past its retention (files).
	audit      *toolhooks.AuditSink
	auditSweep sweeper
}

// sweeper is a limiter whose expired state is removed by a sweep.
type sweeper interface {
	Sweep(ctx context.Context) (int, error)
}

// Build loads and validates the bundle and wires everything on be.
func Build(ctx context.Context, cfg config.Config, be *Backends, log *slog.Logger, opts Options) (*App, error) {
	if opts.RuntimeAuth == nil {
		// Fail closed: a zero token refuses every runtime caller.
		opts.RuntimeAuth = httpapi.BearerToken{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	be.ToolAudit = retainedToolAudit(be.ToolAudit, cfg.AuditRetention)
	cs := be.Changesets
	load := loader(bundle.Options{Secrets: be.Secrets}, opts.Lambda)
	active, err := openBundle(ctx, cfg.BundleDir, cs, be.Secrets, load, log)
	if err != nil {
		return nil, fmt.Errorf("bundle %s:\n%w", filepath.Clean(cfg.BundleDir), err)
	}
	b := active.first
	if opts.Lambda {
		for _, app := range b.OAuthApps {
			if app.Flow == bundle.FlowDeviceCode {
				return nil, fmt.Errorf("bundle: OAuthApp/%s: flow deviceCode needs the background poller of the local server; the Lambda deployment does not run it", app.Name)
			}
		}
	}
	for _, w := range b.Warnings {
		log.Warn("bundle warning", "warning", w)
	}
	mgr, err := oauth.New(oauth.Config{Bundle: b, Store: be.Store, Sealer: be.GrantSealer, SessionSealer: be.SessionSealer,
		Queue: be.Queue, StateKeys: be.StateKeys, BaseURL: cfg.PublicURL, Logger: log, MaxWait: cfg.MaxWait,
		SessionRetention: cfg.SessionRetention, TenantClaim: tenantClaim(cfg)})
	if err != nil {
		return nil, err
	}
	api, err := httpapi.New(mgr, b, opts.RuntimeAuth, log)
	if err != nil {
		return nil, err
	}
	ab := about(opts)
	if active.revs != nil {
		ab.Revision = func(ctx context.Context) string { return active.headOr(ctx).Revision }
	}
	api.SetAbout(ab)
	a := &App{Bundle: b, OAuth: mgr, api: api, log: log, active: active, TurnStats: be.TurnStats}
	a.auditSweep, _ = be.ToolAudit.(sweeper)
	if cs != nil {
		a.Changesets = &changeset.Manager{Repo: cs.Repo, Records: cs.Records, Log: log, Load: load}
		routes, err := bundleapi.New(bundleapi.Config{Manager: a.Changesets, Caller: opts.RuntimeAuth})
		if err != nil {
			return nil, err
		}
		api.MountRuntime(routes.Register, httpapi.Part{Name: "bundle history routes", Credential: httpx.RuntimeToken.Name(),
			Doc: "docs/changesets.md#operators-history-diff-revert", Routes: routes.Patterns()})
	}
	turns := len(b.Swarms) > 0 && be.TurnStore != nil
	if len(b.Swarms) > 0 && be.TurnStore == nil {
		log.Warn("the bundle has swarms but these backends keep no agent instances: turns are off")
	}
	if !cfg.Tools.Routes && !turns {
		return a, a.mountConsole(cfg, be, opts.Lambda, log)
	}
	tp, err := buildToolPlane(ctx, cfg.Tools, active, mgr, be, log, opts)
	if err != nil {
		return nil, fmt.Errorf("tool plane:\n%w", err)
	}
	a.limiter, _ = tp.limiter.(sweeper)
	a.audit = tp.audit
	a.plane = tp.plane
	// One cap on the event streams of this process, for every stream
	// route (per principal and in all).
	a.streams = httpx.NewStreamGate(0, 0)
	if cfg.Tools.Routes {
		if a.Tools, err = buildToolRoutes(cfg.Tools, tp, opts.Native, a.streams, log); err != nil {
			return nil, fmt.Errorf("tool routes:\n%w", err)
		}
		api.Mount(a.Tools.Register, httpapi.Part{Name: "tool routes", Credential: httpx.AgentJWT.Name(), Doc: "docs/tools.md#routes",
			Routes: a.Tools.Patterns()})
		mcp, err := buildMCP(cfg, b, a.Tools, tp.plane, mgr, a.streams, opts.Lambda, log)
		if err != nil {
			return nil, fmt.Errorf("MCP server:\n%w", err)
		}
		api.Mount(mcp, httpapi.Part{Name: "MCP server", Credential: httpx.AgentJWT.Name() + " (audience: the MCP resource)",
			Doc: "docs/tools.md#mcp-server", Routes: []string{mcpapi.Path}})
	}
	if turns {
		tcfg := turntools.Config{Plane: tp.plane, Hooks: tp.hooks, Runner: tp.runner, Native: opts.Native,
			TenantClaim: cfg.Tools.TenantClaim, SkillsClaim: cfg.Tools.SkillsClaim, SubjectsClaim: cfg.Tools.SubjectsClaim, Metrics: tp.metrics, Log: log}
		if a.Changesets != nil {
			tcfg.Bundles = active.at
			tcfg.Builtins = &changesettools.Tools{Manager: a.Changesets, Bundles: active.at, Log: log}
		}
		tools, err := turntools.New(tcfg)
		if err != nil {
			return nil, err
		}
		if a.Turns, err = buildTurns(ctx, active, be, mgr, tools, tp.metrics, cfg.Tools.AllowPrivateUpstreams, log); err != nil {
			return nil, fmt.Errorf("turns:\n%w", err)
		}
		a.Turns.Reserve = cfg.TurnReserve
		a.Turns.CountTurns(be.TurnStats, log)
		routes, err := turnsapi.New(turnsapi.Config{Turns: a.Turns, Caller: opts.RuntimeAuth, Log: log, Stream: httpx.StreamLimits{Gate: a.streams}})
		if err != nil {
			return nil, err
		}
		api.MountRuntime(routes.Register, httpapi.Part{Name: "turn routes", Credential: httpx.RuntimeToken.Name(),
			Doc: "docs/turns.md#http-api-and-cli", Routes: routes.Patterns()})
		a.turnRoutes = routes
	}
	return a, a.mountConsole(cfg, be, opts.Lambda, log)
}

// about is what GET / says of the process: which one it is and its
// version.
func about(opts Options) httpapi.About {
	a := httpapi.About{Version: opts.Version}
	switch opts.Function {
	case "":
	case "serve":
		a.Running = "agentauth serve: every route, on the home's embedded backends"
	default:
		a.Running = "the " + opts.Function + " function"
	}
	if bi, ok := debug.ReadBuildInfo(); ok && a.Version == "" {
		a.Version = bi.Main.Version
	}
	return a
}

// toolPlane is what the REST tool routes and agent turns share: the plane
// (bundle + stored uploads), the http runner, the hooks with the rate
// limiter and the audit log, the metrics recorder (the tool plane's and
// the turns' metrics: AGENTAUTH_METRICS covers both).
type toolPlane struct {
	plane   *toolplane.Plane
	runner  *httptool.Runner
	hooks   *toolhooks.Hooks
	limiter toolhooks.Limiter
	metrics recorder
	audit   *toolhooks.AuditSink
}

// recorder records the tool plane's and the turns' metrics.
type recorder interface {
	metrics.Recorder
	metrics.TurnRecorder
}

func buildToolPlane(ctx context.Context, t *config.Tools, active *activeBundle, tokens httptool.TokenSource, be *Backends, log *slog.Logger, opts Options) (*toolPlane, error) {
	lim, err := be.ToolLimiter(t.Limits)
	if err != nil {
		return nil, fmt.Errorf("tool rate limiter: %w", err)
	}
	pc := toolplane.Config{Bundle: active.first, Tenants: be.Tenants, TenantClaim: t.TenantClaim,
		CheckEvery: t.UploadsCheckEvery, AllowPrivateUpstreams: t.AllowPrivateUpstreams, Log: log}
	if active.revs != nil {
		// The routes follow the active revision within CheckEvery; a
		// turn's step asks for its own revision (SnapshotAt).
		pc.Active = active.head
	}
	plane, err := toolplane.New(ctx, pc)
	if err != nil {
		return nil, err
	}
	var rec recorder = metrics.Nop{}
	switch t.Metrics {
	case "emf":
		if opts.MetricsOut == nil {
			return nil, fmt.Errorf("%s=emf needs an output for the metric lines", config.Metrics)
		}
		rec = &metrics.EMF{W: opts.MetricsOut, Function: opts.Function}
	case "log":
		rec = metrics.Log{Logger: log}
	}
	var sink toolhooks.Sink = toolhooks.LogSink{Log: log}
	audit := newAuditSink(be.ToolAudit, opts.Lambda, log)
	if audit != nil {
		sink = toolhooks.MultiSink{sink, audit}
	}
	return &toolPlane{
		plane:   plane,
		runner:  httptool.New(httptool.Options{Tokens: tokens, AllowPrivateUpstreams: t.AllowPrivateUpstreams, Log: log}),
		hooks:   &toolhooks.Hooks{Limiter: lim, Sink: sink, Log: log},
		audit:   audit,
		limiter: lim,
		metrics: rec,
	}, nil
}

// buildMCP serves the same tool plane over MCP at /mcp: its JWTs must
// name the MCP resource as their audience (the REST routes' audience is
// refused there). In Lambda it is stateless — no session another
// function instance would lack — and answers JSON; the local server keeps
// sessions in the process.
func buildMCP(cfg config.Config, b *bundle.Bundle, tools *toolsapi.API, plane *toolplane.Plane, mgr *oauth.Manager, streams *httpx.StreamGate, lambda bool, log *slog.Logger) (func(*http.ServeMux), error) {
	resource := cfg.Tools.MCPResource
	if resource == "" {
		resource = strings.TrimRight(cfg.PublicURL, "/") + mcpapi.Path
	}
	jc := cfg.Tools.JWT
	jc.Audience = resource
	v, err := jwtauth.New(jc)
	if err != nil {
		return nil, err
	}
	// The sessions' tool lists are resolved again only when the plane's
	// revision moves (a bundle, an upload), never on an idle poll.
	revision := func(ctx context.Context) string { return plane.Snapshot(ctx).Revision }
	srv, err := mcpapi.New(mcpapi.Config{Tools: tools, Version: b.Revision, Consents: consents{mgr}, Revision: revision, Log: log})
	if err != nil {
		return nil, err
	}
	hc := mcpapi.HTTPConfig{Verifier: v, Resource: resource, AuthorizationServers: []string{jc.Issuer}, Stateless: lambda,
		Paths:          claimPaths(cfg),
		AllowedOrigins: cfg.Tools.MCP.AllowedOrigins, Sessions: cfg.Tools.MCP.Sessions, Streams: streams}
	register, err := srv.Routes(hc)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", config.MCPResource, resource, err)
	}
	return register, nil
}

// consents tells the MCP server when an auth session is over (approved,
// refused, expired), for notifications/elicitation/complete.
type consents struct{ m *oauth.Manager }

func (c consents) Done(ctx context.Context, id string) (bool, error) {
	st, err := c.m.SessionStatus(ctx, id, 0)
	if err != nil {
		return false, err
	}
	return !domain.Completable(st.Status), nil
}

// buildToolRoutes serves the tool plane over REST behind the JWT verifier.
func buildToolRoutes(t *config.Tools, tp *toolPlane, native map[string]toolhooks.Invoker, streams *httpx.StreamGate, log *slog.Logger) (*toolsapi.API, error) {
	v, err := jwtauth.New(t.JWT)
	if err != nil {
		return nil, err
	}
	return toolsapi.New(toolsapi.Config{
		Verifier:      v,
		Plane:         tp.plane,
		Runner:        tp.runner,
		Native:        native,
		Hooks:         tp.hooks,
		TenantClaim:   t.TenantClaim,
		SkillsClaim:   t.SkillsClaim,
		SubjectsClaim: t.SubjectsClaim,
		Seam:          t.Seam,
		Metrics:       tp.metrics,
		Log:           log,
		Stream:        httpx.StreamLimits{Gate: streams},
	})
}

// Handler serves every route: the local server.
func (a *App) Handler() http.Handler { return a.api.Handler() }

// RuntimeHandler serves the runtime routes: the gettoken function.
func (a *App) RuntimeHandler() http.Handler { return a.api.RuntimeHandler() }

// TurnStreamHandler serves the turn events route alone (JSON, or the live
// stream): the turn function's function URL. It is an error without turns.
func (a *App) TurnStreamHandler() (http.Handler, error) {
	if a.turnRoutes == nil {
		return nil, errors.New("the bundle has no Swarm or the backends keep no turns: no turn events to serve")
	}
	return a.api.Only(a.turnRoutes.RegisterEvents), nil
}

// CallbackHandler serves the apps' callback paths: the callback function.
func (a *App) CallbackHandler() http.Handler { return a.api.CallbackHandler() }

// ToolsHandler serves the tool routes: the tools function. It is an error
// when they are off.
func (a *App) ToolsHandler() (http.Handler, error) {
	if a.Tools == nil {
		return nil, fmt.Errorf("%s is required for the tool routes", config.JWKSURL)
	}
	return a.api.MountedHandler(), nil
}

// Sweep runs the sweeps once: the OAuth sessions' (expire pending
// sessions, settle interrupted exchanges, deliver auth.granted events whose
// first send failed, delete old sessions) and the file rate limiter's
// (state of refilled buckets).
func (a *App) Sweep(ctx context.Context) (oauth.CleanupReport, error) {
	if a.limiter != nil {
		if n, err := a.limiter.Sweep(ctx); err != nil {
			a.log.WarnContext(ctx, "rate-limit state sweep failed", "err", err)
		} else if n > 0 {
			a.log.InfoContext(ctx, "rate-limit state swept", "keysRemoved", n)
		}
	}
	a.sweepAudit(ctx)
	if a.Changesets != nil {
		if n, err := a.Changesets.Sweep(ctx, 1000); err != nil {
			a.log.WarnContext(ctx, "changeset sweep failed", "err", err)
		} else if n > 0 {
			a.log.InfoContext(ctx, "abandoned changesets removed", "changesets", n)
		}
	}
	return a.OAuth.CleanupExpiredSessions(ctx)
}

// Close stops background work (device-code pollers, origin deliveries:
// those still queued are sent while ctx lasts).
func (a *App) Close(ctx context.Context) error {
	return errors.Join(a.OAuth.Close(ctx), a.Turns.close(ctx), a.closeAudit(ctx))
}

// toolPlane is the tool plane (nil without tool routes and turns).
func (a *App) toolPlane() *toolplane.Plane { return a.plane }

// Active is the bundle the process runs on now: a git bundle's active
// revision (read from the repository), else the bundle loaded at start.
func (a *App) Active(ctx context.Context) (*bundle.Bundle, error) { return a.active.head(ctx) }

// claimPaths are where a caller's claims name its tenant, its skill
// allow list and its OAuth subjects (the tool plane's settings): the MCP
// routes and the console's simulator read a caller by them alike.
func claimPaths(cfg config.Config) domain.ClaimPaths {
	if cfg.Tools == nil {
		return domain.ClaimPaths{}.WithDefaults()
	}
	return domain.ClaimPaths{Tenant: cfg.Tools.TenantClaim, Skills: cfg.Tools.SkillsClaim, Subjects: cfg.Tools.SubjectsClaim}.WithDefaults()
}

// tenantClaim is where a caller's claims name its tenant (the tool
// plane's setting, which the OAuth core and the console read the same).
func tenantClaim(cfg config.Config) string {
	if cfg.Tools == nil {
		return ""
	}
	return cfg.Tools.TenantClaim
}
