package bundle

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

const appsYAML = `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata:
  name: slack-bot
  labels:
    team: platform
spec:
  provider: slack
  flow: authorizationCode
  subjectMode: global
  client:
    clientId:
      valueFrom:
        env: SLACK_CLIENT_ID
    clientSecret:
      valueFrom:
        secretRef:
          ref: Secret/slack
          key: client-secret
    authStyle: params
  endpoints:
    authorizationUrl: https://slack.com/oauth/v2/authorize
    tokenUrl: https://slack.com/api/oauth.v2.access
    revokeUrl: https://slack.com/api/auth.revoke
  scopes: ["chat:write", "channels:read"]
  redirect:
    callbackPath: /oauth/callback/slack-bot
  options:
    user_scope: identity.basic
    team: T111
---
apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata:
  name: demo-user
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: user
  client:
    clientId: {value: demo-client}
    clientSecret:
      valueFrom: {env: DEMO_SECRET}
  endpoints:
    authorizationUrl: http://127.0.0.1:9000/auth
    tokenUrl: http://127.0.0.1:9000/token
    userInfoUrl: http://localhost:9000/me
  scopes:
    - openid
    - profile
  redirect:
    callbackPath: /oauth/callback/demo-user
    baseUrl: http://localhost:8080/
  subjectVerification:
    template: "oidc:user:{sub}"
`

const deviceYAML = `---
# an empty document first: skipped
---
apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata:
  name: cli-device
spec:
  provider: github
  flow: deviceCode
  subjectMode: user
  client:
    clientId: {value: Iv1.abc}
    clientSecret: {value: not-really-secret}
  endpoints:
    deviceAuthorizationUrl: https://github.com/login/device/code
    tokenUrl: https://github.com/login/oauth/access_token
  scopes: [openid, "read:user"]
  subjectVerification:
    issuer: https://issuer.example.com
    jwksUrl: https://issuer.example.com/jwks
`

const (
	slackClientID = "slack-client-id-1234"
	demoSecret    = "env-secret-VALUE-7f3a"
	slackSecret   = "file-secret-VALUE-9c1e"
	openAIKey     = "sk-env-VALUE-41d2"
	hookKey       = "hook-env-VALUE-0123456789abcdef0123"
	chatHMACKey   = "chat-file-VALUE-0123456789abcdef0123"
)

type fakeSecrets map[string]string // "name/key" → value

func (f fakeSecrets) ResolveSecret(name, key string) (domain.Secret, error) {
	v, ok := f[name+"/"+key]
	if !ok {
		return domain.Secret{}, fmt.Errorf("secret %s key %s: %w", name, key, domain.ErrNotFound)
	}
	return domain.NewSecret(v), nil
}

func fakeEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func validOptions() Options {
	return Options{
		LookupEnv: fakeEnv(map[string]string{
			"SLACK_CLIENT_ID": slackClientID,
			"DEMO_SECRET":     demoSecret,
			"EMPTY_VAR":       "",
			"OPENAI_API_KEY":  openAIKey,
			"HOOK_KEY":        hookKey,
		}),
		Secrets: fakeSecrets{"slack/client-secret": slackSecret, "chat-ui/hmac": chatHMACKey},
	}
}

func validFiles() map[string]string {
	return map[string]string{"apps.yaml": appsYAML, "more/device.yaml": deviceYAML}
}

// mustParse parses files with validOptions.
func mustParse(t *testing.T, files map[string]string) *Bundle {
	t.Helper()
	b, err := Parse(toFiles(files), validOptions())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return b
}

func toFiles(m map[string]string) []File {
	var fs []File
	for name, data := range m {
		fs = append(fs, File{Name: name, Data: []byte(data)})
	}
	return fs
}

func TestParseValidBundle(t *testing.T) {
	b := mustParse(t, validFiles())
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(b.Revision) {
		t.Errorf("Revision = %q, want 64 hex digits", b.Revision)
	}
	if len(b.OAuthApps) != 3 {
		t.Fatalf("OAuthApps has %d apps, want 3", len(b.OAuthApps))
	}

	slack := b.OAuthApps["slack-bot"]
	wantSlack := &OAuthApp{
		Name: "slack-bot", Labels: map[string]string{"team": "platform"},
		File: "apps.yaml", Line: 1,
		Provider: "slack", Flow: FlowAuthorizationCode, SubjectMode: domain.SubjectModeGlobal,
		ClientID: slackClientID, ClientSecret: domain.NewSecret(slackSecret), AuthStyle: "params",
		Endpoints: Endpoints{
			AuthorizationURL: "https://slack.com/oauth/v2/authorize",
			TokenURL:         "https://slack.com/api/oauth.v2.access",
			RevokeURL:        "https://slack.com/api/auth.revoke",
		},
		Scopes:   []string{"chat:write", "channels:read"},
		Redirect: Redirect{CallbackPath: "/oauth/callback/slack-bot"},
		Options:  map[string]any{"user_scope": "identity.basic", "team": "T111"},
	}
	if !reflect.DeepEqual(slack, wantSlack) {
		t.Errorf("slack-bot =\n%#v\nwant\n%#v", *slack, *wantSlack)
	}
	if slack.ClientSecret.Reveal() != slackSecret {
		t.Errorf("slack-bot client secret not resolved from the secret store")
	}

	demo := b.OAuthApps["demo-user"]
	if demo.Line != 32 || demo.File != "apps.yaml" {
		t.Errorf("demo-user at %s:%d, want apps.yaml:32", demo.File, demo.Line)
	}
	if demo.ClientID != "demo-client" || demo.ClientSecret.Reveal() != demoSecret {
		t.Errorf("demo-user client not resolved: id %q", demo.ClientID)
	}
	wantSV := &SubjectVerification{Source: VerifyUserInfo, Template: "oidc:user:{sub}"}
	if !reflect.DeepEqual(demo.SubjectVerification, wantSV) {
		t.Errorf("demo-user SubjectVerification = %+v, want %+v", demo.SubjectVerification, wantSV)
	}
	if demo.Redirect != (Redirect{CallbackPath: "/oauth/callback/demo-user", BaseURL: "http://localhost:8080/"}) {
		t.Errorf("demo-user Redirect = %+v", demo.Redirect)
	}
	if demo.Endpoints.UserInfoURL != "http://localhost:9000/me" {
		t.Errorf("demo-user UserInfoURL = %q", demo.Endpoints.UserInfoURL)
	}

	dev := b.OAuthApps["cli-device"]
	if dev.File != "more/device.yaml" || dev.Line != 4 {
		t.Errorf("cli-device at %s:%d, want more/device.yaml:4", dev.File, dev.Line)
	}
	if dev.Flow != FlowDeviceCode || dev.Redirect.CallbackPath != "" ||
		dev.Endpoints.DeviceAuthorizationURL != "https://github.com/login/device/code" {
		t.Errorf("cli-device = %+v", dev)
	}
	wantDevSV := &SubjectVerification{Source: VerifyIDToken, Issuer: "https://issuer.example.com", JWKSURL: "https://issuer.example.com/jwks"}
	if !reflect.DeepEqual(dev.SubjectVerification, wantDevSV) {
		t.Errorf("cli-device SubjectVerification = %+v, want %+v", dev.SubjectVerification, wantDevSV)
	}

	wantWarnings := []string{
		"more/device.yaml:14: OAuthApp/cli-device: spec.client.clientSecret.value: a literal secret in the bundle is for tests and demos; use valueFrom (env or secretRef) (spec 2.4 rule 4)",
	}
	if !reflect.DeepEqual(b.Warnings, wantWarnings) {
		t.Errorf("Warnings =\n%q\nwant\n%q", b.Warnings, wantWarnings)
	}
}

