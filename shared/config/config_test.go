package config

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/local/aesseal"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestDefaultsPerProfile(t *testing.T) {
	local, err := FromEnv(env(nil), Local)
	if err != nil {
		t.Fatal(err)
	}
	if local.BundleDir != "examples/bundle" || local.Home != ".agentauth" || local.LocalSecrets() != filepath.Join(".agentauth", "secrets") ||
		local.MaxWait != 55*time.Second || local.AWS != nil || local.Tools.Routes || local.Tools.Metrics != "log" || local.PublicURL != "" || !local.RuntimeToken.IsZero() {
		t.Fatalf("local defaults: %+v", local)
	}
	lambda, err := FromEnv(env(map[string]string{PublicURL: "https://auth.example/"}), Lambda)
	if err != nil {
		t.Fatal(err)
	}
	if lambda.BundleDir != "bundle" || lambda.Home != "/tmp/agentauth" || lambda.PublicURL != "https://auth.example" {
		t.Fatalf("lambda defaults: %+v", lambda)
	}
	// A flag that moves the home moves the secrets with it, unless they
	// were named.
	local.Home = "/elsewhere"
	if local.LocalSecrets() != "/elsewhere/secrets" {
		t.Fatalf("secrets follow the home: %s", local.LocalSecrets())
	}
	named, _ := FromEnv(env(map[string]string{Secrets: "/run/secrets"}), Local)
	named.Home = "/elsewhere"
	if named.LocalSecrets() != "/run/secrets" {
		t.Fatalf("named secrets: %s", named.LocalSecrets())
	}
}

func TestAWSAndTools(t *testing.T) {
	full := map[string]string{
		PublicURL: "https://auth.example", Table: "t", KMSKeyID: "k", QueueURL: "q", SessionKeysSecret: "s",
		JWKSURL: "https://idp.example/jwks", JWTIssuer: "https://idp.example", JWTAudience: "agentauth-tools",
		ToolRateLimit: "10/s:2", ToolRateLimits: "whoami=1/m", ToolhooksSeam: "true", Metrics: "emf", UploadsCheckSeconds: "30",
		TenantClaim: "org.tenant",
	}
	c, err := FromEnv(env(full), Lambda)
	if err != nil {
		t.Fatal(err)
	}
	if *c.AWS != (AWS{Table: "t", KMSKeyID: "k", QueueURL: "q", SessionKeysSecret: "s", SecretPrefix: "agentauth/"}) {
		t.Fatalf("AWS: %+v", c.AWS)
	}
	tl := c.Tools
	if !tl.Routes || tl.JWT.JWKSURL != full[JWKSURL] || tl.JWT.Issuer != full[JWTIssuer] || tl.JWT.Audience != full[JWTAudience] ||
		!tl.Seam || tl.Metrics != "emf" || tl.UploadsCheckEvery != 30*time.Second || tl.TenantClaim != "org.tenant" ||
		tl.SkillsClaim != "skills" || tl.SubjectsClaim != "agentauth_subjects" || tl.AllowPrivateUpstreams ||
		tl.Limits.Default.Burst != 2 || tl.Limits.PerTool["whoami"].Burst != 1 {
		t.Fatalf("tools: %+v", tl)
	}
}

// TestEveryProblemAtOnceByName: one start shows every mistake, each named
// by its variable, and no value appears (it may be a secret). The one
// exception is a rate-limit spec, quoted to point at the bad entry of a
// list: it is a format, never a secret.
func TestEveryProblemAtOnceByName(t *testing.T) {
	const canary = "s3cret-canary-value"
	bad := map[string]string{
		MaxWait: canary, Table: "t", JWKSURL: "http://idp.example/" + canary, ToolhooksSeam: canary,
		ToolRateLimit: "ten/m", UploadsCheckSeconds: "0", Metrics: canary, TenantClaim: "org..tenant", AllowPrivateUpstreams: canary,
		RuntimeToken: canary, MasterKey: canary,
	}
	_, err := FromEnv(env(bad), Lambda)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, name := range []string{PublicURL, MaxWait, KMSKeyID, QueueURL, SessionKeysSecret, JWKSURL, JWTIssuer, JWTAudience,
		ToolhooksSeam, ToolRateLimit, UploadsCheckSeconds, Metrics, TenantClaim, AllowPrivateUpstreams} {
		if !strings.Contains(msg, name+":") && !strings.Contains(msg, name+" /") {
			t.Errorf("%s is not named in:\n%s", name, msg)
		}
	}
	if strings.Contains(msg, "canary") {
		t.Errorf("a value leaked into the error:\n%s", msg)
	}
	if n := strings.Count(msg, "\n") + 1; n != 14 {
		t.Errorf("%d problems reported, want 14:\n%s", n, msg)
	}
}

