package bundle

import (
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentauth/agentauth/shared/tools/discovery"
)

// httpMethods are the values of Tool.spec.method.
var httpMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// modelToolName is what model APIs accept as a tool (function) name.
var modelToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// maxToolName bounds Tool.spec.name, in characters.
const maxToolName = 128

// maxErrorMessageLimit bounds Tool.spec.errorMessageLimit.
const maxErrorMessageLimit = 1_000_000

// maxSchemaValues bounds the values of an input schema, aliases counted
// each time they are used; maxSchemaDepth bounds its nesting, so that a
// recursive alias cannot make a schema thousands of levels deep.
const (
	maxSchemaValues = 10000
	maxSchemaDepth  = 64
)

// schemaShape checks, before the schema is converted, that n nests at
// most maxSchemaDepth levels and holds at most maxSchemaValues values,
// aliases followed and counted each time they are used; it stops at the
// first breach, so an alias bomb or a recursive alias costs little.
func schemaShape(n *yaml.Node) (tooDeep, tooLarge bool) {
	budget := maxSchemaValues
	var walk func(n *yaml.Node, level int) bool
	walk = func(n *yaml.Node, level int) bool {
		n = deref(n)
		if n == nil {
			return true
		}
		if level > maxSchemaDepth {
			tooDeep = true
			return false
		}
		if budget--; budget < 0 {
			tooLarge = true
			return false
		}
		for _, c := range n.Content {
			if !walk(c, level+1) {
				return false
			}
		}
		return true
	}
	walk(n, 1)
	return tooDeep, tooLarge
}

// decodeTool reads a Tool document into the bundle. Each part of the spec
// is read by its own function; the Tool is added only when its id is valid
// and unused, while every other problem is reported and the load goes on.
func decodeTool(r *res, d *document) {
	spec := r.spec(d,
		"id", "name", "description", "inputSchema", "sourceId", "sourcePath", "method",
		"tags", "labelIds", "version", "enabled", "requiredScopes", "errorMessageLimit",
		"transport", "url", "auth", "idempotent", "annotations")
	if spec == nil {
		return
	}
	t := &Tool{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}
	t.SourceID = toolSourceID(r, spec)
	idLine := toolID(r, spec, t)
	t.ToolName = toolName(r, spec)
	if s := spec.requireStr("description", ""); s.OK {
		t.Description = s.Value
	}
	t.InputSchema, t.InputSchemaJSON, t.Schema = inputSchema(r, spec)
	t.SourcePath = toolSourcePath(r, spec)
	method := spec.oneOf("method", false, httpMethods...)
	if method.OK {
		t.Method = method.Value
	}
	t.Tags, _ = spec.stringList("tags", noSpaces)
	t.LabelIDs, _ = spec.stringList("labelIds", noSpaces)
	if s := spec.str("version"); s.OK {
		t.Version = s.Value
	}
	t.Enabled = spec.optBool("enabled", true)
	t.RequiredScopes, _ = spec.stringList("requiredScopes", noSpaces)
	t.ErrorMessageLimit = spec.intIn("errorMessageLimit", DefaultErrorMessageLimit, 1, maxErrorMessageLimit)
	toolTransport(r, spec, t, method)
	t.Auth = toolAuth(r, spec, t)
	t.Idempotent = spec.optBool("idempotent", idempotentMethod(t.Method))
	t.Annotations = toolAnnotations(spec)
	addTool(r, spec, t, idLine)
}