func TestBundleLookups(t *testing.T) {
	b := mustParse(t, validFiles())
	if a, ok := b.OAuthApp(domain.ObjectRef{Kind: "OAuthApp", Name: "demo-user"}); !ok || a.Name != "demo-user" {
		t.Errorf("OAuthApp(OAuthApp/demo-user) = %v, %v", a, ok)
	}
	if _, ok := b.OAuthApp(domain.ObjectRef{Kind: "Tool", Name: "demo-user"}); ok {
		t.Error("OAuthApp(Tool/demo-user) found an app; the kind must be OAuthApp")
	}
	if _, ok := b.OAuthApp(domain.ObjectRef{Kind: "OAuthApp", Name: "nope"}); ok {
		t.Error("OAuthApp(OAuthApp/nope) found an app")
	}
	if a, ok := b.AppByCallbackPath("/oauth/callback/slack-bot"); !ok || a.Name != "slack-bot" {
		t.Errorf("AppByCallbackPath(slack) = %v, %v", a, ok)
	}
	for _, p := range []string{"", "/oauth/callback/slack-bot/", "/oauth/callback/nope"} {
		if a, ok := b.AppByCallbackPath(p); ok {
			t.Errorf("AppByCallbackPath(%q) = %s, want none", p, a.Name)
		}
	}
	if a, ok := b.AppByCallbackPath("/oauth/callback/demo-user"); !ok || a.Ref() != (domain.ObjectRef{Kind: "OAuthApp", Name: "demo-user"}) {
		t.Errorf("AppByCallbackPath(demo) = %v, %v", a, ok)
	}

	tests := []struct {
		app, server, want string
	}{
		{"slack-bot", "https://auth.example.com", "https://auth.example.com/oauth/callback/slack-bot"},
		{"slack-bot", "https://auth.example.com/", "https://auth.example.com/oauth/callback/slack-bot"},
		{"slack-bot", "https://example.com/prefix//", "https://example.com/prefix/oauth/callback/slack-bot"},
		{"demo-user", "https://ignored.example.com", "http://localhost:8080/oauth/callback/demo-user"},
		{"cli-device", "https://auth.example.com", ""},
	}
	for _, tt := range tests {
		if got := b.OAuthApps[tt.app].CallbackURL(tt.server); got != tt.want {
			t.Errorf("%s.CallbackURL(%q) = %q, want %q", tt.app, tt.server, got, tt.want)
		}
	}
	var nilBundle *Bundle
	if _, ok := nilBundle.OAuthApp(domain.ObjectRef{Kind: "OAuthApp", Name: "x"}); ok {
		t.Error("nil bundle found an app")
	}
}

// lineOf is the 1-based line of the first occurrence of at in text.
func lineOf(t *testing.T, text, at string) int {
	t.Helper()
	i := strings.Index(text, at)
	if i < 0 {
		t.Fatalf("test setup: %q not in the mutated file", at)
	}
	return strings.Count(text[:i], "\n") + 1
}

// mutate replaces the first old in files[name] by new.
func mutate(t *testing.T, files map[string]string, name, old, new string) string {
	t.Helper()
	s, ok := files[name]
	if !ok {
		s = ""
	}
	if old == "" {
		s += new
	} else {
		if !strings.Contains(s, old) {
			t.Fatalf("test setup: %q not in %s", old, name)
		}
		s = strings.Replace(s, old, new, 1)
	}
	files[name] = s
	return s
}

// ruleCase breaks one rule in a valid bundle: Parse must fail and name it.
type ruleCase struct {
	name     string
	file     string // the file to change; runRuleCases' file when empty
	old, new string // replace the first old by new; old "" appends new
	at       string // the error must name the line of this text in the changed file
	want     string // what follows "file:line: " in the error
	opts     func(*Options)
}