// TestMCP: the MCP server's bounds, by default the server's own defaults.
func TestMCP(t *testing.T) {
	c, err := FromEnv(env(nil), Local)
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Tools.MCP; m.AllowedOrigins != nil || m.Sessions.IdleTimeout != 10*time.Minute || m.Sessions.MaxSessions != 1000 ||
		m.Sessions.MaxPerPrincipal != 8 || m.Sessions.InitializeRate.Burst != 10 {
		t.Fatalf("defaults: %+v", m)
	}
	c, err = FromEnv(env(map[string]string{MCPAllowedOrigins: " https://app.example ,,http://localhost:5173", MCPSessionIdle: "60",
		MCPMaxSessions: "50", MCPMaxSessionsPer: "2", MCPInitializeRate: "6/m:1"}), Lambda)
	if err == nil || strings.Count(err.Error(), "\n") != 0 { // only the public URL is missing
		t.Fatalf("%v", err)
	}
	m := c.Tools.MCP
	if !slices.Equal(m.AllowedOrigins, []string{"https://app.example", "http://localhost:5173"}) || m.Sessions.IdleTimeout != time.Minute ||
		m.Sessions.MaxSessions != 50 || m.Sessions.MaxPerPrincipal != 2 ||
		m.Sessions.InitializeRate.Burst != 1 || m.Sessions.InitializeRate.Rate != 0.1 {
		t.Fatalf("set: %+v", m)
	}
}

func TestValues(t *testing.T) {
	tools := map[string]string{JWKSURL: "http://127.0.0.1:9090/jwks", JWTIssuer: "i", JWTAudience: "a"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		bad  string // the variable named in the error; "" for none
	}{
		{"wait 0", with(nil, MaxWait, "0"), ""},
		{"wait 56", with(nil, MaxWait, "56"), MaxWait},
		{"wait negative", with(nil, MaxWait, "-1"), MaxWait},
		{"loopback JWKS over http", tools, ""},
		{"JWKS over http elsewhere", with(tools, JWKSURL, "http://idp.example/jwks"), JWKSURL},
		{"flag 1", with(tools, ToolhooksSeam, "1"), ""},
		{"flag FALSE", with(tools, AllowPrivateUpstreams, "FALSE"), ""},
		{"flag yes", with(tools, AllowPrivateUpstreams, "yes"), AllowPrivateUpstreams},
		{"metrics off", with(tools, Metrics, "off"), ""},
		{"claim path leading dot", with(tools, SkillsClaim, ".skills"), SkillsClaim},
		{"claim path trailing dot", with(tools, SubjectsClaim, "a."), SubjectsClaim},
		{"per-tool limit twice", with(tools, ToolRateLimits, "a=1/s,a=2/s"), ToolRateLimit},
		{"uploads check 3600", with(tools, UploadsCheckSeconds, "3600"), ""},
		{"uploads check 3601", with(tools, UploadsCheckSeconds, "3601"), UploadsCheckSeconds},
		// The tool plane serves agent turns too: its variables are read
		// (and checked) without the REST routes.
		{"tool variables checked without JWKS", map[string]string{Metrics: "nonsense"}, Metrics},
		{"AWS needs the rest", with(nil, Table, "t", QueueURL, "q"), KMSKeyID},
		{"MCP origins", with(nil, MCPAllowedOrigins, "https://app.example, http://localhost:5173"), ""},
		{"MCP origin with a path", with(nil, MCPAllowedOrigins, "https://app.example/app"), MCPAllowedOrigins},
		{"MCP origin without a scheme", with(nil, MCPAllowedOrigins, "app.example"), MCPAllowedOrigins},
		{"MCP idle 10", with(nil, MCPSessionIdle, "10"), ""},
		{"MCP idle 9", with(nil, MCPSessionIdle, "9"), MCPSessionIdle},
		{"MCP sessions 0", with(nil, MCPMaxSessions, "0"), MCPMaxSessions},
		{"MCP sessions per principal 0", with(nil, MCPMaxSessionsPer, "0"), MCPMaxSessionsPer},
		{"MCP initialize rate", with(nil, MCPInitializeRate, "5/s:1"), ""},
		{"MCP initialize rate in words", with(nil, MCPInitializeRate, "five a minute"), MCPInitializeRate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromEnv(env(tc.env), Local)
			switch {
			case tc.bad == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
				t.Fatalf("error %v does not name %s", err, tc.bad)
			}
		})
	}
}