// toolAnnotations reads spec.annotations: the hints a tool declares about
// itself for MCP clients, each optional (nil when none is declared).
func toolAnnotations(spec *mapping) *discovery.ToolAnnotations {
	if n, _ := spec.get("annotations"); n == nil {
		return nil
	}
	m := spec.child("annotations", "title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
	a := &discovery.ToolAnnotations{}
	if s := m.str("title"); s.OK {
		a.Title = s.Value
	}
	for key, dst := range map[string]**bool{"readOnlyHint": &a.ReadOnlyHint, "destructiveHint": &a.DestructiveHint,
		"idempotentHint": &a.IdempotentHint, "openWorldHint": &a.OpenWorldHint} {
		if n, _ := m.get(key); n != nil && n.ShortTag() == "!!bool" {
			v, _ := m.boolean(key)
			*dst = &v
		} else if n != nil {
			m.boolean(key) // reports the value that is not a boolean
		}
	}
	return a
}

// idempotentMethod is a tool's idempotent default: GET and HEAD only read
// (RFC 9110 safe methods), so running one again after a crash changes
// nothing; every other method, and a tool without one, must say so.
func idempotentMethod(method string) bool {
	return method == "GET" || method == "HEAD"
}

// toolSourceID reads spec.sourceId ("" when missing or invalid, reported).
func toolSourceID(r *res, spec *mapping) string {
	src := spec.requireStr("sourceId", "")
	if !src.OK {
		return ""
	}
	if !discovery.ValidSourceID(src.Value) {
		r.errorf(src.Line, spec.field("sourceId"), "%q is not a source id: want letters, digits, '_', '.' and '-', starting with a letter or digit", src.Value)
		return ""
	}
	return src.Value
}

// toolID reads spec.id into t.ID when it is a tool id whose source part is
// t.SourceID (read first), and returns its line for later messages.
func toolID(r *res, spec *mapping, t *Tool) int {
	id := spec.requireStr("id", "")
	if !id.OK {
		return id.Line
	}
	source, _, ok := discovery.SplitToolID(id.Value)
	switch {
	case !ok:
		r.errorf(id.Line, spec.field("id"), "%q is not a tool id: want <source>:<operation>, both of letters, digits, '_', '.' and '-', at most %d characters", id.Value, discovery.MaxToolIDLength)
	case t.SourceID != "" && source != t.SourceID:
		r.errorf(id.Line, spec.field("id"), "the source part %q of %q must be spec.sourceId %q", source, id.Value, t.SourceID)
	default:
		t.ID = id.Value
	}
	return id.Line
}

// toolName reads spec.name, the name models see: at most maxToolName
// characters, no control characters; one that model APIs would refuse is
// a warning, not an error.
func toolName(r *res, spec *mapping) string {
	s := spec.requireStr("name", "")
	if !s.OK {
		return ""
	}
	switch {
	case noControl(s.Value) != "":
		r.errorf(s.Line, spec.field("name"), "%s", noControl(s.Value))
		return ""
	case utf8.RuneCountInString(s.Value) > maxToolName:
		r.errorf(s.Line, spec.field("name"), "must be at most %d characters", maxToolName)
		return ""
	}
	if !modelToolName.MatchString(s.Value) {
		r.warnf(s.Line, spec.field("name"), "%q: model APIs accept tool names of 1 to 64 letters, digits, '_' and '-' only", s.Value)
	}
	return s.Value
}

// toolSourcePath reads the optional spec.sourcePath: an absolute path
// without spaces.
func toolSourcePath(r *res, spec *mapping) string {
	s := spec.str("sourcePath")
	if !s.OK {
		return ""
	}
	switch {
	case !strings.HasPrefix(s.Value, "/"):
		r.errorf(s.Line, spec.field("sourcePath"), "must start with /")
		return ""
	case noSpaces(s.Value) != "":
		r.errorf(s.Line, spec.field("sourcePath"), "must not contain spaces or control characters")
		return ""
	}
	return s.Value
}

// toolTransport reads spec.transport into t, and spec.url, which an http
// tool needs (with spec.method, read by the caller) and no other may have.
func toolTransport(r *res, spec *mapping, t *Tool, method scalar) {
	transport := spec.oneOf("transport", true, TransportHTTP, TransportMCP, TransportNative)
	if transport.OK {
		t.Transport = transport.Value
	}
	u := r.urlField(spec, "url", true)
	switch {
	case !transport.OK:
	case t.Transport == TransportHTTP:
		if !u.Present {
			r.errorf(u.Line, spec.field("url"), "required when transport is http")
		}
		if !method.Present {
			r.errorf(method.Line, spec.field("method"), "required when transport is http")
		}
		t.URL = u.Value
	case u.Present:
		r.errorf(u.Line, spec.field("url"), "only for transport http, not %s", t.Transport)
	}
}

// addTool adds t to the bundle unless its id is missing (reported) or
// already used by another Tool.
func addTool(r *res, spec *mapping, t *Tool, idLine int) {
	if t.ID == "" {
		return
	}
	if first, dup := r.l.b.Tools[t.ID]; dup {
		r.errorf(idLine, spec.field("id"), "duplicate tool id %q: already used by %s (%s:%d)", t.ID, first.Ref(), first.File, first.Line)
		return
	}
	r.l.b.Tools[t.ID] = t
}

// toolAuth reads spec.auth and queues the check of its app and scopes
// against the app, which may be in a later file.
func toolAuth(r *res, spec *mapping, t *Tool) *ToolAuth {
	am := spec.child("auth", "oauthAppRef", "scopes")
	if !am.present || am.bad {
		return nil
	}
	a := &ToolAuth{}
	var ref scalar
	a.OAuthAppRef, ref = am.ref("oauthAppRef", "OAuthApp", true)
	scopes, _ := am.stringItems("scopes", noSpaces)
	for _, s := range scopes {
		a.Scopes = append(a.Scopes, s.Value)
	}
	if !ref.OK {
		return a
	}
	r.l.crossChecks = append(r.l.crossChecks, func() {
		app, ok := r.l.b.OAuthApps[a.OAuthAppRef.Name]
		if !ok {
			r.errorf(ref.Line, am.field("oauthAppRef"), "%s", notInBundle(a.OAuthAppRef, r.l.b.OAuthApps))
			return
		}
		for _, s := range scopes {
			if !slices.Contains(app.Scopes, s.Value) {
				r.errorf(s.Line, indexPath(am.field("scopes"), s.Index), "%q is not among the scopes of %s (%s): a tool cannot widen its app's grant", s.Value, a.OAuthAppRef, strings.Join(app.Scopes, " "))
			}
		}
	})
	return a
}

// inputSchema reads spec.inputSchema: a JSON Schema of type object that
// compiles on its own.
func inputSchema(r *res, spec *mapping) (map[string]any, json.RawMessage, *jsonschema.Schema) {
	n, line := spec.get("inputSchema")
	p := spec.field("inputSchema")
	if n == nil {
		r.errorf(line, p, "required: a JSON Schema of type object")
		return nil, nil, nil
	}
	if n.Kind != yaml.MappingNode {
		r.errorf(n.Line, p, "must be a mapping (a JSON Schema object), got %s", describe(n))
		return nil, nil, nil
	}
	switch tooDeep, tooLarge := schemaShape(n); {
	case tooDeep:
		r.errorf(line, p, "nested more than %d levels deep (aliases followed)", maxSchemaDepth)
		return nil, nil, nil
	case tooLarge:
		r.errorf(line, p, "too large: more than %d values (aliases count each time they are used)", maxSchemaValues)
		return nil, nil, nil
	}
	budget := maxSchemaValues
	v, ok := jsonValue(r, p, n, &budget)
	if !ok {
		return nil, nil, nil
	}
	doc := v.(map[string]any)
	if typ, _ := doc["type"].(string); typ != "object" {
		tn, tl := nodeAt(n, []string{"type"}), n.Line
		if tn != nil {
			tl = tn.Line
		}
		r.errorf(tl, fieldPath(p, "type"), "must be \"object\": a tool's arguments are a JSON object")
		return nil, nil, nil
	}
	sch, err := compileSchema(doc)
	if err != nil {
		reportSchemaError(r, p, line, n, err)
		return nil, nil, nil
	}
	raw, err := json.Marshal(doc)
	if err != nil { // cannot happen: jsonValue makes JSON values
		r.errorf(n.Line, p, "cannot be written as JSON")
		return nil, nil, nil
	}
	return doc, raw, sch
}

// schemaURL names an input schema while it compiles. It is hierarchical
// so that a relative $ref ("defs.json") resolves to another document,
// which noRemoteSchemas refuses, and not to the schema itself (as it would
// against a urn:); ".invalid" is a reserved domain, and nothing loads it.
const (
	schemaBase = "https://agentauth.invalid/"
	schemaURL  = schemaBase + "tool-input-schema.json"
)

// noRemoteSchemas refuses every document the schema refers to: the bundle
// loader reads no file and calls no network for a schema. The standard
// drafts' metaschemas are built into the library and load without it.
type noRemoteSchemas struct{}

var errRemoteSchema = errors.New("an input schema must be self-contained: no $ref to other documents, $schema only for a standard draft")

func (noRemoteSchemas) Load(string) (any, error) { return nil, errRemoteSchema }

func compileSchema(doc map[string]any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noRemoteSchemas{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// reportSchemaError reports what is wrong with a schema that does not
// compile: each failing place of the metaschema validation at its own
// line and field, or the one compile error at the schema.
func reportSchemaError(r *res, p string, keyLine int, root *yaml.Node, err error) {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		printer := message.NewPrinter(language.English)
		reported := map[string]bool{}
		for _, leaf := range schemaLeaves(ve, nil) {
			fp := p
			for _, tok := range leaf.InstanceLocation {
				fp = fieldPath(fp, tok)
			}
			if reported[fp] {
				continue // one message per place: anyOf lists every branch
			}
			reported[fp] = true
			line := keyLine
			if n := nodeAt(root, leaf.InstanceLocation); n != nil {
				line = n.Line
			}
			r.errorf(line, fp, "not a valid JSON Schema: %s", leaf.ErrorKind.LocalizedString(printer))
		}
		if len(reported) > 0 {
			return
		}
	}
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		ref := strings.TrimPrefix(le.URL, schemaBase)
		line := keyLine
		if n := findRef(root, ref); n != nil {
			line = n.Line
		}
		r.errorf(line, p, "refers to %q: %v", ref, errRemoteSchema)
		return
	}
	r.errorf(keyLine, p, "not a valid JSON Schema: %s", strings.ReplaceAll(err.Error(), schemaURL, ""))
}

// findRef finds the $ref or $schema whose value is ref, at most
// maxSchemaDepth levels down.
func findRef(n *yaml.Node, ref string) *yaml.Node { return findRefIn(n, ref, maxSchemaDepth) }

func findRefIn(n *yaml.Node, ref string, levels int) *yaml.Node {
	n = deref(n)
	if n == nil || levels < 0 {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), deref(n.Content[i+1])
			if k != nil && (k.Value == "$ref" || k.Value == "$schema") && v != nil && v.Kind == yaml.ScalarNode && v.Value == ref {
				return v
			}
			if found := findRefIn(v, ref, levels-1); found != nil {
				return found
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if found := findRefIn(c, ref, levels-1); found != nil {
				return found
			}
		}
	}
	return nil
}

// schemaLeaves returns the innermost causes of ve, in order.
func schemaLeaves(ve *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return append(out, ve)
	}
	for _, c := range ve.Causes {
		out = schemaLeaves(c, out)
	}
	return out
}

// nodeAt follows a JSON pointer's tokens through YAML mappings and lists.
func nodeAt(n *yaml.Node, tokens []string) *yaml.Node {
	for _, tok := range tokens {
		n = deref(n)
		if n == nil {
			return nil
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := deref(n.Content[i]); k != nil && k.Value == tok {
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return deref(n)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// CompileInputSchema compiles an input schema the way the loader does
// (draft 2020-12 by default, self-contained), for tools agentauth defines
// itself (the changeset tools).
func CompileInputSchema(doc map[string]any) (*jsonschema.Schema, error) { return compileSchema(doc) }
