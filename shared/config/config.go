// Package config is agentauth's one reader of the environment: every
// AGENTAUTH_* variable (and the seed's GOONDAN_OAUTH_KEY) is declared here
// once, with its default and one line of doc, and read once by FromEnv
// into a typed Config that shared/app wires.
//
// FromEnv reports every problem at once, each by variable name and never
// by value: a value may be a secret (the runtime token, the master key).
// No other package reads the environment; cmd/agentauth's flags override
// the Config after FromEnv.
package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/edge/mcpapi"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
)

// The variables. Var.Doc and the defaults below are what `agentauth
// config` prints and docs/configuration.md lists.
const (
	Bundle       = "AGENTAUTH_BUNDLE"
	Home         = "AGENTAUTH_HOME"
	Secrets      = "AGENTAUTH_SECRETS"
	MasterKey    = "GOONDAN_OAUTH_KEY"
	PublicURL    = "AGENTAUTH_PUBLIC_URL"
	MaxWait      = "AGENTAUTH_MAX_WAIT_SECONDS"
	RuntimeToken = "AGENTAUTH_RUNTIME_TOKEN"

	SessionRetention = "AGENTAUTH_SESSION_RETENTION"
	QueueDedupWindow = "AGENTAUTH_QUEUE_DEDUP_WINDOW"
	AuditRetention   = "AGENTAUTH_AUDIT_RETENTION"

	Table              = "AGENTAUTH_TABLE"
	KMSKeyID           = "AGENTAUTH_KMS_KEY_ID"
	QueueURL           = "AGENTAUTH_QUEUE_URL"
	DeadLetterQueueURL = "AGENTAUTH_DEAD_LETTER_QUEUE_URL"
	SessionKeysSecret  = "AGENTAUTH_SESSION_KEYS_SECRET"
	SecretPrefix       = "AGENTAUTH_SECRET_PREFIX"
	TurnBucket         = "AGENTAUTH_TURN_BUCKET"
	BundleRepo         = "AGENTAUTH_BUNDLE_REPO"

	JWKSURL                = "AGENTAUTH_JWKS_URL"
	JWTIssuer              = "AGENTAUTH_JWT_ISSUER"
	JWTAudience            = "AGENTAUTH_JWT_AUDIENCE"
	MCPResource            = "AGENTAUTH_MCP_RESOURCE"
	MCPAllowedOrigins      = "AGENTAUTH_MCP_ALLOWED_ORIGINS"
	MCPSessionIdle         = "AGENTAUTH_MCP_SESSION_IDLE_SECONDS"
	MCPMaxSessions         = "AGENTAUTH_MCP_MAX_SESSIONS"
	MCPMaxSessionsPer      = "AGENTAUTH_MCP_MAX_SESSIONS_PER_PRINCIPAL"
	MCPInitializeRate      = "AGENTAUTH_MCP_INITIALIZE_RATE"
	TenantClaim            = "AGENTAUTH_TENANT_CLAIM"
	SkillsClaim            = "AGENTAUTH_SKILLS_CLAIM"
	SubjectsClaim          = "AGENTAUTH_SUBJECTS_CLAIM"
	ToolhooksSeam          = "AGENTAUTH_TOOLHOOKS_SEAM"
	ToolRateLimit          = "AGENTAUTH_TOOL_RATE_LIMIT"
	ToolRateLimits         = "AGENTAUTH_TOOL_RATE_LIMITS"
	AllowPrivateUpstreams  = "AGENTAUTH_TOOLS_ALLOW_PRIVATE_UPSTREAMS"
	UploadsCheckSeconds    = "AGENTAUTH_UPLOADS_CHECK_SECONDS"
	Metrics                = "AGENTAUTH_METRICS"
	TurnReserve            = "AGENTAUTH_TURN_RESERVE_SECONDS"
	ConsoleIssuer          = "AGENTAUTH_CONSOLE_ISSUER"
	ConsoleClientID        = "AGENTAUTH_CONSOLE_CLIENT_ID"
	ConsoleClientSecret    = "AGENTAUTH_CONSOLE_CLIENT_SECRET"
	ConsoleClientSecretRef = "AGENTAUTH_CONSOLE_CLIENT_SECRET_REF"
	ConsoleRolesClaim      = "AGENTAUTH_CONSOLE_ROLES_CLAIM"
)