func TestSecretsAreSecrets(t *testing.T) {
	c, err := FromEnv(env(map[string]string{RuntimeToken: "tok-123", MasterKey: "key-456",
		ConsoleIssuer: "http://127.0.0.1:9090", ConsoleClientID: "console", ConsoleClientSecret: "cs-789"}), Local)
	if err != nil {
		t.Fatal(err)
	}
	if c.RuntimeToken.Reveal() != "tok-123" || c.MasterKey.Reveal() != "key-456" || c.Console.ClientSecret.Reveal() != "cs-789" {
		t.Fatal("secrets not read")
	}
	if s := fmt.Sprintf("%v %v %+v", c.RuntimeToken, c.MasterKey, *c.Console); strings.Contains(s, "tok-123") || strings.Contains(s, "key-456") || strings.Contains(s, "cs-789") {
		t.Fatalf("a secret prints: %s", s)
	}
	for _, v := range Variables() {
		if (v.Name == RuntimeToken || v.Name == MasterKey || v.Name == ConsoleClientSecret) != v.Secret {
			t.Errorf("%s: Secret = %v", v.Name, v.Secret)
		}
	}
	if MasterKey != aesseal.EnvVar {
		t.Fatalf("the master key variable is %s here and %s in aesseal", MasterKey, aesseal.EnvVar)
	}
}

// declaredNames are the string constants of this package's source.
func declaredNames(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, _ := strconv.Unquote(lit.Value); regexp.MustCompile(`^(AGENTAUTH|GOONDAN)_[A-Z0-9_]+$`).MatchString(s) {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}

// TestVariablesListsEveryName: a name declared but not listed would be
// read without a default or doc.
func TestVariablesListsEveryName(t *testing.T) {
	names := Names()
	seen := map[string]bool{}
	for _, v := range Variables() {
		if seen[v.Name] {
			t.Errorf("%s listed twice", v.Name)
		}
		seen[v.Name] = true
		if v.Doc == "" {
			t.Errorf("%s has no doc", v.Name)
		}
	}
	declared := declaredNames(t)
	if len(declared) != len(names) {
		t.Errorf("%d names declared, %d listed", len(declared), len(names))
	}
	for _, d := range declared {
		if !slices.Contains(names, d) {
			t.Errorf("%s is declared but not in Variables()", d)
		}
	}
}

var envName = regexp.MustCompile(`\b(AGENTAUTH|GOONDAN)_[A-Z0-9_]+\b`)

// TestInfraSetsOnlyConfigNames: infra/ is its own Go module and keeps its
// own copy of the names it sets on the functions; a name there that is not
// ours would be a variable no function reads.
func TestInfraSetsOnlyConfigNames(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "infra", "stack", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("infra/stack sources: %v", err)
	}
	names := Names()
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"((AGENTAUTH|GOONDAN)_[A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
			found++
			if !slices.Contains(names, m[1]) {
				t.Errorf("%s: the stack sets %s, which is not a shared/config variable", filepath.Base(f), m[1])
			}
		}
	}
	if found < 10 {
		t.Fatalf("found only %d variable names in infra/stack: has the stack moved?", found)
	}
}

// TestDocsListEveryVariable: docs/configuration.md is the reference.
// harnessOnly are the variables only tests and test builds read, which
// the page names under "Test harness only".
var harnessOnly = []string{"AGENTAUTH_REQUIRE_EMULATOR", "AGENTAUTH_FAULT"}

func TestDocsListEveryVariable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := Names()
	for _, n := range names {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/configuration.md does not list %s", n)
		}
	}
	for _, m := range envName.FindAllString(string(doc), -1) {
		if !slices.Contains(names, m) && !slices.Contains(harnessOnly, m) {
			t.Errorf("docs/configuration.md names %s, which agentauth does not read", m)
		}
	}
}

