package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentauth/agentauth/infra/stack"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close() // stops the jsii runtime and removes its temporary files
	os.Exit(code)
}

func TestPropsFrom(t *testing.T) {
	cases := []struct {
		name    string
		ctx     map[string]string // context, looked up by key
		env     map[string]string // environment, looked up by name
		arch    string
		check   func(t *testing.T, p propsView)
		wantErr string
	}{
		{name: "defaults", arch: "arm64", check: func(t *testing.T, p propsView) {
			if p.prefix != "agentauth" || p.assetDir != "../build/lambda" || p.id != "AgentAuth" || p.retention != "" || len(p.callbacks) != 0 || p.secretPrefix != "" {
				t.Errorf("defaults: %+v", p)
			}
		}},
		{name: "context arch x86_64", ctx: map[string]string{"arch": "x86_64"}, arch: "x86_64"},
		{name: "env arch amd64", env: map[string]string{"AGENTAUTH_ARCH": "amd64"}, arch: "x86_64"},
		{name: "context wins over env", ctx: map[string]string{"arch": "arm64"}, env: map[string]string{"AGENTAUTH_ARCH": "x86_64"}, arch: "arm64"},
		{name: "unknown arch", ctx: map[string]string{"arch": "mips"}, wantErr: `arch "mips"`},
		{name: "lists and names", arch: "arm64",
			ctx: map[string]string{"prefix": "aa-dev", "assetDir": "/tmp/fns", "stackName": "Dev",
				"callbackPaths": " /oauth/callback/a, /oauth/callback/b ,", "secretPrefix": "team/agentauth/", "logRetentionDays": "7"},
			check: func(t *testing.T, p propsView) {
				if p.prefix != "aa-dev" || p.assetDir != "/tmp/fns" || p.id != "Dev" || p.retention != awslogs.RetentionDays_ONE_WEEK {
					t.Errorf("got %+v", p)
				}
				if !slices.Equal(p.callbacks, []string{"/oauth/callback/a", "/oauth/callback/b"}) || p.secretPrefix != "team/agentauth/" {
					t.Errorf("lists: %q %q", p.callbacks, p.secretPrefix)
				}
			}},
		{name: "env secret prefix", arch: "arm64", env: map[string]string{"AGENTAUTH_SECRET_PREFIX": "prod/"},
			check: func(t *testing.T, p propsView) {
				if p.secretPrefix != "prod/" {
					t.Errorf("secret prefix %q", p.secretPrefix)
				}
			}},
		{name: "secretArns is refused, not ignored", ctx: map[string]string{"secretArns": "arn:1"}, wantErr: "replaced by secretPrefix"},
		{name: "retention CloudWatch does not offer", ctx: map[string]string{"logRetentionDays": "10"}, wantErr: "logRetentionDays"},
		{name: "retention not a number", ctx: map[string]string{"logRetentionDays": "month"}, wantErr: "logRetentionDays"},
		{name: "no tools settings: no tools function", arch: "arm64", check: func(t *testing.T, p propsView) {
			if p.tools != (stack.ToolsProps{}) || p.tools.Enabled() {
				t.Errorf("tools: %+v", p.tools)
			}
		}},
		{name: "tools from context", arch: "arm64",
			ctx: map[string]string{"jwksUrl": "https://idp.example.com/jwks", "jwtIssuer": "https://idp.example.com/", "jwtAudience": "agentauth",
				"tenantClaim": "org", "skillsClaim": "perms", "toolhooksSeam": "1", "toolRateLimit": "60/m"},
			check: func(t *testing.T, p propsView) {
				want := stack.ToolsProps{JWKSURL: "https://idp.example.com/jwks", JWTIssuer: "https://idp.example.com/", JWTAudience: "agentauth",
					TenantClaim: "org", SkillsClaim: "perms", Seam: true, RateLimit: "60/m"}
				if p.tools != want {
					t.Errorf("tools: %+v, want %+v", p.tools, want)
				}
			}},
		{name: "toolhooksSeam true", arch: "arm64", ctx: map[string]string{"toolhooksSeam": "TRUE"}, check: func(t *testing.T, p propsView) {
			if !p.tools.Seam {
				t.Error("seam off")
			}
		}},
		{name: "toolhooksSeam false", arch: "arm64", ctx: map[string]string{"toolhooksSeam": "false"}, check: func(t *testing.T, p propsView) {
			if p.tools.Seam {
				t.Error("seam on")
			}
		}},
		{name: "toolhooksSeam neither on nor off", ctx: map[string]string{"toolhooksSeam": "yes"}, wantErr: `toolhooksSeam "yes"`},
		{name: "every table index by default", arch: "arm64", check: wantIndexes(4)},
		{name: "tableIndexes 1", arch: "arm64", ctx: map[string]string{"tableIndexes": "1"}, check: wantIndexes(1)},
		{name: "tableIndexes 2", arch: "arm64", ctx: map[string]string{"tableIndexes": "2"}, check: wantIndexes(2)},
		{name: "tableIndexes 3", arch: "arm64", ctx: map[string]string{"tableIndexes": " 3 "}, check: wantIndexes(3)},
		{name: "tableIndexes 4", arch: "arm64", ctx: map[string]string{"tableIndexes": "4"}, check: wantIndexes(4)},
		{name: "tableIndexes 0", ctx: map[string]string{"tableIndexes": "0"}, wantErr: `tableIndexes "0": want 1 to 4`},
		{name: "tableIndexes 5", ctx: map[string]string{"tableIndexes": "5"}, wantErr: `tableIndexes "5": want 1 to 4`},
		{name: "tableIndexes not a number", ctx: map[string]string{"tableIndexes": "three"}, wantErr: `tableIndexes "three": want 1 to 4`},
		{name: "tableIndexes is context only", arch: "arm64", env: map[string]string{"tableIndexes": "1", "AGENTAUTH_TABLE_INDEXES": "1"}, check: wantIndexes(4)},
		{name: "firstSessionIndexOnly is tableIndexes 1", arch: "arm64", ctx: map[string]string{"firstSessionIndexOnly": "true"}, check: wantIndexes(1)},
		{name: "firstSessionIndexOnly 1 with tableIndexes 1", arch: "arm64", ctx: map[string]string{"firstSessionIndexOnly": "1", "tableIndexes": "1"}, check: wantIndexes(1)},
		{name: "firstSessionIndexOnly false", arch: "arm64", ctx: map[string]string{"firstSessionIndexOnly": "false"}, check: wantIndexes(4)},
		{name: "firstSessionIndexOnly false with tableIndexes 3", arch: "arm64", ctx: map[string]string{"firstSessionIndexOnly": "false", "tableIndexes": "3"}, check: wantIndexes(3)},
		{name: "firstSessionIndexOnly true with tableIndexes 3", ctx: map[string]string{"firstSessionIndexOnly": "true", "tableIndexes": "3"},
			wantErr: `firstSessionIndexOnly "true" and tableIndexes "3" disagree`},
		{name: "firstSessionIndexOnly false with tableIndexes 1", ctx: map[string]string{"firstSessionIndexOnly": "false", "tableIndexes": "1"},
			wantErr: `firstSessionIndexOnly "false" and tableIndexes "1" disagree`},
		{name: "firstSessionIndexOnly neither on nor off", ctx: map[string]string{"firstSessionIndexOnly": "one"}, wantErr: `firstSessionIndexOnly "one"`},
		{name: "no turn function by default", arch: "arm64", check: func(t *testing.T, p propsView) {
			if p.turns.Enabled || p.turns.TimeoutSeconds != 0 || len(p.turns.BedrockModels) != 0 {
				t.Errorf("turns: %+v", p.turns)
			}
		}},
		{name: "turns from context", arch: "arm64",
			ctx: map[string]string{"turns": "1", "turnTimeout": "60", "turnBatchSize": "4", "bedrockModels": "anthropic.claude-3-haiku-20240307-v1:0, amazon.nova-lite-v1:0"},
			check: func(t *testing.T, p propsView) {
				if !p.turns.Enabled || p.turns.TimeoutSeconds != 60 || p.turns.BatchSize != 4 ||
					!slices.Equal(p.turns.BedrockModels, []string{"anthropic.claude-3-haiku-20240307-v1:0", "amazon.nova-lite-v1:0"}) {
					t.Errorf("turns: %+v", p.turns)
				}
			}},
		{name: "turns neither on nor off", ctx: map[string]string{"turns": "yes"}, wantErr: `turns "yes"`},
		{name: "turnTimeout not a number", ctx: map[string]string{"turns": "1", "turnTimeout": "2m"}, wantErr: `turnTimeout "2m"`},
		{name: "turn settings are never read from the environment", arch: "arm64",
			env: map[string]string{"turns": "1", "AGENTAUTH_TURN_RESERVE_SECONDS": "5"},
			check: func(t *testing.T, p propsView) {
				if p.turns.Enabled {
					t.Errorf("turns from the environment: %+v", p.turns)
				}
			}},
		{name: "tools settings are never read from the environment", arch: "arm64",
			env: map[string]string{"AGENTAUTH_JWKS_URL": "https://idp.example.com/jwks", "AGENTAUTH_JWT_ISSUER": "x", "AGENTAUTH_JWT_AUDIENCE": "y",
				"AGENTAUTH_TOOLHOOKS_SEAM": "true", "AGENTAUTH_TOOL_RATE_LIMIT": "1/s"},
			check: func(t *testing.T, p propsView) {
				if p.tools != (stack.ToolsProps{}) {
					t.Errorf("tools from the environment: %+v", p.tools)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, id, err := propsFrom(func(key, env string) string {
				if v := tc.ctx[key]; v != "" {
					return v
				}
				return tc.env[env]
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := *p.Architecture.Name(); got != tc.arch {
				t.Errorf("arch = %s, want %s", got, tc.arch)
			}
			if tc.check != nil {
				tc.check(t, propsView{prefix: p.Prefix, assetDir: p.AssetDir, id: id, retention: p.LogRetention, callbacks: p.CallbackPaths, secretPrefix: p.SecretPrefix, tools: p.Tools, tableIndexes: p.TableIndexes, turns: p.Turns})
			}
		})
	}
}

type propsView struct {
	prefix, assetDir, id string
	retention            awslogs.RetentionDays
	callbacks            []string
	secretPrefix         string
	tools                stack.ToolsProps
	tableIndexes         int
	turns                stack.TurnsProps
}

// wantIndexes checks that the props deploy the first n table indexes.
func wantIndexes(n int) func(t *testing.T, p propsView) {
	return func(t *testing.T, p propsView) {
		t.Helper()
		if p.tableIndexes != n {
			t.Errorf("table indexes %d, want %d", p.tableIndexes, n)
		}
	}
}

// TestDeployDocIndexSteps synthesizes the deploys docs/deploy.md's two
// index upgrade sections give, in order, with their context keys read as
// cdk would pass them: each adds exactly one index to the table, from the
// first to all four, and gettoken may query exactly the indexes there
// are. Every other command of the list-index section is an agentauth
// command, which cmd/agentauth's tests run.
func TestDeployDocIndexSteps(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	assets := fakeAssets(t)
	var deploys []string
	for _, title := range []string{"Upgrading a stack: the session indexes", "Upgrading a stack: the list indexes"} {
		for _, line := range shLines(t, docSection(t, string(raw), title)) {
			switch {
			case strings.HasPrefix(line, "npx cdk deploy "):
				deploys = append(deploys, line)
			case title == "Upgrading a stack: the list indexes" && line == "agentauth admin backfill-list-index":
			case title == "Upgrading a stack: the session indexes" && strings.HasPrefix(line, "aws dynamodb scan "):
			default:
				t.Errorf("%s: %q is a command no test runs", title, line)
			}
		}
	}
	if len(deploys) != len(stack.TableIndexOrder) {
		t.Fatalf("%d deploys documented, want %d (one per index): %q", len(deploys), len(stack.TableIndexOrder), deploys)
	}
	for i, line := range deploys {
		ctx := map[string]string{"assetDir": assets}
		words := strings.Fields(line)
		for j, w := range words {
			if w == "-c" && j+1 < len(words) {
				k, v, _ := strings.Cut(words[j+1], "=")
				ctx[k] = v
			}
		}
		p, id, err := propsFrom(func(key, _ string) string { return ctx[key] })
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		s, err := stack.New(app, id, p)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		tpl := *assertions.Template_FromStack(s.Stack, nil).ToJSON()
		want := stack.TableIndexOrder[:i+1]
		if got := indexesOf(tpl); !slices.Equal(got, want) {
			t.Errorf("deploy %d, %s: table indexes %q, want %q", i+1, line, got, want)
		}
		if got := queriedBy(tpl, "SessionIndexes"); !slices.Equal(got, want) {
			t.Errorf("deploy %d, %s: gettoken may query %q, want %q", i+1, line, got, want)
		}
	}
}

// docSection is the text of the markdown section titled title.
func docSection(t *testing.T, doc, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/deploy.md has no section %q", title)
	}
	sec, _, _ := strings.Cut(rest, "\n## ")
	return sec
}

// shLines are the lines of the sh blocks of a markdown text, without
// their comments, continuation lines joined.
func shLines(t *testing.T, text string) []string {
	t.Helper()
	var out []string
	for {
		_, rest, ok := strings.Cut(text, "```sh\n")
		if !ok {
			return out
		}
		block, after, _ := strings.Cut(rest, "```")
		block = strings.ReplaceAll(block, "\\\n", " ")
		for _, l := range strings.Split(block, "\n") {
			l, _, _ = strings.Cut(l, "#")
			if l = strings.Join(strings.Fields(l), " "); l != "" {
				out = append(out, l)
			}
		}
		text = after
	}
}

// indexesOf are the names of the record table's indexes in a template.
func indexesOf(tpl map[string]any) []string {
	var names []string
	for _, r := range tpl["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] != "AWS::DynamoDB::Table" {
			continue
		}
		gsis, _ := r["Properties"].(map[string]any)["GlobalSecondaryIndexes"].([]any)
		for _, g := range gsis {
			names = append(names, g.(map[string]any)["IndexName"].(string))
		}
	}
	return names
}

// queriedBy are the indexes the IAM statement sid names (gettoken's
// SessionIndexes: the only one).
func queriedBy(tpl map[string]any, sid string) []string {
	var names []string
	for _, r := range tpl["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] != "AWS::IAM::Policy" {
			continue
		}
		doc := r["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Sid"] != sid {
				continue
			}
			res, ok := st["Resource"].([]any)
			if !ok {
				res = []any{st["Resource"]}
			}
			for _, x := range res {
				parts := x.(map[string]any)["Fn::Join"].([]any)[1].([]any)
				names = append(names, strings.TrimPrefix(parts[len(parts)-1].(string), "/index/"))
			}
		}
	}
	return names
}

