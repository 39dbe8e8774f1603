// Package stack defines the agentauth CloudFormation stack: the record
// table, the customer-managed KMS key that seals secrets, the FIFO event
// queue with its dead-letter queue, the session-keys secret, the gettoken
// and callback Lambda functions, the optional tools function, the
// optional turn function (the queue's consumer) with its bucket for large
// turn items, the HTTP API in front of them and the function URLs that
// stream.
//
// The stack never builds Go code: it packages prebuilt function directories
// (bootstrap plus the configuration bundle) as assets, so a synth needs only
// those files and Node.js for jsii. It must never import the agentauth
// module, which keeps the Lambda build free of CDK.
package stack

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// SweepMinutes is how often the session sweep runs.
const SweepMinutes = 5

// Environment variables the stack sets on every function. The function side
// (shared/edge/lambdaentry and the AWS adapters) reads the same names.
const (
	EnvTable    = "AGENTAUTH_TABLE"      // DynamoDB table name
	EnvKMSKeyID = "AGENTAUTH_KMS_KEY_ID" // KMS key ARN (GenerateDataKey target)
	EnvQueueURL = "AGENTAUTH_QUEUE_URL"  // SQS FIFO queue URL for auth.granted
	// EnvDeadLetterQueueURL (gettoken only): the events queue's
	// dead-letter queue, which operators list and redrive.
	EnvDeadLetterQueueURL = "AGENTAUTH_DEAD_LETTER_QUEUE_URL"
	EnvBundle             = "AGENTAUTH_BUNDLE"           // bundle directory inside the function package
	EnvPublicURL          = "AGENTAUTH_PUBLIC_URL"       // public base URL of the callback routes
	EnvMaxWaitSeconds     = "AGENTAUTH_MAX_WAIT_SECONDS" // cap on GET /v1/oauth/sessions/{id}?wait=
	// Secrets Manager secret (ARN) holding the session/state keys:
	// comma-separated random strings, the first current.
	EnvSessionKeysSecret = "AGENTAUTH_SESSION_KEYS_SECRET"
	// Bundle secretRef Secret/<name> resolves to the secret <prefix><name>.
	EnvSecretPrefix = "AGENTAUTH_SECRET_PREFIX"
)

// Environment variables the stack sets on the tools function only, on top
// of the ones above. The function side (shared/edge/jwtauth, shared/edge/lambdaentry)
// reads the same names.
const (
	EnvJWKSURL       = "AGENTAUTH_JWKS_URL"        // where the callers' JWT issuer publishes its keys
	EnvJWTIssuer     = "AGENTAUTH_JWT_ISSUER"      // required iss
	EnvJWTAudience   = "AGENTAUTH_JWT_AUDIENCE"    // required aud
	EnvTenantClaim   = "AGENTAUTH_TENANT_CLAIM"    // claim naming the caller's tenant
	EnvSkillsClaim   = "AGENTAUTH_SKILLS_CLAIM"    // claim listing the caller's skills
	EnvToolhooksSeam = "AGENTAUTH_TOOLHOOKS_SEAM"  // "true": serve the seam routes (SeamRoutes)
	EnvToolRateLimit = "AGENTAUTH_TOOL_RATE_LIMIT" // default per-(principal, tool) limit, e.g. "60/m"
	// EnvMetrics "emf": metrics are CloudWatch embedded metric format lines
	// in the function's log, so the role needs no cloudwatch:PutMetricData.
	EnvMetrics = "AGENTAUTH_METRICS"
	// EnvTurnReserve (turn function): seconds a step needs; with less left
	// the turn hands over to a continuation event.
	EnvTurnReserve = "AGENTAUTH_TURN_RESERVE_SECONDS"
	// EnvTurnBucket (turn and gettoken, with turns): the bucket of the
	// turn store's large items.
	EnvTurnBucket = "AGENTAUTH_TURN_BUCKET"
	// EnvBundleRepo (every function, with turns): s3://<turn bucket>/bundle/,
	// the git bundle agents change through changesets (its objects there,
	// its active ref and changeset records in the table).
	EnvBundleRepo = "AGENTAUTH_BUNDLE_REPO"
)

// TurnBlobPrefix is the folder of the turn bucket the functions may use
// (shared/aws/dynamostore: turns/<instance>/<epoch>/<sha256>).
const TurnBlobPrefix = "turns/"

// BundleRepoPrefix is the folder of the turn bucket that holds the git
// bundle's objects (shared/aws/gitstore: bundle/objects/<2 hex>/<38 hex>).
// No lifecycle rule may expire it: a process remembers the objects it
// wrote and never writes them again.
const BundleRepoPrefix = "bundle/"

// Defaults of ToolsProps.TenantClaim and ToolsProps.SkillsClaim.
const (
	DefaultTenantClaim = "tenant_id"
	DefaultSkillsClaim = "skills"
)

// SessionKeyLength is the length of the generated session key string:
// letters and digits only (about 5.95 bits each, so 64 give ~380 bits),
// well above the 32 characters the functions require, and no punctuation,
// so the value never contains the ',' that separates rotated keys.
const SessionKeyLength = 64

// Function names (and the directory names under AssetDir).
const (
	GetToken = "gettoken"
	Callback = "callback"
	// Tools exists only when Props.Tools.JWKSURL is set.
	Tools = "tools"
	// Turn exists only when Props.Turns.Enabled is set: the SQS consumer
	// that runs agent turns.
	Turn = "turn"
)

// EncryptionContextRecord is the EncryptionContext key the envelope sealer
// sets to the record kind; the key policy lets the functions use the key
// only where it is "grant" (sessions are sealed with the session keys).
const EncryptionContextRecord = "agentauth:record"

// RuntimeRoutes are the IAM-authorized routes served by gettoken.
var RuntimeRoutes = []Route{
	{Method: "POST", Path: "/v1/oauth/token"},
	{Method: "GET", Path: "/v1/oauth/sessions/{id}"},
	{Method: "POST", Path: "/v1/oauth/revoke"},
	{Method: "GET", Path: "/v1/oauth/pending"},
}

// TurnRoutes are the agent instances' routes (shared/edge/turnsapi),
// IAM-authorized like the runtime routes and served by gettoken: a posted
// event goes to the instance's FIFO message group (its id deduplicates),
// the turn function runs it; lifecycle changes commit at once and queue
// the instance's wake-up there too. Without a Swarm in the bundle they
// answer 404.
var TurnRoutes = []Route{
	{Method: "GET", Path: "/v1/instances"},
	{Method: "POST", Path: "/v1/instances/{swarm}/{instanceKey}/events"},
	{Method: "GET", Path: "/v1/instances/{swarm}/{instanceKey}/{agent}"},
	{Method: "DELETE", Path: "/v1/instances/{swarm}/{instanceKey}/{agent}"},
	{Method: "POST", Path: "/v1/instances/{swarm}/{instanceKey}/{agent}/pause"},
	{Method: "POST", Path: "/v1/instances/{swarm}/{instanceKey}/{agent}/resume"},
	{Method: "POST", Path: "/v1/instances/{swarm}/{instanceKey}/{agent}/terminate"},
	{Method: "GET", Path: "/v1/instances/{swarm}/{instanceKey}/{agent}/turns/{turnId}/events"},
}

