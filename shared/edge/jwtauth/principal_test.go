package jwtauth

import (
	"reflect"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

func TestNewPrincipal(t *testing.T) {
	actor := func(id string) *domain.Actor { return &domain.Actor{Type: "user", ID: id} }
	for _, tc := range []struct {
		name   string
		claims string
		paths  ClaimPaths
		want   domain.Principal // Claims are checked apart
	}{
		{"a plain caller", `{"sub":"alice","scope":"tools:echo"}`, ClaimPaths{},
			domain.Principal{Subject: "alice", AgentID: DefaultAgentID, Scopes: []string{"tools:echo"}, TurnAuth: domain.TurnAuth{Actor: actor("alice")}}},
		{"every default claim", `{"sub":"alice","agent_id":"planner","tenant_id":"acme","skills":["a","b"],"agentauth_subjects":{"user":"demo:user:alice","global":"demo:team:T1"}}`, ClaimPaths{},
			domain.Principal{Subject: "alice", AgentID: "planner", Tenant: "acme", AllowedSkills: []string{"a", "b"},
				TurnAuth: domain.TurnAuth{Actor: actor("alice"), Subjects: &domain.Subjects{User: "demo:user:alice", Global: "demo:team:T1"}}}},
		{"configured paths", `{"sub":"bob","org":{"id":42,"skills":"x, y"},"subs":{"user":"u"},"tenant_id":"ignored"}`, ClaimPaths{Tenant: "org.id", Skills: "org.skills", Subjects: "subs"},
			domain.Principal{Subject: "bob", AgentID: DefaultAgentID, Tenant: "42", AllowedSkills: []string{"x", "y"},
				TurnAuth: domain.TurnAuth{Actor: actor("bob"), Subjects: &domain.Subjects{User: "u"}}}},
		{"a null tenant is no tenant", `{"sub":"ann","scope":"agentauth:admin","tenant_id":null}`, ClaimPaths{},
			domain.Principal{Subject: "ann", AgentID: DefaultAgentID, Scopes: []string{"agentauth:admin"}, Admin: true, TurnAuth: domain.TurnAuth{Actor: actor("ann")}}},
		{"a tenant that is not a scalar is no tenant", `{"sub":"ann","tenant_id":{"id":"a"}}`, ClaimPaths{},
			domain.Principal{Subject: "ann", AgentID: DefaultAgentID, TurnAuth: domain.TurnAuth{Actor: actor("ann")}}},
		{"tenant admin", `{"sub":"ann","scope":"agentauth:admin","tenant_id":"acme"}`, ClaimPaths{},
			domain.Principal{Subject: "ann", AgentID: DefaultAgentID, Tenant: "acme", Scopes: []string{"agentauth:admin"}, Admin: true, TurnAuth: domain.TurnAuth{Actor: actor("ann")}}},
		{"platform admin", `{"sub":"root","scp":["agentauth:platform-admin"]}`, ClaimPaths{},
			domain.Principal{Subject: "root", AgentID: DefaultAgentID, Scopes: []string{"agentauth:platform-admin"}, Admin: true, PlatformAdmin: true, TurnAuth: domain.TurnAuth{Actor: actor("root")}}},
		{"a look-alike scope is not platform admin", `{"sub":"x","scope":"agentauth:platform-admin2 AGENTAUTH:PLATFORM-ADMIN"}`, ClaimPaths{},
			domain.Principal{Subject: "x", AgentID: DefaultAgentID, Scopes: []string{"agentauth:platform-admin2", "AGENTAUTH:PLATFORM-ADMIN"}, TurnAuth: domain.TurnAuth{Actor: actor("x")}}},
		{"empty subjects are none", `{"sub":"x","agentauth_subjects":{"user":""}}`, ClaimPaths{},
			domain.Principal{Subject: "x", AgentID: DefaultAgentID, TurnAuth: domain.TurnAuth{Actor: actor("x")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustClaims(t, tc.claims)
			got := NewPrincipal(c, tc.paths)
			if !reflect.DeepEqual(got.Claims, map[string]any(c)) {
				t.Fatalf("claims %v, want the verified claims", got.Claims)
			}
			got.Claims = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("principal\n got %+v (turn auth %+v)\nwant %+v (turn auth %+v)", got, got.TurnAuth.Subjects, tc.want, tc.want.TurnAuth.Subjects)
			}
		})
	}
}
