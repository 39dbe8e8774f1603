package bundle

import (
	"encoding/json"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/discovery"
)

// Transports of Tool.spec.transport.
const (
	TransportHTTP   = "http"
	TransportMCP    = "mcp"
	TransportNative = "native"
)

// Scopes of Skill.spec.scope.
const (
	SkillScopeGlobal = "global"
	SkillScopeTenant = "tenant"
)

// DefaultErrorMessageLimit is a tool's errorMessageLimit when the bundle
// sets none: the longest error message, in characters, a tool result
// carries.
const DefaultErrorMessageLimit = 1000

// Tool is a validated Tool resource. Its spec fields:
//
//	field              type                       rule
//	id                 string, required           "<source>:<operation>": source part = sourceId; unique in the bundle
//	name               string, required           the name the model sees; no control characters, at most 128
//	                                              characters (a warning unless 1-64 of A-Z a-z 0-9 _ -, what model
//	                                              APIs accept)
//	description        string, required           what the tool does, for the model
//	inputSchema        mapping, required          a JSON Schema (draft 2020-12 unless $schema names another
//	                                              standard draft) with type: object, self-contained: no $ref to
//	                                              other documents
//	sourceId           string, required           the upstream source: letters, digits, _ . -
//	sourcePath         string                     the upstream path, starting with "/" (/menu/{id})
//	method             GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS   required for transport http
//	tags               [string]                   distinct, no spaces
//	labelIds           [string]                   distinct, no spaces
//	version            string                     quote numbers: "1.2"
//	enabled            bool, default true         a disabled tool matches no selector and is in no manifest,
//	                                              but for an admin's preview of groups listing it explicitly
//	requiredScopes     [string]                   scopes the caller's token must hold to call the tool
//	errorMessageLimit  integer > 0, default 1000  longest error message of a tool result
//	transport          http|mcp|native, required
//	url                string                     required for http, refused otherwise: https, or http to a
//	                                              loopback host; no credentials or fragment
//	auth               mapping                    {oauthAppRef, scopes}: the token getAccessToken fetches for
//	                                              the call; oauthAppRef ("name" or "OAuthApp/name") must name
//	                                              an OAuthApp of the bundle, and scopes must be among its scopes
//	idempotent         bool                       running the call twice does what running it once does: the turn
//	                                              engine runs it again when a crash left its outcome unknown;
//	                                              default true for method GET and HEAD, false otherwise
type Tool struct {
	Name   string            // metadata.name
	Labels map[string]string // metadata.labels
	File   string            // bundle-relative file it came from
	Line   int               // line of its document in File

	ID          string // spec.id, the key of Bundle.Tools
	ToolName    string // spec.name
	Description string
	// InputSchema is spec.inputSchema as JSON values (map[string]any,
	// []any, string, bool, nil, int64, float64); InputSchemaJSON is the
	// same, marshaled once; Schema is it compiled, to validate a call's
	// arguments (decode them with json.Decoder.UseNumber).
	InputSchema     map[string]any
	InputSchemaJSON json.RawMessage
	Schema          *jsonschema.Schema

	SourceID          string
	SourcePath        string
	Method            string
	Tags              []string
	LabelIDs          []string
	Version           string
	Enabled           bool
	RequiredScopes    []string
	ErrorMessageLimit int
	Transport         string // TransportHTTP | TransportMCP | TransportNative
	URL               string // the upstream URL of an http tool
	Auth              *ToolAuth
	Idempotent        bool
	// Annotations are spec.annotations: hints for MCP clients
	// (title, readOnlyHint, destructiveHint, idempotentHint,
	// openWorldHint); nil when the tool declares none.
	Annotations *discovery.ToolAnnotations
}

// ToolAuth is the OAuth token a tool's upstream call carries.
type ToolAuth struct {
	OAuthAppRef domain.ObjectRef // always Kind OAuthApp, of an app in the bundle
	Scopes      []string         // a subset of the app's scopes; empty: the app's
}

// Ref is the tool's object reference.
func (t *Tool) Ref() domain.ObjectRef { return domain.ObjectRef{Kind: "Tool", Name: t.Name} }

// DiscoveryTool is the tool as the discovery index sees it.
func (t *Tool) DiscoveryTool() discovery.Tool {
	return discovery.Tool{
		ID: t.ID, Name: t.ToolName, Description: t.Description, InputSchema: t.InputSchemaJSON,
		SourceID: t.SourceID, SourcePath: t.SourcePath, Method: t.Method,
		Tags: t.Tags, LabelIDs: t.LabelIDs, Version: t.Version, Enabled: t.Enabled, Annotations: t.Annotations,
	}
}

