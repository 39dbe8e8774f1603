package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/oauth"
)

// homeConfig is the local configuration of the environment with home set.
func homeConfig(t *testing.T, home string) config.Config {
	t.Helper()
	cfg, err := localConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Home = home
	return cfg
}

func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return runCmdIn(t, "", args...)
}

// runCmdIn runs a command with stdin.
func runCmdIn(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

// seedHome creates a home with one grant sealed under its key.
func seedHome(t *testing.T) (string, string) {
	t.Helper()
	home := t.TempDir()
	h, err := openHome(context.Background(), homeConfig(t, home), true)
	if err != nil {
		t.Fatal(err)
	}
	ref := domain.ObjectRef{Kind: "OAuthApp", Name: "demo-global"}
	id := oauth.GrantID(ref, "demo:team:T1")
	at, _ := h.Keyring.Seal(context.Background(), []byte("plaintext-access-token-123"), domain.Binding{Record: "grant", RecordID: id, Field: "accessToken"})
	rt, _ := h.Keyring.Seal(context.Background(), []byte("plaintext-refresh-token-456"), domain.Binding{Record: "grant", RecordID: id, Field: "refreshToken"})
	now := time.Now().UTC()
	if _, err := h.Store.PutGrant(context.Background(), domain.Grant{ID: id, Provider: "demo", OAuthAppRef: ref, Subject: "demo:team:T1", Flow: domain.FlowAuthorizationCode,
		ScopesGranted: []string{"openid"}, Token: domain.GrantToken{TokenType: "Bearer", AccessToken: at, RefreshToken: &rt, IssuedAt: now}, CreatedAt: now, UpdatedAt: now}, 0); err != nil {
		t.Fatal(err)
	}
	return home, id
}

func TestExampleBundleLoads(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "secrets", "demo-oidc")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clientSecret"), []byte("demo-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "..", "examples", "bundle")
	b, err := bundle.LoadDir(example, bundle.Options{Secrets: bundle.DirSecrets{Dir: homeConfig(t, home).LocalSecrets()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.OAuthApps) != 2 || b.OAuthApps["demo-user"].SubjectMode != "user" || b.OAuthApps["demo-global"].ClientSecret.Reveal() != "demo-secret" {
		t.Fatalf("example bundle: %+v", b.OAuthApps)
	}
	// The turn demo: the scripted model server (loopback, so no apiKey),
	// an agent whose tools are the demo's whoami, the default swarm.
	m, ok := b.Models["scripted"]
	if !ok || len(b.Models) != 1 || m.Provider != bundle.ModelProviderOpenAI || m.ModelID != "scripted" || m.Endpoint != "http://127.0.0.1:9292/v1" || !m.APIKey.IsZero() {
		t.Fatalf("example models: %+v", b.Models)
	}
	a, ok := b.Agents["assistant"]
	if !ok || len(b.Agents) != 1 || a.ModelRef.Name != "scripted" || a.SystemPrompt == "" ||
		len(a.Tools.ExplicitToolIDs) != 1 || a.Tools.ExplicitToolIDs[0] != "demo:whoami" || b.Tools["demo:whoami"] == nil {
		t.Fatalf("example agents: %+v", b.Agents)
	}
	sw, ok := b.Swarms["default"]
	if !ok || len(b.Swarms) != 1 || sw.Entrypoint != "assistant" || sw.Route("user.input", nil) != "assistant" || sw.StepLimit(a) != bundle.DefaultMaxStepsPerTurn {
		t.Fatalf("example swarms: %+v", b.Swarms)
	}
	if len(b.Warnings) != 0 {
		t.Errorf("the example bundle has warnings: %q", b.Warnings)
	}
	if _, err := bundle.LoadDir(example, bundle.Options{Secrets: bundle.DirSecrets{Dir: t.TempDir()}}); err == nil || !strings.Contains(err.Error(), "Secret/demo-oidc") {
		t.Fatalf("missing secret: %v", err)
	}
}

func TestGrantsListShowsNoSecrets(t *testing.T) {
	home, id := seedHome(t)
	for _, args := range [][]string{{"grants", "list", "--home", home}, {"grants", "list", "--json", "--home", home}} {
		out, _, err := runCmd(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, id) || !strings.Contains(out, "demo:team:T1") {
			t.Fatalf("grants list: %s", out)
		}
		for _, bad := range []string{"plaintext-", "ciphertext", `"iv"`} {
			if strings.Contains(out, bad) {
				t.Fatalf("grants list shows %q: %s", bad, out)
			}
		}
	}
}

func TestKeysRotateReseals(t *testing.T) {
	home, id := seedHome(t)
	before, _ := aesseal.Load(home, "")
	out, _, err := runCmd(t, "keys", "rotate", "--home", home)
	if err != nil || !strings.Contains(out, "resealed 2 values") {
		t.Fatalf("rotate: %q %v", out, err)
	}
	after, err := aesseal.Load(home, "")
	if err != nil || after.CurrentID() == before.CurrentID() {
		t.Fatalf("key not rotated: %v", err)
	}
	st, _ := filestore.New(home)
	g, err := st.GetGrant(context.Background(), id)
	if err != nil || g.Token.AccessToken.KeyID != after.CurrentID() || g.Token.RefreshToken.KeyID != after.CurrentID() {
		t.Fatalf("grant still under the old key: %+v %v", g.Token, err)
	}
	// Only the new key: the records open.
	onlyNew, _ := aesseal.New(mustCurrentKey(t, home))
	v, err := onlyNew.Open(context.Background(), g.Token.AccessToken, domain.Binding{Record: "grant", RecordID: id, Field: "accessToken"})
	if err != nil || string(v) != "plaintext-access-token-123" {
		t.Fatalf("resealed value: %q %v", v, err)
	}
	// A running server blocks rotation.
	unlock, err := lockHome(home, false)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, _, err := runCmd(t, "keys", "rotate", "--home", home); err == nil || !strings.Contains(err.Error(), "running") {
		t.Fatalf("rotate under a server: %v", err)
	}
}

func mustCurrentKey(t *testing.T, home string) []byte {
	t.Helper()
	b, err := os.ReadFile(aesseal.MasterKeyPath(home))
	if err != nil {
		t.Fatal(err)
	}
	k, err := aesseal.ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestWrongOrMissingKeyRefusesToStart(t *testing.T) {
	home, _ := seedHome(t)
	other, _ := aesseal.NewKeyString()
	t.Setenv(config.MasterKey, other)
	_, err := openHome(context.Background(), homeConfig(t, home), true)
	if err == nil || !strings.Contains(err.Error(), "refusing to start") || strings.Contains(err.Error(), other) {
		t.Fatalf("wrong env key: %v", err)
	}
	t.Setenv(config.MasterKey, "")
	if err := os.Remove(aesseal.MasterKeyPath(home)); err != nil {
		t.Fatal(err)
	}
	_, err = openHome(context.Background(), homeConfig(t, home), true)
	if err == nil || !strings.Contains(err.Error(), "refusing to create a new key") {
		t.Fatalf("missing key: %v", err)
	}
	if _, statErr := os.Stat(aesseal.MasterKeyPath(home)); statErr == nil {
		t.Fatal("a new key was created over existing grants")
	}
}

func TestRuntimeToken(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.RuntimeToken, "")
	a, _, err := runCmd(t, "runtime-token", "--home", home)
	if err != nil || len(strings.TrimSpace(a)) < 40 {
		t.Fatalf("token %q %v", a, err)
	}
	b, _, _ := runCmd(t, "runtime-token", "--home", home)
	if a != b {
		t.Fatal("the runtime token changed between calls")
	}
	fi, _ := os.Stat(filepath.Join(home, "runtime-token"))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	t.Setenv(config.RuntimeToken, "from-env")
	if c, _, _ := runCmd(t, "runtime-token", "--home", home); strings.TrimSpace(c) != "from-env" {
		t.Fatalf("env token ignored: %q", c)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"keys"}, {"serve", "--nope"}, {"grants", "list", "extra"}} {
		_, _, err := runCmd(t, args...)
		var ue usageError
		if err == nil || !asUsage(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

func asUsage(err error, ue *usageError) bool {
	u, ok := err.(usageError)
	if ok {
		*ue = u
	}
	return ok
}

func TestCallbackBase(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	for _, tc := range []struct {
		public string
		addr   *net.TCPAddr
		want   string
		ok     bool
	}{
		{"", loop, "http://127.0.0.1:8080", true},
		{"", any, "", false},
		{"https://auth.example.com/", any, "https://auth.example.com", true},
		{"auth.example.com", loop, "", false},
		{"https://auth.example.com/?x=1", loop, "", false},
	} {
		got, err := callbackBase(tc.public, tc.addr)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q %v: %q %v", tc.public, tc.addr, got, err)
		}
	}
}
