package discovery

import (
	"strings"
	"testing"
)

func TestTenantToolIDs(t *testing.T) {
	tool := func(tenant, id string) Tool {
		return Tool{ID: id, Tenant: tenant, Name: "n", SourceID: "menu", Enabled: true}
	}
	ix, err := NewIndex(Config{
		Tools:  []Tool{tool("", "menu:list"), tool("acme", "menu:list"), tool("globex", "menu:list")},
		Groups: []Group{{ID: "g", Active: true, ExplicitToolIDs: []string{"acme/menu:list"}, ExcludedToolIDs: []string{"menu:list"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := ix.GroupTools("g", false)
	if len(got) != 1 || got[0].ToolID != "acme/menu:list" || got[0].Tenant != "acme" {
		t.Fatalf("group tools = %+v, want only acme/menu:list of tenant acme", got)
	}

	for _, tc := range []struct {
		name  string
		tools []Tool
		want  string
	}{
		{"same tenant twice", []Tool{tool("acme", "menu:list"), tool("acme", "menu:list")}, `duplicate tool id "acme/menu:list"`},
		{"bad tenant", []Tool{tool("ac/me", "menu:list")}, `tenant "ac/me"`},
		{"bad id", []Tool{tool("acme", "acme/menu:list")}, "want <source>:<operation>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewIndex(Config{Tools: tc.tools})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
