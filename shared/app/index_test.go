package app

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

// Issue 18: GET / lists the parts that Build turned on — the tool routes
// and MCP with a JWT issuer, the turn routes with a Swarm — with the
// routes each serves, and names the process and its version.
func TestRootListsWhatIsOn(t *testing.T) {
	iss := jwttest.Start(t)
	env := iss.Env()
	cfg := setup(t, teamApp+`---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: "http://127.0.0.1:9/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/scripted}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
`)
	withTools, err := config.FromEnv(func(k string) string { return env[k] }, config.Local)
	if err != nil {
		t.Fatal(err)
	}
	root := func(t *testing.T, a *App) (names []string, routes string, running, version string) {
		t.Helper()
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		var out struct {
			Running, Version string
			Routes           []struct {
				Name   string
				Routes []string
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
			t.Fatalf("GET /: %d %s", rec.Code, rec.Body)
		}
		for _, p := range out.Routes {
			names = append(names, p.Name)
			routes += strings.Join(p.Routes, " ") + " "
		}
		return names, routes, out.Running, out.Version
	}

	plain, err := build(t, cfg, Options{Function: "serve", Version: "v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	names, routes, running, version := root(t, plain)
	if slices.Contains(names, "tool routes") || !slices.Contains(names, "turn routes") ||
		!strings.Contains(routes, "POST /v1/instances/{swarm}/{instanceKey}/events") || !strings.HasPrefix(running, "agentauth serve") || version != "v9.9.9" {
		t.Fatalf("without tools: %v\n%s\n%q %q", names, routes, running, version)
	}

	cfg.Tools = withTools.Tools
	full, err := build(t, cfg, Options{Function: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	names, routes, _, version = root(t, full)
	want := []string{"OAuth runtime", "OAuth callbacks", "tool routes", "MCP server", "turn routes", "health"}
	if !slices.Equal(names, want) || !strings.Contains(routes, "POST /v1/tools/invoke") || !strings.Contains(routes, "/mcp") || version == "" {
		t.Fatalf("with tools: %v\n%s\nversion %q", names, routes, version)
	}
}