// BundleRoutes are the git bundle's history routes (shared/edge/bundleapi:
// log, show, diff, revert), IAM-authorized like the runtime routes and
// served by gettoken. The stack has a git bundle only with turns, so only
// then are they routed.
var BundleRoutes = []Route{
	{Method: "GET", Path: "/v1/bundle/revisions"},
	{Method: "GET", Path: "/v1/bundle/revisions/{ref}"},
	{Method: "GET", Path: "/v1/bundle/diff"},
	{Method: "POST", Path: "/v1/bundle/revert"},
}

// ToolRoutes are served by the tools function. API Gateway does not
// authorize them: the function verifies the caller's JWT itself (issuer,
// audience, signature against the JWKS) and answers 401 with a reason code,
// which an API Gateway JWT authorizer would replace with a bare 401.
var ToolRoutes = []Route{
	{Method: "GET", Path: "/v1/agents/tools"},
	{Method: "GET", Path: "/v1/agents/skills"},
	{Method: "POST", Path: "/v1/tools/invoke"},
	{Method: "POST", Path: "/v1/admin/tenants/{tenant}/skills"},
	{Method: "POST", Path: "/v1/admin/tenants/{tenant}/tools"},
	{Method: "GET", Path: "/v1/admin/tenants/{tenant}/skills"},
	{Method: "GET", Path: "/v1/admin/tenants/{tenant}/tools"},
	{Method: "DELETE", Path: "/v1/admin/tenants/{tenant}/skills/{name}"},
	{Method: "DELETE", Path: "/v1/admin/tenants/{tenant}/tools/{name}"},
	// The MCP server (shared/edge/mcpapi): stateless Streamable HTTP, so
	// GET and DELETE answer 405; its protected resource metadata (RFC
	// 9728), at the well-known URI and with the resource's path.
	{Method: "POST", Path: "/mcp"},
	{Method: "GET", Path: "/mcp"},
	{Method: "DELETE", Path: "/mcp"},
	{Method: "GET", Path: "/.well-known/oauth-protected-resource"},
	{Method: "GET", Path: "/.well-known/oauth-protected-resource/mcp"},
}

// SeamRoutes are the tool-hooks seam's routes, also served by the tools
// function without API Gateway authorization, and only when
// ToolsProps.Seam is set.
var SeamRoutes = []Route{
	{Method: "POST", Path: "/v1/host/sample/toolhooks/invoke"},
	{Method: "GET", Path: "/.well-known/openwop"},
}

// DefaultCallbackPaths is the one public callback route used when
// Props.CallbackPaths is empty: it matches every app whose
// redirect.callbackPath is /oauth/callback/<name>.
var DefaultCallbackPaths = []string{"/oauth/callback/{app}"}

// Route is one HTTP API route.
type Route struct{ Method, Path string }

// Timeouts. API Gateway HTTP API cuts every integration at 30 s, so the
// runtime function cannot usefully run longer and a session long-poll must
// return before that: MaxWaitSeconds leaves a margin for the token work
// around the wait.
const (
	GetTokenTimeoutSeconds = 30
	CallbackTimeoutSeconds = 20
	MaxWaitSeconds         = 25
	// http tools call upstream APIs: the tools function may use all the
	// time the HTTP API gives it.
	ToolsTimeoutSeconds = 30
)

// Props configures the stack.
type Props struct {
	awscdk.StackProps

	// Prefix starts every physical name (table, queue, functions, API,
	// alias, alarm): lower-case letters, digits and '-', at most 32.
	Prefix string
	// AssetDir holds one directory per function (gettoken/, callback/),
	// each with an executable named bootstrap and the configuration bundle
	// at BundlePath. Built beforehand; synth does not compile Go.
	AssetDir string
	// BundlePath is the bundle directory as the function sees it
	// (default /var/task/bundle: <AssetDir>/<fn>/bundle in the package).
	BundlePath string
	// Architecture of the function binaries: ARM_64 for AWS (default),
	// X86_64 for an emulator on an x86 host.
	Architecture awslambda.Architecture
	// LogRetention of the functions' log groups (default one month).
	LogRetention awslogs.RetentionDays
	// PublicURL is the base URL users' browsers reach the callback routes
	// on, e.g. a custom domain mapped to the API. Empty: the HTTP API's
	// own endpoint.
	PublicURL string
	// CallbackPaths are the public callback routes (default
	// DefaultCallbackPaths). List each app's redirect.callbackPath here to
	// expose exactly those paths and nothing else.
	CallbackPaths []string
	// SecretPrefix is where the bundle's secrets live: a secretRef
	// Secret/<name> reads the secret named SecretPrefix+<name>, and both
	// functions may read secrets under this prefix and no others (default
	// Prefix+"/"). It must end with '/', so the grant's trailing wildcard
	// covers one name "directory" and never a sibling such as
	// <prefix>-session-keys or <prefix>x/....
	SecretPrefix string
	// AlarmTopicARN, when set, receives the DLQ alarm's notifications.
	AlarmTopicARN string
	// Tools configures the tools function. Without Tools.JWKSURL the stack
	// has no tools function and no tool routes (and says so in a synth
	// warning).
	Tools ToolsProps
	// Turns configures the turn function. Without Turns.Enabled nothing
	// consumes the event queue (and the synth says so).
	Turns TurnsProps
	// Console serves the operator console at /console/ from gettoken
	// (docs/console.md): without Console.Issuer no console route exists.
	Console ConsoleProps
	// TableIndexes is how many of TableIndexOrder the table has, the first
	// ones (1 to 4; 0: all four). CloudFormation fails an update that adds
	// two global secondary indexes to a table, so a table created before
	// some of them gets them one deploy at a time, each deploy one more
	// (docs/deploy.md). What queries a missing index fails meanwhile:
	// without SweepIndex the session sweep, without the list indexes the
	// console's lists.
	TableIndexes int
}

// ConsoleProps configures the operator console. Its errors name the CDK
// context keys (consoleIssuer, consoleClientId, consoleClientSecretRef,
// consoleRolesClaim) the app reads these fields from.
type ConsoleProps struct {
	// Issuer is the OpenID provider operators sign in with (https). Empty:
	// no console.
	Issuer string
	// ClientID is the console's client at the provider; its redirect URI
	// is <public URL>/console/auth/callback.
	ClientID string
	// ClientSecretRef names the client secret as a bundle secret,
	// <name>/<key>: the Secrets Manager secret SecretPrefix+<name>, its
	// JSON key <key> (gettoken may read the prefix). Empty: a public
	// client.
	ClientSecretRef string
	// RolesClaim is where the ID token lists the operator's roles
	// (default agentauth_roles; Cognito: cognito:groups).
	RolesClaim string
}

// ConsoleRoutes are the console's routes, public at the gateway: the
// console signs its operators in itself (OpenID Connect) and checks its
// session cookie and CSRF token on every request.
var ConsoleRoutes = []Route{
	{Method: "GET", Path: "/console"},
	{Method: "GET", Path: "/console/{proxy+}"},
	{Method: "POST", Path: "/console/{proxy+}"},
}

// Environment variables of the console, set on gettoken when
// Props.Console.Issuer is.
const (
	EnvConsoleIssuer          = "AGENTAUTH_CONSOLE_ISSUER"
	EnvConsoleClientID        = "AGENTAUTH_CONSOLE_CLIENT_ID"
	EnvConsoleClientSecretRef = "AGENTAUTH_CONSOLE_CLIENT_SECRET_REF"
	EnvConsoleRolesClaim      = "AGENTAUTH_CONSOLE_ROLES_CLAIM"
)