// Profile picks the defaults that differ between where agentauth runs.
type Profile int

const (
	// Lambda: a function package (bundle beside the binary, /tmp home,
	// the public URL required).
	Lambda Profile = iota
	// Local: agentauth serve and the admin commands on a laptop.
	Local
)

// Var describes one variable.
type Var struct {
	Name string
	// Lambda and Local are the defaults ("" = none; "required" where the
	// profile cannot run without it).
	Lambda, Local string
	// Secret values are never printed.
	Secret bool
	Doc    string
}

// Variables lists every variable agentauth reads, in the order of the docs.
func Variables() []Var {
	return []Var{
		{Name: Bundle, Lambda: "bundle", Local: "examples/bundle", Doc: "bundle directory (YAML resources), validated as a whole at start"},
		{Name: Home, Lambda: "/tmp/agentauth", Local: ".agentauth", Doc: "home of the embedded backends: file store, key, queue, rate-limit state"},
		{Name: Secrets, Lambda: "<home>/secrets", Local: "<home>/secrets", Doc: "local secrets directory for secretRef values (embedded backends)"},
		{Name: MasterKey, Lambda: "<home>/oauth/keys/master.key", Local: "<home>/oauth/keys/master.key", Secret: true, Doc: "master key of the embedded store: 32 bytes as base64 or hex; comma-separated keys, current first, to rotate"},
		{Name: PublicURL, Lambda: "required", Local: "http://<listen address>", Doc: "public base URL of the callback routes, as browsers reach it"},
		{Name: MaxWait, Lambda: "55", Local: "55", Doc: "cap in seconds on GET /v1/oauth/sessions/{id}?wait= (0-55)"},
		{Name: RuntimeToken, Local: "generated into <home>/runtime-token", Secret: true, Doc: "bearer token of the runtime routes on the local server (API Gateway IAM in AWS)"},
		{Name: SessionRetention, Lambda: "24h", Local: "24h", Doc: "how long a finished OAuth session is kept after its expiry before the sweep deletes it (a Go duration, 1m-8760h); the sessions level off after about 10m + this (AWS: DynamoDB's TTL removes it 24 h after its expiry at the latest)"},
		{Name: QueueDedupWindow, Lambda: "24h", Local: "24h", Doc: "how long the home's event queue keeps a handled event's id to deduplicate a redelivery (a Go duration, 1m-8760h; swept every quarter of it, at most hourly); a redelivery later than this runs again (embedded backends; SQS FIFO deduplicates for its own 5 minutes)"},
		{Name: AuditRetention, Lambda: "168h", Local: "168h", Doc: "how long the audit stream of tool calls keeps a record (a Go duration, 1m-8760h; 0 turns the stored stream off, the log lines stay): locally <home>/audit/tools, a file per UTC day, swept by the server's sweep; on AWS items of " + Table + " that DynamoDB's TTL removes (docs/tools.md#the-audit-stream)"},
		{Name: Table, Doc: "DynamoDB table: set it to use the AWS backends (then the next three are required)"},
		{Name: KMSKeyID, Doc: "KMS key (id or ARN) of the grants' envelope encryption"},
		{Name: QueueURL, Doc: "SQS FIFO queue URL for agent events (auth.granted)"},
		{Name: DeadLetterQueueURL, Doc: "SQS FIFO dead-letter queue of " + QueueURL + ": set it to list and redrive dead-lettered events (agentauth instances dead-letters, the console); without it there are none to see"},
		{Name: SessionKeysSecret, Doc: "Secrets Manager secret: comma-separated random strings (≥ 32 chars, first current) sealing sessions and signing state"},
		{Name: SecretPrefix, Lambda: "agentauth/", Local: "agentauth/", Doc: "bundle Secret/<name> is the Secrets Manager secret <prefix><name>"},
		{Name: TurnBucket, Doc: "S3 bucket for turn items over 32 KB (message payloads, tool outputs); without it a commit holding an item over 300 KB is refused"},
		{Name: BundleRepo, Doc: "s3://<bucket>/<prefix>/: run the bundle as a git repository, its objects under the prefix and its active ref and changeset records in " + Table + " (required with it); every cold start imports the packaged " + Bundle + " into it (docs/changesets.md)"},
		{Name: JWKSURL, Doc: "JWKS of the agents' JWT issuer: set it to serve the tool routes (https, or http on loopback)"},
		{Name: JWTIssuer, Doc: "required iss of agent JWTs (required with " + JWKSURL + ")"},
		{Name: JWTAudience, Doc: "required aud of agent JWTs (required with " + JWKSURL + ")"},
		{Name: MCPResource, Lambda: "<public URL>/mcp", Local: "<public URL>/mcp", Doc: "the MCP server's resource URL (RFC 8707): the aud its JWTs must carry, named by its protected resource metadata"},
		{Name: MCPAllowedOrigins, Doc: "comma-separated browser origins (scheme://host[:port]) that may call /mcp; a request with another Origin header is refused (403), one without passes"},
		{Name: MCPSessionIdle, Lambda: mcpSeconds(mcpapi.DefaultIdleTimeout), Local: mcpSeconds(mcpapi.DefaultIdleTimeout), Doc: "seconds an MCP session may go without a POST before it is closed (10-86400; agentauth serve: the Lambda keeps no session)"},
		{Name: MCPMaxSessions, Lambda: strconv.Itoa(mcpapi.DefaultMaxSessions), Local: strconv.Itoa(mcpapi.DefaultMaxSessions), Doc: "MCP sessions a process keeps at most; past it initialize is refused with 503 (1-100000; agentauth serve)"},
		{Name: MCPMaxSessionsPer, Lambda: strconv.Itoa(mcpapi.DefaultMaxSessionsPerPrincipal), Local: strconv.Itoa(mcpapi.DefaultMaxSessionsPerPrincipal), Doc: "MCP sessions one caller (JWT sub) holds at most; past it initialize is refused with 429 (1-10000; agentauth serve)"},
		{Name: MCPInitializeRate, Lambda: mcpapi.DefaultInitializeRate, Local: mcpapi.DefaultInitializeRate, Doc: "MCP initialize rate per caller: <calls>/<s|m|h>[:<burst>]; past it 429 with Retry-After (agentauth serve)"},
		{Name: TenantClaim, Lambda: jwtauth.DefaultTenantClaim, Local: jwtauth.DefaultTenantClaim, Doc: "dot path of the caller's tenant in the agent JWT"},
		{Name: SkillsClaim, Lambda: jwtauth.DefaultSkillsClaim, Local: jwtauth.DefaultSkillsClaim, Doc: "dot path of the caller's skill allow list (a list, or a comma-separated string)"},
		{Name: SubjectsClaim, Lambda: "agentauth_subjects", Local: "agentauth_subjects", Doc: "dot path of the caller's OAuth subjects, {\"global\": …, \"user\": …}, for the tokens of http tools"},
		{Name: ToolhooksSeam, Lambda: "0", Local: "0", Doc: "1: serve the RFC 0064 seam routes and capability document"},
		{Name: ToolRateLimit, Lambda: ratelimit.DefaultSpec, Local: ratelimit.DefaultSpec, Doc: "default per-(principal, tool) limit: <calls>/<s|m|h>[:<burst>]"},
		{Name: ToolRateLimits, Doc: "per tool name: get_menu=10/m,search=5/s:2"},
		{Name: AllowPrivateUpstreams, Lambda: "0", Local: "0", Doc: "1 lets uploaded http tools use http:// and private addresses, and origin deliveries (Connectors) reach private addresses (local development only)"},
		{Name: UploadsCheckSeconds, Lambda: "10", Local: "10", Doc: "how often a process looks for other processes' tenant uploads and, for a git bundle, a new active revision: for its tool routes, and on Lambda for the whole function, rebuilt on it at the next invocation (1-3600)"},
		{Name: Metrics, Lambda: "log", Local: "log", Doc: "tool-plane and turn metrics: emf (CloudWatch embedded metric format on stdout), log or off"},
		{Name: TurnReserve, Lambda: "20", Local: "30", Doc: "seconds a turn step needs: with less left of the invocation a turn hands over to a continuation event (1-900)"},
		{Name: ConsoleIssuer, Doc: "OpenID provider operators sign in with: set it to serve the operator console at /console/ (https, or http on loopback; docs/console.md)"},
		{Name: ConsoleClientID, Doc: "the console's client id at that provider (required with " + ConsoleIssuer + "); its redirect URI is <public URL>/console/auth/callback"},
		{Name: ConsoleClientSecret, Secret: true, Doc: "the console's client secret (empty: a public client, PKCE only)"},
		{Name: ConsoleClientSecretRef, Doc: "the console's client secret as a bundle secret, <name>/<key>: locally <secrets>/<name>/<key>, on AWS the Secrets Manager secret " + SecretPrefix + "<name>, its JSON key <key> (instead of " + ConsoleClientSecret + ", which a Lambda's environment should not hold)"},
		{Name: ConsoleRolesClaim, Lambda: "agentauth_roles", Local: "agentauth_roles", Doc: "dot path of the operator's roles in the ID token (a list, or a comma-separated string): agentauth:platform-admin sees every tenant, agentauth:admin with " + TenantClaim + "'s claim that tenant"},
	}
}