// TestRetentionWindows: the finished sessions' retention and the queue's
// dedup window are Go durations of at least a minute, 24 h by default;
// a bad one is named by its variable, with the accepted range.
func TestRetentionWindows(t *testing.T) {
	for _, p := range []Profile{Local, Lambda} {
		c, _ := FromEnv(env(map[string]string{PublicURL: "https://auth.example"}), p)
		if c.SessionRetention != 24*time.Hour || c.QueueDedupWindow != 24*time.Hour {
			t.Fatalf("profile %d defaults: retention %s, dedup window %s", p, c.SessionRetention, c.QueueDedupWindow)
		}
	}
	c, err := FromEnv(env(map[string]string{SessionRetention: "5m", QueueDedupWindow: " 90s "}), Local)
	if err != nil || c.SessionRetention != 5*time.Minute || c.QueueDedupWindow != 90*time.Second {
		t.Fatalf("set: retention %s, dedup window %s, %v", c.SessionRetention, c.QueueDedupWindow, err)
	}
	for _, name := range []string{SessionRetention, QueueDedupWindow} {
		for _, bad := range []string{"0", "5", "59s", "-5m", "8761h", "1d", "soon"} {
			_, err := FromEnv(env(map[string]string{name: bad}), Local)
			if err == nil {
				t.Errorf("%s=%q accepted", name, bad)
				continue
			}
			want := name + ": want a Go duration from 1m to 8760h, like 5m or 24h"
			if err.Error() != want {
				t.Errorf("%s=%q: error %q, want %q", name, bad, err, want)
			}
		}
		if _, err := FromEnv(env(map[string]string{name: "1m"}), Local); err != nil {
			t.Errorf("%s=1m (the minimum): %v", name, err)
		}
	}
}

// TestBundleRepo: AGENTAUTH_BUNDLE_REPO names a folder of a bucket, read
// with the AWS backends only; a bad one is named, never quoted.
func TestBundleRepo(t *testing.T) {
	base := map[string]string{PublicURL: "https://auth.example", Table: "t", KMSKeyID: "k", QueueURL: "q", SessionKeysSecret: "s"}
	for _, tc := range []struct{ in, bucket, prefix string }{
		{"s3://agentauth-turnblobs-1/bundle/", "agentauth-turnblobs-1", "bundle/"},
		{"s3://b.example/bundles/main", "b.example", "bundles/main/"},
	} {
		c, err := FromEnv(env(with(base, BundleRepo, tc.in)), Lambda)
		if err != nil || c.AWS.BundleRepo == nil || *c.AWS.BundleRepo != (S3Folder{Bucket: tc.bucket, Prefix: tc.prefix}) {
			t.Fatalf("%s: %+v, %v", tc.in, c.AWS, err)
		}
		if got := c.AWS.BundleRepo.String(); got != "s3://"+tc.bucket+"/"+tc.prefix {
			t.Fatalf("String: %s", got)
		}
	}
	if c, err := FromEnv(env(base), Lambda); err != nil || c.AWS.BundleRepo != nil {
		t.Fatalf("unset: %+v, %v", c.AWS, err)
	}
	for _, bad := range []string{"https://b/x/", "s3://B/x/", "s3://bucket", "s3://bucket/", "s3://bucket//x/", "s3://bucket/a/../", "s3://bucket/a b/"} {
		_, err := FromEnv(env(with(base, BundleRepo, bad)), Lambda)
		if err == nil || !strings.Contains(err.Error(), BundleRepo+": want s3://") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	local := map[string]string{BundleRepo: "s3://bucket/bundle/"}
	if _, err := FromEnv(env(local), Local); err == nil || !strings.Contains(err.Error(), BundleRepo+": needs "+Table) {
		t.Fatalf("without the table: %v", err)
	}
}

func TestConsoleClientSecretRef(t *testing.T) {
	base := map[string]string{ConsoleIssuer: "https://login.example.com", ConsoleClientID: "c"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(base)
		m[k] = v
		return m
	}
	c, err := FromEnv(env(with(ConsoleClientSecretRef, "console/clientSecret")), Lambda)
	if err != nil && strings.Contains(err.Error(), "CONSOLE") {
		t.Fatal(err)
	}
	if c.Console == nil || c.Console.SecretName != "console" || c.Console.SecretKey != "clientSecret" {
		t.Fatalf("%+v", c.Console)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{with(ConsoleClientSecretRef, "console"), ConsoleClientSecretRef + ": must be <name>/<key>"},
		{with(ConsoleClientSecretRef, "a/b/c"), ConsoleClientSecretRef + ": must be <name>/<key>"},
		{func() map[string]string {
			m := with(ConsoleClientSecretRef, "a/b")
			m[ConsoleClientSecret] = "s"
			return m
		}(), "are both set"},
		{map[string]string{ConsoleIssuer: "https://login.example.com"}, ConsoleClientID + ": is required with " + ConsoleIssuer},
		{map[string]string{ConsoleIssuer: "http://login.example.com", ConsoleClientID: "c"}, ConsoleIssuer + ": must be https"},
	} {
		if _, err := FromEnv(env(tc.env), Local); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
}
