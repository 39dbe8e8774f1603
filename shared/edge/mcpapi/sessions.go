package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
)

// Session limits of a session-keeping server (agentauth serve); the
// configuration's defaults (shared/config) are these.
const (
	// DefaultIdleTimeout closes a session that received no request for
	// this long.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultMaxSessions bounds the sessions of a process.
	DefaultMaxSessions = 1000
	// DefaultMaxSessionsPerPrincipal bounds one caller's (one token
	// subject's) sessions: as many as the event streams a caller may
	// hold (httpx.DefaultStreamsPerPrincipal), so each session can keep
	// its GET stream.
	DefaultMaxSessionsPerPrincipal = httpx.DefaultStreamsPerPrincipal
	// DefaultInitializeRate is the rate of initialize per caller, in the
	// rate limit's notation (shared/tools/ratelimit.ParseLimit).
	DefaultInitializeRate = "20/m:10"
)

// SessionLimits bound what a session-keeping server holds; a zero field
// takes its default. A stateless server keeps no session and applies none.
type SessionLimits struct {
	IdleTimeout                  time.Duration
	MaxSessions, MaxPerPrincipal int
	// InitializeRate limits initialize per caller (a zero Rate: the
	// default).
	InitializeRate ratelimit.Limit
	// KeepAlive is the interval of the keep-alive comment on an idle GET
	// stream (httpx.DefaultKeepAlive).
	KeepAlive time.Duration
	// EventBytes bounds the stream events kept for resumption
	// (Last-Event-ID), over all sessions (defaultEventBytes).
	EventBytes int
}

func (l SessionLimits) withDefaults() (SessionLimits, error) {
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxSessions <= 0 {
		l.MaxSessions = DefaultMaxSessions
	}
	if l.MaxPerPrincipal <= 0 {
		l.MaxPerPrincipal = DefaultMaxSessionsPerPrincipal
	}
	if l.InitializeRate.Rate == 0 {
		var err error
		if l.InitializeRate, err = ratelimit.ParseLimit(DefaultInitializeRate); err != nil {
			return l, err
		}
	}
	if l.EventBytes <= 0 {
		l.EventBytes = defaultEventBytes
	}
	return l, l.InitializeRate.Validate()
}

// Keys of the SDK's TokenInfo.Extra, which the SDK hands the handlers of
// every request: the request's principal, and its HTTP context.
const (
	principalExtra = "agentauth.principal"
	requestExtra   = "agentauth.request"
)

// requestContext is a handler's context with the values of its own HTTP
// request first: the SDK runs a session's handlers in a context made from
// the request that opened it, so its request id, trace id and log
// attributes would be that request's. Cancellation stays the handler's.
type requestContext struct {
	context.Context
	request context.Context
}

func (c requestContext) Value(key any) any {
	if v := c.request.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// withRequest is ctx with the values of req's HTTP request, when it came
// over HTTP.
func withRequest(ctx context.Context, req mcp.Request) context.Context {
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		if rc, ok := ex.TokenInfo.Extra[requestExtra].(context.Context); ok {
			return requestContext{ctx, rc}
		}
	}
	return ctx
}

// session is what the server keeps of one MCP session beside the SDK:
// the caller of its last request, what it was last told its tools are,
// the consents it elicited. A stateless server's per-request session is
// never registered.
type session struct {
	// fixed is the caller of a server served in-process (tests); nil over
	// HTTP, where every request names its own.
	fixed     *domain.Principal
	stateless bool
	srv       *mcp.Server
	// onInitialized registers the session once it initialized (nil:
	// stateless, or in-process).
	onInitialized func(*session, *mcp.ServerSession, domain.Principal)

	// Set once, at initialize, before the session is registered.
	ss      *mcp.ServerSession
	id      string    // the session id: a map key, never logged
	key     string    // the principal key its caps count under
	expires time.Time // the opening token's exp (zero: none)
	closing atomic.Bool

	mu      sync.Mutex
	latest  domain.Principal // the caller of the last request
	listFor domain.Principal // the caller the last list was resolved for
	dirty   bool             // latest is another caller than listFor
	listFP  string           // fingerprint of the tools last listed ("" none)
	pending map[string]bool  // elicitation ids not yet complete
}

// maxPending bounds a session's consents awaiting completion.
const maxPending = 16

// principalOf is the caller of req: the principal its verified token
// named (the bearer check put it in the TokenInfo), never the session's
// first.
func (sess *session) principalOf(req mcp.Request) (domain.Principal, bool) {
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		p, ok := ex.TokenInfo.Extra[principalExtra].(domain.Principal)
		return p, ok
	}
	if sess.fixed != nil {
		return *sess.fixed, true
	}
	return domain.Principal{}, false
}

// seen records the caller of a request.
func (sess *session) seen(p domain.Principal) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.latest = p
	if sess.listFP != "" && !reflect.DeepEqual(p.Claims, sess.listFor.Claims) {
		sess.dirty = true
	}
}