// runRuleCases runs each case on valid() changed as it says, with
// validOptions changed by its opts.
func runRuleCases(t *testing.T, valid func() map[string]string, file string, tests []ruleCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := valid()
			file := cmp.Or(tt.file, file)
			changed := files[file]
			if tt.old != "" || tt.new != "" {
				changed = mutate(t, files, file, tt.old, tt.new)
			}
			opts := validOptions()
			if tt.opts != nil {
				tt.opts(&opts)
			}
			b, err := Parse(toFiles(files), opts)
			if err == nil {
				t.Fatalf("Parse succeeded, want error %q", tt.want)
			}
			if b != nil {
				t.Error("Parse returned a bundle with an error")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("error %T is not a *ValidationError with problems", err)
			}
			want := fmt.Sprintf("%s:%d: %s", file, lineOf(t, changed, tt.at), tt.want)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not contain\n  %s\ngot\n  %s", want, strings.ReplaceAll(err.Error(), "\n", "\n  "))
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error shows a URL password: %s", err)
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != len(ve.Problems) {
				t.Errorf("Error() has %d lines for %d problems", len(lines), len(ve.Problems))
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	const dev = "more/device.yaml"
	runRuleCases(t, validFiles, "apps.yaml", []ruleCase{
		// Envelope.
		{name: "apiVersion", old: "apiVersion: agents.example.io/v1alpha1", new: "apiVersion: v1",
			at: "apiVersion: v1", want: `OAuthApp/slack-bot: apiVersion: "v1" is not supported; want agents.example.io/v1alpha1`},
		{name: "apiVersion missing", file: dev, old: "apiVersion: agents.example.io/v1alpha1\n", new: "",
			at: "kind: OAuthApp", want: "OAuthApp/cli-device: apiVersion: required"},
		{name: "unknown kind", old: "kind: OAuthApp\nmetadata:\n  name: demo-user", new: "kind: Tol\nmetadata:\n  name: demo-user",
			at: "kind: Tol", want: `Tol/demo-user: kind: unknown kind "Tol"; known kinds: AccessPolicy, Agent, Connector, Model, OAuthApp, Skill, Swarm, Tool, ToolGroup`},
		{name: "kind missing", file: dev, old: "kind: OAuthApp\n", new: "",
			at: "apiVersion", want: "kind: required"},
		{name: "name invalid", old: "name: demo-user", new: "name: Demo_User",
			at: "name: Demo_User", want: `OAuthApp: metadata.name: "Demo_User" is not a valid name`},
		{name: "name too long", old: "name: demo-user", new: "name: " + strings.Repeat("a", 64),
			at: "name: aaaa", want: `OAuthApp: metadata.name: "aaaa`},
		{name: "name ends with dash", old: "name: demo-user", new: "name: demo-",
			at: "name: demo-", want: `OAuthApp: metadata.name: "demo-" is not a valid name`},
		{name: "name missing", old: "metadata:\n  name: demo-user\n", new: "metadata: {}\n",
			at: "metadata: {}", want: "OAuthApp: metadata.name: required"},
		{name: "label not a string", old: "team: platform", new: "team: [a]",
			at: "team: [a]", want: "OAuthApp/slack-bot: metadata.labels.team: must be a string, got a list"},
		{name: "label a boolean", old: "team: platform", new: "team: true",
			at: "team: true", want: "OAuthApp/slack-bot: metadata.labels.team: must be a string, got a boolean (quote it)"},
		{name: "label key empty", old: "team: platform", new: `"": platform`,
			at: `"": platform`, want: "OAuthApp/slack-bot: metadata.labels: keys must not be empty"},
		{name: "unknown metadata field", old: "  name: demo-user\n", new: "  name: demo-user\n  annotations: {}\n",
			at: "annotations", want: "OAuthApp/demo-user: metadata.annotations: unknown field; known fields: name, labels"},
		{name: "unknown top-level field", old: "", new: "status: {}\n",
			at: "status", want: "OAuthApp/demo-user: status: unknown field; known fields: apiVersion, kind, metadata, spec"},
		{name: "spec missing", file: "extra.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: OAuthApp\nmetadata: {name: x}\n",
			at: "apiVersion", want: "OAuthApp/x: spec: required"},
		{name: "spec not a mapping", file: "extra.yaml", new: "apiVersion: agents.example.io/v1alpha1\nkind: OAuthApp\nmetadata: {name: x}\nspec: [1]\n",
			at: "spec:", want: "OAuthApp/x: spec: must be a mapping, got a list"},
		{name: "document not a mapping", file: "extra.yaml", new: "a: 1\n---\n- a\n- b\n",
			at: "- a", want: "a resource must be a YAML mapping"},
		{name: "duplicate key", old: "  provider: demo\n", new: "  provider: demo\n  provider: demo2\n",
			at: "provider: demo2", want: "OAuthApp/demo-user: spec.provider: duplicate key (first at line 37)"},
		{name: "yaml syntax", old: "  scopes:\n    - openid\n", new: "  scopes: [openid\n",
			at: "  scopes: [openid", want: "invalid YAML: did not find expected ',' or ']'"},
		{name: "duplicate name in same file", old: "name: demo-user", new: "name: slack-bot",
			at: "name: slack-bot\nspec:\n  provider: demo", want: "OAuthApp/slack-bot: metadata.name: duplicate OAuthApp/slack-bot: already defined at apps.yaml:1"},
		{name: "duplicate name across files", file: dev, old: "name: cli-device", new: "name: demo-user",
			at: "name: demo-user", want: "OAuthApp/demo-user: metadata.name: duplicate OAuthApp/demo-user: already defined at apps.yaml:32"},

		// Plain fields.
		{name: "unknown spec field", old: "  flow: authorizationCode\n  subjectMode: user", new: "  flow: authorizationCode\n  subjectmode: user",
			at: "subjectmode", want: "OAuthApp/demo-user: spec.subjectmode: unknown field; did you mean subjectMode?"},
		{name: "provider missing", old: "  provider: demo\n", new: "",
			at: "spec:\n  flow", want: "OAuthApp/demo-user: spec.provider: required"},
		{name: "provider empty", old: "provider: demo", new: `provider: ""`,
			at: `provider: ""`, want: "OAuthApp/demo-user: spec.provider: must not be empty"},
		{name: "provider not a string", old: "provider: demo", new: "provider: {a: b}",
			at: "provider: {", want: "OAuthApp/demo-user: spec.provider: must be a string, got a mapping"},
		{name: "flow invalid", old: "flow: authorizationCode\n  subjectMode: user", new: "flow: implicit\n  subjectMode: user",
			at: "flow: implicit", want: `OAuthApp/demo-user: spec.flow: "implicit" is not allowed; allowed values: authorizationCode, deviceCode`},
		{name: "flow missing", file: dev, old: "  flow: deviceCode\n", new: "",
			at: "spec:", want: "OAuthApp/cli-device: spec.flow: required"},
		{name: "subjectMode invalid", old: "subjectMode: user", new: "subjectMode: tenant",
			at: "subjectMode: tenant", want: `OAuthApp/demo-user: spec.subjectMode: "tenant" is not allowed; allowed values: global, user`},
		{name: "subjectMode missing", old: "  subjectMode: global\n", new: "",
			at: "spec:", want: "OAuthApp/slack-bot: spec.subjectMode: required"},
		{name: "authStyle invalid", old: "authStyle: params", new: "authStyle: basic",
			at: "authStyle", want: `OAuthApp/slack-bot: spec.client.authStyle: "basic" is not allowed; allowed values: header, params`},

		// ValueSource.
		{name: "clientId missing", old: "    clientId: {value: demo-client}\n", new: "",
			at: "  client:\n    clientSecret:\n      valueFrom: {env", want: "OAuthApp/demo-user: spec.client.clientId: required"},
		{name: "client missing", file: dev, old: "  client:\n    clientId: {value: Iv1.abc}\n    clientSecret: {value: not-really-secret}\n", new: "",
			at: "spec:", want: "OAuthApp/cli-device: spec.client.clientId: required"},
		{name: "clientId value not a string", old: "{value: demo-client}", new: "{value: 12345}",
			at: "{value: 12345}", want: "OAuthApp/demo-user: spec.client.clientId.value: must be a string, got a number (quote it)"},
		{name: "clientId value empty", old: "{value: demo-client}", new: `{value: ""}`,
			at: `{value: ""}`, want: "OAuthApp/demo-user: spec.client.clientId.value: must not be empty"},
		{name: "value source typo", old: "{value: demo-client}", new: "{Value: demo-client}",
			at: "{Value", want: "OAuthApp/demo-user: spec.client.clientId.Value: unknown field; did you mean value?"},
		{name: "value and valueFrom", old: "      valueFrom: {env: DEMO_SECRET}\n", new: "      valueFrom: {env: DEMO_SECRET}\n      value: x\n",
			at: "    clientSecret:\n      valueFrom: {env: DEMO", want: "OAuthApp/demo-user: spec.client.clientSecret: set only one of value and valueFrom"},
		{name: "value source empty", old: "    clientSecret:\n      valueFrom: {env: DEMO_SECRET}\n", new: "    clientSecret: {}\n",
			at: "clientSecret: {}", want: "OAuthApp/demo-user: spec.client.clientSecret: needs one of value, valueFrom.env or valueFrom.secretRef"},
		{name: "value source not a mapping", old: "{value: demo-client}", new: "demo-client",
			at: "clientId: demo-client", want: "OAuthApp/demo-user: spec.client.clientId: must be a mapping, got a !!str value"},
		{name: "env not set", old: "env: DEMO_SECRET", new: "env: NOPE_SECRET",
			at: "NOPE_SECRET", want: `OAuthApp/demo-user: spec.client.clientSecret.valueFrom.env: environment variable "NOPE_SECRET" is not set`},
		{name: "env empty", old: "env: DEMO_SECRET", new: "env: EMPTY_VAR",
			at: "EMPTY_VAR", want: `OAuthApp/demo-user: spec.client.clientSecret.valueFrom.env: environment variable "EMPTY_VAR" is empty`},
		{name: "env name empty", old: "env: DEMO_SECRET", new: `env: ""`,
			at: `env: ""`, want: "OAuthApp/demo-user: spec.client.clientSecret.valueFrom.env: must name an environment variable"},
		{name: "env name not a string", old: "env: DEMO_SECRET", new: "env: [DEMO_SECRET]",
			at: "env: [", want: "OAuthApp/demo-user: spec.client.clientSecret.valueFrom.env: must be a string, got a list"},
		{name: "valueFrom not a mapping", old: "{env: DEMO_SECRET}", new: "DEMO_SECRET",
			at: "valueFrom: DEMO_SECRET", want: "OAuthApp/demo-user: spec.client.clientSecret.valueFrom: must be a mapping, got a !!str value"},
		{name: "env and secretRef", old: "{env: DEMO_SECRET}", new: "{env: DEMO_SECRET, secretRef: {ref: Secret/slack, key: client-secret}}",
			at: "valueFrom: {env", want: "OAuthApp/demo-user: spec.client.clientSecret.valueFrom: set only one of env and secretRef"},
		{name: "valueFrom empty", old: "{env: DEMO_SECRET}", new: "{}",
			at: "valueFrom: {}", want: "OAuthApp/demo-user: spec.client.clientSecret.valueFrom: needs env or secretRef"},
		{name: "secretRef wrong kind", old: "ref: Secret/slack", new: "ref: Config/slack",
			at: "ref: Config", want: `OAuthApp/slack-bot: spec.client.clientSecret.valueFrom.secretRef.ref: "Config/slack": want Secret/<name>`},
		{name: "secretRef key missing", old: "          key: client-secret\n", new: "",
			at: "        secretRef:", want: "OAuthApp/slack-bot: spec.client.clientSecret.valueFrom.secretRef.key: required"},
		{name: "secret not found", old: "key: client-secret", new: "key: other",
			at: "ref: Secret/slack", want: `OAuthApp/slack-bot: spec.client.clientSecret.valueFrom.secretRef: Secret/slack key "other": secret slack key other: not found`},
		{name: "secret empty", opts: func(o *Options) { o.Secrets = fakeSecrets{"slack/client-secret": ""} },
			at: "ref: Secret/slack", want: `OAuthApp/slack-bot: spec.client.clientSecret.valueFrom.secretRef: Secret/slack key "client-secret" is empty`},
		{name: "no secret store", opts: func(o *Options) { o.Secrets = nil },
			at: "ref: Secret/slack", want: `OAuthApp/slack-bot: spec.client.clientSecret.valueFrom.secretRef: no secret store configured to resolve Secret/slack key "client-secret"`},

		// Endpoints and flows.
		{name: "tokenUrl missing", old: "    tokenUrl: http://127.0.0.1:9000/token\n", new: "",
			at: "  endpoints:\n    authorizationUrl: http://127", want: "OAuthApp/demo-user: spec.endpoints.tokenUrl: required when flow is authorizationCode"},
		{name: "tokenUrl typo", old: "tokenUrl: http://127.0.0.1:9000/token", new: "tokenURL: http://127.0.0.1:9000/token",
			at: "tokenURL", want: "OAuthApp/demo-user: spec.endpoints.tokenURL: unknown field; did you mean tokenUrl?"},
		{name: "authorizationUrl missing", old: "    authorizationUrl: https://slack.com/oauth/v2/authorize\n", new: "",
			at: "  endpoints:", want: "OAuthApp/slack-bot: spec.endpoints.authorizationUrl: required when flow is authorizationCode"},
		{name: "endpoints missing", old: "  endpoints:\n    authorizationUrl: https://slack.com/oauth/v2/authorize\n    tokenUrl: https://slack.com/api/oauth.v2.access\n    revokeUrl: https://slack.com/api/auth.revoke\n", new: "",
			at: "spec:", want: "OAuthApp/slack-bot: spec.endpoints.tokenUrl: required when flow is authorizationCode"},
		{name: "callbackPath missing", old: "    callbackPath: /oauth/callback/demo-user\n", new: "",
			at: "  redirect:\n    baseUrl", want: "OAuthApp/demo-user: spec.redirect.callbackPath: required when flow is authorizationCode"},
		{name: "deviceAuthorizationUrl missing", file: dev, old: "    deviceAuthorizationUrl: https://github.com/login/device/code\n", new: "",
			at: "  endpoints:", want: "OAuthApp/cli-device: spec.endpoints.deviceAuthorizationUrl: required when flow is deviceCode"},
		{name: "device tokenUrl missing", file: dev, old: "    tokenUrl: https://github.com/login/oauth/access_token\n", new: "",
			at: "  endpoints:", want: "OAuthApp/cli-device: spec.endpoints.tokenUrl: required when flow is deviceCode"},
		{name: "url relative", old: "authorizationUrl: http://127.0.0.1:9000/auth", new: "authorizationUrl: /auth",
			at: "authorizationUrl: /auth", want: "OAuthApp/demo-user: spec.endpoints.authorizationUrl: must be an absolute http or https URL"},
		{name: "url scheme", old: "revokeUrl: https://slack.com/api/auth.revoke", new: "revokeUrl: ftp://slack.com/revoke",
			at: "revokeUrl", want: "OAuthApp/slack-bot: spec.endpoints.revokeUrl: must be an absolute http or https URL"},
		{name: "url plain http", old: "authorizationUrl: http://127.0.0.1:9000/auth", new: "authorizationUrl: http://auth.example.com/auth",
			at: "authorizationUrl: http://auth", want: "OAuthApp/demo-user: spec.endpoints.authorizationUrl: https is required (plain http only for loopback hosts: localhost, 127.0.0.1, ::1)"},
		{name: "url plain http ipv6 loopback ok, other not", old: "tokenUrl: http://127.0.0.1:9000/token", new: "tokenUrl: http://[::1]:9000/token\n    revokeUrl: http://10.0.0.1/revoke",
			at: "revokeUrl: http://10", want: "OAuthApp/demo-user: spec.endpoints.revokeUrl: https is required"},
		{name: "url credentials", old: "tokenUrl: https://slack.com/api/oauth.v2.access", new: "tokenUrl: https://user:hunter2@slack.com/token",
			at: "tokenUrl", want: "OAuthApp/slack-bot: spec.endpoints.tokenUrl: must not contain credentials"},
		{name: "url fragment", old: "userInfoUrl: http://localhost:9000/me", new: "userInfoUrl: http://localhost:9000/me#x",
			at: "userInfoUrl", want: "OAuthApp/demo-user: spec.endpoints.userInfoUrl: must not contain a fragment"},

		// Scopes.
		{name: "scope duplicate", old: "    - profile\n", new: "    - profile\n    - openid\n",
			at: "    - openid\n  redirect", want: `OAuthApp/demo-user: spec.scopes[2]: duplicate scope "openid" (also spec.scopes[0])`},
		{name: "scope empty", old: `["chat:write", "channels:read"]`, new: `["chat:write", ""]`,
			at: "scopes:", want: "OAuthApp/slack-bot: spec.scopes[1]: must not be empty"},
		{name: "scope with space", old: `["chat:write", "channels:read"]`, new: `["chat:write channels:read"]`,
			at: "scopes:", want: `OAuthApp/slack-bot: spec.scopes[0]: "chat:write channels:read" must not contain spaces`},
		{name: "scope not a string", old: "    - profile\n", new: "    - {a: b}\n",
			at: "{a: b}", want: "OAuthApp/demo-user: spec.scopes[1]: must be a string"},
		{name: "scopes not a list", old: `["chat:write", "channels:read"]`, new: `chat:write`,
			at: "scopes:", want: "OAuthApp/slack-bot: spec.scopes: must be a list, got a !!str value"},

		// Redirect.
		{name: "callbackPath relative", old: "callbackPath: /oauth/callback/demo-user", new: "callbackPath: oauth/callback",
			at: "callbackPath: oauth", want: "OAuthApp/demo-user: spec.redirect.callbackPath: must start with /"},
		{name: "callbackPath /v1/", old: "callbackPath: /oauth/callback/demo-user", new: "callbackPath: /v1/oauth/callback",
			at: "callbackPath: /v1", want: "OAuthApp/demo-user: spec.redirect.callbackPath: must not start with /v1/"},
		{name: "callbackPath healthz", old: "callbackPath: /oauth/callback/demo-user", new: "callbackPath: /healthz",
			at: "callbackPath: /healthz", want: "OAuthApp/demo-user: spec.redirect.callbackPath: /healthz is reserved"},
		{name: "callbackPath query", old: "callbackPath: /oauth/callback/demo-user", new: "callbackPath: /cb?x=1",
			at: "callbackPath: /cb?", want: "OAuthApp/demo-user: spec.redirect.callbackPath: must be a path only, without ? or #"},
		{name: "callbackPath fragment", old: "callbackPath: /oauth/callback/demo-user", new: `callbackPath: "/cb#x"`,
			at: "callbackPath: \"/cb#", want: "OAuthApp/demo-user: spec.redirect.callbackPath: must be a path only, without ? or #"},
		{name: "callbackPath dot segments", old: "callbackPath: /oauth/callback/demo-user", new: "callbackPath: /oauth/../cb",
			at: "callbackPath: /oauth/..", want: "OAuthApp/demo-user: spec.redirect.callbackPath: must be a clean path"},
		{name: "callbackPath duplicate", old: "callbackPath: /oauth/callback/demo-user", new: "callbackPath: /oauth/callback/slack-bot",
			at: "callbackPath: /oauth/callback/slack-bot\n    baseUrl", want: `OAuthApp/demo-user: spec.redirect.callbackPath: "/oauth/callback/slack-bot" is already used by OAuthApp/slack-bot (apps.yaml:27)`},
		{name: "callbackPath duplicate across files", file: dev, old: "  scopes:", new: "  redirect: {callbackPath: /oauth/callback/demo-user}\n  scopes:",
			at: "redirect:", want: `OAuthApp/cli-device: spec.redirect.callbackPath: "/oauth/callback/demo-user" is already used by OAuthApp/demo-user (apps.yaml:52)`},
		{name: "baseUrl query", old: "baseUrl: http://localhost:8080/", new: "baseUrl: http://localhost:8080/?a=b",
			at: "baseUrl", want: "OAuthApp/demo-user: spec.redirect.baseUrl: must not contain a query"},
		{name: "baseUrl relative", old: "baseUrl: http://localhost:8080/", new: "baseUrl: localhost:8080",
			at: "baseUrl", want: "OAuthApp/demo-user: spec.redirect.baseUrl: must be an absolute http or https URL"},

		// Options.
		{name: "options reserved key", old: "team: T111", new: "state: abc",
			at: "state: abc", want: `OAuthApp/slack-bot: spec.options.state: "state" is set by agentauth and cannot be overridden; reserved: response_type, client_id, redirect_uri, scope, state, code_challenge, code_challenge_method, nonce`},
		{name: "options reserved redirect_uri", old: "team: T111", new: "redirect_uri: https://evil.example.com",
			at: "redirect_uri", want: `OAuthApp/slack-bot: spec.options.redirect_uri: "redirect_uri" is set by agentauth`},
		{name: "options reserved key reported next to a bad value", old: "team: T111", new: "team: .inf\n    nonce: n",
			at: "nonce: n", want: `OAuthApp/slack-bot: spec.options.nonce: "nonce" is set by agentauth`},
		{name: "options not a mapping", old: "  options:\n    user_scope: identity.basic\n    team: T111\n", new: "  options: [a]\n",
			at: "options:", want: "OAuthApp/slack-bot: spec.options: must be a mapping (a JSON object), got a list"},
		{name: "options not JSON", old: "team: T111", new: "team: .nan",
			at: "team: .nan", want: "OAuthApp/slack-bot: spec.options.team: .nan cannot be represented in JSON"},

		// Subject verification.
		{name: "user mode without verification", old: "    userInfoUrl: http://localhost:9000/me\n", new: "",
			at: "  subjectVerification:", want: "OAuthApp/demo-user: spec.subjectVerification: subjectMode user needs a way to verify the resource owner: set endpoints.userInfoUrl or subjectVerification.issuer, or opt out with subjectVerification.insecureSkipVerification: true"},
		{name: "user mode without subjectVerification block", file: dev, old: "  subjectVerification:\n    issuer: https://issuer.example.com\n    jwksUrl: https://issuer.example.com/jwks\n", new: "",
			at: "spec:", want: "OAuthApp/cli-device: spec.subjectVerification: subjectMode user needs a way"},
		{name: "source invalid", old: `    template: "oidc:user:{sub}"`, new: `    template: "oidc:user:{sub}"` + "\n    source: saml",
			at: "source: saml", want: `OAuthApp/demo-user: spec.subjectVerification.source: "saml" is not allowed; allowed values: userinfo, idToken`},
		{name: "userinfo without userInfoUrl", file: dev, old: "    issuer:", new: "    source: userinfo\n    issuer:",
			at: "  endpoints:", want: "OAuthApp/cli-device: spec.endpoints.userInfoUrl: required when subjectVerification.source is userinfo"},
		{name: "idToken without issuer", old: `    template: "oidc:user:{sub}"`, new: `    template: "oidc:user:{sub}"` + "\n    source: idToken",
			at: "  subjectVerification:", want: "OAuthApp/demo-user: spec.subjectVerification.issuer: required when subjectVerification.source is idToken"},
		{name: "idToken without openid scope", file: dev, old: `[openid, "read:user"]`, new: `["read:user"]`,
			at: "scopes:", want: "OAuthApp/cli-device: spec.scopes: must include openid when subjectVerification.source is idToken"},
		{name: "issuer not https", file: dev, old: "issuer: https://issuer.example.com", new: "issuer: http://issuer.example.com",
			at: "issuer:", want: "OAuthApp/cli-device: spec.subjectVerification.issuer: https is required"},
		{name: "template required", old: `    template: "oidc:user:{sub}"`, new: `    source: userinfo`,
			at: "  subjectVerification:", want: `OAuthApp/demo-user: spec.subjectVerification.template: required for provider "demo" in user mode: built-in subject builders exist only for slack and google (user and global mode), github (user mode)`},
		{name: "template unclosed", old: `"oidc:user:{sub}"`, new: `"oidc:user:{sub"`,
			at: "template:", want: `OAuthApp/demo-user: spec.subjectVerification.template: template: unclosed "{" at offset 10`},
		{name: "template constant", old: `"oidc:user:{sub}"`, new: `"oidc:user"`,
			at: "template:", want: "OAuthApp/demo-user: spec.subjectVerification.template: needs at least one {claim} placeholder"},
		{name: "insecureSkipVerification not bool", old: `    template: "oidc:user:{sub}"`, new: "    insecureSkipVerification: yes",
			at: "insecureSkip", want: "OAuthApp/demo-user: spec.subjectVerification.insecureSkipVerification: must be true or false, got a !!str value"},
		{name: "unknown subjectVerification field", old: `    template: "oidc:user:{sub}"`, new: `    template: "oidc:user:{sub}"` + "\n    jwksURL: https://x",
			at: "jwksURL", want: "OAuthApp/demo-user: spec.subjectVerification.jwksURL: unknown field; did you mean jwksUrl?"},
		{name: "global mode verification validated", old: "    team: T111\n", new: "    team: T111\n  subjectVerification: {source: userinfo}\n",
			at: "  endpoints:\n    authorizationUrl: https://slack", want: "OAuthApp/slack-bot: spec.endpoints.userInfoUrl: required when subjectVerification.source is userinfo"},
		{name: "global mode template required", old: "provider: slack", new: "provider: acme\n  subjectVerification: {issuer: https://id.example.com}",
			at: "subjectVerification:", want: `OAuthApp/slack-bot: spec.subjectVerification.template: required for provider "acme"`},
		{name: "global mode without source", old: "provider: slack", new: "provider: slack\n  subjectVerification: {template: \"{team_id}\"}",
			at: "subjectVerification:", want: "OAuthApp/slack-bot: spec.subjectVerification: subjectVerification needs a way to verify the resource owner"},
	})
}

func TestParseCollectsAllProblems(t *testing.T) {
	files := validFiles()
	mutate(t, files, "apps.yaml", "tokenUrl: https://slack.com/api/oauth.v2.access", "tokenURL: https://slack.com/api/oauth.v2.access")
	mutate(t, files, "apps.yaml", "flow: authorizationCode\n  subjectMode: user", "flow: implicit\n  subjectMode: user")
	mutate(t, files, "more/device.yaml", "subjectMode: user", "subjectMode: nobody")
	files["bad.yaml"] = "kind: [\n"
	_, err := Parse(toFiles(files), validOptions())
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want *ValidationError", err)
	}
	want := []string{
		"apps.yaml:23: OAuthApp/slack-bot: spec.endpoints.tokenURL: unknown field; did you mean tokenUrl?",
		"apps.yaml:21: OAuthApp/slack-bot: spec.endpoints.tokenUrl: required when flow is authorizationCode",
		`apps.yaml:38: OAuthApp/demo-user: spec.flow: "implicit" is not allowed; allowed values: authorizationCode, deviceCode`,
		"bad.yaml:2: invalid YAML: did not find expected node content",
		`more/device.yaml:11: OAuthApp/cli-device: spec.subjectMode: "nobody" is not allowed; allowed values: global, user`,
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.String())
	}
	sortedWant := []string{want[1], want[0], want[2], want[3], want[4]} // by file, then line
	if !reflect.DeepEqual(got, sortedWant) {
		t.Errorf("problems =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(sortedWant, "\n"))
	}
	if err.Error() != strings.Join(sortedWant, "\n") {
		t.Errorf("Error() =\n%s", err)
	}
	p := ve.Problems[0]
	if p.File != "apps.yaml" || p.Line != 21 || p.Resource != "OAuthApp/slack-bot" || p.Field != "spec.endpoints.tokenUrl" {
		t.Errorf("Problem fields = %+v", p)
	}
}

