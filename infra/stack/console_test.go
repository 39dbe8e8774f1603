package stack_test

import (
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/agentauth/agentauth/infra/stack"
)

// TestConsole: with a console issuer, gettoken serves /console/ on public
// routes (the console signs its operators in itself) and gets the
// console's settings; the client secret goes by reference, never by
// value; without one there is no console route.
func TestConsole(t *testing.T) {
	f := synth(t, func(p *stack.Props) {
		p.Console = stack.ConsoleProps{Issuer: "https://login.example.com/oauth2", ClientID: "console-client",
			ClientSecretRef: "console/clientSecret", RolesClaim: "cognito:groups"}
	})
	want := runtimeRoutesWant("/oauth/callback/{app}")
	for _, r := range stack.ConsoleRoutes {
		want[r.Method+" "+r.Path] = routeWant{stack.GetToken, "NONE"}
	}
	assertRoutes(t, f, want)
	env := props(f.resources[f.id[stack.GetToken]])["Environment"].(map[string]any)["Variables"].(map[string]any)
	for k, v := range map[string]string{stack.EnvConsoleIssuer: "https://login.example.com/oauth2", stack.EnvConsoleClientID: "console-client",
		stack.EnvConsoleClientSecretRef: "console/clientSecret", stack.EnvConsoleRolesClaim: "cognito:groups"} {
		if env[k] != v {
			t.Errorf("gettoken %s = %v, want %s", k, env[k], v)
		}
	}
	for k := range env {
		if k == "AGENTAUTH_CONSOLE_CLIENT_SECRET" {
			t.Error("the client secret is in the environment")
		}
	}
	cb := props(f.resources[f.id[stack.Callback]])["Environment"].(map[string]any)["Variables"].(map[string]any)
	if _, ok := cb[stack.EnvConsoleIssuer]; ok {
		t.Error("the callback function got the console's settings")
	}
	check(t, func() {
		f.tpl.HasOutput(jsii.String("ConsoleUrl"), map[string]any{})
	})
	// The default stack has no console route.
	for key := range defaults(t).resources {
		if r := defaults(t).resources[key]; r["Type"] == "AWS::ApiGatewayV2::Route" && strings.Contains(props(r)["RouteKey"].(string), "/console") {
			t.Errorf("a console route without a console: %v", props(r)["RouteKey"])
		}
	}
}

func TestConsoleRejected(t *testing.T) {
	for _, tc := range []struct {
		c    stack.ConsoleProps
		want string
	}{
		{stack.ConsoleProps{Issuer: "http://login.example.com"}, "consoleIssuer"},
		{stack.ConsoleProps{Issuer: "https://login.example.com"}, "missing context consoleClientId"},
		{stack.ConsoleProps{Issuer: "https://login.example.com", ClientID: "c", ClientSecretRef: "just-a-name"}, "want <name>/<key>"},
		{stack.ConsoleProps{ClientID: "c"}, "without consoleIssuer"},
	} {
		p := testProps()
		p.Console = tc.c
		if _, err := newStack(t, "Rejected", p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}
