package domain

import "time"

// EncryptedValue is a sealed secret as stored: AES-256-GCM with the record
// binding as additional data. WrappedKey is set by envelope sealers (KMS).
type EncryptedValue struct {
	Algorithm  string `json:"algorithm"`
	IV         string `json:"iv"`
	Ciphertext string `json:"ciphertext"`
	Tag        string `json:"tag"`
	KeyID      string `json:"keyId,omitempty"`
	WrappedKey string `json:"wrappedKey,omitempty"`
}

// AlgorithmAES256GCM is the only algorithm agentauth writes.
const AlgorithmAES256GCM = "aes-256-gcm"

// IsZero reports whether v holds nothing.
func (v EncryptedValue) IsZero() bool { return v.Ciphertext == "" && v.IV == "" }

// Binding names the place a sealed value belongs to. Sealers bind Record,
// RecordID and Field as additional data, so a ciphertext copied to another
// record or field does not open. App and Subject name the record's owner
// for envelope sealers' key-service context (KMS EncryptionContext, audit);
// they are not part of the additional data.
type Binding struct {
	Record   string // "grant" or "session"
	RecordID string // grant-… or as-…
	Field    string // accessToken, refreshToken, codeVerifier, state, deviceCode
	App      string // "OAuthApp/<name>"
	Subject  string
}

// Sealed field names.
const (
	FieldAccessToken  = "accessToken"
	FieldRefreshToken = "refreshToken"
	FieldCodeVerifier = "codeVerifier"
	FieldState        = "state"
	FieldDeviceCode   = "deviceCode"
)

// GrantBinding binds field of grant g.
func GrantBinding(g Grant, field string) Binding {
	return Binding{Record: "grant", RecordID: g.ID, Field: field, App: g.OAuthAppRef.String(), Subject: g.Subject}
}

// SessionBinding binds field of session s.
func SessionBinding(s Session, field string) Binding {
	return Binding{Record: "session", RecordID: s.ID, Field: field, App: s.OAuthAppRef.String(), Subject: s.Subject}
}

// AAD is the additional-data string for b.
func (b Binding) AAD() []byte {
	return []byte("agentauth/v1|" + b.Record + "|" + b.RecordID + "|" + b.Field)
}

// Grant is an OAuthGrantRecord: a stored token for (app, subject).
type Grant struct {
	ID            string    `json:"-"`
	Provider      string    `json:"provider"`
	OAuthAppRef   ObjectRef `json:"oauthAppRef"`
	Subject       string    `json:"subject"`
	Flow          string    `json:"flow"`
	ScopesGranted []string  `json:"scopesGranted"`
	// ScopesRequested are the scopes the last consent asked for; a provider
	// may grant fewer (ScopesGranted), and a request those cover no more
	// than the last consent did is answered scopeNotGranted, not with
	// another consent the provider would answer the same way.
	ScopesRequested []string       `json:"scopesRequested,omitempty"`
	Token           GrantToken     `json:"token"`
	CreatedAt       time.Time      `json:"createdAt"`
	UpdatedAt       time.Time      `json:"updatedAt"`
	RevokedAt       *time.Time     `json:"revokedAt,omitempty"`
	Revoked         bool           `json:"revoked"`
	ProviderData    map[string]any `json:"providerData,omitempty"`
	// RevokedReason says why a revoked grant was revoked (Revoked…
	// constants); the grant is kept as a tombstone without its tokens.
	RevokedReason string `json:"revokedReason,omitempty"`
	// Tenant is the tenant of the request whose consent made the grant
	// ("" when its claims named none): a tenant admin's console shows it.
	Tenant string `json:"tenant,omitempty"`
	// RefreshFailures counts the refresh attempts that failed since the
	// last success (a provider outage, an unusable answer; never
	// invalid_grant, which revokes the grant instead). A successful
	// refresh or a new consent sets it back to 0.
	RefreshFailures int `json:"refreshFailures,omitempty"`
	// LastRefreshError is the reason code of the last failed refresh
	// (RefreshFailed… constants, an RFC 6749 error code, or "http_<status>"
	// for an answer without one): a fixed vocabulary, never a provider's
	// message, which could quote a token. "" once a refresh succeeds.
	LastRefreshError string `json:"lastRefreshError,omitempty"`
	// LastRefreshFailedAt is when the last failed refresh failed.
	LastRefreshFailedAt *time.Time `json:"lastRefreshFailedAt,omitempty"`
	// Version increases by one on every write; conditional writes compare it
	// so a late writer never overwrites a newer token (fencing).
	Version int64 `json:"version"`
}