func (c ConsoleProps) validate() error {
	if c.Issuer == "" {
		if c.ClientID != "" || c.ClientSecretRef != "" || c.RolesClaim != "" {
			return fmt.Errorf("stack: console: consoleClientId, consoleClientSecretRef or consoleRolesClaim without consoleIssuer (-c consoleIssuer=<the OpenID provider's issuer URL>)")
		}
		return nil
	}
	if err := checkJWKSURL(c.Issuer); err != nil { // the same rule as the function's
		return fmt.Errorf("stack: console: consoleIssuer %q: %w", c.Issuer, err)
	}
	if c.ClientID == "" {
		return fmt.Errorf("stack: console: missing context consoleClientId (required with consoleIssuer)")
	}
	if c.ClientSecretRef != "" {
		name, key, ok := strings.Cut(c.ClientSecretRef, "/")
		if !ok || name == "" || key == "" || strings.Contains(key, "/") {
			return fmt.Errorf("stack: console: consoleClientSecretRef %q: want <name>/<key>, e.g. console/clientSecret", c.ClientSecretRef)
		}
	}
	return nil
}

// env is the console's part of gettoken's environment.
func (c ConsoleProps) env() map[string]string {
	if c.Issuer == "" {
		return nil
	}
	env := map[string]string{EnvConsoleIssuer: c.Issuer, EnvConsoleClientID: c.ClientID}
	if c.ClientSecretRef != "" {
		env[EnvConsoleClientSecretRef] = c.ClientSecretRef
	}
	if c.RolesClaim != "" {
		env[EnvConsoleRolesClaim] = c.RolesClaim
	}
	return env
}

// ToolsProps configures the tools function and its routes. Its errors
// name the CDK context keys (jwksUrl, jwtIssuer, jwtAudience) the app
// reads these fields from.
type ToolsProps struct {
	// JWKSURL is where the issuer of the callers' JWTs publishes its
	// signing keys: https, or http on a loopback host (the rule the
	// function applies). Empty: no tools function.
	JWKSURL string
	// JWTIssuer and JWTAudience are the iss and aud a caller's JWT must
	// carry; both are required with JWKSURL.
	JWTIssuer, JWTAudience string
	// TenantClaim names the claim holding the caller's tenant (default
	// DefaultTenantClaim); SkillsClaim the claim listing its skills
	// (default DefaultSkillsClaim).
	TenantClaim, SkillsClaim string
	// Seam adds SeamRoutes and AGENTAUTH_TOOLHOOKS_SEAM=true.
	Seam bool
	// RateLimit, when set, is the default per-(principal, tool) limit
	// (e.g. "60/m"), passed to the function unparsed: the function owns
	// its syntax.
	RateLimit string
}

// TurnsProps configures the turn function: the consumer of the event
// queue that runs agent turns (functions/turn). Its errors name the CDK
// context keys (turns, turnTimeout, turnBatchSize, bedrockModels).
type TurnsProps struct {
	// Enabled deploys the turn function and its event source mapping.
	Enabled bool
	// TimeoutSeconds is the turn function's timeout (default
	// DefaultTurnTimeoutSeconds, 5-900). The queue's visibility timeout is
	// six times it, as AWS recommends for an SQS event source, and the
	// function hands a turn over with a reserve of a sixth of it (at most
	// 20 s) left.
	TimeoutSeconds int
	// BatchSize is the event source mapping's batch size (1-10, the FIFO
	// limit; default 10): one batch holds several instances' events, which
	// the function runs in parallel.
	BatchSize int
	// BedrockModels are the models the function may call
	// (bedrock:InvokeModel, which Converse needs): a foundation model id
	// becomes its ARN in the stack's region; an ARN (an inference profile,
	// a provisioned model) is used as is. Empty: no Bedrock permission.
	BedrockModels []string
}

// Turn function defaults and bounds.
const (
	DefaultTurnTimeoutSeconds = 120
	DefaultTurnBatchSize      = 10
	// turnVisibilityFactor: the queue's visibility timeout is this many
	// times the turn function's timeout.
	turnVisibilityFactor = 6
)

var (
	bedrockModelID  = regexp.MustCompile(`^[a-z0-9][a-z0-9.:-]{1,127}$`)
	bedrockModelARN = regexp.MustCompile(`^arn:aws[a-z-]*:bedrock:[a-z0-9-]*:[0-9]{0,12}:(foundation-model|inference-profile|application-inference-profile|provisioned-model|custom-model)/[A-Za-z0-9.:/_-]+$`)
)

func (t *TurnsProps) withDefaults() error {
	if !t.Enabled {
		if t.TimeoutSeconds != 0 || t.BatchSize != 0 || len(t.BedrockModels) != 0 {
			return fmt.Errorf("stack: turn function: turnTimeout, turnBatchSize and bedrockModels need turns=1 (the turn function is off)")
		}
		return nil
	}
	if t.TimeoutSeconds == 0 {
		t.TimeoutSeconds = DefaultTurnTimeoutSeconds
	}
	if t.TimeoutSeconds < 5 || t.TimeoutSeconds > 900 {
		return fmt.Errorf("stack: turn function: turnTimeout %d: want 5 to 900 seconds", t.TimeoutSeconds)
	}
	if t.BatchSize == 0 {
		t.BatchSize = DefaultTurnBatchSize
	}
	if t.BatchSize < 1 || t.BatchSize > 10 {
		return fmt.Errorf("stack: turn function: turnBatchSize %d: want 1 to 10 (the limit of a FIFO event source)", t.BatchSize)
	}
	for _, m := range t.BedrockModels {
		if !bedrockModelID.MatchString(m) && !bedrockModelARN.MatchString(m) {
			return fmt.Errorf("stack: turn function: bedrockModels: %q is neither a Bedrock model id (anthropic.claude-3-haiku-20240307-v1:0) nor a Bedrock model ARN", m)
		}
	}
	return nil
}

// reserveSeconds is the AGENTAUTH_TURN_RESERVE_SECONDS the turn function
// gets: a sixth of its timeout, from 1 to 20 s.
func (t TurnsProps) reserveSeconds() int { return max(1, min(20, t.TimeoutSeconds/6)) }

// Enabled reports whether the stack has a tools function.
func (t ToolsProps) Enabled() bool { return t.JWKSURL != "" }

func (t *ToolsProps) withDefaults() error {
	t.JWKSURL = strings.TrimSpace(t.JWKSURL)
	t.JWTIssuer = strings.TrimSpace(t.JWTIssuer)
	t.JWTAudience = strings.TrimSpace(t.JWTAudience)
	if !t.Enabled() {
		return nil
	}
	var missing []string
	if t.JWTIssuer == "" {
		missing = append(missing, "jwtIssuer")
	}
	if t.JWTAudience == "" {
		missing = append(missing, "jwtAudience")
	}
	if len(missing) > 0 {
		return fmt.Errorf("stack: tools function: missing context %s (required with jwksUrl: the function accepts only JWTs with this issuer and audience; -c jwtIssuer=<iss> -c jwtAudience=<aud>)",
			strings.Join(missing, " and "))
	}
	if err := checkJWKSURL(t.JWKSURL); err != nil {
		return fmt.Errorf("stack: tools function: jwksUrl %q: %w", t.JWKSURL, err)
	}
	if t.TenantClaim = strings.TrimSpace(t.TenantClaim); t.TenantClaim == "" {
		t.TenantClaim = DefaultTenantClaim
	}
	if t.SkillsClaim = strings.TrimSpace(t.SkillsClaim); t.SkillsClaim == "" {
		t.SkillsClaim = DefaultSkillsClaim
	}
	t.RateLimit = strings.TrimSpace(t.RateLimit)
	return nil
}