func TestWarnings(t *testing.T) {
	files := validFiles()
	mutate(t, files, "apps.yaml", `  scopes: ["chat:write", "channels:read"]`+"\n", "")
	mutate(t, files, "apps.yaml", "    - openid\n    - profile\n", "")
	mutate(t, files, "apps.yaml", `    template: "oidc:user:{sub}"`, "    insecureSkipVerification: true")
	mutate(t, files, "apps.yaml", "    userInfoUrl: http://localhost:9000/me\n", "")
	b := mustParse(t, files)
	want := []string{
		"apps.yaml:7: OAuthApp/slack-bot: spec.scopes: no scopes: the provider's defaults apply; list at least one scope (spec 2.4 rule 3)",
		"apps.yaml:46: OAuthApp/demo-user: spec.scopes: no scopes: the provider's defaults apply; list at least one scope (spec 2.4 rule 3)",
		"apps.yaml:51: OAuthApp/demo-user: spec.subjectVerification.insecureSkipVerification: insecureSkipVerification is true: the callback will not check who the resource owner is, so a token may be bound to the wrong subject",
		"more/device.yaml:14: OAuthApp/cli-device: spec.client.clientSecret.value: a literal secret in the bundle is for tests and demos; use valueFrom (env or secretRef) (spec 2.4 rule 4)",
	}
	if !reflect.DeepEqual(b.Warnings, want) {
		t.Errorf("Warnings =\n%s\nwant\n%s", strings.Join(b.Warnings, "\n"), strings.Join(want, "\n"))
	}
	demo := b.OAuthApps["demo-user"]
	if demo.SubjectVerification == nil || !demo.SubjectVerification.InsecureSkip {
		t.Errorf("demo-user SubjectVerification = %+v, want InsecureSkip", demo.SubjectVerification)
	}
	if demo.Scopes != nil {
		t.Errorf("Scopes = %q, want none", demo.Scopes)
	}
}