// Why a grant's last refresh failed (Grant.LastRefreshError), when the
// provider's answer did not carry an RFC 6749 error code.
const (
	// RefreshFailedTimeout: the provider did not answer in time.
	RefreshFailedTimeout = "provider_timeout"
	// RefreshFailedUnreachable: the provider could not be reached
	// (connection refused, DNS, TLS).
	RefreshFailedUnreachable = "provider_unreachable"
	// RefreshFailedUnusable: the provider answered with something that is
	// not a token response, or one without an access token.
	RefreshFailedUnusable = "provider_response_unusable"
)

// Why a grant was revoked (Grant.RevokedReason).
const (
	// RevokedByRequest: an operator or runtime revoked it
	// (POST /v1/oauth/revoke).
	RevokedByRequest = "revoke_request"
	// RevokedRefreshRejected: the provider answered its refresh token
	// with invalid_grant (the user removed the app, the provider forgot
	// the grant, the refresh token expired or was reused).
	RevokedRefreshRejected = "refresh_rejected"
	// RevokedTokenRefused: an upstream refused its access token (HTTP
	// 401) and it had no refresh token to get another.
	RevokedTokenRefused = "token_refused"
)

// GrantToken is the sealed token material of a grant.
type GrantToken struct {
	TokenType    string          `json:"tokenType"`
	AccessToken  EncryptedValue  `json:"accessToken"`
	RefreshToken *EncryptedValue `json:"refreshToken,omitempty"`
	ExpiresAt    *time.Time      `json:"expiresAt,omitempty"`
	IssuedAt     time.Time       `json:"issuedAt"`
}

// Completable reports whether a session in status st may still complete:
// pending (a device code being polled) or exchanging (a claimed callback).
func Completable(st SessionStatus) bool { return st == SessionPending || st == SessionExchanging }

// SessionStatus is the state of an auth session.
type SessionStatus string

// Session statuses.
const (
	SessionPending SessionStatus = "pending"
	// SessionExchanging: a callback claimed the session (one conditional
	// write) and is redeeming its code at the provider; no other copy of
	// the callback may. It ends completed or failed; the sweep settles one
	// a crash left behind.
	SessionExchanging SessionStatus = "exchanging"
	SessionCompleted  SessionStatus = "completed"
	SessionFailed     SessionStatus = "failed"
	SessionExpired    SessionStatus = "expired"
)

