package domain

import (
	"errors"
	"strings"
	"testing"
)

func TestGrantIDSpecFormula(t *testing.T) {
	// sha256("OAuthApp/slack-bot:slack:team:T111") computed independently.
	got := GrantID(ObjectRef{Kind: "OAuthApp", Name: "slack-bot"}, "slack:team:T111")
	if got != "grant-99a2b7d40af41f9f" {
		t.Fatalf("GrantID = %s", got)
	}
	app := ObjectRef{Kind: "OAuthApp", Name: "a"}
	if GrantID(app, "s1") == GrantID(app, "s2") {
		t.Fatal("different subjects share a grant id")
	}
	if err := ValidateGrantID(got); err != nil {
		t.Fatal(err)
	}
}

func TestNewSessionID(t *testing.T) {
	a, b := NewSessionID(), NewSessionID()
	if err := ValidateSessionID(a); err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two session ids are equal")
	}
}

func TestValidateIDs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate func(string) error
		id       string
		ok       bool
	}{
		{"grant", ValidateGrantID, "grant-0123456789abcdef", true},
		{"grant upper case", ValidateGrantID, "grant-0123456789ABCDEF", false},
		{"grant short", ValidateGrantID, "grant-0123456789abcde", false},
		{"grant long", ValidateGrantID, "grant-0123456789abcdef0", false},
		{"grant not hex", ValidateGrantID, "grant-0123456789abcdeg", false},
		{"grant traversal", ValidateGrantID, "grant-../../etc/pass", false},
		{"grant zero byte", ValidateGrantID, "grant-0123456789abcde\x00", false},
		{"grant as session", ValidateGrantID, "as-0123456789abcdef0123456789abcdef", false},
		{"empty grant", ValidateGrantID, "", false},
		{"session", ValidateSessionID, "as-0123456789abcdef0123456789abcdef", true},
		{"session upper case", ValidateSessionID, "as-0123456789abcdef0123456789abcdeF", false},
		{"session short", ValidateSessionID, "as-0123456789abcdef", false},
		{"session trailing slash", ValidateSessionID, "as-0123456789abcdef0123456789abcde/", false},
		{"session as grant", ValidateSessionID, "grant-0123456789abcdef", false},
		{"empty session", ValidateSessionID, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.validate(tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("validate(%q) = %v, want ok %v", tc.id, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrInvalidID) || strings.ContainsRune(err.Error(), 0)) {
				t.Fatalf("error %q does not wrap ErrInvalidID or holds a raw zero byte", err)
			}
		})
	}
}

func TestSessionReuseKey(t *testing.T) {
	app := ObjectRef{Kind: "OAuthApp", Name: "slack-bot"}
	resume := ResumeInfo{SwarmRef: ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "i-1", AgentName: "planner",
		Origin: map[string]any{"thread": "t1"}, Auth: TurnAuth{Actor: &Actor{Type: "user", ID: "u1"}}}
	base := SessionReuseKey(app, "sub", []string{"read", "write"}, resume)
	if err := ValidateReuseKey(base); err != nil {
		t.Fatal(err)
	}
	with := func(f func(r *ResumeInfo)) ResumeInfo { r := resume; f(&r); return r }
	t.Run("equal", func(t *testing.T) {
		for name, k := range map[string]string{
			"scopes in another order": SessionReuseKey(app, "sub", []string{"write", "read"}, resume),
			"a scope repeated":        SessionReuseKey(app, "sub", []string{"write", "read", "write"}, resume),
			"another origin and actor": SessionReuseKey(app, "sub", []string{"read", "write"}, with(func(r *ResumeInfo) {
				r.Origin, r.Auth = map[string]any{"thread": "t2"}, TurnAuth{}
			})),
		} {
			if k != base {
				t.Errorf("%s: key differs", name)
			}
		}
	})
	t.Run("different", func(t *testing.T) {
		for name, k := range map[string]string{
			"app":                 SessionReuseKey(ObjectRef{Kind: "OAuthApp", Name: "slack"}, "sub", []string{"read", "write"}, resume),
			"app kind":            SessionReuseKey(ObjectRef{Kind: "Other", Name: "slack-bot"}, "sub", []string{"read", "write"}, resume),
			"subject":             SessionReuseKey(app, "sub2", []string{"read", "write"}, resume),
			"fewer scopes":        SessionReuseKey(app, "sub", []string{"read"}, resume),
			"no scopes":           SessionReuseKey(app, "sub", nil, resume),
			"swarm":               SessionReuseKey(app, "sub", []string{"read", "write"}, with(func(r *ResumeInfo) { r.SwarmRef.Name = "other" })),
			"instance":            SessionReuseKey(app, "sub", []string{"read", "write"}, with(func(r *ResumeInfo) { r.InstanceKey = "i-2" })),
			"agent":               SessionReuseKey(app, "sub", []string{"read", "write"}, with(func(r *ResumeInfo) { r.AgentName = "coder" })),
			"no resume":           SessionReuseKey(app, "sub", []string{"read", "write"}, ResumeInfo{}),
			"joined scopes":       SessionReuseKey(app, "sub", []string{"readwrite"}, resume),
			"shifted scopes":      SessionReuseKey(app, "sub", []string{"rea", "dwrite"}, resume),
			"shifted target":      SessionReuseKey(app, "sub", []string{"read", "write"}, with(func(r *ResumeInfo) { r.InstanceKey, r.AgentName = "i-1p", "lanner" })),
			"subject into scopes": SessionReuseKey(app, "su", []string{"bread", "write"}, resume),
		} {
			if k == base {
				t.Errorf("%s: same key", name)
			}
		}
	})
	for _, k := range []string{"", "rk-" + strings.Repeat("a", 63), "rk-" + strings.Repeat("A", 64), "as-" + strings.Repeat("a", 64), "rk-../" + strings.Repeat("a", 61)} {
		if err := ValidateReuseKey(k); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateReuseKey(%q) = %v, want ErrInvalidID", k, err)
		}
	}
}

