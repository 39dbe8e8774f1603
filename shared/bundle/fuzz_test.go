package bundle

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/discovery"
)

type anySecret struct{}

func (anySecret) ResolveSecret(name, key string) (domain.Secret, error) {
	return domain.NewSecret("fuzz-secret-" + name + "-" + key), nil
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(appsYAML))
	f.Add([]byte(deviceYAML))
	f.Add([]byte(appsYAML + "---\n" + deviceYAML))
	f.Add([]byte("a: &a [x, x]\nb: [*a, *a]\n"))
	f.Add([]byte("apiVersion: agents.example.io/v1alpha1\nkind: OAuthApp\nmetadata: {name: x}\nspec:\n  options: &o {a: *o}\n"))
	f.Add([]byte("kind: [\n"))
	f.Add([]byte("--- !!binary\n"))
	f.Add([]byte("spec: {client: {clientId: {valueFrom: {secretRef: {ref: Secret/x, key: k}}}}}\nkind: OAuthApp\n"))
	f.Add([]byte(appsYAML + "---\n" + toolsYAML))
	f.Add([]byte(toolsYAML))
	f.Add([]byte(turnYAML))
	f.Add([]byte(toolsYAML + "---\n" + turnYAML))
	f.Add([]byte("apiVersion: agents.example.io/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec: {modelRef: m, systemPrompt: \"\", tools: {selectors: [{}], explicitToolIds: [x:y]}, limits: {maxToolCallsPerStep: 128}}\n---\napiVersion: agents.example.io/v1alpha1\nkind: Model\nmetadata: {name: m}\nspec: {provider: bedrock, model: m}\n"))
	f.Add([]byte("apiVersion: agents.example.io/v1alpha1\nkind: Swarm\nmetadata: {name: s}\nspec:\n  agents: [a, Agent/b]\n  entrypoint: a\n  policy: {maxStepsPerTurn: 1000}\n  ingress:\n    - match: {event: e, properties: {k: v}}\n      route: {agentRef: b}\n    - {}\n    - match: {}\n"))
	f.Add([]byte("apiVersion: agents.example.io/v1alpha1\nkind: Swarm\nmetadata: {name: s}\nspec:\n  agents: [a]\n  entrypoint: a\n  policy:\n    changesets: {enabled: true, allowed: {files: [\"tools/**\", \"{a,b}/[x-z]?.yaml\", \".env\"]}, emitRevisionChangedEvent: false}\n---\napiVersion: agents.example.io/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec: {modelRef: m, changesets: {enabled: false, allowed: {files: [\"**\"]}}}\n---\napiVersion: agents.example.io/v1alpha1\nkind: Model\nmetadata: {name: m}\nspec: {provider: bedrock, model: m}\n"))
	f.Add([]byte("apiVersion: agents.example.io/v1alpha1\nkind: Connector\nmetadata: {name: c}\nspec: {type: webhook, url: \"http://localhost:1/h?a=b\", secret: {valueFrom: {env: K}}, events: [turn.started, turn.failed]}\n"))
	f.Add([]byte("apiVersion: agents.example.io/v1alpha1\nkind: Model\nmetadata: {name: m}\nspec: {provider: openai, model: m, endpoint: \"http://[::1]:1/v1\", parameters: {maxTokens: 1, temperature: 2.0}, retry: {maxRetries: 0}}\n"))
	f.Add([]byte("apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: t}\nspec: {id: a:b, name: b, description: d, sourceId: a, transport: native, inputSchema: {type: object, properties: {x: {$ref: '#/$defs/y'}}, $defs: {y: &y {type: array, items: *y}}}}\n"))
	opts := Options{
		LookupEnv: func(k string) (string, bool) { return "fuzz-env-" + k, k != "" && k[0] != 'X' },
		Secrets:   anySecret{},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse([]File{{Name: "fuzz.yaml", Data: data}}, opts)
		if (b == nil) == (err == nil) {
			t.Fatalf("Parse returned bundle %v and error %v", b, err)
		}
		if err != nil {
			ve, ok := err.(*ValidationError)
			if !ok || len(ve.Problems) == 0 {
				t.Fatalf("error %T without problems", err)
			}
			for _, p := range ve.Problems {
				if p.File != "fuzz.yaml" && p.File != "" {
					t.Fatalf("problem names file %q", p.File)
				}
			}
			if strings.Count(err.Error(), "\n")+1 != len(ve.Problems) {
				t.Fatalf("Error() is not one line per problem:\n%s", err)
			}
			return
		}
		for name, app := range b.OAuthApps {
			if name != app.Name || app.File != "fuzz.yaml" {
				t.Fatalf("app %q misfiled: %+v", name, app)
			}
			if app.Flow == FlowAuthorizationCode && (app.Endpoints.AuthorizationURL == "" || app.Endpoints.TokenURL == "" || app.Redirect.CallbackPath == "") {
				t.Fatalf("authorizationCode app %q without its endpoints", name)
			}
			if app.SubjectMode == domain.SubjectModeUser && app.SubjectVerification == nil {
				t.Fatalf("user-mode app %q without subject verification", name)
			}
			if app.ClientID == "" || app.ClientSecret.IsZero() {
				t.Fatalf("app %q without client credentials", name)
			}
		}
		for id, tool := range b.Tools {
			if id != tool.ID || !discovery.ValidToolID(id) || tool.Schema == nil || !json.Valid(tool.InputSchemaJSON) {
				t.Fatalf("tool %q misfiled or without its schema: %+v", id, tool)
			}
			if tool.Transport == TransportHTTP && (tool.URL == "" || tool.Method == "") {
				t.Fatalf("http tool %q without url or method", id)
			}
			if tool.Auth != nil {
				if _, ok := b.OAuthApps[tool.Auth.OAuthAppRef.Name]; !ok {
					t.Fatalf("tool %q names a missing app", id)
				}
			}
		}
		for name, p := range b.AccessPolicies {
			for _, g := range p.AllowedGroupIDs {
				if _, ok := b.ToolGroups[g]; !ok {
					t.Fatalf("policy %q grants a missing group %q", name, g)
				}
			}
		}
		for name, m := range b.Models {
			if name != m.Name || m.ModelID == "" || m.Endpoint == "" && m.Provider == ModelProviderOpenAI ||
				m.RequestTimeout <= 0 || m.MaxRetries < 0 || m.MaxRetries > maxModelRetries ||
				m.Temperature != nil && !(*m.Temperature >= 0 && *m.Temperature <= maxModelTemperature) {
				t.Fatalf("model %q: %+v", name, m)
			}
			if m.Provider == ModelProviderOpenAI && m.APIKey.IsZero() && !loopbackURL(m.Endpoint) {
				t.Fatalf("openai model %q off loopback without an apiKey", name)
			}
			if m.Provider == ModelProviderBedrock && !m.APIKey.IsZero() {
				t.Fatalf("bedrock model %q with an apiKey", name)
			}
		}
		for name, a := range b.Agents {
			if _, ok := b.Models[a.ModelRef.Name]; name != a.Name || !ok || a.ModelRef.Kind != "Model" {
				t.Fatalf("agent %q names a missing model: %+v", name, a)
			}
			if a.MaxStepsPerTurn < 0 || a.MaxStepsPerTurn > maxStepsPerTurn || a.MaxToolCallsPerStep < 1 || a.MaxToolCallsPerStep > maxToolCallsPerStep || a.ToolTimeout < time.Second {
				t.Fatalf("agent %q limits out of range: %+v", name, a)
			}
		}
		for name, sw := range b.Swarms {
			if name != sw.Name || len(sw.Agents) == 0 || !slices.Contains(sw.Agents, sw.Entrypoint) || sw.MaxStepsPerTurn < 1 || sw.MaxStepsPerTurn > maxStepsPerTurn {
				t.Fatalf("swarm %q: %+v", name, sw)
			}
			for _, a := range sw.Agents {
				if _, ok := b.Agents[a]; !ok {
					t.Fatalf("swarm %q names a missing agent %q", name, a)
				}
			}
			for _, rule := range sw.Ingress {
				if rule.Agent != "" && !slices.Contains(sw.Agents, rule.Agent) {
					t.Fatalf("swarm %q routes to %q, not one of its agents", name, rule.Agent)
				}
				if got := sw.Route(rule.Event, rule.Properties); !slices.Contains(sw.Agents, got) {
					t.Fatalf("swarm %q: Route(%q, %v) = %q, not one of its agents", name, rule.Event, rule.Properties, got)
				}
			}
		}
		for name, c := range b.Connectors {
			if name != c.Name || c.Type != ConnectorTypeWebhook || c.URL == "" || c.Secret.IsZero() || len(c.Events) == 0 {
				t.Fatalf("connector %q: %+v", name, c)
			}
		}
		for name, sk := range b.Skills {
			if (sk.Scope == SkillScopeTenant) != (sk.TenantID != "") || sk.SkillName == "" {
				t.Fatalf("skill %q: scope %q, tenant %q", name, sk.Scope, sk.TenantID)
			}
		}
		ix, err := discovery.NewIndex(b.DiscoveryConfig())
		if err != nil {
			t.Fatalf("a valid bundle gives an invalid discovery config: %v", err)
		}
		if w := ix.Warnings(); len(w) > 0 && len(b.Warnings) == 0 {
			t.Fatalf("the index warns %q about a bundle without warnings", w)
		}
	})
}

func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"oidc:user:{sub}", "{https://slack.com/team_id}:{user.id}", "{", "}", "{}", "a{b}c{d.e}", "{a{b}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTemplate(s)
		if err != nil {
			if tp != nil {
				t.Fatal("template and error")
			}
			return
		}
		if tp.String() != s {
			t.Fatalf("String() = %q, want %q", tp.String(), s)
		}
		// Every placeholder present as an exact key: expansion succeeds and
		// contains no braces that were not literal.
		claims := map[string]any{}
		for _, p := range tp.Placeholders() {
			claims[p] = "v"
		}
		out, err := tp.Expand(claims)
		if err != nil {
			t.Fatalf("Expand with all claims: %v", err)
		}
		if strings.ContainsAny(out, "{}") {
			t.Fatalf("Expand(%q) = %q still has braces", s, out)
		}
		if len(tp.Placeholders()) > 0 {
			if _, err := tp.Expand(nil); err == nil {
				t.Fatal("Expand without claims succeeded")
			}
		}
		// Nested and odd claim shapes must not panic.
		_, _ = tp.Expand(map[string]any{"a": map[string]any{"b": []any{1}}, s: nil})
	})
}
