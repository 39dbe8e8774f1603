package discovery

import (
	"encoding/json"
	"strings"
)

// Config is what an Index is built from: the bundle's tools, groups and
// policies, plus any tenant-uploaded tools appended to Tools.
type Config struct {
	Tools    []Tool
	Groups   []Group
	Policies []Policy
}

// Tool is one tool of the registry, as discovery sees it.
type Tool struct {
	// ID is "<source>:<operation>" (see ValidToolID), unique in a Config.
	ID          string
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema as JSON; empty means
	// {"type":"object"} (a tool without arguments).
	InputSchema json.RawMessage
	SourceID    string
	SourcePath  string
	Method      string
	Tags        []string
	LabelIDs    []string
	Version     string
	Enabled     bool
	// Tenant, when set, makes this a tenant-uploaded tool: its manifest
	// id is TenantToolID(Tenant, ID), so tenants never collide with each
	// other or with the bundle, and only that tenant's callers may see it
	// (the caller filters: see ToolManifestEntry.Tenant).
	Tenant string
	// Annotations are the hints the tool declares about itself (nil:
	// none), passed on to MCP clients.
	Annotations *ToolAnnotations
}

// ToolAnnotations are a tool's hints to its callers, as MCP names them:
// hints, never enforced, and only those the tool declares (nil: not
// declared).
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// TenantToolID is the manifest id of a tenant's tool: "<tenant>/<id>".
func TenantToolID(tenant, id string) string {
	if tenant == "" {
		return id
	}
	return tenant + "/" + id
}

// key is the tool's id in the index and the manifest.
func (t Tool) key() string { return TenantToolID(t.Tenant, t.ID) }

// Group is a ToolGroup. Its tools are the enabled tools that match all of
// its Selectors (a group without selectors selects none this way), plus
// ExplicitToolIDs (enabled or not), minus ExcludedToolIDs, which win over
// both. An inactive group contributes nothing.
type Group struct {
	ID              string
	Active          bool
	Selectors       []Selector
	ExplicitToolIDs []string
	ExcludedToolIDs []string
}

// Selector picks tools by pattern (see Pattern) and by tags and labels. A
// tool matches when every criterion does:
//
//	Source            pattern over the tool's SourceID
//	Name              pattern over the tool's Name
//	Path              pattern over the tool's SourcePath
//	Method            pattern over the tool's Method
//	RequiredTags      every one is among the tool's Tags
//	ExcludedTags      none is among the tool's Tags
//	RequiredLabelIDs  every one is among the tool's LabelIDs
//
// An empty pattern is not checked (the same as "*"). Tags and label ids
// compare exactly.
type Selector struct {
	Source           string
	Name             string
	Path             string
	Method           string
	RequiredTags     []string
	ExcludedTags     []string
	RequiredLabelIDs []string
}

// Validate reports the first pattern of s that does not compile.
func (s Selector) Validate() error {
	for _, p := range []string{s.Source, s.Name, s.Path, s.Method} {
		if _, err := CompilePattern(p); err != nil {
			return err
		}
	}
	return nil
}

// Policy is an AccessPolicy: when it is active and all of its Matchers
// match the claims, it grants GroupIDs. A policy without matchers never
// matches.
type Policy struct {
	ID       string
	Active   bool
	Priority int
	Matchers []Matcher
	GroupIDs []string
}

// ToolManifestEntry is a tool as shown to an agent. Entries returned by an
// Index share their InputSchema and Tags with the Index: treat them as
// read-only.
type ToolManifestEntry struct {
	ToolID      string          `json:"tool_id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	SourceID    string          `json:"source_id"`
	SourcePath  string          `json:"source_path"`
	Tags        []string        `json:"tags"`
	Version     string          `json:"version,omitempty"`
	// Annotations are the tool's declared hints (readOnlyHint, …).
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	// Tenant is the uploading tenant of a tenant tool (empty for the
	// bundle's): a caller whose tenant differs must never see the entry.
	Tenant string `json:"-"`
}

// Options tune Resolve.
type Options struct {
	// IncludeDisabled keeps disabled tools that a group lists explicitly
	// (an admin's preview). Selectors consider enabled tools only, as in
	// the seed, so a disabled tool is never picked up by a pattern.
	IncludeDisabled bool
}

// Access is what the AccessResolver grants one set of claims.
type Access struct {
	// PolicyIDs are the matching policies in evaluation order: priority
	// highest first, then id ascending.
	PolicyIDs []string
	// GroupIDs are the union of their granted groups, sorted, inactive and
	// unknown ones included (they contribute no tools).
	GroupIDs []string
}

// Resolution is the answer to one GetAgentToolsQuery.
type Resolution struct {
	Access
	// Tools is the deduplicated manifest, sorted by tool id.
	Tools []ToolManifestEntry
}

// MaxToolIDLength bounds a tool id.
const MaxToolIDLength = 200

// ValidToolID reports whether id has the shape "<source>:<operation>":
// a source id (letters, digits, "_", "." and "-", starting with a letter
// or digit), one colon, and an operation (the same characters, starting
// with a letter, digit or "_"), at most MaxToolIDLength bytes.
func ValidToolID(id string) bool {
	if len(id) > MaxToolIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] == ':' {
			return validIDPart(id[:i], false) && validIDPart(id[i+1:], true)
		}
	}
	return false
}

// ValidSourceID reports whether id can be the source part of a tool id.
func ValidSourceID(id string) bool {
	return len(id) < MaxToolIDLength && validIDPart(id, false)
}

// validIDPart: letters, digits, '_', '.' and '-', not empty, starting with
// a letter or digit (or '_' when underscoreFirst).
func validIDPart(s string, underscoreFirst bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_' && (i > 0 || underscoreFirst):
		case (c == '.' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// SplitToolID returns the source and operation of a valid tool id.
func SplitToolID(id string) (source, operation string, ok bool) {
	if !ValidToolID(id) {
		return "", "", false
	}
	source, operation, _ = strings.Cut(id, ":")
	return source, operation, true
}
