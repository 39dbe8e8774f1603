package main

import (
	"os"
	"slices"
	"strings"
	"testing"

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
		{name: "firstSessionIndexOnly", arch: "arm64", ctx: map[string]string{"firstSessionIndexOnly": "true"}, check: func(t *testing.T, p propsView) {
			if !p.firstIndexOnly {
				t.Error("both indexes")
			}
		}},
		{name: "both session indexes by default", arch: "arm64", check: func(t *testing.T, p propsView) {
			if p.firstIndexOnly {
				t.Error("one index")
			}
		}},
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
				tc.check(t, propsView{prefix: p.Prefix, assetDir: p.AssetDir, id: id, retention: p.LogRetention, callbacks: p.CallbackPaths, secretPrefix: p.SecretPrefix, tools: p.Tools, firstIndexOnly: p.FirstSessionIndexOnly, turns: p.Turns})
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
	firstIndexOnly       bool
	turns                stack.TurnsProps
}