// Session is an AuthSessionRecord: one authorization attempt.
type Session struct {
	ID              string      `json:"-"`
	Provider        string      `json:"provider"`
	OAuthAppRef     ObjectRef   `json:"oauthAppRef"`
	SubjectMode     string      `json:"subjectMode"`
	Subject         string      `json:"subject"`
	RequestedScopes []string    `json:"requestedScopes"`
	Flow            SessionFlow `json:"flow"`
	// AuthorizationURL is public (it is shown to the user). A code
	// session's URL is stored without its state, which is sealed in
	// Flow.State; oauth adds it back when it hands the link out.
	AuthorizationURL string        `json:"authorizationUrl"`
	Status           SessionStatus `json:"status"`
	StatusReason     string        `json:"statusReason,omitempty"`
	CreatedAt        time.Time     `json:"createdAt"`
	ExpiresAt        time.Time     `json:"expiresAt"`
	CompletedAt      *time.Time    `json:"completedAt,omitempty"`
	Resume           ResumeInfo    `json:"resume"`
	// EventPending is set when the auth.granted event could not be queued
	// after the grant was stored; a sweep delivers it later.
	EventPending bool `json:"eventPending,omitempty"`
	// ReuseKey (SessionReuseKey) lets a repeated request find this session
	// while it is pending (see ReusableAt); empty: never reused.
	ReuseKey string `json:"reuseKey,omitempty"`
	// Tenant is the tenant the request that started the session named in
	// its claims ("" when none).
	Tenant string `json:"tenant,omitempty"`
	// StartedBy names the edge whose request started the consent
	// (StartedBy… constants; "" for sessions stored before it was kept).
	// A request that reuses the pending session does not change it.
	StartedBy string `json:"startedBy,omitempty"`
	Version   int64  `json:"version"`
}

// Who started a consent (Session.StartedBy).
const (
	// StartedByTurn: a turn's tool call (the engine).
	StartedByTurn = "turn"
	// StartedByTool: a call of an http tool through the tool routes
	// (POST /v1/tools/invoke).
	StartedByTool = "tool"
	// StartedByMCP: a call of an http tool through the MCP server.
	StartedByMCP = "mcp"
	// StartedByREST: the token route (POST /v1/oauth/token).
	StartedByREST = "rest"
)

// SessionReuseMargin is how much of its lifetime a pending session must
// have left to answer a repeated request: a link handed out must leave the
// user time to open it and approve.
const SessionReuseMargin = time.Minute

// ReusableAt reports whether s may answer a repeated request at at: it has
// a reuse key, is pending, and expires more than SessionReuseMargin after
// at. Every store decides with it whether a reuse key is taken.
func (s Session) ReusableAt(at time.Time) bool {
	return s.ReuseKey != "" && s.Status == SessionPending && s.ExpiresAt.Sub(at) > SessionReuseMargin
}

// SweepSet is the part of the session sweep a session is in, by what is
// left to do with it. Stores index sessions by it (SessionIndex), so the
// sweep reads the sessions it acts on and never every session.
type SweepSet string

// Sweep sets.
const (
	// SweepPending: waiting for the user; expired once past ExpiresAt.
	SweepPending SweepSet = "pending"
	// SweepExchanging: a callback claimed it and is redeeming the code.
	SweepExchanging SweepSet = "exchanging"
	// SweepEventPending: completed, its auth.granted event still unsent.
	SweepEventPending SweepSet = "eventPending"
	// SweepFinished: completed, failed or expired with nothing left to
	// send; kept for a retention period after its expiry, then deleted.
	SweepFinished SweepSet = "finished"
)

// SweepSetOf is the sweep set s belongs in.
func SweepSetOf(s Session) SweepSet {
	switch {
	case s.Status == SessionPending:
		return SweepPending
	case s.Status == SessionExchanging:
		return SweepExchanging
	case s.Status == SessionCompleted && s.EventPending:
		return SweepEventPending
	}
	return SweepFinished
}

// SessionFlow is the sealed flow material of a session.
type SessionFlow struct {
	Type       string          `json:"type"`
	PKCE       *PKCE           `json:"pkce,omitempty"`
	State      EncryptedValue  `json:"state"`
	DeviceCode *DeviceCodeInfo `json:"deviceCode,omitempty"`
}

// PKCE is the stored PKCE pair; the verifier is sealed.
type PKCE struct {
	Method        string         `json:"method"`
	CodeVerifier  EncryptedValue `json:"codeVerifier"`
	CodeChallenge string         `json:"codeChallenge"`
}