// listed records the tools a list told the session, and for whom.
func (sess *session) listed(fp string, p domain.Principal) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.listFP, sess.listFor, sess.dirty = fp, p, false
}

// elicited records a consent the session was sent a URL elicitation for.
func (sess *session) elicited(id string) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.pending == nil {
		sess.pending = map[string]bool{}
	}
	if len(sess.pending) < maxPending {
		sess.pending[id] = true
	}
}

// registry is the sessions of one session-keeping handler: the caps, the
// initialize rate limit, and the one watch loop of all live sessions
// (watch.go).
type registry struct {
	s       *Server
	lim     SessionLimits
	limiter *ratelimit.Memory

	mu       sync.Mutex
	live     map[string]*session // by session id (never logged)
	perKey   map[string]int      // live and reserved sessions by principal key
	reserved int                 // initializes in flight
	running  bool                // the watch loop runs
	lastRev  string              // the tool plane's revision the lists were last checked at
	rounds   atomic.Int64        // watch rounds done (tests wait on it)
}

func newRegistry(s *Server, lim SessionLimits) (*registry, error) {
	limiter, err := ratelimit.NewMemory(ratelimit.Limits{Default: lim.InitializeRate}, s.cfg.Now)
	if err != nil {
		return nil, err
	}
	r := &registry{s: s, lim: lim, limiter: limiter, live: map[string]*session{}, perKey: map[string]int{}}
	if s.cfg.Revision != nil {
		r.lastRev = s.cfg.Revision(context.Background())
	}
	return r, nil
}

// refusal is a request the caps or the rate limit refuse: the HTTP status
// and a message that says what to do.
type refusal struct {
	status     int
	message    string
	retryAfter time.Duration
}

// allowInitialize spends one of the caller's initializes.
func (r *registry) allowInitialize(ctx context.Context, key string) *refusal {
	ok, retry, err := r.limiter.Allow(ctx, key, "initialize")
	if err != nil || !ok {
		return &refusal{status: http.StatusTooManyRequests, retryAfter: retry, message: fmt.Sprintf(
			"too many MCP sessions opened by this caller (at most %s); reuse a session (its Mcp-Session-Id) or retry later", rateText(r.lim.InitializeRate))}
	}
	return nil
}

// rateText is a limit as the configuration writes it, roughly.
func rateText(l ratelimit.Limit) string {
	if perMin := l.Rate * 60; perMin >= 1 {
		return fmt.Sprintf("%.0f a minute, %d at once", perMin, l.Burst)
	}
	return fmt.Sprintf("%.0f an hour, %d at once", l.Rate*3600, l.Burst)
}

// reserve holds a session slot for an initialize in flight; release gives
// the reservation back once the initialize is answered (the session, if
// it opened, holds a slot of its own by then).
func (r *registry) reserve(key string) (release func(), _ *refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.perKey[key] >= r.lim.MaxPerPrincipal:
		return nil, &refusal{status: http.StatusTooManyRequests, message: fmt.Sprintf(
			"this caller has %d open MCP sessions, the most it may hold: close one (DELETE with its Mcp-Session-Id) or let one idle out", r.lim.MaxPerPrincipal)}
	case len(r.live)+r.reserved >= r.lim.MaxSessions:
		return nil, &refusal{status: http.StatusServiceUnavailable, retryAfter: time.Minute, message: fmt.Sprintf(
			"the server holds %d MCP sessions, the most it keeps: retry later", r.lim.MaxSessions)}
	}
	r.perKey[key]++
	r.reserved++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reserved--
			r.dropKey(r.perKey, key)
		})
	}, nil
}

func (r *registry) dropKey(m map[string]int, key string) {
	if m[key]--; m[key] <= 0 {
		delete(m, key)
	}
}

// register makes a session that initialized live: counted under its
// caller, watched, closed when its opening token expires.
func (r *registry) register(sess *session, ss *mcp.ServerSession, p domain.Principal) {
	id := ss.ID()
	if id == "" {
		return
	}
	sess.ss, sess.id, sess.key, sess.expires = ss, id, p.Subject, expiryOf(p.Claims)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.live[id]; dup {
		return
	}
	r.live[id] = sess
	r.perKey[sess.key]++
	if !r.running {
		r.running = true
		go r.watch()
	}
}

// closed forgets a session the SDK closed (deleted, idle, expired, its
// connection gone): the event store's SessionClosed, the SDK's one close
// hook of a session.
func (r *registry) closed(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sess, ok := r.live[id]
	if !ok {
		return
	}
	delete(r.live, id)
	r.dropKey(r.perKey, sess.key)
}

// count reports the live sessions (tests).
func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.live)
}

// expiryOf is a token's exp claim (zero when absent or not a number):
// the verifier has checked it is a NumericDate.
func expiryOf(claims map[string]any) time.Time {
	var sec float64
	switch v := claims["exp"].(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return time.Time{}
		}
		sec = f
	case float64:
		sec = v
	case int64:
		sec = float64(v)
	case int:
		sec = float64(v)
	default:
		return time.Time{}
	}
	return time.Unix(0, int64(sec*1e9))
}
