package bundle

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/discovery"
)

// turnYAML holds the turn engine's kinds. Its line numbers are asserted:
// append, do not insert.
const turnYAML = `apiVersion: agents.example.io/v1alpha1
kind: Model
metadata:
  name: gpt
  labels: {team: platform}
spec:
  provider: openai
  model: gpt-4o-mini
  credentials:
    apiKey:
      valueFrom: {env: OPENAI_API_KEY}
  parameters:
    maxTokens: 4096
    temperature: 0.2
  timeouts: {requestSeconds: 60}
  retry: {maxRetries: 5}
---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: local}
spec:
  provider: openai
  model: "llama3.1:8b"
  endpoint: http://localhost:11434/v1
---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: claude}
spec:
  provider: bedrock
  model: anthropic.claude-3-5-haiku-20241022-v1:0
  region: eu-central-1
  parameters: {temperature: 1}
---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: emulated}
spec:
  provider: bedrock
  model: scripted
  endpoint: http://127.0.0.1:4566
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec:
  modelRef: Model/gpt
  systemPrompt: |
    You help with Slack.
  tools:
    selectors:
      - source: slack
        requiredTags: [chat]
    explicitToolIds: [native:now, tenant:later]
    excludedToolIds: [slack:legacy_post]
  limits:
    maxStepsPerTurn: 8
    maxToolCallsPerStep: 4
    toolTimeoutSeconds: 30
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: helper}
spec:
  modelRef: local
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: support}
spec:
  agents: [Agent/assistant, helper]
  entrypoint: Agent/assistant
  policy: {maxStepsPerTurn: 50}
  ingress:
    - match: {event: user.input, properties: {channel: help}}
      route: {agentRef: Agent/helper}
    - match:
        properties: {channel: help, priority: high}
    - match: {event: system.wakeup}
      route: {agentRef: helper}
    - route: {}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: solo}
spec:
  agents: [helper]
  entrypoint: helper
---
apiVersion: agents.example.io/v1alpha1
kind: Connector
metadata: {name: chat-ui}
spec:
  type: webhook
  url: https://chat.example.com/hooks/agentauth?tenant=acme
  secret:
    valueFrom: {secretRef: {ref: Secret/chat-ui, key: hmac}}
  events: [turn.completed, turn.parked, turn.failed]
---
apiVersion: agents.example.io/v1alpha1
kind: Connector
metadata: {name: local-hook}
spec:
  type: webhook
  url: http://127.0.0.1:7000/hook
  secret: {valueFrom: {env: HOOK_KEY}}
`

func turnFiles() map[string]string {
	f := toolFiles()
	f["turn.yaml"] = turnYAML
	return f
}

func ptr[T any](v T) *T { return &v }

// warningsAbout is the bundle's warnings about resources of kind.
func warningsAbout(b *Bundle, kind string) []string {
	var out []string
	for _, w := range b.Warnings {
		if strings.Contains(w, ": "+kind+"/") {
			out = append(out, w)
		}
	}
	return out
}

func TestParseModels(t *testing.T) {
	b := mustParse(t, turnFiles())
	want := map[string]*Model{
		"gpt": {Name: "gpt", Labels: map[string]string{"team": "platform"}, File: "turn.yaml", Line: 1,
			Provider: ModelProviderOpenAI, ModelID: "gpt-4o-mini", Endpoint: DefaultOpenAIEndpoint,
			APIKey: domain.NewSecret(openAIKey), MaxTokens: 4096, Temperature: ptr(0.2),
			RequestTimeout: time.Minute, MaxRetries: 5},
		"local": {Name: "local", File: "turn.yaml", Line: 18,
			Provider: ModelProviderOpenAI, ModelID: "llama3.1:8b", Endpoint: "http://localhost:11434/v1",
			RequestTimeout: DefaultModelRequestTimeout, MaxRetries: DefaultModelMaxRetries},
		"claude": {Name: "claude", File: "turn.yaml", Line: 26,
			Provider: ModelProviderBedrock, ModelID: "anthropic.claude-3-5-haiku-20241022-v1:0", Region: "eu-central-1",
			Temperature: ptr(1.0), RequestTimeout: DefaultModelRequestTimeout, MaxRetries: DefaultModelMaxRetries},
		"emulated": {Name: "emulated", File: "turn.yaml", Line: 35,
			Provider: ModelProviderBedrock, ModelID: "scripted", Endpoint: "http://127.0.0.1:4566",
			RequestTimeout: DefaultModelRequestTimeout, MaxRetries: DefaultModelMaxRetries},
	}
	if !reflect.DeepEqual(b.Models, want) {
		for name, m := range b.Models {
			t.Errorf("%s = %+v", name, *m)
		}
	}
	if b.Models["gpt"].APIKey.Reveal() != openAIKey {
		t.Error("gpt's apiKey not resolved from the environment")
	}
	if !b.Models["local"].APIKey.IsZero() {
		t.Error("local has an apiKey")
	}
	if s := fmt.Sprintf("%+v %#v", *b.Models["gpt"], b.Models["gpt"]); strings.Contains(s, openAIKey) {
		t.Errorf("printing a model shows its apiKey: %s", s)
	}
	if got := b.Models["gpt"].Ref(); got != (domain.ObjectRef{Kind: "Model", Name: "gpt"}) {
		t.Errorf("Ref() = %v", got)
	}
}

