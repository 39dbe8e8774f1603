package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/discovery"
)

const toolsYAML = `apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata:
  name: slack-post
  labels: {team: platform}
spec:
  id: slack:post_message
  name: post_message
  description: Post a message to a Slack channel
  inputSchema:
    type: object
    properties:
      channel: {type: string, minLength: 1}
      text: {type: string}
      thread: {$ref: "#/$defs/ts"}
    required: [channel, text]
    additionalProperties: false
    $defs:
      ts: {type: string, pattern: "^[0-9]+\\.[0-9]+$"}
  sourceId: slack
  sourcePath: /api/chat.postMessage
  method: POST
  tags: [chat, write]
  labelIds: [lbl-comms]
  version: "2.1"
  requiredScopes: ["tools:slack"]
  errorMessageLimit: 500
  transport: http
  url: https://slack.com/api/chat.postMessage
  auth:
    oauthAppRef: OAuthApp/slack-bot
    scopes: ["chat:write"]
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: clock}
spec:
  id: native:now
  name: now
  description: The current time
  inputSchema: {type: object}
  sourceId: native
  transport: native
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: legacy}
spec:
  id: slack:legacy_post
  name: legacy_post
  description: Old posting API
  inputSchema: {type: object}
  sourceId: slack
  transport: mcp
  enabled: false
  auth: {oauthAppRef: slack-bot}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: chat-writers}
spec:
  selectors:
    - source: slack
      name: "post_*"
      path: "/api/*"
      method: POST
      requiredTags: [chat]
      excludedTags: [deprecated]
      requiredLabelIds: [lbl-comms]
    - name: "regex:post_"
  explicitToolIds: [native:now]
  excludedToolIds: [slack:legacy_post]
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: dormant}
spec:
  active: false
  explicitToolIds: [tenant:uploaded_later]
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: staff}
spec:
  priority: 10
  claimMatchers:
    - {claim: realm_access.roles, operator: contains, value: staff}
    - {claim: email_verified, operator: equals, value: "true"}
    - {claim: tenant_id, operator: in, value: "acme, globex"}
    - {claim: email, operator: matches, value: '[a-z]+@acme\.com$'}
    - {claim: sub, operator: exists}
  allowedGroupIds: [chat-writers, dormant]
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: "off"}
spec:
  active: false
  priority: -3
  claimMatchers:
    - {claim: sub, operator: exists}
  allowedGroupIds: [chat-writers]
---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: slack-etiquette}
spec:
  description: How to write in Slack
  content: |
    Keep it short.
  scope: global
---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: acme-onboarding}
spec:
  name: onboarding
  description: Acme's onboarding
  content: Welcome to Acme.
  scope: tenant
  tenantId: acme
`

func toolFiles() map[string]string {
	f := validFiles()
	f["tools.yaml"] = toolsYAML
	return f
}

