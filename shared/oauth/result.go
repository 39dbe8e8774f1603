package oauth

import (
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// Result statuses.
const (
	StatusReady                 = "ready"
	StatusAuthorizationRequired = "authorization_required"
	StatusError                 = "error"
)

// Error codes of an error result. The first seven are the spec's;
// CodeGrantUnreadable is ours: one stored grant cannot be opened (corrupt
// file, unknown key), which needs an operator, not a new consent.
const (
	CodeOAuthAppNotFound      = "oauthAppNotFound"
	CodeSubjectUnavailable    = "subjectUnavailable"
	CodeScopeNotAllowed       = "scopeNotAllowed"
	CodeTokenRevoked          = "tokenRevoked"
	CodeRefreshFailed         = "refreshFailed"
	CodeDeviceCodeUnsupported = "deviceCodeUnsupported"
	CodeConfigurationError    = "configurationError"
	CodeGrantUnreadable       = "grantUnreadable"
)

// Result is an OAuthTokenResult. AccessToken is a domain.Secret so a Result
// can be logged or marshalled without leaking; the HTTP layer reveals it on
// purpose for the ready response only.
type Result struct {
	Status string

	// ready
	AccessToken domain.Secret
	TokenType   string
	ExpiresAt   *time.Time
	Scopes      []string
	// TTLShorterThanRequested: the token has no more than minTtlSeconds
	// left because the provider issues tokens that live shorter than that;
	// it is refreshed once half its lifetime is gone, not on every call.
	TTLShorterThanRequested bool
	// Refreshable: the grant has a refresh token, so the token is
	// renewed without the user. Without one (the provider did not grant
	// offline_access), the user is asked again once the token expires.
	Refreshable bool
	// ScopesNotGranted are requested scopes the token lacks: only
	// protocol scopes (offline_access, openid) — a missing API scope is
	// scopeNotGranted, never ready.
	ScopesNotGranted []string

	// authorization_required
	AuthSessionID    string
	AuthorizationURL string
	SessionExpiresAt time.Time
	Message          string
	DeviceCode       *DeviceCodePrompt

	// error
	Error *ResultError
}

// DeviceCodePrompt is what the user needs for the device code flow.
type DeviceCodePrompt struct {
	VerificationURI string `json:"verificationUri"`
	UserCode        string `json:"userCode"`
	Interval        int    `json:"interval"`
}

// ResultError is the error of an error result.
type ResultError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Scopes are the scopes the error is about (scopeNotGranted: the
	// missing ones).
	Scopes []string `json:"scopes,omitempty"`
}

// ErrorResult builds an error result.
func ErrorResult(code, message string) Result {
	return Result{Status: StatusError, Error: &ResultError{Code: code, Message: message}}
}

// TokenRequest is a getAccessToken call with its turn.
type TokenRequest struct {
	AppRef domain.ObjectRef
	// Scopes requested; nil or empty means the app's scopes.
	Scopes []string
	// MinTTLSeconds; nil means DefaultMinTTLSeconds.
	MinTTLSeconds *int
	Auth          domain.TurnAuth
	// Resume is where auth.granted goes; nil means no event is queued.
	Resume *domain.ResumeInfo
	// Via names the edge the request came through (domain.StartedBy…):
	// a consent it starts records it as Session.StartedBy, for the
	// operator. It changes nothing else.
	Via string
}

// DefaultMinTTLSeconds is the spec's default minTtlSeconds.
const DefaultMinTTLSeconds = 300

// MaxMinTTLSeconds bounds minTtlSeconds (one year): no token lives longer,
// and larger values would overflow a time.Duration.
const MaxMinTTLSeconds = 365 * 24 * 3600

// DefaultSessionTTL is how long an auth session stays usable.
const DefaultSessionTTL = 10 * time.Minute

// AuthPendingBlock is the auth.pending context block: what the agent tells
// its user, never a secret.
type AuthPendingBlock struct {
	Type  string            `json:"type"` // auth.pending
	Items []AuthPendingItem `json:"items"`
}

// AuthPendingItem is one pending session.
type AuthPendingItem struct {
	AuthSessionID    string           `json:"authSessionId"`
	OAuthAppRef      domain.ObjectRef `json:"oauthAppRef"`
	Provider         string           `json:"provider"`
	SubjectMode      string           `json:"subjectMode"`
	AuthorizationURL string           `json:"authorizationUrl"`
	ExpiresAt        time.Time        `json:"expiresAt"`
	Message          string           `json:"message"`
	DeviceCode       *PendingDevice   `json:"deviceCode,omitempty"`
}

// PendingDevice is the device-code part of a pending item.
type PendingDevice struct {
	VerificationURI string `json:"verificationUri"`
	UserCode        string `json:"userCode"`
}