func TestValidationErrorKeepsWarnings(t *testing.T) {
	files := validFiles()
	mutate(t, files, "apps.yaml", "provider: demo", "provider: 7")
	_, err := Parse(toFiles(files), validOptions())
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Warnings) != 1 || !strings.Contains(ve.Warnings[0].String(), "clientSecret.value") {
		t.Fatalf("err = %#v", err)
	}
	if strings.Contains(err.Error(), "literal secret") {
		t.Error("Error() lists warnings")
	}
}

func TestSecretsNeverInMessages(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, dir, "slack", "client-secret", slackSecret+"\n")
	opts := Options{
		LookupEnv: fakeEnv(map[string]string{"SLACK_CLIENT_ID": slackClientID, "DEMO_SECRET": demoSecret}),
		Secrets:   DirSecrets{Dir: dir},
	}
	const literal = "not-really-secret"

	// Valid first: the secrets do resolve, so the check below is not vacuous.
	b, err := Parse(toFiles(validFiles()), opts)
	if err != nil {
		t.Fatal(err)
	}
	if b.OAuthApps["slack-bot"].ClientSecret.Reveal() != slackSecret || b.OAuthApps["demo-user"].ClientSecret.Reveal() != demoSecret {
		t.Fatal("secrets not resolved")
	}
	for _, app := range b.OAuthApps {
		for _, s := range []string{fmt.Sprintf("%v", app), fmt.Sprintf("%+v", *app), fmt.Sprintf("%#v", app.ClientSecret)} {
			if strings.Contains(s, slackSecret) || strings.Contains(s, demoSecret) {
				t.Errorf("printing app %s shows its secret: %s", app.Name, s)
			}
		}
	}

	// Then with fields after the resolved secrets broken, and a clientId
	// resolved from a secret-bearing variable used in the wrong place.
	variants := []func(map[string]string){
		func(f map[string]string) {
			mutate(t, f, "apps.yaml", "team: T111", "state: x")
			mutate(t, f, "apps.yaml", `"oidc:user:{sub}"`, `"oidc:user:{sub"`)
			mutate(t, f, "apps.yaml", "    - profile\n", "    - profile\n    - profile\n")
			mutate(t, f, "more/device.yaml", "tokenUrl: https://github.com/login/oauth/access_token", "tokenUrl: http://github.com/x")
		},
		func(f map[string]string) {
			mutate(t, f, "apps.yaml", "env: SLACK_CLIENT_ID", "env: DEMO_SECRET")
			mutate(t, f, "apps.yaml", "callbackPath: /oauth/callback/demo-user", "callbackPath: /oauth/callback/slack-bot")
			mutate(t, f, "apps.yaml", "ref: Secret/slack", "ref: Secret/slack\n          extra: 1")
			mutate(t, f, "more/device.yaml", "flow: deviceCode", "flow: x")
		},
		func(f map[string]string) {
			mutate(t, f, "apps.yaml", "    authStyle: params\n", "    authStyle: nope\n")
			mutate(t, f, "apps.yaml", "    userInfoUrl: http://localhost:9000/me\n", "")
			mutate(t, f, "more/device.yaml", "read:user", "read user")
		},
	}
	for i, change := range variants {
		files := validFiles()
		change(files)
		_, err := Parse(toFiles(files), opts)
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) < 3 {
			t.Fatalf("variant %d: err = %v, want several problems", i, err)
		}
		texts := []string{err.Error(), fmt.Sprintf("%+v", ve)}
		for _, w := range ve.Warnings {
			texts = append(texts, w.String())
		}
		for _, s := range texts {
			for _, secret := range []string{slackSecret, demoSecret, literal} {
				if strings.Contains(s, secret) {
					t.Errorf("variant %d: message shows a secret value:\n%s", i, s)
				}
			}
		}
	}

	// Warnings of a valid bundle.
	for _, w := range b.Warnings {
		for _, secret := range []string{slackSecret, demoSecret, literal} {
			if strings.Contains(w, secret) {
				t.Errorf("warning shows a secret value: %s", w)
			}
		}
	}
}

