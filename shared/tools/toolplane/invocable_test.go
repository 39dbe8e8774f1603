package toolplane

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

const agentsBundle = `apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: clock}
spec: {id: "native:now", name: now, description: the time, inputSchema: {type: object}, sourceId: native, transport: native, requiredScopes: [a]}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: menu}
spec: {id: "menu:get", name: get_menu, description: d, inputSchema: {type: object}, sourceId: menu, transport: http, method: GET, url: "https://api.example.com/menu", tags: [menu]}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: clock2}
spec: {id: "native2:now", name: now, description: another now, inputSchema: {type: object}, sourceId: native2, transport: native, requiredScopes: [b]}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: legacy}
spec: {id: "mcp:old", name: old, description: d, inputSchema: {type: object}, sourceId: mcp, transport: mcp}
---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: m}
spec: {provider: openai, model: x, endpoint: "http://127.0.0.1:9/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: menus}
spec:
  modelRef: Model/m
  tools: {selectors: [{requiredTags: [menu]}], explicitToolIds: ["native:now"], excludedToolIds: ["native:now"]}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: bare}
spec: {modelRef: Model/m}
`

func agentsPlane(t *testing.T) (*Plane, *MemoryTenants) {
	t.Helper()
	b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(agentsBundle)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := NewMemoryTenants()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	p, err := New(context.Background(), Config{Bundle: b, Tenants: store, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return p, store
}

func sortedIDs(m map[string]bool) []string {
	var ids []string
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestAgentSelections: an Agent's tools select among the bundle's tools
// and the uploads like a ToolGroup, exclusion winning, and follow uploads.
func TestAgentSelections(t *testing.T) {
	ctx := context.Background()
	p, _ := agentsPlane(t)
	snap := p.Snapshot(ctx)
	if got := sortedIDs(snap.Agents["menus"]); !reflect.DeepEqual(got, []string{"menu:get"}) {
		t.Errorf("menus selects %q before the upload", got)
	}
	if got, ok := snap.Agents["bare"]; !ok || len(got) != 0 {
		t.Errorf("bare selects %v (known %v), want nothing", got, ok)
	}
	if _, err := p.Upload(ctx, "acme", domain.TenantKindTool, []byte(`{"id":"orders:list","name":"list_orders","description":"d","inputSchema":{"type":"object"},"sourceId":"orders","transport":"native","tags":["menu"]}`)); err != nil {
		t.Fatal(err)
	}
	if got := sortedIDs(p.Snapshot(ctx).Agents["menus"]); !reflect.DeepEqual(got, []string{"acme/orders:list", "menu:get"}) {
		t.Errorf("menus selects %q after the upload", got)
	}
	// The selection grants nothing by itself: no policy, no tool.
	if _, m := p.Catalog().Manifest(map[string]any{"sub": "u", "tenant_id": "acme"}, toolcatalog.Options{}); len(m) != 0 {
		t.Errorf("an agent's selection reached a caller's manifest: %v", m)
	}
}

func TestInvocable(t *testing.T) {
	p, _ := agentsPlane(t)
	snap := p.Snapshot(context.Background())
	ran := ""
	impl := func(id string, e Entry) toolhooks.Invoker {
		if e.Tool.Transport != bundle.TransportNative {
			return nil
		}
		return func(context.Context, json.RawMessage) (json.RawMessage, error) {
			ran = id
			return json.RawMessage(`1`), nil
		}
	}
	code := func(t *testing.T, inv toolhooks.Invoker) string {
		t.Helper()
		_, err := inv(context.Background(), nil)
		var te *toolhooks.ToolError
		if errors.As(err, &te) {
			return te.Code
		}
		if err != nil {
			t.Fatal(err)
		}
		return ""
	}
	for _, tc := range []struct {
		name       string
		tool       string
		ids        []string
		wantScopes []string
		wantCode   string
		wantRan    string
		outside    bool // not in the catalog: no implementation at all
	}{
		{"one tool, run by its implementation", "now", []string{"native:now"}, []string{"a"}, "", "native:now", false},
		{"not in the catalog", "now", nil, nil, "", "", true},
		{"an id the snapshot no longer has", "now", []string{"acme/gone:x"}, nil, "", "", true},
		{"two of one name: ambiguous, under both scopes", "now", []string{"native:now", "native2:now"}, []string{"a", "b"}, CodeAmbiguous, "", false},
		{"no implementation here", "old", []string{"mcp:old"}, nil, CodeTransportUnsupported, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = ""
			tool, inv := snap.Invocable(tc.tool, tc.ids, impl)
			if tool.Name != tc.tool || !reflect.DeepEqual(tool.RequiredScopes, tc.wantScopes) {
				t.Fatalf("tool = %+v", tool)
			}
			if tc.outside {
				if inv != nil {
					t.Fatal("a tool outside the catalog has an implementation")
				}
				return
			}
			if got := code(t, inv); got != tc.wantCode || ran != tc.wantRan {
				t.Fatalf("code %q ran %q, want %q and %q", got, ran, tc.wantCode, tc.wantRan)
			}
		})
	}
}
