package bundle

import "github.com/agentauth/agentauth/shared/domain"

// APIVersion is the only apiVersion the loader accepts.
const APIVersion = "agents.example.io/v1alpha1"

// Flow values of OAuthApp.spec.flow.
const (
	FlowAuthorizationCode = "authorizationCode"
	FlowDeviceCode        = "deviceCode"
)

// Subject verification sources.
const (
	VerifyUserInfo = "userinfo"
	VerifyIDToken  = "idToken"
)

// Bundle is a validated configuration bundle.
type Bundle struct {
	// Revision is the hex SHA-256 over every file's name and content in
	// name order: it changes exactly when the bundle's content does.
	Revision string
	// OAuthApps by metadata.name.
	OAuthApps map[string]*OAuthApp
	// Tools by tool id (spec.id, "<source>:<operation>"), not by
	// metadata.name: groups and manifests name tools by id.
	Tools map[string]*Tool
	// ToolGroups by metadata.name, the group id.
	ToolGroups map[string]*ToolGroup
	// AccessPolicies by metadata.name, the policy id.
	AccessPolicies map[string]*AccessPolicy
	// Skills by metadata.name.
	Skills map[string]*Skill
	// Models by metadata.name.
	Models map[string]*Model
	// Agents by metadata.name.
	Agents map[string]*Agent
	// Swarms by metadata.name.
	Swarms map[string]*Swarm
	// Connectors by metadata.name.
	Connectors map[string]*Connector
	// Warnings are problems that do not stop the bundle from loading
	// (empty scopes, subject verification turned off); the caller logs
	// them at start.
	Warnings []string
}

// OAuthApp is a validated OAuthApp resource with its ValueSources resolved.
type OAuthApp struct {
	Name   string            // metadata.name
	Labels map[string]string // metadata.labels
	File   string            // bundle-relative file it came from
	Line   int               // line of its document in File

	Provider    string // slack, github, google, or any identifier
	Flow        string // FlowAuthorizationCode | FlowDeviceCode
	SubjectMode string // domain.SubjectModeGlobal | domain.SubjectModeUser

	ClientID     string        // resolved client.clientId (public)
	ClientSecret domain.Secret // resolved client.clientSecret
	// AuthStyle is client.authStyle: "" (auto-detect), "header" (HTTP
	// Basic) or "params" (client_secret_post).
	AuthStyle string

	Endpoints Endpoints
	Scopes    []string
	Redirect  Redirect
	// Options are spec.options; string values become extra query
	// parameters of the authorization URL. Reserved OAuth parameters are
	// refused at load.
	Options map[string]any

	// SubjectVerification is always set for user mode (validated), and set
	// for global mode only when configured.
	SubjectVerification *SubjectVerification
}

// Ref is the app's object reference.
func (a *OAuthApp) Ref() domain.ObjectRef { return domain.ObjectRef{Kind: "OAuthApp", Name: a.Name} }

// Endpoints are the provider's URLs.
type Endpoints struct {
	AuthorizationURL       string
	TokenURL               string
	RevokeURL              string // RFC 7009, optional
	UserInfoURL            string // optional
	DeviceAuthorizationURL string // RFC 8628, required for deviceCode
}

// Redirect is where the provider sends the browser back.
type Redirect struct {
	CallbackPath string // starts with "/"
	BaseURL      string // optional; the server's public URL when empty
}

// SubjectVerification says how the callback proves who the resource owner
// is.
type SubjectVerification struct {
	// Source is VerifyUserInfo (GET endpoints.userInfoUrl with the new
	// token) or VerifyIDToken (a signed OIDC id_token from the token
	// response, checked against Issuer's keys, audience = client id).
	Source string
	// Template builds the subject from the claims: "{path.to.claim}"
	// placeholders, e.g. "oidc:user:{sub}". Empty means the provider's
	// built-in builder (slack, github, google).
	Template string
	// Issuer and JWKSURL verify id_tokens (JWKSURL empty: discovered from
	// Issuer's /.well-known/openid-configuration).
	Issuer  string
	JWKSURL string
	// InsecureSkip turns verification off (spec.subjectVerification.
	// insecureSkipVerification: true); the loader adds a warning.
	InsecureSkip bool
}