func TestParseAgents(t *testing.T) {
	b := mustParse(t, turnFiles())
	want := map[string]*Agent{
		"assistant": {Name: "assistant", File: "turn.yaml", Line: 43,
			ModelRef: domain.ObjectRef{Kind: "Model", Name: "gpt"}, SystemPrompt: "You help with Slack.\n",
			Tools: ToolSelection{
				Selectors:       []discovery.Selector{{Source: "slack", RequiredTags: []string{"chat"}}},
				ExplicitToolIDs: []string{"native:now", "tenant:later"},
				ExcludedToolIDs: []string{"slack:legacy_post"},
			},
			MaxStepsPerTurn: 8, MaxToolCallsPerStep: 4, ToolTimeout: 30 * time.Second,
			Changesets: AgentChangesets{Enabled: true}},
		"helper": {Name: "helper", File: "turn.yaml", Line: 61,
			ModelRef:            domain.ObjectRef{Kind: "Model", Name: "local"},
			MaxToolCallsPerStep: DefaultMaxToolCallsPerStep, ToolTimeout: DefaultToolTimeout,
			Changesets: AgentChangesets{Enabled: true}},
	}
	if !reflect.DeepEqual(b.Agents, want) {
		for name, a := range b.Agents {
			t.Errorf("%s = %+v", name, *a)
		}
	}
	if got := b.Agents["helper"].Ref(); got != (domain.ObjectRef{Kind: "Agent", Name: "helper"}) {
		t.Errorf("Ref() = %v", got)
	}
	wantWarning := `turn.yaml:54: Agent/assistant: spec.tools.explicitToolIds[1]: no Tool with id "tenant:later" in the bundle; kept, since tenants may upload it at run time`
	// An agent without tools is no mistake (a ToolGroup without any is):
	// helper has no warning.
	if agentWarnings := warningsAbout(b, "Agent"); !reflect.DeepEqual(agentWarnings, []string{wantWarning}) {
		t.Errorf("agent warnings =\n%s\nwant\n%s", strings.Join(agentWarnings, "\n"), wantWarning)
	}

	// The agent's selection is a discovery group like any other: the
	// same tools as a ToolGroup with the same fields.
	cfg := b.DiscoveryConfig()
	cfg.Groups = append(cfg.Groups, b.Agents["assistant"].Tools.Group("agent:assistant", true))
	ix, err := discovery.NewIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ix.GroupTools("agent:assistant", false) {
		got = append(got, e.ToolID)
	}
	if want := []string{"native:now", "slack:post_message"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the agent's tools = %q, want %q", got, want)
	}
}

func TestParseSwarms(t *testing.T) {
	b := mustParse(t, turnFiles())
	want := map[string]*Swarm{
		"support": {Name: "support", File: "turn.yaml", Line: 67,
			Agents: []string{"assistant", "helper"}, Entrypoint: "assistant", MaxStepsPerTurn: 50,
			Ingress: []IngressRule{
				{Event: "user.input", Properties: map[string]string{"channel": "help"}, Agent: "helper"},
				{Properties: map[string]string{"channel": "help", "priority": "high"}},
				{Event: "system.wakeup", Agent: "helper"},
				{},
			},
			Changesets: SwarmChangesets{EmitRevisionChanged: true}},
		"solo": {Name: "solo", File: "turn.yaml", Line: 83,
			Agents: []string{"helper"}, Entrypoint: "helper", MaxStepsPerTurn: DefaultMaxStepsPerTurn,
			Changesets: SwarmChangesets{EmitRevisionChanged: true}},
	}
	if !reflect.DeepEqual(b.Swarms, want) {
		for name, s := range b.Swarms {
			t.Errorf("%s = %+v", name, *s)
		}
	}
	if got := b.Swarms["solo"].Ref(); got != (domain.ObjectRef{Kind: "Swarm", Name: "solo"}) {
		t.Errorf("Ref() = %v", got)
	}
	if w := warningsAbout(b, "Swarm"); w != nil {
		t.Errorf("unexpected warnings: %q", w)
	}

	support := b.Swarms["support"]
	for _, tt := range []struct {
		agent *Agent
		want  int
	}{
		{b.Agents["assistant"], 8}, // the agent's limit wins
		{b.Agents["helper"], 50},   // none: the swarm's
		{nil, 50},
	} {
		if got := support.StepLimit(tt.agent); got != tt.want {
			t.Errorf("StepLimit(%v) = %d, want %d", tt.agent, got, tt.want)
		}
	}
	if got := b.Swarms["solo"].StepLimit(b.Agents["helper"]); got != DefaultMaxStepsPerTurn {
		t.Errorf("solo StepLimit = %d, want the default %d", got, DefaultMaxStepsPerTurn)
	}
}

func TestSwarmRoute(t *testing.T) {
	support := mustParse(t, turnFiles()).Swarms["support"]
	bare := &Swarm{Agents: []string{"a", "b"}, Entrypoint: "a"}
	emptyValue := &Swarm{Agents: []string{"a", "b"}, Entrypoint: "a", Ingress: []IngressRule{
		{Properties: map[string]string{"thread": ""}, Agent: "b"},
	}}
	noCatchAll := &Swarm{Agents: []string{"a", "b"}, Entrypoint: "a", Ingress: []IngressRule{
		{Event: "agent.delegate", Agent: "b"},
	}}
	tests := []struct {
		name  string
		swarm *Swarm
		event string
		props map[string]string
		want  string
	}{
		{"event and property match", support, "user.input", map[string]string{"channel": "help"}, "helper"},
		{"first match wins over a later, narrower rule", support, "user.input", map[string]string{"channel": "help", "priority": "high"}, "helper"},
		{"properties alone; a rule without route goes to the entrypoint", support, "auth.granted", map[string]string{"channel": "help", "priority": "high"}, "assistant"},
		{"one property of two does not match", support, "auth.granted", map[string]string{"channel": "help"}, "assistant"},
		{"event alone", support, "system.wakeup", nil, "helper"},
		{"event alone, extra properties", support, "system.wakeup", map[string]string{"channel": "help"}, "helper"},
		{"property value differs", support, "user.input", map[string]string{"channel": "sales"}, "assistant"},
		{"no properties", support, "user.input", nil, "assistant"},
		{"event type is exact", support, "User.Input", map[string]string{"channel": "help"}, "assistant"},
		{"property value is exact", support, "user.input", map[string]string{"channel": "Help"}, "assistant"},
		{"no rules: the entrypoint", bare, "user.input", map[string]string{"channel": "help"}, "a"},
		{"no rule matches: the entrypoint", noCatchAll, "user.input", nil, "a"},
		{"a rule matches", noCatchAll, "agent.delegate", nil, "b"},
		{"an empty value needs the key", emptyValue, "user.input", map[string]string{"thread": ""}, "b"},
		{"a missing key is not an empty value", emptyValue, "user.input", nil, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.swarm.Route(tt.event, tt.props); got != tt.want {
				t.Errorf("Route(%q, %v) = %q, want %q", tt.event, tt.props, got, tt.want)
			}
		})
	}
}

