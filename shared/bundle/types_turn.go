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
}

// Ref is the agent's object reference.
func (a *Agent) Ref() domain.ObjectRef { return domain.ObjectRef{Kind: "Agent", Name: a.Name} }
