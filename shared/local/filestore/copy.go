package filestore

import (
	"slices"

	"github.com/agentauth/agentauth/shared/domain"
)

// The cache hands out deep copies so no caller can change what another
// caller will read.

func copyGrant(g domain.Grant) domain.Grant {
	g.ScopesGranted = slices.Clone(g.ScopesGranted)
	g.ScopesRequested = slices.Clone(g.ScopesRequested)
	g.Token.RefreshToken = clonePtr(g.Token.RefreshToken)
	g.Token.ExpiresAt = clonePtr(g.Token.ExpiresAt)
	g.RevokedAt = clonePtr(g.RevokedAt)
	g.LastRefreshFailedAt = clonePtr(g.LastRefreshFailedAt)
	g.ProviderData = cloneJSONObject(g.ProviderData)
	return g
}

func copySession(s domain.Session) domain.Session {
	s.RequestedScopes = slices.Clone(s.RequestedScopes)
	s.Flow.PKCE = clonePtr(s.Flow.PKCE)
	s.Flow.DeviceCode = clonePtr(s.Flow.DeviceCode)
	s.CompletedAt = clonePtr(s.CompletedAt)
	s.Resume.Origin = cloneJSONObject(s.Resume.Origin)
	s.Resume.Auth.Actor = clonePtr(s.Resume.Auth.Actor)
	s.Resume.Auth.Subjects = clonePtr(s.Resume.Auth.Subjects)
	s.Resume.Auth.Claims = cloneJSONObject(s.Resume.Auth.Claims)
	return s
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneJSONObject(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneJSONValue(v)
	}
	return out
}

// cloneJSONValue copies the containers encoding/json decodes into; every
// other value it produces is immutable.
func cloneJSONValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneJSONObject(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneJSONValue(e)
		}
		return out
	default:
		return v
	}
}