// ToolGroup is a validated ToolGroup resource; its id is its
// metadata.name. Its spec fields are active and a ToolSelection's:
//
//	field   type                 rule
//	active  bool, default true   an inactive group grants no tools
type ToolGroup struct {
	Name   string // metadata.name: the group id
	Labels map[string]string
	File   string
	Line   int

	Active bool
	ToolSelection
}

// ToolSelection picks tools: the enabled tools that match every selector,
// plus the explicit ids, minus the excluded ones. It is a ToolGroup's spec
// and an Agent's spec.tools, read by one decoder. Its fields:
//
//	field            type                    rule
//	selectors        [selector]              a tool must match all of them; none: no tool by pattern
//	explicitToolIds  [tool id]               added whether or not a selector matches
//	excludedToolIds  [tool id]               removed, even when explicit
//
// and a selector's (every field optional; see discovery.Pattern):
//
//	source, name, path, method  pattern   "*", "regex:<re>" or a glob; omitted: not checked
//	requiredTags                [string]  all present on the tool
//	excludedTags                [string]  none present
//	requiredLabelIds            [string]  all present
//
// An explicit or excluded id that names no Tool of the bundle is a
// warning, not an error: tenants upload tools at run time.
type ToolSelection struct {
	Selectors       []discovery.Selector
	ExplicitToolIDs []string
	ExcludedToolIDs []string
}

// Group is the selection as a discovery group named id, so that the
// discovery index resolves it like any group.
func (s ToolSelection) Group(id string, active bool) discovery.Group {
	return discovery.Group{
		ID: id, Active: active, Selectors: s.Selectors,
		ExplicitToolIDs: s.ExplicitToolIDs, ExcludedToolIDs: s.ExcludedToolIDs,
	}
}

// AccessPolicy is a validated AccessPolicy resource; its id is its
// metadata.name. Its spec fields:
//
//	field            type                 rule
//	active           bool, default true   an inactive policy grants nothing
//	priority         integer, default 0   evaluation order, highest first (ties by name)
//	claimMatchers    [matcher]            all must match; none: the policy never matches (a warning)
//	allowedGroupIds  [string]             ToolGroup names of the bundle
//
// and a matcher's (see discovery.Matcher for the operators):
//
//	claim     string, required   dot path into the claims ("realm_access.roles")
//	operator  string, required   equals, not_equals, contains, not_contains, matches, in, not_in, exists
//	value     string             required but for exists, which takes none; quote numbers and booleans
type AccessPolicy struct {
	Name   string // metadata.name: the policy id
	Labels map[string]string
	File   string
	Line   int

	Active          bool
	Priority        int
	ClaimMatchers   []discovery.Matcher
	AllowedGroupIDs []string
}

// Skill is a validated Skill resource. Its spec fields:
//
//	field        type                    rule
//	name         string                  the name allow lists name; default metadata.name
//	description  string, required
//	content      string, required        at most 1 MiB
//	scope        global|tenant, required global: every caller; tenant: the tenant's callers whose allow list names it
//	tenantId     string                  required for tenant scope, refused for global
//
// (scope, tenantId, name) is unique in the bundle.
type Skill struct {
	Name   string // metadata.name
	Labels map[string]string
	File   string
	Line   int

	SkillName   string // spec.name
	Description string
	Content     string
	Scope       string // SkillScopeGlobal | SkillScopeTenant
	TenantID    string // set exactly when Scope is SkillScopeTenant
}

// DiscoveryConfig is the bundle's tools, groups and policies for
// discovery.NewIndex, each list in a stable order. Append tenant-uploaded
// tools to Tools before building the index.
func (b *Bundle) DiscoveryConfig() discovery.Config {
	var cfg discovery.Config
	if b == nil {
		return cfg
	}
	for _, id := range sortedKeys(b.Tools) {
		cfg.Tools = append(cfg.Tools, b.Tools[id].DiscoveryTool())
	}
	for _, name := range sortedKeys(b.ToolGroups) {
		g := b.ToolGroups[name]
		cfg.Groups = append(cfg.Groups, g.Group(g.Name, g.Active))
	}
	for _, name := range sortedKeys(b.AccessPolicies) {
		p := b.AccessPolicies[name]
		cfg.Policies = append(cfg.Policies, discovery.Policy{
			ID: p.Name, Active: p.Active, Priority: p.Priority,
			Matchers: p.ClaimMatchers, GroupIDs: p.AllowedGroupIDs,
		})
	}
	return cfg
}