func TestParseToolKinds(t *testing.T) {
	b := mustParse(t, toolFiles())
	if len(b.OAuthApps) != 3 || len(b.Tools) != 3 || len(b.ToolGroups) != 2 || len(b.AccessPolicies) != 2 || len(b.Skills) != 2 {
		t.Fatalf("counts: %d apps, %d tools, %d groups, %d policies, %d skills", len(b.OAuthApps), len(b.Tools), len(b.ToolGroups), len(b.AccessPolicies), len(b.Skills))
	}

	post := b.Tools["slack:post_message"]
	if post.Schema == nil {
		t.Fatal("slack:post_message has no compiled schema")
	}
	wantSchemaJSON := `{"$defs":{"ts":{"pattern":"^[0-9]+\\.[0-9]+$","type":"string"}},"additionalProperties":false,"properties":{"channel":{"minLength":1,"type":"string"},"text":{"type":"string"},"thread":{"$ref":"#/$defs/ts"}},"required":["channel","text"],"type":"object"}`
	if string(post.InputSchemaJSON) != wantSchemaJSON {
		t.Errorf("InputSchemaJSON = %s", post.InputSchemaJSON)
	}
	gotPost := *post
	gotPost.Schema, gotPost.InputSchema, gotPost.InputSchemaJSON = nil, nil, nil
	wantPost := Tool{
		Name: "slack-post", Labels: map[string]string{"team": "platform"}, File: "tools.yaml", Line: 1,
		ID: "slack:post_message", ToolName: "post_message", Description: "Post a message to a Slack channel",
		SourceID: "slack", SourcePath: "/api/chat.postMessage", Method: "POST",
		Tags: []string{"chat", "write"}, LabelIDs: []string{"lbl-comms"}, Version: "2.1", Enabled: true,
		RequiredScopes: []string{"tools:slack"}, ErrorMessageLimit: 500, Transport: TransportHTTP,
		URL:  "https://slack.com/api/chat.postMessage",
		Auth: &ToolAuth{OAuthAppRef: domain.ObjectRef{Kind: "OAuthApp", Name: "slack-bot"}, Scopes: []string{"chat:write"}},
	}
	if !reflect.DeepEqual(gotPost, wantPost) {
		t.Errorf("slack:post_message =\n%+v\nwant\n%+v", gotPost, wantPost)
	}

	now := b.Tools["native:now"]
	if now.Line != 34 || !now.Enabled || now.ErrorMessageLimit != DefaultErrorMessageLimit || now.Transport != TransportNative ||
		now.Auth != nil || now.URL != "" || now.Method != "" || now.Tags != nil || string(now.InputSchemaJSON) != `{"type":"object"}` {
		t.Errorf("native:now = %+v", now)
	}
	legacy := b.Tools["slack:legacy_post"]
	if legacy.Enabled || legacy.Transport != TransportMCP || legacy.Auth == nil || legacy.Auth.OAuthAppRef.Name != "slack-bot" || legacy.Auth.Scopes != nil {
		t.Errorf("slack:legacy_post = %+v, auth %+v", legacy, legacy.Auth)
	}

	wantGroup := &ToolGroup{
		Name: "chat-writers", File: "tools.yaml", Line: 58, Active: true,
		ToolSelection: ToolSelection{
			Selectors: []discovery.Selector{
				{Source: "slack", Name: "post_*", Path: "/api/*", Method: "POST", RequiredTags: []string{"chat"}, ExcludedTags: []string{"deprecated"}, RequiredLabelIDs: []string{"lbl-comms"}},
				{Name: "regex:post_"},
			},
			ExplicitToolIDs: []string{"native:now"}, ExcludedToolIDs: []string{"slack:legacy_post"},
		},
	}
	if got := b.ToolGroups["chat-writers"]; !reflect.DeepEqual(got, wantGroup) {
		t.Errorf("chat-writers =\n%+v\nwant\n%+v", got, wantGroup)
	}
	if g := b.ToolGroups["dormant"]; g.Active || g.Selectors != nil || !reflect.DeepEqual(g.ExplicitToolIDs, []string{"tenant:uploaded_later"}) {
		t.Errorf("dormant = %+v", g)
	}

	wantPolicy := &AccessPolicy{
		Name: "staff", File: "tools.yaml", Line: 81, Active: true, Priority: 10,
		ClaimMatchers: []discovery.Matcher{
			{Claim: "realm_access.roles", Operator: "contains", Value: "staff"},
			{Claim: "email_verified", Operator: "equals", Value: "true"},
			{Claim: "tenant_id", Operator: "in", Value: "acme, globex"},
			{Claim: "email", Operator: "matches", Value: `[a-z]+@acme\.com$`},
			{Claim: "sub", Operator: "exists"},
		},
		AllowedGroupIDs: []string{"chat-writers", "dormant"},
	}
	if got := b.AccessPolicies["staff"]; !reflect.DeepEqual(got, wantPolicy) {
		t.Errorf("staff =\n%+v\nwant\n%+v", got, wantPolicy)
	}
	if p := b.AccessPolicies["off"]; p.Active || p.Priority != -3 {
		t.Errorf("off = %+v", p)
	}

	wantSkills := map[string]*Skill{
		"slack-etiquette": {Name: "slack-etiquette", File: "tools.yaml", Line: 104, SkillName: "slack-etiquette",
			Description: "How to write in Slack", Content: "Keep it short.\n", Scope: SkillScopeGlobal},
		"acme-onboarding": {Name: "acme-onboarding", File: "tools.yaml", Line: 113, SkillName: "onboarding",
			Description: "Acme's onboarding", Content: "Welcome to Acme.", Scope: SkillScopeTenant, TenantID: "acme"},
	}
	if !reflect.DeepEqual(b.Skills, wantSkills) {
		t.Errorf("skills =\n%+v\nwant\n%+v", b.Skills, wantSkills)
	}

	wantWarnings := []string{
		"more/device.yaml:14: OAuthApp/cli-device: spec.client.clientSecret.value: a literal secret in the bundle is for tests and demos; use valueFrom (env or secretRef) (spec 2.4 rule 4)",
		`tools.yaml:79: ToolGroup/dormant: spec.explicitToolIds[0]: no Tool with id "tenant:uploaded_later" in the bundle; kept, since tenants may upload it at run time`,
	}
	if !reflect.DeepEqual(b.Warnings, wantWarnings) {
		t.Errorf("Warnings =\n%s\nwant\n%s", strings.Join(b.Warnings, "\n"), strings.Join(wantWarnings, "\n"))
	}
}

func TestToolSchemaValidatesArguments(t *testing.T) {
	b := mustParse(t, toolFiles())
	sch := b.Tools["slack:post_message"].Schema
	for _, tt := range []struct {
		args string
		ok   bool
	}{
		{`{"channel":"C1","text":"hi"}`, true},
		{`{"channel":"C1","text":"hi","thread":"1700000000.000100"}`, true},
		{`{"channel":"C1"}`, false},
		{`{"channel":"","text":"hi"}`, false},
		{`{"channel":"C1","text":"hi","extra":1}`, false},
		{`{"channel":"C1","text":"hi","thread":"yesterday"}`, false},
		{`["C1","hi"]`, false},
	} {
		dec := json.NewDecoder(strings.NewReader(tt.args))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); (err == nil) != tt.ok {
			t.Errorf("Validate(%s) = %v, want ok %v", tt.args, err, tt.ok)
		}
	}
}