// DeviceCodeInfo is the device authorization state of a session.
type DeviceCodeInfo struct {
	DeviceCode              EncryptedValue `json:"deviceCode"`
	VerificationURI         string         `json:"verificationUri"`
	VerificationURIComplete string         `json:"verificationUriComplete,omitempty"`
	UserCode                string         `json:"userCode"`
	Interval                int            `json:"interval"`
	ExpiresAt               time.Time      `json:"expiresAt"`
}

// Event is a message for an agent instance's queue.
type Event struct {
	// ID deduplicates: the same ID is delivered once (the auth session id
	// for auth.granted).
	ID          string            `json:"id"`
	SwarmRef    ObjectRef         `json:"swarmRef"`
	InstanceKey string            `json:"instanceKey"`
	AgentName   string            `json:"agentName"`
	Input       string            `json:"input"`
	Origin      map[string]any    `json:"origin,omitempty"`
	Auth        TurnAuth          `json:"auth"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	EnqueuedAt  time.Time         `json:"enqueuedAt"`
}

// AuthGrantedEvent is the input of an auth.granted event.
type AuthGrantedEvent struct {
	Type          string    `json:"type"` // auth.granted
	OAuthAppRef   ObjectRef `json:"oauthAppRef"`
	Provider      string    `json:"provider"`
	Subject       string    `json:"subject"`
	ScopesGranted []string  `json:"scopesGranted"`
	// ScopesNotGranted lists what the consent asked for and the provider
	// did not grant.
	ScopesNotGranted []string `json:"scopesNotGranted,omitempty"`
	GrantID          string   `json:"grantId"`
}

// AuthRevokedEvent is the input of an auth.revoked event: a grant a call
// used is no longer honoured by its provider and was revoked here; the
// call that found out asks for consent again through AuthSessionID. It
// holds no token.
type AuthRevokedEvent struct {
	Type        string    `json:"type"` // auth.revoked
	OAuthAppRef ObjectRef `json:"oauthAppRef"`
	Provider    string    `json:"provider"`
	Subject     string    `json:"subject"`
	GrantID     string    `json:"grantId"`
	// Reason is the grant's RevokedReason.
	Reason string `json:"reason"`
	// AuthSessionID is the new consent's session; its auth.granted
	// resumes the call.
	AuthSessionID string `json:"authSessionId"`
}

// DeadLetter is an agent event that failed every delivery attempt, kept for an operator.
type DeadLetter struct {
	ID       string    // the store's own id for it: a file name locally, the SQS message id on AWS; safe in a URL path ([A-Za-z0-9._-], ≤ 128)
	Event    Event     // the event as it was queued
	Error    string    // why it failed, as recorded ("" when the queue does not say: SQS)
	Attempts int       // delivery attempts when known (0: unknown)
	At       time.Time // when it was dead-lettered (SQS: when it was first received)
}

// GrantQuery selects one page of grants for an operator, newest first.
type GrantQuery struct {
	Tenant    string // the grants of this tenant ("" : those with no tenant) …
	AnyTenant bool   // … unless AnyTenant: every grant (a platform admin)
	App       string // OAuthApp name; "" any
	Subject   string // exact; "" any
	Revoked   *bool  // nil any; true revoked only; false not revoked
	After     string // the previous page's Next; "" the first page
	Limit     int    // 1..100 (0: 50)
}

// GrantPage is one page of a GrantQuery.
type GrantPage struct {
	Grants     []Grant
	Next       string  // "" on the last page; opaque, safe in a URL query
	Unreadable []error // records listed but not readable (skipped)
}

// SessionQuery selects one page of auth sessions, newest first.
type SessionQuery struct {
	Tenant    string
	AnyTenant bool
	App       string
	Status    SessionStatus // "" any
	Reason    string        // StatusReason; "" any
	Since     time.Time     // created at or after; zero: any
	After     string
	Limit     int
}

// SessionPage is one page of a SessionQuery.
type SessionPage struct {
	Sessions   []Session
	Next       string
	Unreadable []error
}