func TestValueSourceKinds(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, dir, "demo", "secret", "from-file\n")
	tests := []struct {
		name, source string
		want         string
	}{
		{"value", "{value: literal-value}", "literal-value"},
		{"env", "{valueFrom: {env: SOME_VAR}}", "from-env"},
		{"secretRef", "{valueFrom: {secretRef: {ref: Secret/demo, key: secret}}}", "from-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := validFiles()
			mutate(t, files, "apps.yaml", "    clientSecret:\n      valueFrom: {env: DEMO_SECRET}\n", "    clientSecret: "+tt.source+"\n")
			mutate(t, files, "apps.yaml", "clientId: {value: demo-client}", "clientId: "+tt.source)
			opts := Options{
				LookupEnv: fakeEnv(map[string]string{"SOME_VAR": "from-env", "SLACK_CLIENT_ID": "x"}),
				Secrets:   multiSecrets{DirSecrets{Dir: dir}, fakeSecrets{"slack/client-secret": "s"}},
			}
			b, err := Parse(toFiles(files), opts)
			if err != nil {
				t.Fatal(err)
			}
			app := b.OAuthApps["demo-user"]
			if app.ClientID != tt.want || app.ClientSecret.Reveal() != tt.want {
				t.Errorf("clientId %q, clientSecret %q, want %q", app.ClientID, app.ClientSecret.Reveal(), tt.want)
			}
		})
	}
}

