package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

var errSubjectMismatch = errors.New("subject mismatch")

// maxUserInfoBytes bounds what we read from a userinfo endpoint.
const maxUserInfoBytes = 1 << 20

// verifySubject proves that the resource owner of tok is the session's
// subject. It fails closed: no claims, a missing claim or a different
// subject is an error, and the token is then not stored.
func (m *Manager) verifySubject(ctx context.Context, rt *appRuntime, s domain.Session, tok *oauth2.Token) error {
	sv := rt.app.SubjectVerification
	if sv == nil || sv.InsecureSkip {
		return nil
	}
	var claims map[string]any
	var err error
	if rt.idTokens != nil {
		claims, err = m.idTokenClaims(ctx, rt, s, tok)
	} else {
		claims, err = m.userInfo(ctx, rt, tok)
	}
	if err != nil {
		return err
	}
	actual, err := buildSubject(rt, s.SubjectMode, claims)
	if err != nil {
		return err
	}
	if actual != s.Subject {
		// Subjects are identifiers, not secrets; both help an operator.
		return fmt.Errorf("%w: session is for %q, provider says %q", errSubjectMismatch, s.Subject, actual)
	}
	return nil
}

func (m *Manager) userInfo(ctx context.Context, rt *appRuntime, tok *oauth2.Token) (map[string]any, error) {
	pctx, cancel := m.providerCtx(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, rt.app.Endpoints.UserInfoURL, nil)
	if err != nil {
		return nil, fmt.Errorf("userinfo request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Accept", "application/json")
	resp, err := m.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("userinfo: %s", safeReason(atProvider("userinfo", err)))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("userinfo answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUserInfoBytes))
	if err != nil {
		return nil, fmt.Errorf("userinfo read: %s", safeReason(atProvider("userinfo", err)))
	}
	return decodeClaims(body)
}

func decodeClaims(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numeric ids (GitHub) must not turn into 1.2e+07
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return nil, errors.New("claims are not a JSON object")
	}
	return claims, nil
}

func (m *Manager) idTokenClaims(ctx context.Context, rt *appRuntime, s domain.Session, tok *oauth2.Token) (map[string]any, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("token response has no id_token")
	}
	pctx, cancel := m.providerCtx(ctx)
	defer cancel()
	idt, err := rt.idTokens.Verify(pctx, raw)
	if err != nil {
		return nil, fmt.Errorf("id_token rejected: %w", err)
	}
	if !m.state.nonceValid(s.ID, idt.Nonce) {
		return nil, errors.New("id_token nonce does not belong to this session")
	}
	var rawClaims json.RawMessage
	if err := idt.Claims(&rawClaims); err != nil {
		return nil, fmt.Errorf("id_token claims: %w", err)
	}
	return decodeClaims(rawClaims)
}

// buildSubject turns claims into a subject: the app's template, or the
// provider's built-in builder (spec §4.3 formats).
func buildSubject(rt *appRuntime, mode string, claims map[string]any) (string, error) {
	if rt.template != nil {
		return rt.template.Expand(claims)
	}
	// Read as a template placeholder of that name is, so that a built-in
	// and the template spelling it out give one subject.
	str := func(path string) string {
		v, _ := domain.LookupClaim(claims, path)
		s, _ := domain.ClaimString(v)
		return s
	}
	p := rt.app.Provider
	switch {
	case p == "slack" && mode == domain.SubjectModeUser:
		team, user := str("https://slack.com/team_id"), str("https://slack.com/user_id")
		if user == "" {
			user = str("sub")
		}
		if team != "" && user != "" {
			return "slack:user:" + team + ":" + user, nil
		}
	case p == "slack" && mode == domain.SubjectModeGlobal:
		if team := str("https://slack.com/team_id"); team != "" {
			return "slack:team:" + team, nil
		}
	case p == "github" && mode == domain.SubjectModeUser:
		if id := str("id"); id != "" {
			return "github:user:" + id, nil
		}
	case p == "google" && mode == domain.SubjectModeUser:
		if sub := str("sub"); sub != "" {
			return "google:user:" + sub, nil
		}
	case p == "google" && mode == domain.SubjectModeGlobal:
		if hd := str("hd"); hd != "" {
			return "google:domain:" + hd, nil
		}
	default:
		return "", fmt.Errorf("provider %q has no built-in %s subject builder; set subjectVerification.template", p, mode)
	}
	return "", fmt.Errorf("provider %q claims lack what a %s subject needs", p, mode)
}

// idTokenVerifier checks an id_token's signature, issuer, audience and
// expiry.
type idTokenVerifier interface {
	Verify(ctx context.Context, raw string) (*oidc.IDToken, error)
}

// oidcVerifier uses go-oidc. Keys are fetched lazily (first callback), so a
// provider that is down at start does not stop agentauth from starting.
type oidcVerifier struct {
	issuer, jwksURL, clientID string
	client                    *http.Client

	mu sync.Mutex
	v  *oidc.IDTokenVerifier
}

func newOIDCVerifier(issuer, jwksURL, clientID string, client *http.Client) *oidcVerifier {
	return &oidcVerifier{issuer: issuer, jwksURL: jwksURL, clientID: clientID, client: client}
}

func (o *oidcVerifier) Verify(ctx context.Context, raw string) (*oidc.IDToken, error) {
	v, err := o.verifier(ctx)
	if err != nil {
		return nil, err
	}
	return v.Verify(ctx, raw)
}

func (o *oidcVerifier) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.v != nil {
		return o.v, nil
	}
	// The key set outlives this request; it must not inherit its deadline.
	kctx := oidc.ClientContext(context.WithoutCancel(ctx), o.client)
	cfg := &oidc.Config{ClientID: o.clientID}
	if o.jwksURL != "" {
		o.v = oidc.NewVerifier(o.issuer, oidc.NewRemoteKeySet(kctx, o.jwksURL), cfg)
		return o.v, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.client), o.issuer)
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", o.issuer, err)
	}
	o.v = p.VerifierContext(kctx, cfg)
	return o.v, nil
}
