package domain

import (
	"reflect"
	"testing"
)

func TestPrincipalMayManageTenant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      Principal
		tenant string
		want   bool
	}{
		{"admin of the tenant", Principal{Admin: true, Tenant: "a"}, "a", true},
		{"admin of another tenant", Principal{Admin: true, Tenant: "a"}, "b", false},
		{"admin naming no tenant", Principal{Admin: true}, "a", false},
		{"platform admin", Principal{Admin: true, PlatformAdmin: true}, "b", true},
		{"platform admin with a tenant of its own", Principal{Admin: true, PlatformAdmin: true, Tenant: "a"}, "b", true},
		{"tenant member without admin", Principal{Tenant: "a"}, "a", false},
		{"nobody", Principal{}, "a", false},
		{"no tenant to manage", Principal{Admin: true, PlatformAdmin: true}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.MayManageTenant(tc.tenant); got != tc.want {
				t.Fatalf("MayManageTenant(%q) = %v, want %v", tc.tenant, got, tc.want)
			}
		})
	}
}

func TestTurnAuthPrincipal(t *testing.T) {
	alice := &Actor{Type: "user", ID: "slack:U1"}
	for _, tc := range []struct {
		name  string
		auth  TurnAuth
		paths ClaimPaths
		want  Principal // Claims are checked apart
	}{
		{"claims: the sub claim is the subject, the turn keeps its actor",
			TurnAuth{Actor: alice, Claims: map[string]any{"sub": "alice", "scope": "tools:echo b", "tenant_id": "acme", "skills": []any{"s1"}, "agent_id": "planner"}}, ClaimPaths{},
			Principal{Subject: "alice", AgentID: "planner", Tenant: "acme", AllowedSkills: []string{"s1"}, Scopes: []string{"tools:echo", "b"}, TurnAuth: TurnAuth{Actor: alice}}},
		{"no sub claim: the actor's id",
			TurnAuth{Actor: alice, Claims: map[string]any{"tenant_id": "acme"}}, ClaimPaths{},
			Principal{Subject: "slack:U1", AgentID: DefaultAgentID, Tenant: "acme", Scopes: nil, TurnAuth: TurnAuth{Actor: alice}}},
		{"no claims at all: the actor, nothing more",
			TurnAuth{Actor: alice}, ClaimPaths{},
			Principal{Subject: "slack:U1", AgentID: DefaultAgentID, TurnAuth: TurnAuth{Actor: alice}}},
		{"no actor: one is made of the sub claim",
			TurnAuth{Claims: map[string]any{"sub": "bob"}}, ClaimPaths{},
			Principal{Subject: "bob", AgentID: DefaultAgentID, TurnAuth: TurnAuth{Actor: &Actor{Type: "user", ID: "bob"}}}},
		{"nobody",
			TurnAuth{}, ClaimPaths{},
			Principal{AgentID: DefaultAgentID}},
		{"the turn's subjects win over the subjects claim",
			TurnAuth{Actor: alice, Subjects: &Subjects{User: "demo:user:turn"}, Claims: map[string]any{"sub": "alice", "agentauth_subjects": map[string]any{"user": "demo:user:claim", "global": "demo:team:claim"}}}, ClaimPaths{},
			Principal{Subject: "alice", AgentID: DefaultAgentID, TurnAuth: TurnAuth{Actor: alice, Subjects: &Subjects{User: "demo:user:turn"}}}},
		{"no subjects in the turn: the claim's, from the configured paths",
			TurnAuth{Actor: alice, Claims: map[string]any{"sub": "alice", "org": map[string]any{"id": "t9"}, "subs": map[string]any{"user": "demo:user:claim"}}}, ClaimPaths{Tenant: "org.id", Subjects: "subs"},
			Principal{Subject: "alice", AgentID: DefaultAgentID, Tenant: "t9", TurnAuth: TurnAuth{Actor: alice, Subjects: &Subjects{User: "demo:user:claim"}}}},
		{"admin scopes read as at the edge",
			TurnAuth{Claims: map[string]any{"sub": "root", "scp": []any{ScopePlatformAdmin}}}, ClaimPaths{},
			Principal{Subject: "root", AgentID: DefaultAgentID, Scopes: []string{ScopePlatformAdmin}, Admin: true, PlatformAdmin: true, TurnAuth: TurnAuth{Actor: &Actor{Type: "user", ID: "root"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.auth.Principal(tc.paths)
			if !reflect.DeepEqual(got.Claims, tc.auth.Claims) || !reflect.DeepEqual(got.TurnAuth.Claims, tc.auth.Claims) {
				t.Fatalf("claims %v / turn auth claims %v, want the turn's", got.Claims, got.TurnAuth.Claims)
			}
			got.Claims, got.TurnAuth.Claims = nil, nil
			if len(got.Scopes) == 0 && len(tc.want.Scopes) == 0 {
				got.Scopes, tc.want.Scopes = nil, nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("principal\n got %+v (actor %+v, subjects %+v)\nwant %+v (actor %+v, subjects %+v)",
					got, got.TurnAuth.Actor, got.TurnAuth.Subjects, tc.want, tc.want.TurnAuth.Actor, tc.want.TurnAuth.Subjects)
			}
		})
	}
}
