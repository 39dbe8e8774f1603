package bundle

import (
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// Providers of Model.spec.provider.
const (
	// ModelProviderBedrock is Amazon Bedrock's Converse API, signed with
	// the AWS credentials of the process.
	ModelProviderBedrock = "bedrock"
	// ModelProviderOpenAI is any OpenAI-compatible chat-completions
	// endpoint: OpenAI, vLLM, Ollama, LiteLLM, the scripted model server.
	ModelProviderOpenAI = "openai"
)

// Defaults of a Model's spec.
const (
	DefaultOpenAIEndpoint      = "https://api.openai.com/v1"
	DefaultModelRequestTimeout = 120 * time.Second
	DefaultModelMaxRetries     = 3
)

// Model is a validated Model resource: a language model the turn engine
// calls. Its spec fields:
//
//	field                     type                          rule
//	provider                  bedrock|openai, required      openai: any OpenAI-compatible chat-completions endpoint
//	model                     string, required              the provider's model id; no spaces
//	endpoint                  URL                           openai: the base URL (default https://api.openai.com/v1);
//	                                                        bedrock: an endpoint override (default: the SDK's); https, or
//	                                                        http to a loopback host; no credentials, query or fragment
//	region                    string                        bedrock only: the AWS region (default: the SDK's)
//	credentials.apiKey        ValueSource                   openai only: required unless the endpoint is a loopback host;
//	                                                        bedrock signs with the process's AWS credentials and refuses it
//	parameters.maxTokens      integer 1..200000             the answer's cap (default: the provider's)
//	parameters.temperature    number 0..2                   (default: the provider's)
//	timeouts.requestSeconds   integer 1..900, default 120   one model request, retries not counted
//	retry.maxRetries          integer 0..10, default 3      retries of a 429, 5xx or throttled call (never another 4xx)
type Model struct {
	Name   string // metadata.name
	Labels map[string]string
	File   string
	Line   int

	Provider string // ModelProviderBedrock | ModelProviderOpenAI
	ModelID  string // spec.model
	// Endpoint is the openai base URL (DefaultOpenAIEndpoint when the
	// bundle sets none), or bedrock's override ("" for the SDK's).
	Endpoint string
	Region   string // bedrock; "" for the SDK's
	// APIKey is the resolved credentials.apiKey of an openai model; zero
	// for bedrock and for a loopback endpoint without one.
	APIKey domain.Secret

	MaxTokens      int      // parameters.maxTokens; 0: the provider's default
	Temperature    *float64 // parameters.temperature; nil: the provider's default
	RequestTimeout time.Duration
	MaxRetries     int
}

// Ref is the model's object reference.
func (m *Model) Ref() domain.ObjectRef { return domain.ObjectRef{Kind: "Model", Name: m.Name} }

// Defaults of an Agent's spec.limits.
const (
	DefaultMaxToolCallsPerStep = 16
	DefaultToolTimeout         = 60 * time.Second
)

// Agent is a validated Agent resource: a model, its instructions and the
// tools its steps may offer. Its spec fields:
//
//	field                         type                          rule
//	modelRef                      Model/<name>, required        a Model of the bundle
//	systemPrompt                  string                        may be empty or absent; at most 256 KiB
//	tools                         ToolSelection                 the step's tools (step.tools): selectors, explicitToolIds,
//	                                                            excludedToolIds, as a ToolGroup's; absent: no tools. A step's
//	                                                            catalog is this ∩ what the turn's principal may see
//	limits.maxStepsPerTurn        integer 1..1000               overrides the Swarm's policy.maxStepsPerTurn
//	limits.maxToolCallsPerStep    integer 1..128, default 16    the most tool calls one step makes
//	limits.toolTimeoutSeconds     integer 1..900, default 60    one tool call
//	changesets.enabled            boolean, default true         false: the agent may not change the bundle even when its
//	                                                            Swarm's policy.changesets allows it
//	changesets.allowed.files      [glob]                        the files it may change, within its Swarm's list; absent or
//	                                                            empty: every file (see Swarm.ChangesetPolicy)
type Agent struct {
	Name   string // metadata.name
	Labels map[string]string
	File   string
	Line   int

	ModelRef     domain.ObjectRef // Kind Model, of a Model in the bundle: Bundle.Models[ModelRef.Name]
	SystemPrompt string
	Tools        ToolSelection

	MaxStepsPerTurn     int // limits.maxStepsPerTurn; 0: the Swarm's (see Swarm.StepLimit)
	MaxToolCallsPerStep int
	ToolTimeout         time.Duration

	Changesets AgentChangesets
}

// AgentChangesets is an Agent's changesets: whether it takes part when its
// Swarm enables changesets, and which files it may change. Ask
// Swarm.ChangesetPolicy, which combines it with the Swarm's.
type AgentChangesets struct {
	Enabled      bool     // changesets.enabled; true when the bundle sets none
	AllowedFiles []string // changesets.allowed.files, distinct globs; nil: every file
}

// Ref is the agent's object reference.
func (a *Agent) Ref() domain.ObjectRef { return domain.ObjectRef{Kind: "Agent", Name: a.Name} }

// DefaultMaxStepsPerTurn is a Swarm's policy.maxStepsPerTurn when the
// bundle sets none (the runtime model's default).
const DefaultMaxStepsPerTurn = 32

// Swarm is a validated Swarm resource: the agents that serve one kind of
// conversation, and which of them an incoming event goes to. Its spec
// fields:
//
//	field                                       type                           rule
//	agents                                      [Agent/<name>], required       Agents of the bundle, at least one, each once
//	entrypoint                                  Agent/<name>, required         one of agents
//	policy.maxStepsPerTurn                      integer 1..1000, default 32    a turn ends after this many steps (an Agent's limit
//	                                                                           overrides it)
//	policy.changesets.enabled                   boolean, default false         whether the swarm's agents may change the bundle
//	policy.changesets.allowed.files             [glob]                         the files they may change; absent or empty: every file
//	policy.changesets.emitRevisionChangedEvent  boolean, default true          whether a committed changeset emits a revision-changed event
//	ingress                                     [rule]                         routes events to agents; first match wins
//
// and an ingress rule's:
//
//	match.event               string                         the event type, exactly; omitted: any
//	match.properties          {string: string}               each must equal the event's property; omitted: any
//	route.agentRef            Agent/<name>                   one of agents; omitted: the entrypoint
//
// A glob of allowed.files (the Swarm's and an Agent's) matches the whole
// slash-separated path relative to the bundle root: * and ? within one
// segment, ** across segments, {a,b} and [a-z] as in doublestar; names
// starting with "." match like any other. It must be relative, without
// backslashes, . or .. segments, or empty segments.
//
// event and properties AND; a rule without match (or with an empty one)
// matches every event, so any rule after it is unreachable (a warning).
type Swarm struct {
	Name   string // metadata.name
	Labels map[string]string
	File   string
	Line   int

	Agents          []string // names of Agents in the bundle, in spec order
	Entrypoint      string   // one of Agents
	MaxStepsPerTurn int      // policy.maxStepsPerTurn
	Ingress         []IngressRule
	Changesets      SwarmChangesets // policy.changesets
}

// SwarmChangesets is a Swarm's policy.changesets: whether its agents may
// change the bundle, and which files. Ask Swarm.ChangesetPolicy, which
// combines it with an Agent's.
type SwarmChangesets struct {
	Enabled             bool     // enabled; false when the bundle sets none
	AllowedFiles        []string // allowed.files, distinct globs; nil: every file
	EmitRevisionChanged bool     // emitRevisionChangedEvent; true when the bundle sets none
}

// IngressRule is one rule of a Swarm's ingress.
type IngressRule struct {
	Event      string            // match.event; "" matches every type
	Properties map[string]string // match.properties; nil matches every event
	Agent      string            // route.agentRef's name, one of the Swarm's agents; "" for the entrypoint
}

// Ref is the swarm's object reference.
func (s *Swarm) Ref() domain.ObjectRef { return domain.ObjectRef{Kind: "Swarm", Name: s.Name} }

// Matches reports whether an event of type eventType with properties
// matches the rule: the same type (when the rule names one) and every
// property the rule names, with the same value.
func (r IngressRule) Matches(eventType string, properties map[string]string) bool {
	if r.Event != "" && r.Event != eventType {
		return false
	}
	for k, want := range r.Properties {
		if got, ok := properties[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// CatchAll reports whether the rule matches every event.
func (r IngressRule) CatchAll() bool { return r.Event == "" && len(r.Properties) == 0 }

// Route is the agent an event goes to: the agent of the first ingress rule
// that matches it (the entrypoint when that rule names none), else the
// entrypoint.
func (s *Swarm) Route(eventType string, properties map[string]string) (agent string) {
	for _, r := range s.Ingress {
		if r.Matches(eventType, properties) {
			if r.Agent != "" {
				return r.Agent
			}
			break
		}
	}
	return s.Entrypoint
}

// StepLimit is how many steps a turn of agent a may run in the swarm: the
// agent's limits.maxStepsPerTurn when set, else the swarm's policy.
func (s *Swarm) StepLimit(a *Agent) int {
	if a != nil && a.MaxStepsPerTurn > 0 {
		return a.MaxStepsPerTurn
	}
	return s.MaxStepsPerTurn
}

// ConnectorTypeWebhook is the one Connector type: an HTTPS POST signed
// with HMAC-SHA256.
const ConnectorTypeWebhook = "webhook"

// Turn events a Connector delivers.
const (
	ConnectorEventTurnStarted   = "turn.started"
	ConnectorEventTurnParked    = "turn.parked"
	ConnectorEventTurnCompleted = "turn.completed"
	ConnectorEventTurnFailed    = "turn.failed"
)

// DefaultConnectorEvents are the events a Connector delivers when its
// spec names none: the final answer and the consent link of a parked turn.
func DefaultConnectorEvents() []string {
	return []string{ConnectorEventTurnCompleted, ConnectorEventTurnParked}
}

// Connector is a validated Connector resource: where a turn's outcome is
// delivered (agentauth's outbound delivery to the origin). Its spec
// fields:
//
//	field    type                   rule
//	type     webhook, required
//	url      URL, required          https, or http to a loopback host; no credentials or fragment
//	secret   ValueSource, required  the HMAC-SHA256 key the deliveries are signed with (a warning under 32 bytes)
//	events   [string]               which turn events to deliver: turn.started, turn.parked, turn.completed,
//	                                turn.failed; default [turn.completed, turn.parked]
type Connector struct {
	Name   string // metadata.name
	Labels map[string]string
	File   string
	Line   int

	Type   string // ConnectorTypeWebhook
	URL    string
	Secret domain.Secret // the resolved HMAC key
	Events []string      // distinct; DefaultConnectorEvents when the spec names none
}

// Ref is the connector's object reference.
func (c *Connector) Ref() domain.ObjectRef { return domain.ObjectRef{Kind: "Connector", Name: c.Name} }