func TestResumeTargetKey(t *testing.T) {
	base := ResumeTarget{SwarmRef: ObjectRef{Kind: "Swarm", Name: "victim"}, InstanceKey: "C1", AgentName: "assistant"}
	key := ResumeTargetKey(base)
	if err := ValidateResumeTargetKey(key); err != nil {
		t.Fatal(err)
	}
	info := ResumeInfo{SwarmRef: base.SwarmRef, InstanceKey: "C1", AgentName: "assistant", TurnID: "t-1", Step: 2, CallID: "c",
		Origin: map[string]any{"thread": "t1"}, Auth: TurnAuth{Actor: &Actor{Type: "user", ID: "u1"}}}
	if info.Target() != base || ResumeTargetKey(info.Target()) != key {
		t.Fatalf("the target of a resume is its swarm, instance and agent only: %+v", info.Target())
	}
	with := func(f func(*ResumeTarget)) ResumeTarget { r := base; f(&r); return r }
	for name, other := range map[string]ResumeTarget{
		"swarm":          with(func(r *ResumeTarget) { r.SwarmRef.Name = "other" }),
		"swarm kind":     with(func(r *ResumeTarget) { r.SwarmRef.Kind = "Other" }),
		"instance":       with(func(r *ResumeTarget) { r.InstanceKey = "C2" }),
		"agent":          with(func(r *ResumeTarget) { r.AgentName = "coder" }),
		"shifted swarm":  with(func(r *ResumeTarget) { r.SwarmRef.Name, r.InstanceKey = "victimC", "1" }),
		"shifted kind":   with(func(r *ResumeTarget) { r.SwarmRef.Kind, r.SwarmRef.Name = "Swarmv", "ictim" }),
		"shifted agent":  with(func(r *ResumeTarget) { r.InstanceKey, r.AgentName = "C1a", "ssistant" }),
		"no swarm":       with(func(r *ResumeTarget) { r.SwarmRef = ObjectRef{} }),
		"the old tuple":  {InstanceKey: "C1", AgentName: "assistant"},
		"nothing at all": {},
	} {
		if ResumeTargetKey(other) == key {
			t.Errorf("%s: same key", name)
		}
	}
	for _, k := range []string{"", "rt-" + strings.Repeat("a", 63), "rt-" + strings.Repeat("A", 64), "rk-" + strings.Repeat("a", 64), "rt-../" + strings.Repeat("a", 61)} {
		if err := ValidateResumeTargetKey(k); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateResumeTargetKey(%q) = %v, want ErrInvalidID", k, err)
		}
	}
}

func TestResumeTargetValidate(t *testing.T) {
	full := ResumeTarget{SwarmRef: ObjectRef{Kind: "Swarm", Name: "s"}, InstanceKey: "i", AgentName: "a"}
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		t    ResumeTarget
		want string
	}{
		"no swarm":      {ResumeTarget{InstanceKey: "i", AgentName: "a"}, "swarmRef"},
		"no swarm kind": {ResumeTarget{SwarmRef: ObjectRef{Name: "s"}, InstanceKey: "i", AgentName: "a"}, "swarmRef"},
		"no swarm name": {ResumeTarget{SwarmRef: ObjectRef{Kind: "Swarm"}, InstanceKey: "i", AgentName: "a"}, "swarmRef"},
		"no instance":   {ResumeTarget{SwarmRef: full.SwarmRef, AgentName: "a"}, "instanceKey"},
		"no agent":      {ResumeTarget{SwarmRef: full.SwarmRef, InstanceKey: "i"}, "agentName"},
	} {
		err := tc.t.Validate()
		if !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidID naming %s", name, err, tc.want)
		}
	}
}

func TestValidateDeadLetterID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"1700000000000000000-0123456789abcdef.json", true},
		{"6f2d6a1e-8c4b-4c5e-9a57-3f1d2e4b5a6c", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{".", false},
		{"..", false},
		{"...", false},
		{"../x", false},
		{"a/b", false},
		{`a\b`, false},
		{"a b", false},
		{"a%2Fb", false},
		{strings.Repeat("a", 129), false},
	} {
		err := ValidateDeadLetterID(tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidID)) {
			t.Errorf("ValidateDeadLetterID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}