// multiSecrets tries each resolver in turn.
type multiSecrets []SecretResolver

func (m multiSecrets) ResolveSecret(name, key string) (domain.Secret, error) {
	var err error
	for _, r := range m {
		var s domain.Secret
		if s, err = r.ResolveSecret(name, key); err == nil {
			return s, nil
		}
	}
	return domain.Secret{}, err
}

func TestDefaultLookupEnvIsOS(t *testing.T) {
	t.Setenv("AGENTAUTH_BUNDLE_TEST_SECRET", "os-env-value")
	files := validFiles()
	mutate(t, files, "apps.yaml", "env: DEMO_SECRET", "env: AGENTAUTH_BUNDLE_TEST_SECRET")
	mutate(t, files, "apps.yaml", "env: SLACK_CLIENT_ID", "env: AGENTAUTH_BUNDLE_TEST_SECRET")
	opts := validOptions()
	opts.LookupEnv = nil
	b, err := Parse(toFiles(files), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.OAuthApps["demo-user"].ClientSecret.Reveal(); got != "os-env-value" {
		t.Errorf("secret = %q", got)
	}
}

func TestAliasesAndAliasBomb(t *testing.T) {
	files := validFiles()
	mutate(t, files, "apps.yaml", "  endpoints:\n    authorizationUrl: http", "  endpoints: &ep\n    authorizationUrl: http")
	b, err := Parse(toFiles(files), validOptions())
	if err != nil || b.OAuthApps["demo-user"].Endpoints.TokenURL == "" {
		t.Fatalf("anchor on endpoints: %v", err)
	}

	bomb := "  options:\n    a: &a [x, x, x, x, x, x, x, x, x, x]\n    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
		"    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
		"    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n    f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
	files = validFiles()
	mutate(t, files, "apps.yaml", "  options:\n    user_scope: identity.basic\n    team: T111\n", bomb)
	_, err = Parse(toFiles(files), validOptions())
	if err == nil || !strings.Contains(err.Error(), "spec.options") || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("alias bomb: err = %v", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
		t.Errorf("alias bomb reported %d problems, want 1", n)
	}
}

func TestOptionsValues(t *testing.T) {
	files := validFiles()
	mutate(t, files, "apps.yaml", "team: T111", "team: T111\n    n: 3\n    f: 1.5\n    ok: true\n    nothing: null\n    list: [a, 2]\n    nested: {k: v}")
	b := mustParse(t, files)
	want := map[string]any{
		"user_scope": "identity.basic", "team": "T111", "n": int64(3), "f": 1.5, "ok": true,
		"nothing": nil, "list": []any{"a", int64(2)}, "nested": map[string]any{"k": "v"},
	}
	if got := b.OAuthApps["slack-bot"].Options; !reflect.DeepEqual(got, want) {
		t.Errorf("Options = %#v, want %#v", got, want)
	}
}

func TestRevision(t *testing.T) {
	opts := validOptions()
	parse := func(files []File) string {
		t.Helper()
		b, err := Parse(files, opts)
		if err != nil {
			t.Fatal(err)
		}
		return b.Revision
	}
	files := toFiles(validFiles())
	base := parse(files)
	if again := parse(toFiles(validFiles())); again != base {
		t.Error("revision differs for the same content")
	}
	reversed := []File{files[1], files[0]}
	if parse(reversed) != base {
		t.Error("revision depends on the order files are given in")
	}
	changed := validFiles()
	changed["apps.yaml"] += "# a comment changes the content\n"
	if parse(toFiles(changed)) == base {
		t.Error("revision did not change with the content")
	}
	renamed := validFiles()
	renamed["other/device.yaml"] = renamed["more/device.yaml"]
	delete(renamed, "more/device.yaml")
	if parse(toFiles(renamed)) == base {
		t.Error("revision did not change with a file name")
	}

	// Length prefixes: moving bytes between name and content, or across
	// files, changes the hash.
	pairs := [][2][]File{
		{{{Name: "a", Data: []byte("bc")}}, {{Name: "ab", Data: []byte("c")}}},
		{{{Name: "a", Data: []byte("x")}, {Name: "b", Data: []byte("y")}}, {{Name: "a", Data: []byte("xb")}, {Name: "", Data: []byte("y")}}},
		{{{Name: "a", Data: nil}}, {}},
	}
	for i, p := range pairs {
		if revision(p[0]) == revision(p[1]) {
			t.Errorf("pair %d: revisions collide", i)
		}
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "more", "deeper"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appsYAML), 0o644))
	must(os.WriteFile(filepath.Join(dir, "more", "deeper", "device.yml"), []byte(deviceYAML), 0o644))
	must(os.WriteFile(filepath.Join(dir, "README.md"), []byte("not: [yaml"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "more", "notes.txt"), []byte("kind: Nope"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, ".github", "workflows"), 0o755))
	must(os.WriteFile(filepath.Join(dir, ".github", "workflows", "ci.yml"), []byte("on: push\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, ".hidden.yaml"), []byte("kind: Nope\n"), 0o644))

	b, err := LoadDir(dir, validOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.OAuthApps) != 3 || b.OAuthApps["cli-device"].File != "more/deeper/device.yml" {
		t.Errorf("apps = %v, cli-device file %q", len(b.OAuthApps), b.OAuthApps["cli-device"].File)
	}
	want, err := Parse([]File{{Name: "apps.yaml", Data: []byte(appsYAML)}, {Name: "more/deeper/device.yml", Data: []byte(deviceYAML)}}, validOptions())
	if err != nil {
		t.Fatal(err)
	}
	if b.Revision != want.Revision {
		t.Error("LoadDir revision differs from Parse of the same files")
	}

	must(os.WriteFile(filepath.Join(dir, "more", "broken.yaml"), []byte("apiVersion: agents.example.io/v1alpha1\nkind: Pipeline\n"), 0o644))
	if _, err := LoadDir(dir, validOptions()); err == nil || !strings.Contains(err.Error(), `more/broken.yaml:2: Pipeline: kind: unknown kind "Pipeline"; known kinds: AccessPolicy, Agent, Connector, Model, OAuthApp, Skill, Swarm, Tool, ToolGroup`) {
		t.Errorf("LoadDir with a broken file: %v", err)
	}

	empty := t.TempDir()
	must(os.WriteFile(filepath.Join(empty, "x.txt"), nil, 0o644))
	if _, err := LoadDir(empty, validOptions()); err == nil || !strings.Contains(err.Error(), "no *.yaml or *.yml files") {
		t.Errorf("LoadDir of a directory without YAML: %v", err)
	}
	if _, err := LoadDir(filepath.Join(dir, "missing"), validOptions()); err == nil {
		t.Error("LoadDir of a missing directory succeeded")
	}
}

func TestParseEdgeCases(t *testing.T) {
	b, err := Parse(nil, Options{})
	if err != nil || len(b.OAuthApps) != 0 {
		t.Errorf("Parse(nil) = %v, %v", b, err)
	}
	if _, err := Parse([]File{{Name: "", Data: nil}}, Options{}); err == nil {
		t.Error("a file without a name was accepted")
	}
	if _, err := Parse([]File{{Name: "a.yaml"}, {Name: "a.yaml"}}, Options{}); err == nil || !strings.Contains(err.Error(), "a.yaml: file given twice") {
		t.Errorf("duplicate file names: %v", err)
	}
	b, err = Parse([]File{{Name: "empty.yaml", Data: []byte("---\n# only comments\n---\n")}}, Options{})
	if err != nil || len(b.OAuthApps) != 0 {
		t.Errorf("empty documents: %v, %v", b, err)
	}
}

func writeSecret(t *testing.T, dir, name, key, value string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, key), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDirSecrets(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, dir, "app", "id", "plain")
	writeSecret(t, dir, "app", "nl", "with-newline\n")
	writeSecret(t, dir, "app", "two", "two-newlines\n\n")
	writeSecret(t, dir, "app", "crlf", "windows\r\n")
	writeSecret(t, dir, "app.v2", "client_secret-1", "dotted")
	outside := t.TempDir()
	writeSecret(t, outside, "x", "y", "outside-value")
	if err := os.Symlink(filepath.Join(outside, "x", "y"), filepath.Join(dir, "app", "escape")); err != nil {
		t.Fatal(err)
	}
	s := DirSecrets{Dir: dir}

	ok := []struct{ name, key, want string }{
		{"app", "id", "plain"},
		{"app", "nl", "with-newline"},
		{"app", "two", "two-newlines\n"},
		{"app", "crlf", "windows"},
		{"app.v2", "client_secret-1", "dotted"},
	}
	for _, tt := range ok {
		got, err := s.ResolveSecret(tt.name, tt.key)
		if err != nil || got.Reveal() != tt.want {
			t.Errorf("ResolveSecret(%q, %q) = %q, %v; want %q", tt.name, tt.key, got.Reveal(), err, tt.want)
		}
	}

	bad := []struct {
		name, key string
		want      error
	}{
		{"..", "id", domain.ErrInvalidID},
		{".", "id", domain.ErrInvalidID},
		{"app", "..", domain.ErrInvalidID},
		{"app", ".", domain.ErrInvalidID},
		{"../app", "id", domain.ErrInvalidID},
		{"app/../app", "id", domain.ErrInvalidID},
		{"app", "../app/id", domain.ErrInvalidID},
		{"app", "/etc/passwd", domain.ErrInvalidID},
		{"", "id", domain.ErrInvalidID},
		{"app", "", domain.ErrInvalidID},
		{`app\x`, "id", domain.ErrInvalidID},
		{"app", "missing", domain.ErrNotFound},
		{"nope", "id", domain.ErrNotFound},
		{"app", "escape", nil}, // a symlink out of Dir
	}
	for _, tt := range bad {
		got, err := s.ResolveSecret(tt.name, tt.key)
		if err == nil {
			t.Errorf("ResolveSecret(%q, %q) = %q, want an error", tt.name, tt.key, got.Reveal())
			continue
		}
		if tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("ResolveSecret(%q, %q) error %v, want %v", tt.name, tt.key, err, tt.want)
		}
		if strings.Contains(err.Error(), "outside-value") || strings.Contains(err.Error(), "plain") {
			t.Errorf("error shows a secret: %v", err)
		}
	}
	if _, err := (DirSecrets{}).ResolveSecret("app", "id"); err == nil {
		t.Error("DirSecrets without Dir resolved a secret")
	}
}

