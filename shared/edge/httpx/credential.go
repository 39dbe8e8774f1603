package httpx

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// Credential is one of the two bearer credentials agentauth's routes
// take: the runtime routes the runtime token, the tool routes an agent
// JWT. Sent the one where the other belongs, a caller gets a 401 that
// says which the route takes (Credential.Refusal).
type Credential int

const (
	// RuntimeToken is the runtime routes' credential: locally the
	// home's runtime token (on AWS, IAM signs those routes instead).
	RuntimeToken Credential = iota + 1
	// AgentJWT is the tool routes' credential: a JWT from the
	// deployment's identity provider.
	AgentJWT
)

// Name is c in a few words.
func (c Credential) Name() string {
	if c == AgentJWT {
		return "agent JWT"
	}
	return "runtime token"
}

// Header is how a caller sends c.
func (c Credential) Header() string {
	if c == AgentJWT {
		return "an agent JWT (Authorization: Bearer <JWT from your identity provider>)"
	}
	return "the runtime token (Authorization: Bearer <runtime token>, printed by `agentauth runtime-token`)"
}

// Refusal is the 401 message of a route that takes c when r's bearer
// token looks like the other credential — "this route takes …; the
// token sent looks like …" — and "" when it does not. It judges the
// token by its shape alone and never puts any of it in the message.
func (c Credential) Refusal(r *http.Request) string {
	tok, ok := bearer(r)
	if !ok {
		return ""
	}
	switch {
	case c == RuntimeToken && looksLikeJWT(tok):
		return "this route takes " + c.Header() + "; the token sent looks like a JWT, which the tool routes take (/v1/agents/…, /v1/tools/invoke)"
	case c == AgentJWT && strings.HasPrefix(tok, domain.RuntimeTokenPrefix) && !looksLikeJWT(tok):
		return "this route takes " + c.Header() + "; the token sent looks like agentauth's runtime token, which the runtime routes take (/v1/oauth/…, /v1/instances/…)"
	}
	return ""
}

// bearer is the token of r's one "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	v := r.Header.Values("Authorization")
	if len(v) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v[0]), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// looksLikeJWT reports whether tok has a compact JWS's shape: three
// base64url parts joined by dots, the first a JSON object (the header).
// Nothing is verified; the signature is not even read.
func looksLikeJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	for _, p := range parts {
		if strings.TrimLeft(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return false
		}
	}
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	return err == nil && bytes.HasPrefix(bytes.TrimSpace(header), []byte("{"))
}