// TestDeployDocConsole synthesizes docs/deploy.md's "Operator console"
// deploy as written: its context keys give gettoken the console's
// settings and the public console routes.
func TestDeployDocConsole(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	assets := fakeAssets(t)
	var deploy string
	for _, line := range shLines(t, docSection(t, string(raw), "Operator console")) {
		switch {
		case line == "cd infra":
		case strings.HasPrefix(line, "npx cdk deploy "):
			deploy = line
		default:
			t.Errorf("Operator console: %q is a command no test runs", line)
		}
	}
	ctx := map[string]string{"assetDir": assets}
	words := strings.Fields(deploy)
	for j, w := range words {
		if w == "-c" && j+1 < len(words) {
			k, v, _ := strings.Cut(words[j+1], "=")
			ctx[k] = v
		}
	}
	if ctx["consoleIssuer"] == "" {
		t.Fatalf("the documented deploy sets no consoleIssuer: %q", deploy)
	}
	p, id, err := propsFrom(func(key, _ string) string { return ctx[key] })
	if err != nil {
		t.Fatalf("%s: %v", deploy, err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	s, err := stack.New(app, id, p)
	if err != nil {
		t.Fatalf("%s: %v", deploy, err)
	}
	tpl := *assertions.Template_FromStack(s.Stack, nil).ToJSON()
	routes := map[string]bool{}
	var env map[string]any
	for _, r := range tpl["Resources"].(map[string]any) {
		r := r.(map[string]any)
		props, _ := r["Properties"].(map[string]any)
		switch r["Type"] {
		case "AWS::ApiGatewayV2::Route":
			if props["AuthorizationType"] == "NONE" {
				routes[props["RouteKey"].(string)] = true
			}
		case "AWS::Lambda::Function":
			if props["FunctionName"] == p.Prefix+"-gettoken" {
				env = props["Environment"].(map[string]any)["Variables"].(map[string]any)
			}
		}
	}
	for _, r := range stack.ConsoleRoutes {
		if !routes[r.Method+" "+r.Path] {
			t.Errorf("no public route %s %s", r.Method, r.Path)
		}
	}
	if env[stack.EnvConsoleIssuer] != ctx["consoleIssuer"] || env[stack.EnvConsoleClientID] != ctx["consoleClientId"] ||
		env[stack.EnvConsoleClientSecretRef] != ctx["consoleClientSecretRef"] || env[stack.EnvConsoleRolesClaim] != ctx["consoleRolesClaim"] {
		t.Errorf("gettoken's console settings: %v", env)
	}
}

// fakeAssets is an asset directory with a stand-in bootstrap for each
// function a documented deploy builds, so that synthesis finds them.
func fakeAssets(t *testing.T) string {
	t.Helper()
	assets := t.TempDir()
	for _, fn := range []string{stack.GetToken, stack.Callback} {
		if err := os.MkdirAll(filepath.Join(assets, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(assets, fn, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return assets
}