// A broken agents list is reported once: the entrypoint and routes that
// name an agent left out of it are not reported again.
func TestSwarmBrokenAgentsReportedOnce(t *testing.T) {
	files := turnFiles()
	mutate(t, files, "turn.yaml", "agents: [Agent/assistant, helper]", "agents: [Agent/assistant, Model/helper]")
	_, err := Parse(toFiles(files), validOptions())
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	want := []string{`turn.yaml:71: Swarm/support: spec.agents[1]: "Model/helper": must name an Agent, not a Model`}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseConnectors(t *testing.T) {
	b := mustParse(t, turnFiles())
	want := map[string]*Connector{
		"chat-ui": {Name: "chat-ui", File: "turn.yaml", Line: 90, Type: ConnectorTypeWebhook,
			URL: "https://chat.example.com/hooks/agentauth?tenant=acme", Secret: domain.NewSecret(chatHMACKey),
			Events: []string{"turn.completed", "turn.parked", "turn.failed"}},
		"local-hook": {Name: "local-hook", File: "turn.yaml", Line: 100, Type: ConnectorTypeWebhook,
			URL: "http://127.0.0.1:7000/hook", Secret: domain.NewSecret(hookKey),
			Events: []string{"turn.completed", "turn.parked"}},
	}
	if !reflect.DeepEqual(b.Connectors, want) {
		for name, c := range b.Connectors {
			t.Errorf("%s = %+v", name, *c)
		}
	}
	if b.Connectors["chat-ui"].Secret.Reveal() != chatHMACKey || b.Connectors["local-hook"].Secret.Reveal() != hookKey {
		t.Error("connector secrets not resolved")
	}
	if got := b.Connectors["chat-ui"].Ref(); got != (domain.ObjectRef{Kind: "Connector", Name: "chat-ui"}) {
		t.Errorf("Ref() = %v", got)
	}
	// The default is a fresh slice each time: a caller cannot change it.
	d := DefaultConnectorEvents()
	d[0] = "changed"
	if DefaultConnectorEvents()[0] != ConnectorEventTurnCompleted {
		t.Error("DefaultConnectorEvents shares its slice")
	}
}

// Each warning of the turn kinds, from a valid bundle changed as the case
// says.
func TestTurnWarnings(t *testing.T) {
	tests := []struct {
		name     string
		old, new []string // each old replaced by its new, in order
		kind     string
		want     []string
	}{
		{name: "an id both explicit and excluded",
			old:  []string{"excludedToolIds: [slack:legacy_post]"},
			new:  []string{"excludedToolIds: [slack:legacy_post, native:now]"},
			kind: "Agent",
			want: []string{
				`turn.yaml:54: Agent/assistant: spec.tools.explicitToolIds[1]: no Tool with id "tenant:later" in the bundle; kept, since tenants may upload it at run time`,
				`turn.yaml:55: Agent/assistant: spec.tools.excludedToolIds[1]: "native:now" is also in explicitToolIds: exclusion wins, the agent does not hold it`,
			}},
		{name: "a rule after a catch-all",
			old:  []string{"    - route: {}\n", "  entrypoint: helper\n"},
			new:  []string{"    - route: {}\n    - match: {event: user.input}\n", "  entrypoint: helper\n  ingress:\n    - match: {}\n      route: {agentRef: helper}\n    - {}\n"},
			kind: "Swarm",
			want: []string{
				"turn.yaml:82: Swarm/support: spec.ingress[4]: unreachable: spec.ingress[3] before it matches every event",
				"turn.yaml:93: Swarm/solo: spec.ingress[1]: unreachable: spec.ingress[0] before it matches every event",
			}},
		{name: "a short literal webhook key",
			old:  []string{"secret: {valueFrom: {env: HOOK_KEY}}"},
			new:  []string{"secret: {value: tiny-key-VALUE}"},
			kind: "Connector",
			want: []string{
				"turn.yaml:106: Connector/local-hook: spec.secret.value: a literal secret in the bundle is for tests and demos; use valueFrom (env or secretRef) (spec 2.4 rule 4)",
				"turn.yaml:106: Connector/local-hook: spec.secret: shorter than 32 bytes: use a random HMAC-SHA256 key of at least 32 bytes",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := turnFiles()
			for i := range tt.old {
				mutate(t, files, "turn.yaml", tt.old[i], tt.new[i])
			}
			b := mustParse(t, files)
			if got := warningsAbout(b, tt.kind); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if s := strings.Join(b.Warnings, "\n"); strings.Contains(s, "tiny-key-VALUE") {
				t.Errorf("a warning shows a key: %s", s)
			}
		})
	}
}

// Each form a Model may take, alone in a file, and what it decodes to.
func TestModelForms(t *testing.T) {
	tests := []struct {
		name, spec string
		want       Model
		warning    string
	}{
		{"openai defaults", "provider: openai\n  model: m\n  credentials: {apiKey: {valueFrom: {env: OPENAI_API_KEY}}}",
			Model{Provider: "openai", ModelID: "m", Endpoint: "https://api.openai.com/v1", APIKey: domain.NewSecret(openAIKey), RequestTimeout: 120 * time.Second, MaxRetries: 3}, ""},
		{"openai other https endpoint", "provider: openai\n  model: m\n  endpoint: https://litellm.example.com/v1\n  credentials: {apiKey: {valueFrom: {env: OPENAI_API_KEY}}}",
			Model{Provider: "openai", ModelID: "m", Endpoint: "https://litellm.example.com/v1", APIKey: domain.NewSecret(openAIKey), RequestTimeout: 120 * time.Second, MaxRetries: 3}, ""},
		{"openai loopback IPv6 without a key", "provider: openai\n  model: m\n  endpoint: http://[::1]:8000/v1",
			Model{Provider: "openai", ModelID: "m", Endpoint: "http://[::1]:8000/v1", RequestTimeout: 120 * time.Second, MaxRetries: 3}, ""},
		{"openai loopback with a key", "provider: openai\n  model: m\n  endpoint: http://127.0.0.1:9292/v1\n  credentials: {apiKey: {value: k}}",
			Model{Provider: "openai", ModelID: "m", Endpoint: "http://127.0.0.1:9292/v1", APIKey: domain.NewSecret("k"), RequestTimeout: 120 * time.Second, MaxRetries: 3},
			"x.yaml:8: Model/x: spec.credentials.apiKey.value: a literal secret in the bundle is for tests and demos; use valueFrom (env or secretRef) (spec 2.4 rule 4)"},
		{"bedrock defaults", "provider: bedrock\n  model: amazon.nova-lite-v1:0",
			Model{Provider: "bedrock", ModelID: "amazon.nova-lite-v1:0", RequestTimeout: 120 * time.Second, MaxRetries: 3}, ""},
		{"bedrock inference profile ARN and GovCloud region", "provider: bedrock\n  model: arn:aws:bedrock:us-gov-west-1:123456789012:inference-profile/us-gov.m\n  region: us-gov-west-1",
			Model{Provider: "bedrock", ModelID: "arn:aws:bedrock:us-gov-west-1:123456789012:inference-profile/us-gov.m", Region: "us-gov-west-1", RequestTimeout: 120 * time.Second, MaxRetries: 3}, ""},
		{"bounds low", "provider: bedrock\n  model: m\n  parameters: {maxTokens: 1, temperature: 0}\n  timeouts: {requestSeconds: 1}\n  retry: {maxRetries: 0}",
			Model{Provider: "bedrock", ModelID: "m", MaxTokens: 1, Temperature: ptr(0.0), RequestTimeout: time.Second}, ""},
		{"bounds high", "provider: bedrock\n  model: m\n  parameters: {maxTokens: 200000, temperature: 2.0}\n  timeouts: {requestSeconds: 900}\n  retry: {maxRetries: 10}",
			Model{Provider: "bedrock", ModelID: "m", MaxTokens: 200000, Temperature: ptr(2.0), RequestTimeout: 900 * time.Second, MaxRetries: 10}, ""},
		{"empty blocks take the defaults", "provider: bedrock\n  model: m\n  parameters: {}\n  timeouts:\n  retry: {}\n  credentials: {}",
			Model{Provider: "bedrock", ModelID: "m", RequestTimeout: 120 * time.Second, MaxRetries: 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: agents.example.io/v1alpha1\nkind: Model\nmetadata: {name: x}\nspec:\n  " + tt.spec + "\n"
			b, err := Parse([]File{{Name: "x.yaml", Data: []byte(doc)}}, validOptions())
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Name, want.File, want.Line = "x", "x.yaml", 1
			if got := b.Models["x"]; !reflect.DeepEqual(got, &want) {
				t.Errorf("got  %+v\nwant %+v", *got, want)
			}
			var wantWarnings []string
			if tt.warning != "" {
				wantWarnings = []string{tt.warning}
			}
			if !reflect.DeepEqual(b.Warnings, wantWarnings) {
				t.Errorf("warnings = %q, want %q", b.Warnings, wantWarnings)
			}
		})
	}
}

func TestTurnRules(t *testing.T) {
	runRuleCases(t, turnFiles, "turn.yaml", []ruleCase{
		// Model.
		{name: "model spec missing", old: "metadata: {name: local}\nspec:\n  provider: openai\n  model: \"llama3.1:8b\"\n  endpoint: http://localhost:11434/v1\n", new: "metadata: {name: local}\n",
			at: "apiVersion: agents.example.io/v1alpha1\nkind: Model\nmetadata: {name: local}", want: "Model/local: spec: required"},
		{name: "model unknown field", old: "  retry: {maxRetries: 5}", new: "  retries: {maxRetries: 5}",
			at: "retries:", want: "Model/gpt: spec.retries: unknown field; known fields: provider, model, endpoint, region, credentials, parameters, timeouts, retry"},
		{name: "provider missing", old: "  provider: openai\n  model: gpt-4o-mini\n", new: "  model: gpt-4o-mini\n",
			at: "spec:\n  model: gpt", want: "Model/gpt: spec.provider: required"},
		{name: "provider unknown", old: "provider: bedrock\n  model: anthropic", new: "provider: anthropic\n  model: anthropic",
			at: "provider: anthropic", want: `Model/claude: spec.provider: "anthropic" is not allowed; allowed values: bedrock, openai`},
		{name: "model id missing", old: "  model: scripted\n", new: "",
			at: "spec:\n  provider: bedrock\n  endpoint", want: "Model/emulated: spec.model: required"},
		{name: "model id with a space", old: "model: gpt-4o-mini", new: "model: gpt 4o",
			at: "model: gpt 4o", want: `Model/gpt: spec.model: "gpt 4o" must not contain spaces or control characters`},
		{name: "model id a number", old: "model: scripted", new: "model: 4",
			at: "model: 4", want: "Model/emulated: spec.model: must be a string, got a number (quote it)"},
		{name: "endpoint plain http off loopback", old: "endpoint: http://localhost:11434/v1", new: "endpoint: http://ollama.lan:11434/v1",
			at: "endpoint:", want: "Model/local: spec.endpoint: https is required (plain http only for loopback hosts: localhost, 127.0.0.1, ::1)"},
		{name: "endpoint with credentials", old: "endpoint: http://localhost:11434/v1", new: "endpoint: https://u:hunter2@llm.example.com/v1",
			at: "endpoint:", want: "Model/local: spec.endpoint: must not contain credentials"},
		{name: "endpoint with a query", old: "endpoint: http://localhost:11434/v1", new: "endpoint: https://llm.example.com/v1?key=x",
			at: "endpoint:", want: "Model/local: spec.endpoint: must not contain a query"},
		{name: "endpoint not a URL", old: "endpoint: http://127.0.0.1:4566", new: "endpoint: bedrock.local",
			at: "endpoint: bedrock.local", want: "Model/emulated: spec.endpoint: must be an absolute http or https URL"},
		{name: "openai without a key", old: "  credentials:\n    apiKey:\n      valueFrom: {env: OPENAI_API_KEY}\n", new: "",
			at: "spec:\n  provider: openai\n  model: gpt", want: "Model/gpt: spec.credentials.apiKey: required for provider openai unless the endpoint is on a loopback host (a local server, or the scripted model)"},
		{name: "openai https endpoint without a key", old: "endpoint: http://localhost:11434/v1", new: "endpoint: https://vllm.example.com/v1",
			at: "spec:\n  provider: openai\n  model: \"llama", want: "Model/local: spec.credentials.apiKey: required for provider openai unless the endpoint is on a loopback host"},
		{name: "openai empty credentials", old: "endpoint: http://localhost:11434/v1", new: "endpoint: https://vllm.example.com/v1\n  credentials: {}",
			at: "credentials: {}", want: "Model/local: spec.credentials.apiKey: required for provider openai"},
		{name: "openai key from an unset variable", old: "env: OPENAI_API_KEY", new: "env: NOPE_KEY",
			at: "env: NOPE_KEY", want: `Model/gpt: spec.credentials.apiKey.valueFrom.env: environment variable "NOPE_KEY" is not set`},
		{name: "openai key not a ValueSource", old: "    apiKey:\n      valueFrom: {env: OPENAI_API_KEY}", new: "    apiKey: sk-123",
			at: "apiKey: sk-123", want: "Model/gpt: spec.credentials.apiKey: must be a mapping, got a !!str value"},
		{name: "openai with a region", old: "  endpoint: http://localhost:11434/v1\n", new: "  endpoint: http://localhost:11434/v1\n  region: us-east-1\n",
			at: "region: us-east-1", want: "Model/local: spec.region: only for provider bedrock: an openai endpoint is named by its URL"},
		{name: "credentials unknown field", old: "    apiKey:\n      valueFrom", new: "    apikey:\n      valueFrom",
			at: "apikey:", want: "Model/gpt: spec.credentials.apikey: unknown field; did you mean apiKey?"},
		{name: "bedrock with a key", old: "  region: eu-central-1\n", new: "  region: eu-central-1\n  credentials: {apiKey: {valueFrom: {env: NOT_READ}}}\n",
			at: "credentials: {apiKey", want: "Model/claude: spec.credentials.apiKey: not for provider bedrock: it signs its calls with the AWS credentials of the process (the function's role; locally the SDK's default chain); apiKey is for provider openai"},
		{name: "bedrock region malformed", old: "region: eu-central-1", new: "region: Frankfurt",
			at: "region: Frankfurt", want: `Model/claude: spec.region: "Frankfurt" is not an AWS region name (like us-east-1)`},
		{name: "maxTokens zero", old: "maxTokens: 4096", new: "maxTokens: 0",
			at: "maxTokens: 0", want: "Model/gpt: spec.parameters.maxTokens: must be between 1 and 200000"},
		{name: "maxTokens too many", old: "maxTokens: 4096", new: "maxTokens: 200001",
			at: "maxTokens: 2", want: "Model/gpt: spec.parameters.maxTokens: must be between 1 and 200000"},
		{name: "maxTokens decimal", old: "maxTokens: 4096", new: "maxTokens: 4096.5",
			at: "maxTokens: 4", want: "Model/gpt: spec.parameters.maxTokens: must be an integer, got a number"},
		{name: "temperature above 2", old: "temperature: 0.2", new: "temperature: 2.01",
			at: "temperature: 2", want: "Model/gpt: spec.parameters.temperature: must be a number between 0 and 2"},
		{name: "temperature negative", old: "temperature: 1}", new: "temperature: -0.5}",
			at: "temperature: -", want: "Model/claude: spec.parameters.temperature: must be a number between 0 and 2"},
		{name: "temperature NaN", old: "temperature: 0.2", new: "temperature: .nan",
			at: "temperature: .nan", want: "Model/gpt: spec.parameters.temperature: must be a number between 0 and 2"},
		{name: "temperature quoted", old: "temperature: 0.2", new: `temperature: "0.2"`,
			at: "temperature:", want: "Model/gpt: spec.parameters.temperature: must be a number, got a string (write the number without quotes)"},
		{name: "parameters unknown field", old: "maxTokens: 4096", new: "maxtokens: 4096",
			at: "maxtokens:", want: "Model/gpt: spec.parameters.maxtokens: unknown field; did you mean maxTokens?"},
		{name: "requestSeconds zero", old: "requestSeconds: 60", new: "requestSeconds: 0",
			at: "requestSeconds: 0", want: "Model/gpt: spec.timeouts.requestSeconds: must be between 1 and 900"},
		{name: "requestSeconds too long", old: "requestSeconds: 60", new: "requestSeconds: 901",
			at: "requestSeconds: 901", want: "Model/gpt: spec.timeouts.requestSeconds: must be between 1 and 900"},
		{name: "maxRetries negative", old: "maxRetries: 5", new: "maxRetries: -1",
			at: "maxRetries: -1", want: "Model/gpt: spec.retry.maxRetries: must be between 0 and 10"},
		{name: "maxRetries too many", old: "maxRetries: 5", new: "maxRetries: 11",
			at: "maxRetries: 11", want: "Model/gpt: spec.retry.maxRetries: must be between 0 and 10"},
		{name: "retry not a mapping", old: "retry: {maxRetries: 5}", new: "retry: 5",
			at: "retry: 5", want: "Model/gpt: spec.retry: must be a mapping, got a number"},
		// Agent.
		{name: "agent spec missing", old: "metadata: {name: helper}\nspec:\n  modelRef: local\n", new: "metadata: {name: helper}\n",
			at: "apiVersion: agents.example.io/v1alpha1\nkind: Agent\nmetadata: {name: helper}", want: "Agent/helper: spec: required"},
		{name: "agent unknown field", old: "  modelRef: local\n", new: "  modelRef: local\n  model: local\n",
			at: "  model: local", want: "Agent/helper: spec.model: unknown field; did you mean modelRef?"},
		{name: "modelRef missing", old: "  modelRef: local\n", new: "  systemPrompt: hi\n",
			at: "spec:\n  systemPrompt: hi", want: "Agent/helper: spec.modelRef: required"},
		{name: "modelRef names no model", old: "modelRef: local", new: "modelRef: Model/nope",
			at: "modelRef: Model/nope", want: "Agent/helper: spec.modelRef: Model/nope is not in the bundle; Models: claude, emulated, gpt, local"},
		{name: "modelRef of another kind", old: "modelRef: local", new: "modelRef: Tool/clock",
			at: "modelRef: Tool", want: `Agent/helper: spec.modelRef: "Tool/clock": must name a Model, not a Tool`},
		{name: "modelRef malformed", old: "modelRef: local", new: "modelRef: Model/",
			at: "modelRef: Model/\n", want: `Agent/helper: spec.modelRef: "Model/": want a Model name or Model/<name>`},
		{name: "modelRef from another file names no model", file: "a-first.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Agent\nmetadata: {name: early}\nspec:\n  modelRef: Model/gtp\n",
			at: "modelRef:", want: "Agent/early: spec.modelRef: Model/gtp is not in the bundle; Models: claude, emulated, gpt, local"},
		{name: "systemPrompt not a string", old: "  modelRef: local\n", new: "  modelRef: local\n  systemPrompt: [a]\n",
			at: "systemPrompt: [a]", want: "Agent/helper: spec.systemPrompt: must be a string, got a list"},
		{name: "systemPrompt too long", old: "  modelRef: local\n", new: "  modelRef: local\n  systemPrompt: " + strings.Repeat("x", 256<<10+1) + "\n",
			at: "systemPrompt: x", want: "Agent/helper: spec.systemPrompt: must be at most 262144 bytes"},
		{name: "tools not a mapping", old: "  modelRef: local\n", new: "  modelRef: local\n  tools: [native:now]\n",
			at: "tools: [", want: "Agent/helper: spec.tools: must be a mapping, got a list"},
		{name: "tools unknown field", old: "    explicitToolIds: [native:now, tenant:later]", new: "    explicitToolIds: [native:now, tenant:later]\n    active: true",
			at: "active: true", want: "Agent/assistant: spec.tools.active: unknown field; known fields: selectors, explicitToolIds, excludedToolIds"},
		{name: "tools selector pattern invalid", old: "      - source: slack\n", new: "      - source: \"regex:(\"\n",
			at: "source: \"regex", want: `Agent/assistant: spec.tools.selectors[0].source: pattern "regex:(": invalid regular expression`},
		{name: "tools explicit id shape", old: "explicitToolIds: [native:now, tenant:later]", new: "explicitToolIds: [native:now, now]",
			at: "explicitToolIds:", want: `Agent/assistant: spec.tools.explicitToolIds[1]: "now" is not a tool id: want <source>:<operation>`},
		{name: "tools excluded id duplicate", old: "excludedToolIds: [slack:legacy_post]", new: "excludedToolIds: [slack:legacy_post, slack:legacy_post]",
			at: "excludedToolIds:", want: `Agent/assistant: spec.tools.excludedToolIds[1]: duplicate "slack:legacy_post" (also spec.tools.excludedToolIds[0])`},
		{name: "maxStepsPerTurn zero", old: "maxStepsPerTurn: 8", new: "maxStepsPerTurn: 0",
			at: "maxStepsPerTurn: 0", want: "Agent/assistant: spec.limits.maxStepsPerTurn: must be between 1 and 1000"},
		{name: "maxStepsPerTurn too many", old: "maxStepsPerTurn: 8", new: "maxStepsPerTurn: 1001",
			at: "maxStepsPerTurn: 1001", want: "Agent/assistant: spec.limits.maxStepsPerTurn: must be between 1 and 1000"},
		{name: "maxToolCallsPerStep zero", old: "maxToolCallsPerStep: 4", new: "maxToolCallsPerStep: 0",
			at: "maxToolCallsPerStep: 0", want: "Agent/assistant: spec.limits.maxToolCallsPerStep: must be between 1 and 128"},
		{name: "maxToolCallsPerStep too many", old: "maxToolCallsPerStep: 4", new: "maxToolCallsPerStep: 129",
			at: "maxToolCallsPerStep: 129", want: "Agent/assistant: spec.limits.maxToolCallsPerStep: must be between 1 and 128"},
		{name: "toolTimeoutSeconds zero", old: "toolTimeoutSeconds: 30", new: "toolTimeoutSeconds: 0",
			at: "toolTimeoutSeconds: 0", want: "Agent/assistant: spec.limits.toolTimeoutSeconds: must be between 1 and 900"},
		{name: "toolTimeoutSeconds too long", old: "toolTimeoutSeconds: 30", new: "toolTimeoutSeconds: 901",
			at: "toolTimeoutSeconds: 901", want: "Agent/assistant: spec.limits.toolTimeoutSeconds: must be between 1 and 900"},
		{name: "limits unknown field", old: "maxToolCallsPerStep: 4", new: "maxToolCalls: 4",
			at: "maxToolCalls:", want: "Agent/assistant: spec.limits.maxToolCalls: unknown field; did you mean maxToolCallsPerStep?"},

		// Swarm.
		{name: "swarm spec missing", old: "metadata: {name: solo}\nspec:\n  agents: [helper]\n  entrypoint: helper\n", new: "metadata: {name: solo}\n",
			at: "apiVersion: agents.example.io/v1alpha1\nkind: Swarm\nmetadata: {name: solo}", want: "Swarm/solo: spec: required"},
		{name: "swarm unknown field", old: "  entrypoint: helper\n", new: "  entrypoint: helper\n  entryPoint: helper\n",
			at: "entryPoint", want: "Swarm/solo: spec.entryPoint: unknown field; did you mean entrypoint?"},
		{name: "agents missing", old: "  agents: [helper]\n", new: "",
			at: "spec:\n  entrypoint: helper", want: "Swarm/solo: spec.agents: required: at least one Agent"},
		{name: "agents empty", old: "agents: [helper]", new: "agents: []",
			at: "agents: []", want: "Swarm/solo: spec.agents: must name at least one Agent"},
		{name: "agents not a list", old: "agents: [helper]", new: "agents: helper",
			at: "agents: helper", want: "Swarm/solo: spec.agents: must be a list, got a !!str value"},
		{name: "agent not in the bundle", old: "agents: [Agent/assistant, helper]", new: "agents: [Agent/assistant, helpr]",
			at: "agents: [Agent/assistant, helpr]", want: "Swarm/support: spec.agents[1]: Agent/helpr is not in the bundle; Agents: assistant, helper"},
		{name: "agent named twice, spelt two ways", old: "agents: [Agent/assistant, helper]", new: "agents: [Agent/assistant, helper, assistant]",
			at: "agents: [", want: "Swarm/support: spec.agents[2]: duplicate Agent/assistant (also spec.agents[0])"},
		{name: "agent of another kind", old: "agents: [helper]", new: "agents: [Model/local]",
			at: "agents: [Model", want: `Swarm/solo: spec.agents[0]: "Model/local": must name an Agent, not a Model`},
		{name: "agent from another file not in the bundle", file: "a-first.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Swarm\nmetadata: {name: early}\nspec:\n  agents:\n    - helper\n    - Agent/later\n  entrypoint: helper\n",
			at: "- Agent/later", want: "Swarm/early: spec.agents[1]: Agent/later is not in the bundle; Agents: assistant, helper"},
		{name: "entrypoint missing", old: "  entrypoint: helper\n", new: "",
			at: "spec:\n  agents: [helper]", want: "Swarm/solo: spec.entrypoint: required"},
		{name: "entrypoint not one of the agents", old: "entrypoint: helper", new: "entrypoint: assistant",
			at: "entrypoint: assistant", want: "Swarm/solo: spec.entrypoint: Agent/assistant is not one of spec.agents (helper)"},
		{name: "entrypoint of another kind", old: "entrypoint: helper", new: "entrypoint: Model/local",
			at: "entrypoint: Model", want: `Swarm/solo: spec.entrypoint: "Model/local": must name an Agent, not a Model`},
		{name: "swarm maxStepsPerTurn zero", old: "policy: {maxStepsPerTurn: 50}", new: "policy: {maxStepsPerTurn: 0}",
			at: "policy:", want: "Swarm/support: spec.policy.maxStepsPerTurn: must be between 1 and 1000"},
		{name: "swarm maxStepsPerTurn too many", old: "policy: {maxStepsPerTurn: 50}", new: "policy: {maxStepsPerTurn: 1001}",
			at: "policy:", want: "Swarm/support: spec.policy.maxStepsPerTurn: must be between 1 and 1000"},
		{name: "policy unknown field", old: "policy: {maxStepsPerTurn: 50}", new: "policy: {maxSteps: 50}",
			at: "policy:", want: "Swarm/support: spec.policy.maxSteps: unknown field; did you mean maxStepsPerTurn?"},
		{name: "ingress not a list", old: "  entrypoint: helper\n", new: "  entrypoint: helper\n  ingress: {route: {}}\n",
			at: "ingress: {", want: "Swarm/solo: spec.ingress: must be a list, got a mapping"},
		{name: "ingress rule null", old: "    - route: {}\n", new: "    -\n",
			at: "    -\n", want: "Swarm/support: spec.ingress[3]: must be a mapping {match, route}; {} routes every event to the entrypoint"},
		{name: "ingress rule a string", old: "    - route: {}\n", new: "    - helper\n",
			at: "    - helper", want: "Swarm/support: spec.ingress[3]: must be a mapping, got a !!str value"},
		{name: "ingress rule unknown field", old: "    - route: {}\n", new: "    - to: helper\n",
			at: "    - to:", want: "Swarm/support: spec.ingress[3].to: unknown field; known fields: match, route"},
		{name: "match unknown field", old: "match: {event: system.wakeup}", new: "match: {type: system.wakeup}",
			at: "match: {type", want: "Swarm/support: spec.ingress[2].match.type: unknown field; known fields: event, properties"},
		{name: "match event empty", old: "match: {event: system.wakeup}", new: `match: {event: ""}`,
			at: `match: {event: ""}`, want: "Swarm/support: spec.ingress[2].match.event: must not be empty; leave it out to match every event type"},
		{name: "match event with a space", old: "match: {event: system.wakeup}", new: `match: {event: "system wakeup"}`,
			at: "match: {event: \"system", want: `Swarm/support: spec.ingress[2].match.event: "system wakeup" must not contain spaces or control characters`},
		{name: "match event a list", old: "match: {event: system.wakeup}", new: "match: {event: [a, b]}",
			at: "match: {event: [", want: "Swarm/support: spec.ingress[2].match.event: must be a string, got a list"},
		{name: "match property a number", old: "properties: {channel: help, priority: high}", new: "properties: {channel: help, priority: 1}",
			at: "properties: {channel: help, priority: 1}", want: "Swarm/support: spec.ingress[1].match.properties.priority: must be a string, got a number (quote it)"},
		{name: "match properties a list", old: "properties: {channel: help, priority: high}", new: "properties: [channel]",
			at: "properties: [channel]", want: "Swarm/support: spec.ingress[1].match.properties: must be a mapping of strings, got a list"},
		{name: "match property key empty", old: "properties: {channel: help, priority: high}", new: `properties: {"": help}`,
			at: `properties: {"": help}`, want: "Swarm/support: spec.ingress[1].match.properties: keys must not be empty"},
		{name: "route agent not one of the agents", old: "route: {agentRef: Agent/helper}", new: "route: {agentRef: Agent/other}",
			at: "route: {agentRef: Agent/other}", want: "Swarm/support: spec.ingress[0].route.agentRef: Agent/other is not one of spec.agents (assistant, helper)"},
		{name: "route agent of another kind", old: "route: {agentRef: Agent/helper}", new: "route: {agentRef: Model/gpt}",
			at: "route: {agentRef: Model/gpt}", want: `Swarm/support: spec.ingress[0].route.agentRef: "Model/gpt": must name an Agent, not a Model`},
		{name: "route unknown field", old: "    - route: {}\n", new: "    - route: {agent: helper}\n",
			at: "route: {agent:", want: "Swarm/support: spec.ingress[3].route.agent: unknown field; did you mean agentRef?"},
		{name: "duplicate swarm", file: "z.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Swarm\nmetadata: {name: solo}\nspec: {agents: [helper], entrypoint: helper}\n",
			at: "metadata:", want: "Swarm/solo: metadata.name: duplicate Swarm/solo: already defined at turn.yaml:83"},

		// Connector.
		{name: "connector spec missing", old: "metadata: {name: local-hook}\nspec:\n  type: webhook\n  url: http://127.0.0.1:7000/hook\n  secret: {valueFrom: {env: HOOK_KEY}}\n", new: "metadata: {name: local-hook}\n",
			at: "apiVersion: agents.example.io/v1alpha1\nkind: Connector\nmetadata: {name: local-hook}", want: "Connector/local-hook: spec: required"},
		{name: "connector unknown field", old: "  url: http://127.0.0.1:7000/hook\n", new: "  url: http://127.0.0.1:7000/hook\n  URL: x\n",
			at: "  URL: x", want: "Connector/local-hook: spec.URL: unknown field; did you mean url?"},
		{name: "connector type missing", old: "  type: webhook\n  url: http://127", new: "  url: http://127",
			at: "spec:\n  url: http://127", want: "Connector/local-hook: spec.type: required"},
		{name: "connector type unknown", old: "  type: webhook\n  url: http://127", new: "  type: slack\n  url: http://127",
			at: "type: slack", want: `Connector/local-hook: spec.type: "slack" is not allowed; allowed values: webhook`},
		{name: "connector url missing", old: "  url: http://127.0.0.1:7000/hook\n", new: "",
			at: "spec:\n  type: webhook\n  secret: {valueFrom: {env: HOOK", want: "Connector/local-hook: spec.url: required"},
		{name: "connector url plain http off loopback", old: "url: http://127.0.0.1:7000/hook", new: "url: http://hooks.example.com/x",
			at: "url: http://hooks", want: "Connector/local-hook: spec.url: https is required (plain http only for loopback hosts: localhost, 127.0.0.1, ::1)"},
		{name: "connector url with credentials", old: "url: http://127.0.0.1:7000/hook", new: "url: https://u:hunter2@hooks.example.com/x",
			at: "url: https://u:", want: "Connector/local-hook: spec.url: must not contain credentials"},
		{name: "connector url with a fragment", old: "url: http://127.0.0.1:7000/hook", new: "url: https://hooks.example.com/x#frag",
			at: "url: https://hooks", want: "Connector/local-hook: spec.url: must not contain a fragment"},
		{name: "connector secret missing", old: "  secret: {valueFrom: {env: HOOK_KEY}}\n", new: "",
			at: "spec:\n  type: webhook\n  url: http://127", want: "Connector/local-hook: spec.secret: required"},
		{name: "connector secret from an unset variable", old: "env: HOOK_KEY", new: "env: NO_HOOK_KEY",
			at: "env: NO_HOOK_KEY", want: `Connector/local-hook: spec.secret.valueFrom.env: environment variable "NO_HOOK_KEY" is not set`},
		{name: "connector secret from a missing secret", old: "ref: Secret/chat-ui, key: hmac", new: "ref: Secret/chat-ui, key: hmac2",
			at: "valueFrom: {secretRef: {ref: Secret/chat-ui", want: `Connector/chat-ui: spec.secret.valueFrom.secretRef: Secret/chat-ui key "hmac2": secret chat-ui key hmac2: not found`},
		{name: "connector events empty", old: "events: [turn.completed, turn.parked, turn.failed]", new: "events: []",
			at: "events: []", want: "Connector/chat-ui: spec.events: must not be empty; leave it out for the default (turn.completed, turn.parked)"},
		{name: "connector event unknown", old: "events: [turn.completed, turn.parked, turn.failed]", new: "events: [turn.completed, step.started]",
			at: "events: [", want: `Connector/chat-ui: spec.events[1]: "step.started" is not a turn event a connector delivers; known: turn.started, turn.parked, turn.completed, turn.failed`},
		{name: "connector event duplicate", old: "events: [turn.completed, turn.parked, turn.failed]", new: "events: [turn.parked, turn.parked]",
			at: "events: [", want: `Connector/chat-ui: spec.events[1]: duplicate "turn.parked" (also spec.events[0])`},
		{name: "connector events not a list", old: "events: [turn.completed, turn.parked, turn.failed]", new: "events: turn.completed",
			at: "events: turn", want: "Connector/chat-ui: spec.events: must be a list, got a !!str value"},
		{name: "duplicate connector", file: "z.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Connector\nmetadata: {name: chat-ui}\nspec: {type: webhook, url: https://x.example.com, secret: {valueFrom: {env: HOOK_KEY}}}\n",
			at: "metadata:", want: "Connector/chat-ui: metadata.name: duplicate Connector/chat-ui: already defined at turn.yaml:90"},

		{name: "duplicate model", file: "z.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: Model\nmetadata: {name: gpt}\nspec: {provider: bedrock, model: m}\n",
			at: "metadata:", want: "Model/gpt: metadata.name: duplicate Model/gpt: already defined at turn.yaml:1"},
	})
}

// A resolved apiKey or webhook key never shows in a problem or a warning,
// also when the resource around it is broken.
func TestTurnSecretsNeverInMessages(t *testing.T) {
	files := turnFiles()
	mutate(t, files, "turn.yaml", "maxTokens: 4096", "maxTokens: -1")
	mutate(t, files, "turn.yaml", "model: gpt-4o-mini", "model: gpt 4o")
	mutate(t, files, "turn.yaml", "    apiKey:\n", "    apiKey:\n      value: "+openAIKey+"\n")
	mutate(t, files, "turn.yaml", "url: http://127.0.0.1:7000/hook", "url: http://hooks.example.com/x")
	mutate(t, files, "turn.yaml", "events: [turn.completed, turn.parked, turn.failed]", "events: [turn.completed, turn.parked, turn.failed, x]")
	_, err := Parse(toFiles(files), validOptions())
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) < 3 {
		t.Fatalf("err = %v, want several problems", err)
	}
	texts := []string{err.Error(), fmt.Sprintf("%+v", ve)}
	for _, w := range ve.Warnings {
		texts = append(texts, w.String())
	}
	for _, s := range texts {
		for _, secret := range []string{openAIKey, hookKey, chatHMACKey} {
			if strings.Contains(s, secret) {
				t.Errorf("message shows a secret:\n%s", s)
			}
		}
	}
}