// checkJWKSURL applies the function's own rule (shared/edge/jwtauth) at synth,
// so a URL the function would refuse fails the deploy, not every cold start.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("want an absolute https URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("want https (http only on a loopback host)")
}

// functions lists the stack's functions in creation order.
func (p *Props) functions() []string {
	fns := []string{GetToken, Callback}
	if p.Tools.Enabled() {
		fns = append(fns, Tools)
	}
	if p.Turns.Enabled {
		fns = append(fns, Turn)
	}
	return fns
}

// Stack is the synthesized agentauth stack and its main resources.
type Stack struct {
	awscdk.Stack
	Table    awsdynamodb.Table
	Key      awskms.Key
	Queue    awssqs.Queue
	DLQ      awssqs.Queue
	DLQAlarm awscloudwatch.Alarm
	// SessionKeys seals sessions and signs OAuth state (AES keys derived
	// from its comma-separated strings), so the callback needs no KMS call
	// to open a session.
	SessionKeys awssecretsmanager.Secret
	API         awsapigatewayv2.HttpApi
	Functions   map[string]awslambda.Function
	// TurnBlobs holds turn items over 32 KB (nil without the turn
	// function).
	TurnBlobs awss3.Bucket
	// StreamURLs are the functions' URLs in response-streaming mode, by
	// function: turn (the live turn event stream, IAM) and tools (the
	// tools-provider stream, JWT checked by the function).
	StreamURLs map[string]awslambda.FunctionUrl
}

