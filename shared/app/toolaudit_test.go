package app

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

const auditTools = `---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: lookup}
spec: {id: "seed:lookup", name: lookup, description: looks up, inputSchema: {type: object}, sourceId: seed, transport: native}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: seed}
spec: {selectors: [{source: seed}]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: sub, operator: exists}], allowedGroupIds: [seed]}
`

// auditCanary is an argument value: it must reach the tool and never the
// audit stream.
const auditCanary = "canary-arg-7f3e9d2c41"

// A REST tool call through the hooks lands in the stored audit stream,
// scoped to the caller's tenant, with its argsHash and no argument value;
// AGENTAUTH_AUDIT_RETENTION=0 stores nothing.
func TestToolCallLandsInTheAuditStream(t *testing.T) {
	iss := jwttest.Start(t)
	env := iss.Env()
	withTools, err := config.FromEnv(func(k string) string { return env[k] }, config.Local)
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	native := map[string]toolhooks.Invoker{"seed:lookup": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
		seen = string(args)
		return json.RawMessage(`{"found":true}`), nil
	}}
	invoke := func(t *testing.T, a *App, tenant string) (argsHash string) {
		t.Helper()
		h, err := a.ToolsHandler()
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/v1/tools/invoke", strings.NewReader(`{"toolName":"lookup","args":{"q":"`+auditCanary+`"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+iss.Mint(t, map[string]any{"sub": "alice", "tenant_id": tenant, "agent_id": "helper"}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out struct {
			ToolCalled struct {
				ArgsHash string `json:"argsHash"`
				Tenant   string `json:"tenant"`
			} `json:"toolCalled"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 || len(out.ToolCalled.ArgsHash) != 64 || out.ToolCalled.Tenant != tenant {
			t.Fatalf("invoke: %d %s", rec.Code, rec.Body)
		}
		if !strings.Contains(seen, auditCanary) {
			t.Fatalf("the tool got %s", seen)
		}
		return out.ToolCalled.ArgsHash
	}

	t.Run("stored", func(t *testing.T) {
		cfg := setup(t, teamApp+auditTools)
		cfg.Tools = withTools.Tools
		be, err := OpenBackends(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Build(context.Background(), cfg, be, nil, Options{Native: native})
		if err != nil {
			t.Fatal(err)
		}
		if be.ToolAudit == nil || a.audit == nil || a.auditSweep == nil {
			t.Fatal("no audit stream on the embedded backends")
		}
		hash := invoke(t, a, "acme")
		invoke(t, a, "globex")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.audit.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		page, err := be.ToolAudit.QueryToolAudit(ctx, domain.ToolAuditQuery{Tenant: "acme"})
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("acme's stream: %+v, %v", page, err)
		}
		r := page.Records[0]
		if r.ArgsHash != hash || r.Tool != "lookup" || r.Principal != "alice" || r.Tenant != "acme" || r.AgentID != "helper" ||
			r.Transport != "native" || r.Via != "" || r.Status != toolhooks.StatusOK || r.DurationMs == nil || time.Since(r.At) > time.Minute {
			t.Fatalf("record %+v (argsHash %s)", r, hash)
		}
		if all, _ := be.ToolAudit.QueryToolAudit(ctx, domain.ToolAuditQuery{AnyTenant: true}); len(all.Records) != 2 {
			t.Fatalf("every tenant: %d records", len(all.Records))
		}
		files, _ := filepath.Glob(filepath.Join(cfg.Home, "audit", "tools", "*.jsonl"))
		if len(files) != 1 {
			t.Fatalf("audit files %v", files)
		}
		b, _ := os.ReadFile(files[0])
		if strings.Contains(string(b), auditCanary) || !strings.Contains(string(b), hash) {
			t.Fatalf("audit file:\n%s", b)
		}
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("off", func(t *testing.T) {
		cfg := setup(t, teamApp+auditTools)
		cfg.Tools = withTools.Tools
		cfg.AuditRetention = 0
		be, err := OpenBackends(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Build(context.Background(), cfg, be, nil, Options{Native: native})
		if err != nil {
			t.Fatal(err)
		}
		if be.ToolAudit != nil || a.audit != nil {
			t.Fatal("retention 0 and still a stored stream")
		}
		invoke(t, a, "acme")
		if _, err := os.Stat(filepath.Join(cfg.Home, "audit")); !os.IsNotExist(err) {
			t.Fatalf("audit directory: %v", err)
		}
	})
}