// Names returns every variable name.
func Names() []string {
	vs := Variables()
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

// Config is agentauth's configuration.
type Config struct {
	// BundleDir is the bundle directory.
	BundleDir string
	// Home is the embedded backends' directory.
	Home string
	// SecretsDir resolves secretRef locally ("": <Home>/secrets, see
	// LocalSecrets).
	SecretsDir string
	// MasterKey is GOONDAN_OAUTH_KEY (empty: the key file in the home).
	MasterKey domain.Secret
	// PublicURL is the callback base URL ("" locally: the listen address).
	PublicURL string
	// MaxWait caps session long polls.
	MaxWait time.Duration
	// RuntimeToken is the local runtime credential (empty: the home's file).
	RuntimeToken domain.Secret
	// SessionRetention is how long after its expiry a finished OAuth
	// session is kept (oauth.Config.SessionRetention).
	SessionRetention time.Duration
	// QueueDedupWindow is how long the embedded event queue keeps a
	// handled event's id (filequeue.WithDedupWindow).
	QueueDedupWindow time.Duration
	// AuditRetention is how long the audit stream of tool calls keeps a
	// record; 0: no stored stream.
	AuditRetention time.Duration
	// AWS is set when AGENTAUTH_TABLE is: the AWS backends.
	AWS *AWS
	// TurnReserve is the time a turn step needs: with less left before
	// the invocation's deadline a turn hands over (engine.Engine.Reserve).
	TurnReserve time.Duration
	// Tools configures the tool plane (always) and its REST routes (on
	// when AGENTAUTH_JWKS_URL is set: Tools.Routes).
	Tools *Tools
	// Console is set when AGENTAUTH_CONSOLE_ISSUER is: the operator
	// console at /console/.
	Console *Console
}

// Console configures the operator console's sign-in.
type Console struct {
	Issuer, ClientID string
	ClientSecret     domain.Secret
	// ClientSecretRef names the client secret as a bundle secret
	// (SecretName/SecretKey) when ClientSecret is not given.
	SecretName, SecretKey string
	RolesClaim            string
}

// AWS names the AWS backends' resources.
type AWS struct {
	Table, KMSKeyID, QueueURL, SessionKeysSecret, SecretPrefix string
	// DeadLetterQueueURL is the events queue's dead-letter queue (""
	// none: no dead letters to list).
	DeadLetterQueueURL string
	// TurnBucket keeps large turn items ("": none).
	TurnBucket string
	// BundleRepo is the git bundle's object store (nil: the packaged
	// bundle directory, as is).
	BundleRepo *S3Folder
}

// S3Folder is a folder of a bucket: s3://<Bucket>/<Prefix>, Prefix ending
// with '/'.
type S3Folder struct {
	Bucket, Prefix string
}

// String is the folder as the variable writes it.
func (f S3Folder) String() string { return "s3://" + f.Bucket + "/" + f.Prefix }

// s3Bucket is an S3 bucket name (general purpose buckets' rules, without
// the finer ones S3 itself enforces).
var s3Bucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ParseS3Folder reads s3://<bucket>/<prefix>/: a bucket name and a
// non-empty folder of printable ASCII (a missing final '/' is added).
func ParseS3Folder(v string) (S3Folder, error) {
	rest, ok := strings.CutPrefix(v, "s3://")
	if !ok {
		return S3Folder{}, errors.New("want s3://<bucket>/<prefix>/")
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if !s3Bucket.MatchString(bucket) {
		return S3Folder{}, errors.New("want s3://<bucket>/<prefix>/ with a bucket name of 3-63 of a-z, 0-9, '.', '-'")
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if prefix == "" || len(prefix) > 512 || strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "//") {
		return S3Folder{}, errors.New("want s3://<bucket>/<prefix>/ with a folder such as bundle/")
	}
	for _, c := range prefix {
		if c <= ' ' || c > '~' {
			return S3Folder{}, errors.New("want s3://<bucket>/<prefix>/ with a folder of printable ASCII, no space")
		}
	}
	for _, seg := range strings.Split(strings.TrimSuffix(prefix, "/"), "/") {
		if seg == "." || seg == ".." {
			return S3Folder{}, errors.New("want s3://<bucket>/<prefix>/ with no . or .. segment")
		}
	}
	return S3Folder{Bucket: bucket, Prefix: prefix}, nil
}

// Tools is the tool routes' configuration.
type Tools struct {
	// Routes: the REST tool routes are served (AGENTAUTH_JWKS_URL is set);
	// JWT checks their callers. The rest configures the tool plane, which
	// agent turns use whether or not the routes are on.
	Routes bool
	JWT    jwtauth.Config
	// MCPResource is the MCP server's resource URL ("": <public URL>/mcp).
	MCPResource string
	// MCP bounds the MCP server.
	MCP MCP

	TenantClaim, SkillsClaim, SubjectsClaim string
	Seam                                    bool
	Limits                                  ratelimit.Limits
	AllowPrivateUpstreams                   bool
	UploadsCheckEvery                       time.Duration
	// Metrics is emf, log or off.
	Metrics string
}

// MCP is what bounds the MCP server (shared/edge/mcpapi): its allowed
// browser origins and its sessions.
type MCP struct {
	AllowedOrigins []string
	Sessions       mcpapi.SessionLimits
}

// mcpSeconds is a duration as the variables write it.
func mcpSeconds(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// LocalSecrets is the local secrets directory: AGENTAUTH_SECRETS, else
// <home>/secrets (after flags have set the home).
func (c Config) LocalSecrets() string {
	if c.SecretsDir != "" {
		return c.SecretsDir
	}
	return filepath.Join(c.Home, "secrets")
}

// FromEnv reads every variable through getenv (os.Getenv in production)
// with the profile's defaults. The error lists every problem, one per
// line, by variable name.
func FromEnv(getenv func(string) string, p Profile) (Config, error) {
	r := reader{getenv: getenv, profile: p, defaults: map[string]Var{}}
	for _, v := range Variables() {
		r.defaults[v.Name] = v
	}
	var c Config
	c.BundleDir = r.str(Bundle)
	c.Home = r.str(Home)
	c.SecretsDir = r.get(Secrets)
	c.MasterKey = domain.NewSecret(r.get(MasterKey))
	c.RuntimeToken = domain.NewSecret(r.get(RuntimeToken))
	c.PublicURL = strings.TrimRight(r.get(PublicURL), "/")
	if c.PublicURL == "" && p == Lambda {
		r.fail(PublicURL, "is required (the public base URL of the callback routes)")
	}
	c.MaxWait = time.Duration(r.intIn(MaxWait, 0, 55)) * time.Second
	c.SessionRetention = r.durationIn(SessionRetention, time.Minute, 8760*time.Hour)
	c.QueueDedupWindow = r.durationIn(QueueDedupWindow, time.Minute, 8760*time.Hour)
	if strings.TrimSpace(r.str(AuditRetention)) != "0" {
		c.AuditRetention = r.durationIn(AuditRetention, time.Minute, 8760*time.Hour)
	}
	if r.get(Table) != "" {
		c.AWS = &AWS{Table: r.get(Table), KMSKeyID: r.get(KMSKeyID), QueueURL: r.get(QueueURL),
			SessionKeysSecret: r.get(SessionKeysSecret), SecretPrefix: r.str(SecretPrefix), TurnBucket: r.get(TurnBucket),
			DeadLetterQueueURL: r.get(DeadLetterQueueURL)}
		for _, k := range []string{KMSKeyID, QueueURL, SessionKeysSecret} {
			if r.get(k) == "" {
				r.fail(k, "is required with "+Table)
			}
		}
		if v := r.get(BundleRepo); v != "" {
			f, err := ParseS3Folder(v)
			if err != nil {
				r.fail(BundleRepo, err.Error())
			} else {
				c.AWS.BundleRepo = &f
			}
		}
	} else if r.get(BundleRepo) != "" {
		// The repository's ref and records live in the table: without it
		// there is nowhere to keep them.
		r.fail(BundleRepo, "needs "+Table+" (the AWS backends)")
	}
	c.TurnReserve = time.Duration(r.intIn(TurnReserve, 1, 900)) * time.Second
	c.Tools = r.tools()
	if iss := r.get(ConsoleIssuer); iss != "" {
		c.Console = &Console{Issuer: strings.TrimRight(iss, "/"), ClientID: r.get(ConsoleClientID),
			ClientSecret: domain.NewSecret(r.get(ConsoleClientSecret)), RolesClaim: r.claimPath(ConsoleRolesClaim)}
		if err := jwtauth.CheckJWKSURL(iss); err != nil {
			r.fail(ConsoleIssuer, err.Error())
		}
		if c.Console.ClientID == "" {
			r.fail(ConsoleClientID, "is required with "+ConsoleIssuer)
		}
		if ref := r.get(ConsoleClientSecretRef); ref != "" {
			name, key, ok := strings.Cut(ref, "/")
			switch {
			case !c.Console.ClientSecret.IsZero():
				r.fail(ConsoleClientSecretRef, "and "+ConsoleClientSecret+" are both set: give the secret one way")
			case !ok || name == "" || key == "" || strings.Contains(key, "/"):
				r.fail(ConsoleClientSecretRef, "must be <name>/<key>, e.g. console/clientSecret")
			default:
				c.Console.SecretName, c.Console.SecretKey = name, key
			}
		}
	}
	return c, errors.Join(r.errs...)
}

func (r *reader) tools() *Tools {
	t := &Tools{}
	if r.get(JWKSURL) != "" {
		t.Routes = true
		t.JWT = jwtauth.Config{JWKSURL: r.get(JWKSURL), Issuer: r.get(JWTIssuer), Audience: r.get(JWTAudience)}
		if err := jwtauth.CheckJWKSURL(t.JWT.JWKSURL); err != nil {
			r.fail(JWKSURL, err.Error())
		}
		for _, k := range []string{JWTIssuer, JWTAudience} {
			if r.get(k) == "" {
				r.fail(k, "is required with "+JWKSURL)
			}
		}
		// Checked where it is used (shared/edge/mcpapi): a bad one fails
		// the start, named by this variable.
		t.MCPResource = r.get(MCPResource)
	}
	t.TenantClaim, t.SkillsClaim, t.SubjectsClaim = r.claimPath(TenantClaim), r.claimPath(SkillsClaim), r.claimPath(SubjectsClaim)
	t.Seam = r.flag(ToolhooksSeam)
	t.AllowPrivateUpstreams = r.flag(AllowPrivateUpstreams)
	var err error
	if t.Limits, err = ratelimit.ParseLimits(r.get(ToolRateLimit), r.get(ToolRateLimits)); err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s / %s: %w", ToolRateLimit, ToolRateLimits, err))
	}
	t.UploadsCheckEvery = time.Duration(r.intIn(UploadsCheckSeconds, 1, 3600)) * time.Second
	t.MCP = r.mcp()
	switch t.Metrics = r.str(Metrics); t.Metrics {
	case "emf", "log", "off":
	default:
		r.fail(Metrics, "want emf, log or off")
	}
	return t
}

// mcp reads the MCP server's bounds.
func (r *reader) mcp() MCP {
	var m MCP
	for o := range strings.SplitSeq(r.get(MCPAllowedOrigins), ",") {
		if o = strings.TrimSpace(o); o != "" {
			m.AllowedOrigins = append(m.AllowedOrigins, o)
		}
	}
	if _, err := mcpapi.ParseOrigins(m.AllowedOrigins); err != nil {
		r.fail(MCPAllowedOrigins, "want comma-separated origins, each scheme://host[:port] (http or https, no path)")
	}
	m.Sessions.IdleTimeout = time.Duration(r.intIn(MCPSessionIdle, 10, 86400)) * time.Second
	m.Sessions.MaxSessions = r.intIn(MCPMaxSessions, 1, 100000)
	m.Sessions.MaxPerPrincipal = r.intIn(MCPMaxSessionsPer, 1, 10000)
	var err error
	if m.Sessions.InitializeRate, err = ratelimit.ParseLimit(r.str(MCPInitializeRate)); err != nil {
		r.fail(MCPInitializeRate, err.Error())
	}
	return m
}

// reader collects every problem instead of stopping at the first.
type reader struct {
	getenv   func(string) string
	profile  Profile
	defaults map[string]Var
	errs     []error
}

func (r *reader) get(name string) string { return strings.TrimSpace(r.getenv(name)) }

func (r *reader) fail(name, msg string) { r.errs = append(r.errs, fmt.Errorf("%s: %s", name, msg)) }

// str is the value or the profile's default.
func (r *reader) str(name string) string {
	if v := r.get(name); v != "" {
		return v
	}
	if r.profile == Local {
		return r.defaults[name].Local
	}
	return r.defaults[name].Lambda
}

func (r *reader) intIn(name string, lo, hi int) int {
	n, err := strconv.Atoi(r.str(name))
	if err != nil || n < lo || n > hi {
		r.fail(name, fmt.Sprintf("want a whole number from %d to %d", lo, hi))
	}
	return n
}

// durationIn is a Go duration (5m, 24h) from lo to hi.
func (r *reader) durationIn(name string, lo, hi time.Duration) time.Duration {
	d, err := time.ParseDuration(r.str(name))
	if err != nil || d < lo || d > hi {
		r.fail(name, fmt.Sprintf("want a Go duration from %s to %s, like 5m or 24h", fmtDuration(lo), fmtDuration(hi)))
	}
	return d
}

// fmtDuration writes whole minutes and hours as people do (1m, 24h), not
// as time.Duration does (1m0s, 24h0m0s).
func fmtDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

func (r *reader) flag(name string) bool {
	switch strings.ToLower(r.str(name)) {
	case "0", "false":
		return false
	case "1", "true":
		return true
	}
	r.fail(name, "want 1 or 0")
	return false
}

func (r *reader) claimPath(name string) string {
	v := r.str(name)
	if err := domain.CheckClaimPath(v); err != nil {
		r.fail(name, err.Error()+" (want a dot path into the claims, like tenant_id or org.id)")
	}
	return v
}