var (
	prefixRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	// Secrets Manager name characters, then '/': no '*' or '?', which
	// would widen the IAM grant, and a trailing '/' that closes the prefix.
	secretPrefixRE = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{0,256}/$`)
)

func (p *Props) withDefaults() error {
	if !prefixRE.MatchString(p.Prefix) {
		return fmt.Errorf("stack: prefix %q: want 1-32 of a-z, 0-9, '-' starting with a letter", p.Prefix)
	}
	if p.AssetDir == "" {
		return fmt.Errorf("stack: asset directory is required (the built functions: <dir>/gettoken/bootstrap, <dir>/callback/bootstrap, and <dir>/tools/bootstrap with jwksUrl)")
	}
	if err := p.Tools.withDefaults(); err != nil {
		return err
	}
	if err := p.Turns.withDefaults(); err != nil {
		return err
	}
	if err := p.Console.validate(); err != nil {
		return err
	}
	for _, fn := range p.functions() {
		bin := filepath.Join(p.AssetDir, fn, "bootstrap")
		st, err := os.Stat(bin)
		if err != nil {
			return fmt.Errorf("stack: function %s: %w (build the functions first)", fn, err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("stack: function %s: %s is not an executable file", fn, bin)
		}
	}
	switch {
	case p.TableIndexes == 0:
		p.TableIndexes = len(TableIndexOrder)
	case p.TableIndexes < 1 || p.TableIndexes > len(TableIndexOrder):
		return fmt.Errorf("stack: table indexes %d: want 1 to %d, the first ones of %s", p.TableIndexes, len(TableIndexOrder), strings.Join(TableIndexOrder, ", "))
	}
	if p.BundlePath == "" {
		p.BundlePath = "/var/task/bundle"
	}
	if p.SecretPrefix == "" {
		p.SecretPrefix = p.Prefix + "/"
	}
	if !secretPrefixRE.MatchString(p.SecretPrefix) || p.SecretPrefix == "/" {
		return fmt.Errorf("stack: secret prefix %q: want Secrets Manager name characters ending with '/', e.g. %q", p.SecretPrefix, p.Prefix+"/")
	}
	if p.Architecture == nil {
		p.Architecture = awslambda.Architecture_ARM_64()
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if len(p.CallbackPaths) == 0 {
		p.CallbackPaths = DefaultCallbackPaths
	}
	seen := map[string]bool{}
	// Tool and seam paths are reserved even when not deployed, so turning
	// the tools function on never collides with a callback path.
	for _, rs := range [][]Route{RuntimeRoutes, TurnRoutes, BundleRoutes, ToolRoutes, SeamRoutes} {
		for _, r := range rs {
			seen[r.Path] = true
		}
	}
	seen["/healthz"] = true
	for _, cp := range p.CallbackPaths {
		if len(cp) < 2 || cp[0] != '/' {
			return fmt.Errorf("stack: callback path %q must start with '/'", cp)
		}
		if seen[cp] {
			return fmt.Errorf("stack: callback path %q is listed twice or collides with a runtime or tool route", cp)
		}
		seen[cp] = true
	}
	return nil
}

// New adds the agentauth stack to scope. Each concern is built by a
// function of its own, in this order; every construct keeps its id
// directly under the stack, so the logical ids (and a deployed stack) do
// not depend on how New is split.
func New(scope constructs.Construct, id string, props Props) (*Stack, error) {
	if err := props.withDefaults(); err != nil {
		return nil, err
	}
	st := awscdk.NewStack(scope, jsii.String(id), &props.StackProps)
	s := &Stack{Stack: st, Functions: map[string]awslambda.Function{}}

	fns := props.functions()
	roles := newRoles(st, fns)
	s.Key = newKey(st, props, fns, roles)
	s.Table = newTable(st, props.Prefix, s.Key, props.TableIndexes)
	s.Queue, s.DLQ, s.DLQAlarm = newEventQueues(st, props.Prefix, props.AlarmTopicARN, props.Turns)
	if props.Turns.Enabled {
		s.TurnBlobs = newTurnBlobs(st, s.Key)
	}
	s.SessionKeys = newSessionKeys(st, props.Prefix)
	s.API = newHTTPAPI(st, props.Prefix)
	publicURL := s.API.ApiEndpoint()
	if props.PublicURL != "" {
		publicURL = jsii.String(props.PublicURL)
	}
	env := s.sharedEnv(props, publicURL)
	for _, fn := range fns {
		fenv := functionEnv(fn, env, props)
		blobs := s.TurnBlobs != nil && (fn == Turn || fn == GetToken)
		if blobs {
			fenv[EnvTurnBucket] = s.TurnBlobs.BucketName()
		}
		if fn == GetToken {
			// gettoken serves the runtime routes, the operators' face:
			// it lists and redrives the dead letters.
			fenv[EnvDeadLetterQueueURL] = s.DLQ.QueueUrl()
		}
		if s.TurnBlobs != nil {
			// With turns agents may change their bundle: every function
			// runs it as a git repository (docs/changesets.md).
			fenv[EnvBundleRepo] = awscdk.Fn_Join(jsii.String(""), jsii.Strings("s3://", *s.TurnBlobs.BucketName(), "/"+BundleRepoPrefix))
		}
		s.Functions[fn] = newFunction(st, props, fn, roles[fn], fenv)
		grantData(roles[fn], fn, s.Table, TableIndexOrder[:props.TableIndexes], s.Queue, s.SessionKeys, props.SecretPrefix)
		if fn == GetToken {
			grantDeadLetters(roles[fn], s.DLQ)
		}
		if blobs {
			grantTurnBlobs(roles[fn], s.TurnBlobs)
		}
		if s.TurnBlobs != nil {
			grantBundleRepo(roles[fn], s.TurnBlobs)
		}
	}
	if props.Turns.Enabled {
		s.addTurnSource(props.Turns, roles[Turn])
	}
	s.addStreamURLs()
	newSessionSweep(st, props.Prefix, s.Functions[GetToken])
	s.addRoutes(props)
	s.addOutputs(props, publicURL)
	return s, nil
}

// physicalName is the name of one of the stack's resources: every name
// starts with the prefix, so two stacks in one account do not collide.
func physicalName(prefix, suffix string) *string { return jsii.String(prefix + "-" + suffix) }

// newRoles creates one role per function, without
// AWSLambdaBasicExecutionRole: log writes are granted on the function's own
// log group only (newFunction).
func newRoles(st awscdk.Stack, fns []string) map[string]awsiam.Role {
	roles := map[string]awsiam.Role{}
	for _, fn := range fns {
		roles[fn] = awsiam.NewRole(st, jsii.String(fn+"Role"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			Description: jsii.String("agentauth " + fn + " function"),
		})
	}
	return roles
}

// Global secondary indexes of the record table, as
// shared/aws/dynamostore.TableSchema declares them (that package's doc
// lists the access patterns): pending sessions by resume target (only
// pending sessions carry pendingFor) and sessions by sweep set, both
// sorted by expiry, so auth.pending and the session sweep read by key and
// never scan.
const (
	PendingIndex = "pending-by-target"
	SweepIndex   = "sweep-by-expiry"
	// The operator console's lists (keys only, newest first): by tenant or
	// swarm (listKey), and for every tenant (listAll).
	ListIndex    = "list-by-scope"
	ListAllIndex = "list-all"
)

// TableIndexOrder is the order the record table's indexes came in, the
// order an older table gets them in: Props.TableIndexes = n keeps the
// first n.
var TableIndexOrder = []string{PendingIndex, SweepIndex, ListIndex, ListAllIndex}

// newTable creates the record table: grants and sessions, one item per
// record, keyed by pk, with the first indexes of TableIndexOrder. Secret
// fields are already envelope-sealed by the functions; table SSE with the
// same customer-managed key covers the rest of each item (ids, status,
// expiry) and puts the whole table under the key's lifecycle.
func newTable(st awscdk.Stack, prefix string, key awskms.Key, indexes int) awsdynamodb.Table {
	t := awsdynamodb.NewTable(st, jsii.String("Records"), &awsdynamodb.TableProps{
		TableName:           physicalName(prefix, "records"),
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("ttl"),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Encryption:         awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:      key,
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	expiresAt := &awsdynamodb.Attribute{Name: jsii.String("expiresAt"), Type: awsdynamodb.AttributeType_NUMBER}
	listSort := &awsdynamodb.Attribute{Name: jsii.String("listSort"), Type: awsdynamodb.AttributeType_STRING}
	defs := map[string]*awsdynamodb.GlobalSecondaryIndexProps{
		PendingIndex: {PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pendingFor"), Type: awsdynamodb.AttributeType_STRING},
			SortKey: expiresAt, ProjectionType: awsdynamodb.ProjectionType_ALL},
		SweepIndex: {PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("sweepSet"), Type: awsdynamodb.AttributeType_STRING},
			SortKey: expiresAt, ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY},
		ListIndex: {PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("listKey"), Type: awsdynamodb.AttributeType_STRING},
			SortKey: listSort, ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY},
		ListAllIndex: {PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("listAll"), Type: awsdynamodb.AttributeType_STRING},
			SortKey: listSort, ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY},
	}
	for _, name := range TableIndexOrder[:indexes] {
		d := defs[name]
		d.IndexName = jsii.String(name)
		t.AddGlobalSecondaryIndex(d)
	}
	return t
}

// newEventQueues creates the auth.granted event queue, its dead-letter
// queue and the alarm on it (notifying alarmTopicARN when set). FIFO, one
// message group per agent instance, deduplicated by auth session id (never
// by content). SQS-managed encryption: the events hold ids and resume
// targets, no secret, and a KMS-encrypted queue would need unconditioned
// kms:GenerateDataKey for every producer and consumer on the sealing key.
//
// The visibility timeout is six times the turn function's timeout (AWS's
// recommendation for an SQS event source: room for the function's retries
// of a batch before SQS hands it out again), and 180 s without one, room
// for a consumer with a 30 s timeout.
func newEventQueues(st awscdk.Stack, prefix, alarmTopicARN string, turns TurnsProps) (queue, dlq awssqs.Queue, alarm awscloudwatch.Alarm) {
	visibility := 180
	if turns.Enabled {
		visibility = turnVisibilityFactor * turns.TimeoutSeconds
	}
	dlq = awssqs.NewQueue(st, jsii.String("EventsDLQ"), &awssqs.QueueProps{
		QueueName:                 physicalName(prefix, "events-dlq.fifo"),
		Fifo:                      jsii.Bool(true),
		ContentBasedDeduplication: jsii.Bool(false),
		Encryption:                awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:                jsii.Bool(true),
		RetentionPeriod:           awscdk.Duration_Days(jsii.Number(14)),
	})
	queue = awssqs.NewQueue(st, jsii.String("Events"), &awssqs.QueueProps{
		QueueName:                 physicalName(prefix, "events.fifo"),
		Fifo:                      jsii.Bool(true),
		ContentBasedDeduplication: jsii.Bool(false),
		Encryption:                awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:                jsii.Bool(true),
		RetentionPeriod:           awscdk.Duration_Days(jsii.Number(14)),
		VisibilityTimeout:         awscdk.Duration_Seconds(jsii.Number(visibility)),
		DeadLetterQueue:           &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(5)},
	})
	alarm = awscloudwatch.NewAlarm(st, jsii.String("EventsDLQNotEmpty"), &awscloudwatch.AlarmProps{
		AlarmName:        physicalName(prefix, "events-dlq-not-empty"),
		AlarmDescription: jsii.String("auth.granted or agent events failed delivery 5 times and sit in the DLQ; inspect and redrive"),
		Metric: dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period:    awscdk.Duration_Minutes(jsii.Number(1)),
			Statistic: jsii.String("Maximum"),
		}),
		Threshold:          jsii.Number(0),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(1),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	if alarmTopicARN != "" {
		topic := awssns.Topic_FromTopicArn(st, jsii.String("AlarmTopic"), jsii.String(alarmTopicARN))
		alarm.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
	}
	return queue, dlq, alarm
}

// newSessionKeys creates the session and state keys: generated by Secrets
// Manager, never seen by CloudFormation or the template. Retained: deleting
// it would make every pending session and outstanding state unreadable.
// Rotate by prepending a new string (see lambdaentry.SessionKeys).
func newSessionKeys(st awscdk.Stack, prefix string) awssecretsmanager.Secret {
	return awssecretsmanager.NewSecret(st, jsii.String("SessionKeys"), &awssecretsmanager.SecretProps{
		SecretName:  physicalName(prefix, "session-keys"),
		Description: jsii.String("agentauth: keys that seal OAuth sessions and sign state (comma-separated, first current)"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(SessionKeyLength),
			ExcludePunctuation: jsii.Bool(true),
			IncludeSpace:       jsii.Bool(false),
		},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
}

// newHTTPAPI creates the HTTP API, without routes. It exists before the
// functions: the functions read its endpoint from their environment
// (Api -> Function), while routes, integrations and invoke permissions
// come after both (Function -> Integration -> Route, addRoutes), so there
// is no cycle.
func newHTTPAPI(st awscdk.Stack, prefix string) awsapigatewayv2.HttpApi {
	return awsapigatewayv2.NewHttpApi(st, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:            physicalName(prefix, "http"),
		Description:        jsii.String("agentauth runtime (IAM), OAuth callback (public) and tool (JWT checked by the function) routes"),
		CreateDefaultStage: jsii.Bool(true),
	})
}

// sharedEnv is the environment every function gets.
func (s *Stack) sharedEnv(props Props, publicURL *string) map[string]*string {
	return map[string]*string{
		EnvTable:     s.Table.TableName(),
		EnvKMSKeyID:  s.Key.KeyArn(),
		EnvQueueURL:  s.Queue.QueueUrl(),
		EnvBundle:    jsii.String(props.BundlePath),
		EnvPublicURL: publicURL,
		// The full ARN, the resource the roles are granted on.
		EnvSessionKeysSecret: s.SessionKeys.SecretArn(),
		EnvSecretPrefix:      jsii.String(props.SecretPrefix),
	}
}

// functionEnv is fn's environment: the shared one, plus gettoken's wait cap,
// the tools function's settings or the turn function's reserve.
func functionEnv(fn string, shared map[string]*string, props Props) map[string]*string {
	env := maps.Clone(shared)
	switch fn {
	case GetToken:
		env[EnvMaxWaitSeconds] = jsii.String(fmt.Sprint(MaxWaitSeconds))
		for k, v := range props.Console.env() {
			env[k] = jsii.String(v)
		}
	case Tools:
		for k, v := range toolsEnv(props.Tools) {
			env[k] = jsii.String(v)
		}
	case Turn:
		env[EnvTurnReserve] = jsii.String(fmt.Sprint(props.Turns.reserveSeconds()))
		env[EnvMetrics] = jsii.String("emf")
	}
	return env
}

// functionTimeout is fn's timeout in seconds.
func functionTimeout(fn string, props Props) float64 {
	switch fn {
	case Callback:
		return CallbackTimeoutSeconds
	case Tools:
		return ToolsTimeoutSeconds
	case Turn:
		return float64(props.Turns.TimeoutSeconds)
	}
	return GetTokenTimeoutSeconds
}

// functionMemory is fn's memory in MB: the turn function runs several
// instances' steps at once (and Lambda's CPU share grows with memory).
func functionMemory(fn string) float64 {
	if fn == Turn {
		return 512
	}
	return 256
}

// newFunction creates fn from its prebuilt package <AssetDir>/<fn>, with a
// log group of its own that only its role may write to.
func newFunction(st awscdk.Stack, props Props, fn string, role awsiam.Role, env map[string]*string) awslambda.Function {
	logs := awslogs.NewLogGroup(st, jsii.String(fn+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + props.Prefix + "-" + fn),
		Retention:     props.LogRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	logs.GrantWrite(role)
	return awslambda.NewFunction(st, jsii.String(fn+"Function"), &awslambda.FunctionProps{
		FunctionName: physicalName(props.Prefix, fn),
		Description:  jsii.String("agentauth " + fn),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Handler:      jsii.String("bootstrap"),
		Architecture: props.Architecture,
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(props.AssetDir, fn)), nil),
		MemorySize:   jsii.Number(functionMemory(fn)),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(functionTimeout(fn, props))),
		Environment:  &env,
		Role:         role,
		LogGroup:     logs,
	})
}

// newSessionSweep schedules the session sweep on gettoken (whose role
// already has the table and the queue): expire pending sessions, re-send
// auth.granted events whose first send failed (so none is lost), delete
// finished sessions; see shared/edge/lambdaentry.
func newSessionSweep(st awscdk.Stack, prefix string, gettoken awslambda.Function) {
	awsevents.NewRule(st, jsii.String("SessionSweep"), &awsevents.RuleProps{
		RuleName:    physicalName(prefix, "session-sweep"),
		Description: jsii.String("agentauth session sweep (cleanup, late auth.granted delivery)"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(SweepMinutes))),
		Targets:     &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(gettoken, nil)},
	})
}

// addRoutes routes the API to the functions: the runtime routes under IAM
// authorization, /healthz and the callback paths public, and the tool (and
// seam) routes public too, since the tools function checks the JWT itself
// (see ToolRoutes). Without a tools function the synth warns.
func (s *Stack) addRoutes(props Props) {
	iamAuth := awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	noAuth := awsapigatewayv2.NewHttpNoneAuthorizer()
	runtimeInteg, callbackInteg := s.integration(GetToken), s.integration(Callback)
	for _, r := range append(append([]Route(nil), RuntimeRoutes...), TurnRoutes...) {
		s.route(r, runtimeInteg, iamAuth)
	}
	if props.Turns.Enabled {
		for _, r := range BundleRoutes {
			s.route(r, runtimeInteg, iamAuth)
		}
	}
	s.route(Route{Method: "GET", Path: "/healthz"}, runtimeInteg, noAuth)
	if props.Console.Issuer != "" {
		for _, r := range ConsoleRoutes {
			s.route(r, runtimeInteg, noAuth)
		}
	}
	for _, cp := range props.CallbackPaths {
		s.route(Route{Method: "GET", Path: cp}, callbackInteg, noAuth)
	}
	if !props.Turns.Enabled {
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("agentauth:noTurnFunction"), jsii.String(
			"no turn function: context turns is not set, so nothing consumes the event queue "+
				"(agent turns, auth.granted resumptions); deploy it with -c turns=1"))
	}
	if !props.Tools.Enabled() {
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("agentauth:noToolsFunction"), jsii.String(
			"no tools function and no tool routes: context jwksUrl is not set "+
				"(deploy them with -c jwksUrl=<JWKS URL> -c jwtIssuer=<iss> -c jwtAudience=<aud>)"))
		return
	}
	toolsInteg := s.integration(Tools)
	routes := ToolRoutes
	if props.Tools.Seam {
		routes = append(append([]Route(nil), ToolRoutes...), SeamRoutes...)
	}
	for _, r := range routes {
		s.route(r, toolsInteg, noAuth)
	}
}

// integration is the payload-2.0 Lambda integration of fn.
func (s *Stack) integration(fn string) awsapigatewayv2.HttpRouteIntegration {
	return awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(fn+"Integration"), s.Functions[fn],
		&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
			PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		})
}

func (s *Stack) route(r Route, in awsapigatewayv2.HttpRouteIntegration, auth awsapigatewayv2.IHttpRouteAuthorizer) {
	s.API.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path: jsii.String(r.Path), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
		Integration: in, Authorizer: auth,
	})
}

// addOutputs adds the stack outputs that deploy-local, the tests and an
// operator read.
func (s *Stack) addOutputs(props Props, publicURL *string) {
	out := func(id, desc string, v *string) {
		awscdk.NewCfnOutput(s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out("ApiUrl", "HTTP API endpoint (runtime routes, SigV4-signed)", s.API.ApiEndpoint())
	out("PublicUrl", "base URL of the OAuth callback routes", publicURL)
	out("TableName", "DynamoDB table of grants, sessions and leases", s.Table.TableName())
	out("KeyArn", "KMS key that seals secrets", s.Key.KeyArn())
	out("QueueUrl", "SQS FIFO queue of agent events", s.Queue.QueueUrl())
	out("DlqUrl", "dead-letter queue of agent events", s.DLQ.QueueUrl())
	out("SessionKeysSecretArn", "Secrets Manager secret of the session and state keys", s.SessionKeys.SecretArn())
	out("SecretPrefix", "bundle secretRef Secret/<name> reads the secret <SecretPrefix><name>", jsii.String(props.SecretPrefix))
	out("GetTokenFunctionName", "runtime routes function", s.Functions[GetToken].FunctionName())
	out("CallbackFunctionName", "OAuth callback function", s.Functions[Callback].FunctionName())
	if props.Console.Issuer != "" {
		out("ConsoleUrl", "the operator console (OpenID Connect sign-in; register <ConsoleUrl>auth/callback at the provider)",
			awscdk.Fn_Join(jsii.String(""), jsii.Strings(*publicURL, "/console/")))
	}
	if props.Tools.Enabled() {
		// The tool routes take no SigV4, like the callback routes: agents
		// reach them on the public base URL.
		out("ToolsUrl", "base URL of the tool routes (GET <ToolsUrl>/v1/agents/tools, Bearer JWT)", publicURL)
		out("ToolsFunctionName", "tools function", s.Functions[Tools].FunctionName())
	}
	if props.Turns.Enabled {
		out("TurnFunctionName", "turn function (the event queue's consumer)", s.Functions[Turn].FunctionName())
		out("TurnBucketName", "S3 bucket of turn items over 32 KB", s.TurnBlobs.BucketName())
		out("TurnStreamUrl", "live turn events: GET <TurnStreamUrl>v1/instances/…/turns/{turnId}/events, Accept: text/event-stream, SigV4 (service lambda)", s.StreamURLs[Turn].Url())
	}
	if u, ok := s.StreamURLs[Tools]; ok {
		out("ToolsStreamUrl", "the caller's tool list, live: GET <ToolsStreamUrl>v1/agents/stream, Bearer JWT", u.Url())
	}
}

// toolsEnv is what the tools function reads on top of the shared
// environment. Optional settings are left out rather than set empty, so
// the function's own defaults apply.
func toolsEnv(t ToolsProps) map[string]string {
	env := map[string]string{
		EnvJWKSURL:     t.JWKSURL,
		EnvJWTIssuer:   t.JWTIssuer,
		EnvJWTAudience: t.JWTAudience,
		EnvTenantClaim: t.TenantClaim,
		EnvSkillsClaim: t.SkillsClaim,
		EnvMetrics:     "emf",
	}
	if t.Seam {
		env[EnvToolhooksSeam] = "true"
	}
	if t.RateLimit != "" {
		env[EnvToolRateLimit] = t.RateLimit
	}
	return env
}

// newKey creates the sealing key. Its policy is the only thing that lets a
// function use it: no IAM policy in this stack names KMS, so the account
// root statement (administration and rewrap, for operators whose IAM
// policies allow it) never extends to the functions.
func newKey(st awscdk.Stack, props Props, fns []string, roles map[string]awsiam.Role) awskms.Key {
	root := awsiam.NewAccountRootPrincipal()
	doc := awsiam.NewPolicyDocument(nil)
	doc.AddStatements(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AccountAdministrationAndRewrap"),
		Principals: &[]awsiam.IPrincipal{root},
		Actions: jsii.Strings(
			"kms:Create*", "kms:Describe*", "kms:Enable*", "kms:List*", "kms:Put*", "kms:Update*",
			"kms:Revoke*", "kms:Disable*", "kms:Get*", "kms:Delete*", "kms:TagResource", "kms:UntagResource",
			"kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion", "kms:RotateKeyOnDemand",
			// agentauth keys rewrap: open with this key, seal with another
			// (or the reverse), directly or through ReEncrypt.
			"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom", "kms:ReEncryptTo",
		),
		Resources: jsii.Strings("*"),
	}))
	// The tools function gets the same grant: it opens grants to hand http
	// tools their upstream tokens, and refreshes them.
	for _, fn := range fns {
		doc.AddStatements(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("Seal" + fn + "Records"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewArnPrincipal(roles[fn].RoleArn())},
			Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
			Resources:  jsii.Strings("*"),
			Conditions: &map[string]any{
				"StringEquals": map[string]any{
					// Only grants are KMS-sealed: sessions use the
					// session-keys secret, so the functions cannot use
					// the key for anything but a grant's tokens.
					"kms:EncryptionContext:" + EncryptionContextRecord: []string{"grant"},
				},
			},
		}))
	}
	// Table SSE: DynamoDB uses the key on the caller's behalf, so the
	// callers need it — but only through DynamoDB (kms:ViaService), which
	// never hands them a data key: this cannot open a sealed secret.
	var callers []awsiam.IPrincipal
	for _, fn := range fns {
		callers = append(callers, awsiam.NewArnPrincipal(roles[fn].RoleArn()))
	}
	doc.AddStatements(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("TableEncryptionThroughDynamoDB"),
		Principals: &callers,
		Actions:    jsii.Strings("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*", "kms:DescribeKey"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{
			"StringEquals": map[string]any{
				"kms:ViaService":    awscdk.Fn_Join(jsii.String(""), jsii.Strings("dynamodb.", *awscdk.Aws_REGION(), ".amazonaws.com")),
				"kms:CallerAccount": awscdk.Aws_ACCOUNT_ID(),
			},
		},
	}))
	// The turn bucket's default encryption (SSE-KMS with an S3 Bucket
	// Key): the functions that read and write it — every one, since the
	// git bundle lives there — use the key through S3 only, like the
	// table's.
	if props.Turns.Enabled {
		blobUsers := callers
		doc.AddStatements(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("TurnBucketEncryptionThroughS3"),
			Principals: &blobUsers,
			Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
			Resources:  jsii.Strings("*"),
			Conditions: &map[string]any{
				"StringEquals": map[string]any{
					"kms:ViaService":    awscdk.Fn_Join(jsii.String(""), jsii.Strings("s3.", *awscdk.Aws_REGION(), ".amazonaws.com")),
					"kms:CallerAccount": awscdk.Aws_ACCOUNT_ID(),
				},
			},
		}))
	}
	return awskms.NewKey(st, jsii.String("SealingKey"), &awskms.KeyProps{
		Alias:             jsii.String("alias/" + props.Prefix + "-sealing"),
		Description:       jsii.String("agentauth: envelope encryption of OAuth grants and sessions, and table SSE"),
		EnableKeyRotation: jsii.Bool(true),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(30)),
		Policy:            doc,
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
}

// dataActions are what the DynamoDB store calls: conditional writes,
// the session-completion transaction and lease checks.
var dataActions = []string{
	"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
	"dynamodb:TransactWriteItems", "dynamodb:ConditionCheckItem",
}

// grantData gives fn's role the table, queue and secrets it needs, each on
// that one resource. gettoken also queries the indexes the table has
// (GET /v1/oauth/pending, the session sweep, the console's lists) and
// enqueues (a device-code session completes in gettoken, which then emits
// auth.granted itself). tools needs what gettoken's token path needs: it
// fetches tokens for http tools through the same OAuth core (grants,
// sessions, auth.granted), keeps its rate-limit counters in the table
// (UpdateItem) and lists tenant uploads by Scan.
//
// Bundle secrets are granted by name prefix. The functions only ever ask
// for <secretPrefix><name> (awssecrets), and a secret's ARN ends in a
// random six-character suffix that is unknown until the secret exists, so
// arn:...:secret:<secretPrefix>* is the narrowest resource that covers the
// bundle's secrets: it is pinned to this stack's region and account, it
// covers only names under the prefix (which ends with '/', so neither
// <prefix>-session-keys nor a sibling prefix matches), and only
// GetSecretValue is granted — no listing, writing or policy change.
func grantData(role awsiam.Role, fn string, table awsdynamodb.Table, indexes []string, queue awssqs.Queue, sessionKeys awssecretsmanager.Secret, secretPrefix string) {
	actions := append([]string(nil), dataActions...)
	switch fn {
	case Tools:
		actions = append(actions, "dynamodb:Scan")
	case GetToken, Turn:
		// An instance's turns and calls are read in BatchGetItem requests
		// of 100; GET /v1/instances and the tool plane's tenant uploads
		// are listed by Scan.
		actions = append(actions, "dynamodb:BatchGetItem", "dynamodb:Scan")
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("Records"),
		Actions:   jsii.Strings(actions...),
		Resources: &[]*string{table.TableArn()},
	}))
	if fn == Turn {
		// auth.pending blocks: pending sessions by resume target.
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("PendingIndex"),
			Actions:   jsii.Strings("dynamodb:Query"),
			Resources: &[]*string{awscdk.Fn_Join(jsii.String(""), jsii.Strings(*table.TableArn(), "/index/", PendingIndex))},
		}))
	}
	if fn == GetToken {
		// Only the indexes the table has (Props.TableIndexes): no grant
		// names an index that does not exist yet.
		var arns []*string
		for _, ix := range indexes {
			arns = append(arns, awscdk.Fn_Join(jsii.String(""), jsii.Strings(*table.TableArn(), "/index/", ix)))
		}
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("SessionIndexes"),
			Actions:   jsii.Strings("dynamodb:Query"),
			Resources: &arns,
		}))
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("Events"),
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: &[]*string{queue.QueueArn()},
	}))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SessionKeys"),
		Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
		Resources: &[]*string{sessionKeys.SecretArn()},
	}))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:     jsii.String("BundleSecrets"),
		Actions: jsii.Strings("secretsmanager:GetSecretValue"),
		Resources: &[]*string{awscdk.Fn_Join(jsii.String(""), jsii.Strings(
			"arn:", *awscdk.Aws_PARTITION(), ":secretsmanager:", *awscdk.Aws_REGION(), ":", *awscdk.Aws_ACCOUNT_ID(),
			":secret:", secretPrefix, "*"))},
	}))
}

// deadLetterActions are what listing and redriving the dead letters call
// on the dead-letter queue (shared/aws/sqsqueue.DeadLetters): receive
// (a listing holds what it read briefly), make visible again, delete a
// redriven message, and its approximate count. The redrive's send to the
// events queue is grantData's sqs:SendMessage.
var deadLetterActions = []string{"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}

// grantDeadLetters gives fn's role the dead-letter queue, that one
// resource.
func grantDeadLetters(role awsiam.Role, dlq awssqs.Queue) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("DeadLetters"),
		Actions:   jsii.Strings(deadLetterActions...),
		Resources: &[]*string{dlq.QueueArn()},
	}))
}

// addTurnSource feeds the event queue to the turn function: FIFO batches
// of up to BatchSize, with ReportBatchItemFailures, so a failed event goes
// back with the later events of its instance only (shared/edge/lambdaentry)
// and, after the queue's maxReceiveCount, to the dead-letter queue and its
// alarm. CDK grants the role what the mapping needs of the queue
// (receive, delete, change visibility, attributes). The Bedrock models
// the bundle's Model resources name are granted here, each by ARN.
func (s *Stack) addTurnSource(t TurnsProps, role awsiam.Role) {
	s.Functions[Turn].AddEventSource(awslambdaeventsources.NewSqsEventSource(s.Queue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(t.BatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		Enabled:                 jsii.Bool(true),
	}))
	if len(t.BedrockModels) == 0 {
		return
	}
	var arns []*string
	for _, m := range t.BedrockModels {
		if bedrockModelARN.MatchString(m) {
			arns = append(arns, jsii.String(m))
			continue
		}
		arns = append(arns, awscdk.Fn_Join(jsii.String(""), jsii.Strings(
			"arn:", *awscdk.Aws_PARTITION(), ":bedrock:", *awscdk.Aws_REGION(), "::foundation-model/", m)))
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("BedrockModels"),
		Actions:   jsii.Strings("bedrock:InvokeModel"),
		Resources: &arns,
	}))
}

// newTurnBlobs creates the bucket of the turn store's large items: message
// payloads and tool outputs over 32 KB, content-addressed under
// TurnBlobPrefix. Private (public access blocked, bucket-owner objects,
// TLS only), encrypted with the stack's key through S3 with a Bucket Key
// (one KMS call per object per minute at most, not per request), and
// retained like the table whose items name its objects. Objects leave
// with their instance (the turn store deletes the instance's folder);
// the lifecycle rule clears uploads that never completed.
func newTurnBlobs(st awscdk.Stack, key awskms.Key) awss3.Bucket {
	return awss3.NewBucket(st, jsii.String("TurnBlobs"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_KMS,
		EncryptionKey:     key,
		BucketKeyEnabled:  jsii.Bool(true),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(false),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("abort-incomplete-uploads"),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
}

// grantTurnBlobs lets role read, write and delete objects under
// TurnBlobPrefix, and list that folder only (an instance's deletion lists
// its folder); nothing else of the bucket.
func grantTurnBlobs(role awsiam.Role, bucket awss3.Bucket) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("TurnBlobs"),
		Actions:   jsii.Strings("s3:GetObject", "s3:PutObject", "s3:DeleteObject"),
		Resources: &[]*string{bucket.ArnForObjects(jsii.String(TurnBlobPrefix + "*"))},
	}))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("TurnBlobList"),
		Actions:    jsii.Strings("s3:ListBucket"),
		Resources:  &[]*string{bucket.BucketArn()},
		Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": []string{TurnBlobPrefix + "*"}}},
	}))
}

// grantBundleRepo lets role read and write the git bundle's objects under
// BundleRepoPrefix — never delete them: gitstore only adds objects, each
// written if absent — and list that folder only, so that a missing object
// is S3's 404 (the ListBucket permission) rather than 403.
func grantBundleRepo(role awsiam.Role, bucket awss3.Bucket) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("GitBundle"),
		Actions:   jsii.Strings("s3:GetObject", "s3:PutObject"),
		Resources: &[]*string{bucket.ArnForObjects(jsii.String(BundleRepoPrefix + "*"))},
	}))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("GitBundleList"),
		Actions:    jsii.Strings("s3:ListBucket"),
		Resources:  &[]*string{bucket.BucketArn()},
		Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": []string{BundleRepoPrefix + "*"}}},
	}))
}

// addStreamURLs gives the functions that stream a function URL in
// RESPONSE_STREAM mode: API Gateway HTTP APIs buffer every answer, so a
// live event stream cannot pass through them. The turn function's URL
// serves the turn event stream (shared/edge/lambdaentry) and, like the
// runtime routes it mirrors, takes only SigV4-signed IAM callers; the
// tools function's takes any caller, like the tool routes, since the
// function verifies the caller's JWT itself. A stream lasts until shortly
// before the function's timeout, then asks the client to reconnect with
// Last-Event-ID.
func (s *Stack) addStreamURLs() {
	s.StreamURLs = map[string]awslambda.FunctionUrl{}
	for fn, auth := range map[string]awslambda.FunctionUrlAuthType{Turn: awslambda.FunctionUrlAuthType_AWS_IAM, Tools: awslambda.FunctionUrlAuthType_NONE} {
		f, ok := s.Functions[fn]
		if !ok {
			continue
		}
		s.StreamURLs[fn] = f.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: auth, InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM})
	}
}