func TestDirSecretsInBundle(t *testing.T) {
	dir := t.TempDir()
	files := validFiles()
	mutate(t, files, "apps.yaml", "ref: Secret/slack", "ref: Secret/..")
	opts := validOptions()
	opts.Secrets = DirSecrets{Dir: dir}
	_, err := Parse(toFiles(files), opts)
	want := `apps.yaml:18: OAuthApp/slack-bot: spec.client.clientSecret.valueFrom.secretRef: Secret/.. key "client-secret": secret name "..": want [A-Za-z0-9._-]+, not . or ..: invalid id`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestOfflineAccessWithoutConsentPromptWarns: OpenID providers drop
// offline_access unless the request has prompt=consent (OIDC Core §11).
func TestOfflineAccessWithoutConsentPromptWarns(t *testing.T) {
	app := func(options string) string {
		return `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: oidc}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: global
  client: {clientId: {value: c}, clientSecret: {valueFrom: {env: OIDC_SECRET}}}
  endpoints: {authorizationUrl: "https://idp.example/auth", tokenUrl: "https://idp.example/token"}
  scopes: [openid, offline_access]
  redirect: {callbackPath: /oauth/callback/oidc}
` + options
	}
	env := func(string) (string, bool) { return "s", true }
	for _, tc := range []struct {
		name, options string
		warns         bool
	}{
		{"no options", "", true},
		{"prompt login", "  options: {prompt: login}\n", true},
		{"prompt consent", "  options: {prompt: consent}\n", false},
		{"prompt login consent", "  options: {prompt: \"login consent\"}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Parse([]File{{Name: "a.yaml", Data: []byte(app(tc.options))}}, Options{LookupEnv: env})
			if err != nil {
				t.Fatal(err)
			}
			warned := strings.Contains(strings.Join(b.Warnings, "\n"), "a.yaml:10: OAuthApp/oidc: spec.scopes: offline_access is ignored")
			if warned != tc.warns {
				t.Fatalf("warnings %q, want the offline_access warning: %v", b.Warnings, tc.warns)
			}
		})
	}
}