func TestToolRules(t *testing.T) {
	runRuleCases(t, toolFiles, "tools.yaml", []ruleCase{
		// Tool: identity.
		{name: "id missing", old: "  id: native:now\n", new: "",
			at: "spec:\n  name: now", want: "Tool/clock: spec.id: required"},
		{name: "id shape", old: "id: native:now", new: "id: native-now",
			at: "id: native-now", want: `Tool/clock: spec.id: "native-now" is not a tool id: want <source>:<operation>`},
		{name: "id two colons", old: "id: native:now", new: `id: "native:now:x"`,
			at: "id: \"native:now:x", want: `Tool/clock: spec.id: "native:now:x" is not a tool id`},
		{name: "id source differs from sourceId", old: "id: native:now", new: "id: clock:now",
			at: "id: clock:now", want: `Tool/clock: spec.id: the source part "clock" of "clock:now" must be spec.sourceId "native"`},
		{name: "duplicate tool id", old: "id: native:now", new: "id: slack:post_message\n  sourceId: slack",
			at: "id: slack:post_message\n  sourceId: slack\n  name: now", want: `Tool/clock: spec.id: duplicate tool id "slack:post_message": already used by Tool/slack-post (tools.yaml:1)`},
		{name: "duplicate tool id across files", file: "z.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: again}\nspec: {id: native:now, name: now, description: d, inputSchema: {type: object}, sourceId: native, transport: native}\n",
			at: "spec:", want: `Tool/again: spec.id: duplicate tool id "native:now": already used by Tool/clock (tools.yaml:34)`},
		{name: "duplicate metadata.name", old: "metadata: {name: clock}", new: "metadata: {name: legacy}",
			at: "metadata: {name: legacy}\nspec:\n  id: slack:legacy", want: "Tool/legacy: metadata.name: duplicate Tool/legacy: already defined at tools.yaml:34"},
		{name: "sourceId shape", old: "sourceId: native", new: "sourceId: nat:ive",
			at: "sourceId: nat", want: `Tool/clock: spec.sourceId: "nat:ive" is not a source id`},
		{name: "sourceId missing", old: "  sourceId: native\n", new: "",
			at: "spec:\n  id: native", want: "Tool/clock: spec.sourceId: required"},
		{name: "name missing", old: "  name: now\n", new: "",
			at: "spec:\n  id: native", want: "Tool/clock: spec.name: required"},
		{name: "name control character", old: "  name: now\n", new: "  name: \"n\\tow\"\n",
			at: "name: \"n", want: "Tool/clock: spec.name: must not contain control characters"},
		{name: "name too long", old: "  name: now\n", new: "  name: " + strings.Repeat("x", 129) + "\n",
			at: "name: xx", want: "Tool/clock: spec.name: must be at most 128 characters"},
		{name: "description missing", old: "  description: The current time\n", new: "",
			at: "spec:\n  id: native", want: "Tool/clock: spec.description: required"},
		{name: "spec missing", old: "metadata: {name: clock}\nspec:\n  id: native:now\n  name: now\n  description: The current time\n  inputSchema: {type: object}\n  sourceId: native\n  transport: native\n", new: "metadata: {name: clock}\n",
			at: "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: clock}", want: "Tool/clock: spec: required"},
		{name: "spec not a mapping", old: "metadata: {name: clock}\nspec:\n  id: native:now\n  name: now\n  description: The current time\n  inputSchema: {type: object}\n  sourceId: native\n  transport: native\n", new: "metadata: {name: clock}\nspec: [native:now]\n",
			at: "spec: [native:now]", want: "Tool/clock: spec: must be a mapping, got a list"},
		{name: "unknown field", old: "  transport: native\n", new: "  transport: native\n  sourceID: x\n",
			at: "sourceID", want: "Tool/clock: spec.sourceID: unknown field; did you mean sourceId?"},

		// Tool: input schema.
		{name: "schema missing", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  sourceId: native",
			at: "spec:\n  id: native", want: "Tool/clock: spec.inputSchema: required: a JSON Schema of type object"},
		{name: "schema not a mapping", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema: [object]\n  sourceId: native",
			at: "inputSchema: [", want: "Tool/clock: spec.inputSchema: must be a mapping (a JSON Schema object), got a list"},
		{name: "schema type not object", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema: {type: string}\n  sourceId: native",
			at: "inputSchema: {type: string", want: `Tool/clock: spec.inputSchema.type: must be "object": a tool's arguments are a JSON object`},
		{name: "schema type missing", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema: {properties: {}}\n  sourceId: native",
			at: "inputSchema: {prop", want: `Tool/clock: spec.inputSchema.type: must be "object"`},
		{name: "schema invalid keyword value", old: "channel: {type: string, minLength: 1}", new: "channel: {type: string, minLength: -1}",
			at: "channel: {type: string, minLength: -1}", want: "Tool/slack-post: spec.inputSchema.properties.channel.minLength: not a valid JSON Schema: minimum: got -1, want 0"},
		{name: "schema invalid type name", old: "      text: {type: string}", new: "      text:\n        type: strng",
			at: "type: strng", want: "Tool/slack-post: spec.inputSchema.properties.text.type: not a valid JSON Schema: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'"},
		{name: "schema properties not an object", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema:\n    type: object\n    properties: [a]\n  sourceId: native",
			at: "properties: [a]", want: "Tool/clock: spec.inputSchema.properties: not a valid JSON Schema: got array, want object"},
		{name: "schema bad pattern", old: `pattern: "^[0-9]+\\.[0-9]+$"`, new: `pattern: "(["`,
			at: `pattern: "(["`, want: `Tool/slack-post: spec.inputSchema["$defs"].ts.pattern: not a valid JSON Schema: '([' is not valid regex`},
		{name: "schema remote ref", old: `thread: {$ref: "#/$defs/ts"}`, new: `thread: {$ref: "https://example.com/ts.json"}`,
			at: "thread:", want: `Tool/slack-post: spec.inputSchema: refers to "https://example.com/ts.json": an input schema must be self-contained: no $ref to other documents, $schema only for a standard draft`},
		{name: "schema file ref", old: `thread: {$ref: "#/$defs/ts"}`, new: `thread: {$ref: "file:///etc/passwd"}`,
			at: "thread:", want: `Tool/slack-post: spec.inputSchema: refers to "file:///etc/passwd": an input schema must be self-contained`},
		{name: "schema relative ref", old: `thread: {$ref: "#/$defs/ts"}`, new: `thread: {$ref: "ts.json"}`,
			at: "thread:", want: `Tool/slack-post: spec.inputSchema: refers to "ts.json": an input schema must be self-contained`},
		{name: "schema dangling ref", old: `thread: {$ref: "#/$defs/ts"}`, new: `thread: {$ref: "#/$defs/nope"}`,
			at: "  inputSchema:", want: `Tool/slack-post: spec.inputSchema: not a valid JSON Schema: json-pointer in "#/$defs/nope" not found`},
		{name: "schema unknown metaschema", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema: {$schema: \"https://example.com/meta\", type: object}\n  sourceId: native",
			at: "inputSchema: {$schema", want: `Tool/clock: spec.inputSchema: refers to "https://example.com/meta"`},
		{name: "schema recursive alias", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema: {type: object, properties: {x: &x {type: array, items: *x}}}\n  sourceId: native",
			at: "inputSchema: {type: object, properties: {x: &x", want: "Tool/clock: spec.inputSchema: nested more than 64 levels deep (aliases followed)"},
		{name: "schema alias bomb", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema:\n    type: object\n    $defs:\n      a: &a [x, x, x, x, x, x, x, x, x, x]\n      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n      g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n  sourceId: native",
			at: "  inputSchema:\n    type: object\n    $defs", want: "Tool/clock: spec.inputSchema: too large: more than 10000 values (aliases count each time they are used)"},
		{name: "schema not JSON", old: "  inputSchema: {type: object}\n  sourceId: native", new: "  inputSchema: {type: object, default: .nan}\n  sourceId: native",
			at: "inputSchema: {type: object, default", want: "Tool/clock: spec.inputSchema.default: .nan cannot be represented in JSON"},

		// Tool: other fields.
		{name: "sourcePath relative", old: "sourcePath: /api/chat.postMessage", new: "sourcePath: api/chat",
			at: "sourcePath:", want: "Tool/slack-post: spec.sourcePath: must start with /"},
		{name: "sourcePath space", old: "sourcePath: /api/chat.postMessage", new: "sourcePath: /api/chat post",
			at: "sourcePath:", want: "Tool/slack-post: spec.sourcePath: must not contain spaces or control characters"},
		{name: "method invalid", old: "method: POST", new: "method: post",
			at: "method: post", want: `Tool/slack-post: spec.method: "post" is not allowed; allowed values: GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS`},
		{name: "method required for http", old: "  method: POST\n", new: "",
			at: "spec:\n  id: slack:post", want: "Tool/slack-post: spec.method: required when transport is http"},
		{name: "tag with space", old: "tags: [chat, write]", new: "tags: [chat, \"read only\"]",
			at: "tags:", want: `Tool/slack-post: spec.tags[1]: "read only" must not contain spaces or control characters`},
		{name: "tag duplicate", old: "tags: [chat, write]", new: "tags: [chat, chat]",
			at: "tags:", want: `Tool/slack-post: spec.tags[1]: duplicate "chat" (also spec.tags[0])`},
		{name: "tags not a list", old: "tags: [chat, write]", new: "tags: chat",
			at: "tags:", want: "Tool/slack-post: spec.tags: must be a list, got a !!str value"},
		{name: "labelIds item not a string", old: "labelIds: [lbl-comms]", new: "labelIds: [{a: b}]",
			at: "labelIds:", want: "Tool/slack-post: spec.labelIds[0]: must be a string, got a mapping"},
		{name: "version number", old: `version: "2.1"`, new: "version: 2.1",
			at: "version:", want: "Tool/slack-post: spec.version: must be a string, got a number (quote it)"},
		{name: "enabled not bool", old: "enabled: false", new: "enabled: no",
			at: "enabled:", want: "Tool/legacy: spec.enabled: must be true or false, got a !!str value"},
		{name: "idempotent not bool", old: "enabled: false", new: "enabled: false\n  idempotent: \"true\"",
			at: "idempotent:", want: "Tool/legacy: spec.idempotent: must be true or false, got a !!str value"},
		{name: "requiredScopes empty item", old: `requiredScopes: ["tools:slack"]`, new: `requiredScopes: [""]`,
			at: "requiredScopes:", want: "Tool/slack-post: spec.requiredScopes[0]: must not be empty"},
		{name: "errorMessageLimit zero", old: "errorMessageLimit: 500", new: "errorMessageLimit: 0",
			at: "errorMessageLimit:", want: "Tool/slack-post: spec.errorMessageLimit: must be between 1 and 1000000"},
		{name: "errorMessageLimit negative", old: "errorMessageLimit: 500", new: "errorMessageLimit: -5",
			at: "errorMessageLimit:", want: "Tool/slack-post: spec.errorMessageLimit: must be between 1 and 1000000"},
		{name: "errorMessageLimit string", old: "errorMessageLimit: 500", new: `errorMessageLimit: "500"`,
			at: "errorMessageLimit:", want: "Tool/slack-post: spec.errorMessageLimit: must be an integer, got a string (write the number without quotes)"},
		{name: "errorMessageLimit float", old: "errorMessageLimit: 500", new: "errorMessageLimit: 5.5",
			at: "errorMessageLimit:", want: "Tool/slack-post: spec.errorMessageLimit: must be an integer, got a number"},
		{name: "errorMessageLimit huge", old: "errorMessageLimit: 500", new: "errorMessageLimit: 99999999999999999999",
			at: "errorMessageLimit:", want: "Tool/slack-post: spec.errorMessageLimit: must be an integer"},
		{name: "transport missing", old: "  transport: native\n", new: "",
			at: "spec:\n  id: native", want: "Tool/clock: spec.transport: required"},
		{name: "transport invalid", old: "transport: native", new: "transport: grpc",
			at: "transport: grpc", want: `Tool/clock: spec.transport: "grpc" is not allowed; allowed values: http, mcp, native`},
		{name: "url required for http", old: "  url: https://slack.com/api/chat.postMessage\n", new: "",
			at: "spec:\n  id: slack:post", want: "Tool/slack-post: spec.url: required when transport is http"},
		{name: "url plain http", old: "url: https://slack.com/api/chat.postMessage", new: "url: http://slack.com/api",
			at: "url:", want: "Tool/slack-post: spec.url: https is required (plain http only for loopback hosts: localhost, 127.0.0.1, ::1)"},
		{name: "url credentials", old: "url: https://slack.com/api/chat.postMessage", new: "url: https://u:hunter2@slack.com/api",
			at: "url:", want: "Tool/slack-post: spec.url: must not contain credentials"},
		{name: "url for a native tool", old: "transport: native", new: "transport: native\n  url: https://x.example.com",
			at: "url: https://x.example.com", want: "Tool/clock: spec.url: only for transport http, not native"},

		// Tool: auth, checked against the app once every file is read.
		{name: "auth app missing", old: "oauthAppRef: OAuthApp/slack-bot", new: "oauthAppRef: OAuthApp/slack-bots",
			at: "oauthAppRef:", want: "Tool/slack-post: spec.auth.oauthAppRef: OAuthApp/slack-bots is not in the bundle; OAuthApps: cli-device, demo-user, slack-bot"},
		{name: "auth ref other kind", old: "oauthAppRef: OAuthApp/slack-bot", new: "oauthAppRef: Secret/slack",
			at: "oauthAppRef:", want: `Tool/slack-post: spec.auth.oauthAppRef: "Secret/slack": must name an OAuthApp, not a Secret`},
		{name: "auth ref malformed", old: "oauthAppRef: OAuthApp/slack-bot", new: "oauthAppRef: OAuthApp/",
			at: "oauthAppRef:", want: `Tool/slack-post: spec.auth.oauthAppRef: "OAuthApp/": want an OAuthApp name or OAuthApp/<name>`},
		{name: "auth ref missing", old: "auth: {oauthAppRef: slack-bot}", new: "auth: {scopes: [x]}",
			at: "auth: {", want: "Tool/legacy: spec.auth.oauthAppRef: required"},
		{name: "auth scope widens the grant", old: `scopes: ["chat:write"]`, new: "scopes:\n      - chat:write\n      - admin",
			at: "- admin", want: `Tool/slack-post: spec.auth.scopes[1]: "admin" is not among the scopes of OAuthApp/slack-bot (chat:write channels:read): a tool cannot widen its app's grant`},
		{name: "auth scope of another app", old: `scopes: ["chat:write"]`, new: `scopes: ["openid"]`,
			at: "scopes: [\"openid", want: `Tool/slack-post: spec.auth.scopes[0]: "openid" is not among the scopes of OAuthApp/slack-bot`},
		{name: "auth app from a later file", file: "a-first.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: early}\nspec:\n  id: slack:early\n  name: early\n  description: d\n  inputSchema: {type: object}\n  sourceId: slack\n  transport: native\n  auth: {oauthAppRef: slack-bot, scopes: [nope]}\n",
			at: "auth:", want: `Tool/early: spec.auth.scopes[0]: "nope" is not among the scopes of OAuthApp/slack-bot`},
		{name: "auth unknown field", old: "oauthAppRef: slack-bot}", new: "oauthAppRef: slack-bot, scope: x}",
			at: "auth: {oauthAppRef: slack-bot, scope", want: "Tool/legacy: spec.auth.scope: unknown field; did you mean scopes?"},

		// ToolGroup.
		{name: "selector pattern regex invalid", old: `name: "regex:post_"`, new: `name: "regex:(post_"`,
			at: `name: "regex:(post_"`, want: `ToolGroup/chat-writers: spec.selectors[1].name: pattern "regex:(post_": invalid regular expression: missing closing ): "(post_"`},
		{name: "selector pattern empty", old: `name: "regex:post_"`, new: `path: ""`,
			at: `path: ""`, want: "ToolGroup/chat-writers: spec.selectors[1].path: must not be empty; leave it out to match every value"},
		{name: "selector unknown field", old: "      method: POST\n", new: "      verb: POST\n",
			at: "verb:", want: "ToolGroup/chat-writers: spec.selectors[0].verb: unknown field; known fields: source, name, path, method, requiredTags, excludedTags, requiredLabelIds"},
		{name: "selector not a mapping", old: `    - name: "regex:post_"`, new: "    - post_*",
			at: "- post_*", want: "ToolGroup/chat-writers: spec.selectors[1]: must be a mapping, got a !!str value"},
		{name: "selector null", old: `    - name: "regex:post_"`, new: "    -",
			at: "    -\n", want: "ToolGroup/chat-writers: spec.selectors[1]: must be a mapping; {} selects every enabled tool"},
		{name: "selector tags with space", old: "requiredTags: [chat]", new: `requiredTags: ["chat room"]`,
			at: "requiredTags:", want: `ToolGroup/chat-writers: spec.selectors[0].requiredTags[0]: "chat room" must not contain spaces`},
		{name: "explicit id shape", old: "explicitToolIds: [native:now]", new: "explicitToolIds: [now]",
			at: "explicitToolIds:", want: `ToolGroup/chat-writers: spec.explicitToolIds[0]: "now" is not a tool id: want <source>:<operation>`},
		{name: "excluded id shape", old: "excludedToolIds: [slack:legacy_post]", new: "excludedToolIds: [\"a b:c\"]",
			at: "excludedToolIds:", want: `ToolGroup/chat-writers: spec.excludedToolIds[0]: "a b:c" is not a tool id`},
		{name: "group active not bool", old: "active: false\n  explicitToolIds", new: "active: 0\n  explicitToolIds",
			at: "active: 0", want: "ToolGroup/dormant: spec.active: must be true or false, got a number"},
		{name: "group spec missing", old: "metadata: {name: dormant}\nspec:\n  active: false\n  explicitToolIds: [tenant:uploaded_later]\n", new: "metadata: {name: dormant}\n",
			at: "apiVersion: agents.example.io/v1alpha1\nkind: ToolGroup\nmetadata: {name: dormant}", want: "ToolGroup/dormant: spec: required"},

		// AccessPolicy.
		{name: "policy unknown group", old: "allowedGroupIds: [chat-writers, dormant]", new: "allowedGroupIds: [chat-writers, dormnat]",
			at: "allowedGroupIds:", want: `AccessPolicy/staff: spec.allowedGroupIds[1]: no ToolGroup "dormnat" in the bundle; ToolGroups: chat-writers, dormant`},
		{name: "policy group duplicate", old: "allowedGroupIds: [chat-writers, dormant]", new: "allowedGroupIds: [dormant, dormant]",
			at: "allowedGroupIds:", want: `AccessPolicy/staff: spec.allowedGroupIds[1]: duplicate "dormant" (also spec.allowedGroupIds[0])`},
		{name: "policy priority string", old: "priority: 10", new: "priority: high",
			at: "priority: high", want: "AccessPolicy/staff: spec.priority: must be an integer, got a string (write the number without quotes)"},
		{name: "policy priority out of range", old: "priority: 10", new: "priority: 3000000000",
			at: "priority: 3", want: "AccessPolicy/staff: spec.priority: must be an integer between -2147483648 and 2147483647"},
		{name: "matcher operator unknown", old: "operator: contains, value: staff", new: "operator: has, value: staff",
			at: "operator: has", want: `AccessPolicy/staff: spec.claimMatchers[0].operator: "has" is not allowed; allowed values: equals, not_equals, contains, not_contains, matches, in, not_in, exists`},
		{name: "matcher operator missing", old: "{claim: realm_access.roles, operator: contains, value: staff}", new: "{claim: realm_access.roles, value: staff}",
			at: "{claim: realm_access.roles, value", want: "AccessPolicy/staff: spec.claimMatchers[0].operator: required"},
		{name: "matcher claim missing", old: "{claim: sub, operator: exists}\n  allowedGroupIds: [chat-writers, dormant]", new: "{operator: exists}\n  allowedGroupIds: [chat-writers, dormant]",
			at: "{operator: exists}", want: "AccessPolicy/staff: spec.claimMatchers[4].claim: required"},
		{name: "matcher claim empty segment", old: "claim: realm_access.roles", new: "claim: realm_access..roles",
			at: "claim: realm_access..", want: `AccessPolicy/staff: spec.claimMatchers[0].claim: claim path "realm_access..roles" has an empty segment`},
		{name: "matcher value missing", old: "operator: contains, value: staff}", new: "operator: contains}",
			at: "operator: contains}", want: "AccessPolicy/staff: spec.claimMatchers[0].value: required for operator contains"},
		{name: "matcher value not a string", old: `operator: equals, value: "true"`, new: "operator: equals, value: true",
			at: "operator: equals, value: true", want: "AccessPolicy/staff: spec.claimMatchers[1].value: must be a string, got a boolean (quote it)"},
		{name: "matcher exists with value", old: "{claim: sub, operator: exists}\n  allowedGroupIds: [chat-writers, dormant]", new: "{claim: sub, operator: exists, value: x}\n  allowedGroupIds: [chat-writers, dormant]",
			at: "{claim: sub, operator: exists, value", want: "AccessPolicy/staff: spec.claimMatchers[4].value: operator exists takes no value"},
		{name: "matcher regex invalid", old: `value: '[a-z]+@acme\.com$'`, new: `value: '[a-z+@acme\.com$'`,
			at: "operator: matches", want: `AccessPolicy/staff: spec.claimMatchers[3].value: invalid regular expression: missing closing ]`},
		{name: "matcher in empty item", old: `value: "acme, globex"`, new: `value: "acme, , globex"`,
			at: "operator: in", want: "AccessPolicy/staff: spec.claimMatchers[2].value: operator in: item 2 of the comma-separated value is empty"},
		{name: "matcher contains empty value", old: "operator: contains, value: staff", new: `operator: contains, value: ""`,
			at: "operator: contains", want: "AccessPolicy/staff: spec.claimMatchers[0].value: operator contains needs a non-empty value"},
		{name: "matcher not a mapping", old: "    - {claim: sub, operator: exists}\n  allowedGroupIds: [chat-writers, dormant]", new: "    - sub exists\n  allowedGroupIds: [chat-writers, dormant]",
			at: "- sub exists", want: "AccessPolicy/staff: spec.claimMatchers[4]: must be a mapping, got a !!str value"},

		// Skill.
		{name: "skill scope missing", old: "  scope: global\n", new: "",
			at: "spec:\n  description: How", want: "Skill/slack-etiquette: spec.scope: required"},
		{name: "skill scope invalid", old: "scope: global", new: "scope: public",
			at: "scope: public", want: `Skill/slack-etiquette: spec.scope: "public" is not allowed; allowed values: global, tenant`},
		{name: "skill tenant without tenantId", old: "  tenantId: acme\n", new: "",
			at: "spec:\n  name: onboarding", want: "Skill/acme-onboarding: spec.tenantId: required when scope is tenant"},
		{name: "skill global with tenantId", old: "scope: global", new: "scope: global\n  tenantId: acme",
			at: "tenantId: acme\n---", want: "Skill/slack-etiquette: spec.tenantId: only for scope tenant: a global skill is visible to every tenant"},
		{name: "skill tenantId empty", old: "tenantId: acme", new: `tenantId: ""`,
			at: "tenantId:", want: "Skill/acme-onboarding: spec.tenantId: must not be empty"},
		{name: "skill content missing", old: "  content: Welcome to Acme.\n", new: "",
			at: "spec:\n  name: onboarding", want: "Skill/acme-onboarding: spec.content: required"},
		{name: "skill description missing", old: "  description: Acme's onboarding\n", new: "",
			at: "spec:\n  name: onboarding", want: "Skill/acme-onboarding: spec.description: required"},
		{name: "skill name empty", old: "name: onboarding", new: `name: ""`,
			at: "name: \"\"", want: "Skill/acme-onboarding: spec.name: must not be empty; leave it out to use metadata.name"},
		{name: "skill name clash in a tenant", file: "z.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Skill\nmetadata: {name: acme-onboarding-2}\nspec: {name: onboarding, description: d, content: c, scope: tenant, tenantId: acme}\n",
			at: "spec:", want: `Skill/acme-onboarding-2: spec.name: skill name "onboarding" is already used in tenant acme by Skill/acme-onboarding (tools.yaml:113)`},
		{name: "skill name clash global by default name", file: "z.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Skill\nmetadata: {name: other}\nspec: {name: slack-etiquette, description: d, content: c, scope: global}\n",
			at: "spec:", want: `Skill/other: spec.name: skill name "slack-etiquette" is already used in global by Skill/slack-etiquette (tools.yaml:104)`},
	})
}

// TestToolIdempotent: idempotent defaults to true for GET and HEAD only,
// and a declaration wins either way, in the bundle and in an upload.
func TestToolIdempotent(t *testing.T) {
	httpTool := func(method, extra string) string {
		return "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: probe}\nspec:\n" +
			"  id: demo:probe\n  name: probe\n  description: d\n  inputSchema: {type: object}\n  sourceId: demo\n" +
			"  transport: http\n  url: https://api.example.com/probe\n  method: " + method + "\n" + extra
	}
	for _, tc := range []struct {
		name, doc string
		want      bool
	}{
		{"GET by default", httpTool("GET", ""), true},
		{"HEAD by default", httpTool("HEAD", ""), true},
		{"POST by default", httpTool("POST", ""), false},
		{"DELETE by default", httpTool("DELETE", ""), false},
		{"OPTIONS by default", httpTool("OPTIONS", ""), false},
		{"GET declared not idempotent", httpTool("GET", "  idempotent: false\n"), false},
		{"PUT declared idempotent", httpTool("PUT", "  idempotent: true\n"), true},
		{"null is the default", httpTool("GET", "  idempotent: null\n"), true},
		{"native by default", "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: probe}\nspec: {id: demo:probe, name: probe, description: d, inputSchema: {type: object}, sourceId: demo, transport: native}\n", false},
		{"native declared idempotent", "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: probe}\nspec: {id: demo:probe, name: probe, description: d, inputSchema: {type: object}, sourceId: demo, transport: native, idempotent: true}\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := validFiles()
			files["probe.yaml"] = tc.doc
			if got := mustParse(t, files).Tools["demo:probe"].Idempotent; got != tc.want {
				t.Fatalf("Idempotent = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("upload", func(t *testing.T) {
		for body, want := range map[string]bool{
			`{"id":"menu:list","name":"list_menu","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"http","url":"https://api.example.com/menu","method":"GET"}`:                 true,
			`{"id":"menu:order","name":"order","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"http","url":"https://api.example.com/menu","method":"POST"}`:                   false,
			`{"id":"menu:order","name":"order","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"http","url":"https://api.example.com/menu","method":"POST","idempotent":true}`: true,
		} {
			tool, err := ParseTenantTool([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if tool.Idempotent != want {
				t.Errorf("%s: Idempotent = %v, want %v", tool.ID, tool.Idempotent, want)
			}
		}
	})
}

func TestToolWarnings(t *testing.T) {
	files := toolFiles()
	mutate(t, files, "tools.yaml", "  name: now\n", "  name: \"what time is it\"\n")
	mutate(t, files, "tools.yaml", "excludedToolIds: [slack:legacy_post]", "excludedToolIds: [native:now, slack:gone]")
	mutate(t, files, "tools.yaml", "  claimMatchers:\n    - {claim: sub, operator: exists}\n  allowedGroupIds: [chat-writers]\n", "  allowedGroupIds: []\n")
	files["z.yaml"] = "apiVersion: agents.example.io/v1alpha1\nkind: ToolGroup\nmetadata: {name: empty}\nspec: {selectors: []}\n"
	b := mustParse(t, files)
	want := []string{
		"more/device.yaml:14: OAuthApp/cli-device: spec.client.clientSecret.value: a literal secret in the bundle is for tests and demos; use valueFrom (env or secretRef) (spec 2.4 rule 4)",
		`tools.yaml:39: Tool/clock: spec.name: "what time is it": model APIs accept tool names of 1 to 64 letters, digits, '_' and '-' only`,
		`tools.yaml:72: ToolGroup/chat-writers: spec.excludedToolIds[0]: "native:now" is also in explicitToolIds: exclusion wins, the group does not hold it`,
		`tools.yaml:72: ToolGroup/chat-writers: spec.excludedToolIds[1]: no Tool with id "slack:gone" in the bundle; kept, since tenants may upload it at run time`,
		`tools.yaml:79: ToolGroup/dormant: spec.explicitToolIds[0]: no Tool with id "tenant:uploaded_later" in the bundle; kept, since tenants may upload it at run time`,
		"tools.yaml:97: AccessPolicy/off: spec.claimMatchers: no claim matchers: the policy never matches",
		"tools.yaml:100: AccessPolicy/off: spec.allowedGroupIds: no groups: the policy grants nothing",
		"z.yaml:4: ToolGroup/empty: spec: no selectors and no explicitToolIds: the group holds no tools",
	}
	if !reflect.DeepEqual(b.Warnings, want) {
		t.Errorf("Warnings =\n%s\nwant\n%s", strings.Join(b.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

func TestDiscoveryConfig(t *testing.T) {
	b := mustParse(t, toolFiles())
	cfg := b.DiscoveryConfig()
	// Tenant tools join the bundle's.
	cfg.Tools = append(cfg.Tools, discovery.Tool{ID: "tenant:uploaded_later", Name: "later", Enabled: true})
	ix, err := discovery.NewIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w := ix.Warnings(); len(w) != 0 {
		t.Errorf("index warnings: %q", w)
	}
	claims := map[string]any{
		"sub": "u1", "email": "alice@acme.com", "email_verified": true, "tenant_id": "globex",
		"realm_access": map[string]any{"roles": []any{"staff"}},
	}
	r := ix.Resolve(claims, discovery.Options{IncludeDisabled: true})
	if !reflect.DeepEqual(r.PolicyIDs, []string{"staff"}) || !reflect.DeepEqual(r.GroupIDs, []string{"chat-writers", "dormant"}) {
		t.Errorf("access = %+v", r.Access)
	}
	var got []string
	for _, e := range r.Tools {
		got = append(got, e.ToolID)
	}
	if want := []string{"native:now", "slack:post_message"}; !reflect.DeepEqual(got, want) {
		t.Errorf("tools = %q, want %q", got, want)
	}
	j, _ := json.Marshal(r.Tools[1])
	want := `{"tool_id":"slack:post_message","name":"post_message","description":"Post a message to a Slack channel","input_schema":` +
		string(b.Tools["slack:post_message"].InputSchemaJSON) + `,"source_id":"slack","source_path":"/api/chat.postMessage","tags":["chat","write"],"version":"2.1"}`
	if string(j) != want {
		t.Errorf("entry JSON =\n%s\nwant\n%s", j, want)
	}
	delete(claims, "sub")
	if r := ix.Resolve(claims, discovery.Options{}); r.Tools != nil || r.PolicyIDs != nil {
		t.Errorf("without sub: %+v", r)
	}
	if cfg := (*Bundle)(nil).DiscoveryConfig(); cfg.Tools != nil {
		t.Error("nil bundle has tools")
	}
}

// The compiled schema refuses to load anything: a $ref that names a file
// is not read.
func TestSchemaLoaderReadsNothing(t *testing.T) {
	if _, err := (noRemoteSchemas{}).Load("file:///etc/hostname"); err == nil {
		t.Fatal("loaded a file")
	}
	_, err := compileSchema(map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "file:///etc/hostname"}}})
	var le *jsonschema.LoadURLError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a LoadURLError", err)
	}
	var buf bytes.Buffer
	buf.WriteString(err.Error())
	if !strings.Contains(buf.String(), "self-contained") {
		t.Errorf("err = %v", err)
	}
}

func TestToolAnnotations(t *testing.T) {
	tool := func(extra string) string {
		return "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: probe}\nspec:\n" +
			"  id: demo:probe\n  name: probe\n  description: d\n  inputSchema: {type: object}\n  sourceId: demo\n" +
			"  transport: http\n  url: https://api.example.com/probe\n  method: GET\n" + extra
	}
	files := validFiles()
	files["probe.yaml"] = tool("  annotations: {title: Probe, readOnlyHint: true, openWorldHint: false}\n")
	a := mustParse(t, files).Tools["demo:probe"].Annotations
	if a == nil || a.Title != "Probe" || a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint ||
		a.DestructiveHint != nil || a.IdempotentHint != nil {
		t.Fatalf("annotations %+v", a)
	}
	files["probe.yaml"] = tool("")
	if a := mustParse(t, files).Tools["demo:probe"].Annotations; a != nil {
		t.Fatalf("no annotations declared, got %+v", a)
	}
	for doc, want := range map[string]string{
		"  annotations: {readOnlyHint: yes please}\n": "readOnlyHint: must be true or false",
		"  annotations: {readOnly: true}\n":           "readOnly",
	} {
		files["probe.yaml"] = tool(doc)
		_, err := Parse(toFiles(files), validOptions())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", doc, err, want)
		}
	}
	// Uploads read them the same way.
	up, err := ParseTenantTool([]byte(`{"id":"menu:list","name":"list_menu","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"http","url":"https://api.example.com/menu","method":"GET","annotations":{"readOnlyHint":true}}`))
	if err != nil || up.Annotations == nil || !*up.Annotations.ReadOnlyHint {
		t.Fatalf("upload: %v %+v", err, up)
	}
}
