package oauth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

// SignInConfig configures an OpenID Connect relying party for operator
// sign-in (the console).
type SignInConfig struct {
	Issuer       string // OIDC issuer URL; its discovery document is read on first use, not in NewSignIn
	ClientID     string
	ClientSecret domain.Secret // empty for a public client
	RedirectURL  string        // the console's callback URL
	Scopes       []string      // default: openid profile email; must hold openid
	HTTPClient   *http.Client  // nil: a client with a 10 s timeout
	// Keys seal the pending sign-in: each at least 32 bytes; Keys[0] seals,
	// every key opens (rotation). They may be the keys of another use (the
	// state keys): the sealing key is derived from them with a label of its own.
	Keys [][]byte
	Now  func() time.Time // nil: time.Now
}

// SignedIn is a completed sign-in.
type SignedIn struct {
	Claims   map[string]any // the ID token's verified claims; numbers are json.Number
	ReturnTo string         // the sanitised path given to Begin
	Expiry   time.Time      // the ID token's exp
}

// Reasons of a SignInError.
const (
	SignInProviderError   = "provider_error"
	SignInStateMismatch   = "state_mismatch"
	SignInPendingExpired  = "pending_expired"
	SignInPendingInvalid  = "pending_invalid"
	SignInExchangeFailed  = "exchange_failed"
	SignInIDTokenInvalid  = "id_token_invalid"
	SignInDiscoveryFailed = "discovery_failed"
)

// SignInError is every refusal of Begin and Finish. Reason is a stable code
// (the SignIn* constants); Detail is a sentence safe to show the operator: it
// never holds a code, token, verifier, state or nonce (a provider's error
// code and description may appear).
type SignInError struct{ Reason, Detail string }

func (e *SignInError) Error() string { return "sign-in refused (" + e.Reason + "): " + e.Detail }

func signInErr(reason, format string, args ...any) *SignInError {
	return &SignInError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

const (
	// pendingTTL is how long a browser has between Begin and Finish.
	pendingTTL = 10 * time.Minute
	// pendingVersion is the first byte of a sealed pending value.
	pendingVersion byte = 1
	// pendingKeyLabel separates the pending sealing key from every other
	// key derived from (or equal to) the same configured keys.
	pendingKeyLabel = "agentauth/console-signin/pending/v1"
	// maxPendingLen bounds the work done on an untrusted cookie.
	maxPendingLen = 2048
	// maxReturnToLen bounds the path kept in the pending value.
	maxReturnToLen = 1024
	// maxProviderText bounds a provider's error description we repeat.
	maxProviderText = 200
	// kidLen is the length of a pending value's key id.
	kidLen = 4
)

// SignIn is the relying party of an operator sign-in: Authorization Code
// with PKCE S256, state and nonce, and ID token verification. It keeps no
// server-side state: what the callback needs travels sealed in a cookie.
type SignIn struct {
	issuer, clientID, redirectURL string
	clientSecret                  domain.Secret
	scopes                        []string
	client                        *http.Client
	now                           func() time.Time
	keys                          []pendingKey // keys[0] seals

	mu       sync.Mutex
	oauth    *oauth2.Config        // set by discover
	verifier *oidc.IDTokenVerifier // set by discover
}

// pendingKey is one derived sealing key and its id.
type pendingKey struct {
	id   [kidLen]byte
	aead cipher.AEAD
}

// pending is the sealed content of the pending cookie. The field names are
// short: the value travels in a cookie.
type pending struct {
	Verifier string `json:"v"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	ReturnTo string `json:"r"`
	Expires  int64  `json:"e"`
}

// NewSignIn validates cfg; it makes no network call.
func NewSignIn(cfg SignInConfig) (*SignIn, error) {
	if err := absoluteHTTPURL(cfg.Issuer); err != nil {
		return nil, fmt.Errorf("sign-in: issuer: %w", err)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("sign-in: client id is empty")
	}
	if err := absoluteHTTPURL(cfg.RedirectURL); err != nil {
		return nil, fmt.Errorf("sign-in: redirect URL: %w", err)
	}
	scopes := cfg.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	}
	if !slices.Contains(scopes, oidc.ScopeOpenID) {
		return nil, errors.New("sign-in: scopes must include openid (no ID token otherwise)")
	}
	if len(cfg.Keys) == 0 {
		return nil, errors.New("sign-in: no keys")
	}
	s := &SignIn{
		issuer: cfg.Issuer, clientID: cfg.ClientID, redirectURL: cfg.RedirectURL,
		clientSecret: cfg.ClientSecret, scopes: slices.Clone(scopes),
		client: cfg.HTTPClient, now: cfg.Now,
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 10 * time.Second}
	}
	if s.now == nil {
		s.now = time.Now
	}
	for i, k := range cfg.Keys {
		if len(k) < 32 {
			return nil, fmt.Errorf("sign-in: key %d is %d bytes, want at least 32", i, len(k))
		}
		pk, err := derivePendingKey(k)
		if err != nil {
			return nil, fmt.Errorf("sign-in: key %d: %w", i, err)
		}
		s.keys = append(s.keys, pk)
	}
	return s, nil
}

func absoluteHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	return nil
}

// derivePendingKey derives the AES-256-GCM key of pending values from a
// configured key; its id is a hash of the derived key, which names the key
// without revealing anything about it.
func derivePendingKey(secret []byte) (pendingKey, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, pendingKeyLabel, 32)
	if err != nil {
		return pendingKey{}, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return pendingKey{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return pendingKey{}, err
	}
	var pk pendingKey
	sum := sha256.Sum256(append([]byte(pendingKeyLabel+"/kid|"), key...))
	copy(pk.id[:], sum[:])
	pk.aead = aead
	return pk, nil
}

// Begin starts a sign-in. It returns the provider's authorization URL
// (Authorization Code, PKCE S256, a fresh state and nonce) and pending, an
// opaque sealed value the caller keeps in a short-lived HttpOnly cookie and
// hands to Finish. returnTo is where to go after the sign-in: a local path
// ("/" when it is anything else).
func (s *SignIn) Begin(ctx context.Context, returnTo string) (authURL, pending string, err error) {
	conf, _, err := s.discover(ctx)
	if err != nil {
		return "", "", err
	}
	p := pendingFor(SafeReturnTo(returnTo), s.now())
	pending = s.seal(p)
	authURL = conf.AuthCodeURL(p.State, oauth2.S256ChallengeOption(p.Verifier), oidc.Nonce(p.Nonce))
	return authURL, pending, nil
}

func pendingFor(returnTo string, now time.Time) pending {
	return pending{
		Verifier: oauth2.GenerateVerifier(),
		State:    randomToken(),
		Nonce:    randomToken(),
		ReturnTo: returnTo,
		Expires:  now.Add(pendingTTL).Unix(),
	}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// SafeReturnTo is returnTo when it is a path on this origin, else "/". A
// leading "//" or "/\" would make it a URL of another host to a browser.
func SafeReturnTo(returnTo string) string {
	if returnTo == "" || len(returnTo) > maxReturnToLen || returnTo[0] != '/' {
		return "/"
	}
	if len(returnTo) > 1 && (returnTo[1] == '/' || returnTo[1] == '\\') {
		return "/"
	}
	if strings.IndexFunc(returnTo, unicode.IsControl) >= 0 {
		return "/"
	}
	return returnTo
}

// Finish completes a sign-in from the callback's query and the pending
// value Begin returned. It refuses (a *SignInError) unless pending opens
// under one of the keys and has not expired, the query's state equals
// pending's, the provider answered with a code, the code exchange (with
// the PKCE verifier) succeeds and the ID token verifies: signature by the
// issuer's keys, issuer, audience, expiry and nonce.
func (s *SignIn) Finish(ctx context.Context, query url.Values, pendingValue string) (SignedIn, error) {
	p, err := s.open(pendingValue)
	if err != nil {
		return SignedIn{}, signInErr(SignInPendingInvalid, "this browser's sign-in could not be read; start again")
	}
	if !s.now().Before(time.Unix(p.Expires, 0)) {
		return SignedIn{}, signInErr(SignInPendingExpired, "the sign-in took longer than %d minutes; start again", int(pendingTTL/time.Minute))
	}
	if subtle.ConstantTimeCompare([]byte(query.Get("state")), []byte(p.State)) != 1 {
		return SignedIn{}, signInErr(SignInStateMismatch, "the provider's answer does not belong to this browser's sign-in; start again")
	}
	if iss := query.Get("iss"); iss != "" && iss != s.issuer {
		// RFC 9207: an answer of another issuer (mix-up attack).
		return SignedIn{}, signInErr(SignInProviderError, "the answer comes from issuer %q, not %q", truncateText(iss), s.issuer)
	}
	if code := query.Get("error"); code != "" {
		return SignedIn{}, providerRefusal(code, query.Get("error_description"))
	}
	code := query.Get("code")
	if code == "" {
		return SignedIn{}, signInErr(SignInExchangeFailed, "the provider's answer carries no authorization code")
	}
	conf, verifier, err := s.discover(ctx)
	if err != nil {
		return SignedIn{}, err
	}
	tok, err := conf.Exchange(oidc.ClientContext(ctx, s.client), code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		return SignedIn{}, signInErr(SignInExchangeFailed, "the code exchange failed: %s", safeReason(atProvider("token", err)))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return SignedIn{}, signInErr(SignInIDTokenInvalid, "the token response has no ID token")
	}
	idt, err := verifier.Verify(oidc.ClientContext(ctx, s.client), raw)
	if err != nil {
		return SignedIn{}, signInErr(SignInIDTokenInvalid, "the ID token %s", s.whyInvalid(raw, err))
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.Nonce)) != 1 {
		return SignedIn{}, signInErr(SignInIDTokenInvalid, "the ID token's nonce does not belong to this sign-in")
	}
	// OIDC Core 3.1.3.7: with several audiences, azp must name us.
	if len(idt.Audience) > 1 {
		var c struct {
			AZP string `json:"azp"`
		}
		if err := idt.Claims(&c); err != nil || c.AZP != s.clientID {
			return SignedIn{}, signInErr(SignInIDTokenInvalid, "the ID token has several audiences and its azp is not %q", s.clientID)
		}
	}
	var rawClaims json.RawMessage
	if err := idt.Claims(&rawClaims); err != nil {
		return SignedIn{}, signInErr(SignInIDTokenInvalid, "the ID token's claims are unreadable")
	}
	claims, err := decodeClaims(rawClaims)
	if err != nil {
		return SignedIn{}, signInErr(SignInIDTokenInvalid, "the ID token's claims are not a JSON object")
	}
	return SignedIn{Claims: claims, ReturnTo: p.ReturnTo, Expiry: idt.Expiry}, nil
}

// providerRefusal reports an error answer of the authorization endpoint.
// The code is kept only when it looks like an RFC 6749 code; the
// description is the provider's text, shortened and stripped of control
// characters (it is shown to the operator).
func providerRefusal(code, description string) *SignInError {
	if !oauthErrorCode.MatchString(code) {
		code = "unknown_error"
	}
	e := signInErr(SignInProviderError, "the provider refused the sign-in: %s", code)
	if d := truncateText(description); d != "" {
		e.Detail += " (" + d + ")"
	}
	return e
}

func truncateText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > maxProviderText {
		s = string(r[:maxProviderText]) + "…"
	}
	return s
}

// whyInvalid describes a verification failure. go-oidc's messages are not
// repeated (a parse error may quote the token); the unverified payload
// tells an issuer or audience mismatch from a bad signature.
func (s *SignIn) whyInvalid(raw string, err error) string {
	var expired *oidc.TokenExpiredError
	if errors.As(err, &expired) {
		return "has expired"
	}
	var c struct {
		Iss string          `json:"iss"`
		Aud json.RawMessage `json:"aud"`
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "is not a signed JWT"
	}
	body, derr := base64.RawURLEncoding.DecodeString(parts[1])
	if derr != nil || json.Unmarshal(body, &c) != nil {
		return "is not a signed JWT"
	}
	if c.Iss != s.issuer {
		return fmt.Sprintf("was not issued by %s", s.issuer)
	}
	var one string
	var many []string
	if json.Unmarshal(c.Aud, &one) == nil {
		many = []string{one}
	} else {
		_ = json.Unmarshal(c.Aud, &many)
	}
	if !slices.Contains(many, s.clientID) {
		return fmt.Sprintf("is not for client %s", s.clientID)
	}
	if errors.Is(err, context.DeadlineExceeded) || fromNetwork(err) {
		return "could not be checked: the issuer's keys are unreachable"
	}
	return "failed verification (signature, algorithm or validity time)"
}

// seal returns p sealed under keys[0]: base64url(version | key id | GCM
// nonce | ciphertext), with the version, key id and client id as
// additional data.
func (s *SignIn) seal(p pending) string {
	plain, _ := json.Marshal(p) // strings and an int: cannot fail
	k := s.keys[0]
	head := make([]byte, 0, 1+kidLen+k.aead.NonceSize())
	head = append(head, pendingVersion)
	head = append(head, k.id[:]...)
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := k.aead.Seal(append(head, nonce...), nonce, plain, s.additionalData(head[:1+kidLen]))
	return base64.RawURLEncoding.EncodeToString(out)
}

func (s *SignIn) additionalData(head []byte) []byte {
	return append(append(slices.Clone(head), "|"+s.clientID...), 0)
}

var errPendingInvalid = errors.New("pending sign-in invalid")

// open is seal's inverse under any configured key.
func (s *SignIn) open(value string) (pending, error) {
	if value == "" || len(value) > maxPendingLen {
		return pending{}, errPendingInvalid
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil || len(b) < 1+kidLen || b[0] != pendingVersion {
		return pending{}, errPendingInvalid
	}
	head, rest := b[:1+kidLen], b[1+kidLen:]
	for _, k := range s.keys {
		if subtle.ConstantTimeCompare(k.id[:], head[1:]) != 1 {
			continue
		}
		ns := k.aead.NonceSize()
		if len(rest) < ns+k.aead.Overhead() {
			return pending{}, errPendingInvalid
		}
		plain, err := k.aead.Open(nil, rest[:ns], rest[ns:], s.additionalData(head))
		if err != nil {
			return pending{}, errPendingInvalid
		}
		var p pending
		if json.Unmarshal(plain, &p) != nil || p.State == "" || p.Nonce == "" || p.Verifier == "" {
			return pending{}, errPendingInvalid
		}
		return p, nil
	}
	return pending{}, errPendingInvalid
}

// discover reads the issuer's discovery document once; a failure is not
// kept, so the next sign-in tries again.
func (s *SignIn) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oauth != nil {
		return s.oauth, s.verifier, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, s.client), s.issuer)
	if err != nil {
		return nil, nil, signInErr(SignInDiscoveryFailed, "reading the discovery document of %s failed: %s", s.issuer, safeReason(atProvider("discovery", err)))
	}
	var meta struct {
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	_ = p.Claims(&meta)
	endpoint := p.Endpoint()
	endpoint.AuthStyle = authStyle(s.clientSecret, meta.AuthMethods)
	// The key set outlives this request; it must not inherit its deadline.
	kctx := oidc.ClientContext(context.WithoutCancel(ctx), s.client)
	s.verifier = p.VerifierContext(kctx, &oidc.Config{ClientID: s.clientID, Now: s.now})
	s.oauth = &oauth2.Config{
		ClientID: s.clientID, ClientSecret: s.clientSecret.Reveal(),
		Endpoint: endpoint, RedirectURL: s.redirectURL, Scopes: s.scopes,
	}
	return s.oauth, s.verifier, nil
}

// authStyle picks one client authentication, so a failing exchange is not
// sent twice (x/oauth2's auto-detection): a public client sends its id in
// the body; a confidential one uses HTTP Basic unless the provider
// announces only client_secret_post. No announcement means
// client_secret_basic (OpenID Connect Discovery 1.0 §3).
func authStyle(secret domain.Secret, methods []string) oauth2.AuthStyle {
	if secret.IsZero() {
		return oauth2.AuthStyleInParams
	}
	if len(methods) > 0 && !slices.Contains(methods, "client_secret_basic") && slices.Contains(methods, "client_secret_post") {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}
