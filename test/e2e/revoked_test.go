package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// TestTurnRecoversFromAGrantTheProviderDropped is issue 18.2 on the real
// binary and the real OpenID provider: a turn's whoami call (the
// provider's userinfo, with the broker's token) after the provider stopped
// honouring the grant — the app revoked at the provider (RFC 7009: every
// token of the grant dies), and then `make run`'s case, the provider
// restarted (it keeps its tokens in memory). Each time the call gets 401,
// its one refresh is refused (invalid_grant), it parks with a fresh
// consent link, the user consents in Chromium, and exactly that call runs
// again and the agent answers — no second message, no tool.failed.
func TestTurnRecoversFromAGrantTheProviderDropped(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	modelURL, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// A fixed port, so the restarted provider has the issuer and the
	// endpoints the bundle names.
	popts := e2ekit.ProviderOptions{Port: freePort(t), Clients: []e2ekit.Client{{
		ClientID: clientID, ClientSecret: clientSecret,
		RedirectURIs: []string{base + "/oauth/callback/e2e-user"},
		GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken},
	}}}
	p := e2ekit.StartProvider(t, popts)
	srv := startServer(t, port, t.TempDir(), map[string]string{"turns.yaml": turnsBundle(p, modelURL+"/v1")}, "E2E_CLIENT_SECRET="+clientSecret)
	browser := e2ekit.StartBrowser(t)

	// ask posts "who am I?" on its own instance and returns the turn's
	// events once it completed; consents are given as they are asked for.
	var seenTokens []string
	ask := func(t *testing.T, instance string, consents int) []map[string]any {
		t.Helper()
		code, out := srv.call(t, "POST", "/v1/instances/default/"+instance+"/events", map[string]any{
			"text": "who am I?",
			"auth": map[string]any{"actor": map[string]string{"type": "user", "id": "alice"},
				"subjects": map[string]string{"user": "demo:user:alice"},
				"claims":   map[string]any{"sub": "alice", "scope": "profile.read"}},
		})
		if code != 202 {
			t.Fatalf("post: %d %v", code, out)
		}
		turnID := ""
		if consents > 0 {
			var parked map[string]any
			turnID, parked = srv.waitForFirst(ctx, t, instance, "turn.parked", "turn.completed")
			if parked["type"] != "turn.parked" {
				t.Fatalf("%s: the turn completed without asking for consent: %v", instance, parked["data"])
			}
			link := parked["data"].(map[string]any)["authorizationUrl"].(string)
			if !strings.HasPrefix(link, p.AuthorizationURL) {
				t.Fatalf("%s: consent link %s", instance, link)
			}
			if _, err := browser.Authorize(ctx, link, "alice"); err != nil {
				t.Fatalf("%s: consent: %v", instance, err)
			}
		}
		id, done := srv.waitFor(ctx, t, instance, "turn.completed")
		if turnID != "" && id != turnID {
			t.Fatalf("%s: turn %s completed, %s parked", instance, id, turnID)
		}
		if final, _ := done["data"].(map[string]any)["final"].(string); !strings.Contains(final, "Alice") {
			t.Fatalf("%s: the agent's answer %q", instance, final)
		}
		ready := srv.token(t, tokenReq{App: "e2e-user", User: "demo:user:alice", Instance: instance})
		if ready["status"] != "ready" {
			t.Fatalf("%s: the grant after the turn: %v", instance, ready)
		}
		seenTokens = append(seenTokens, ready["accessToken"].(string))
		return srv.turnEvents(t, instance, id)
	}
	// one call: called once, parked on the fresh consent, resumed, completed.
	resumedOnce := func(t *testing.T, instance string, evs []map[string]any) {
		t.Helper()
		var types []string
		for _, e := range evs {
			types = append(types, e["type"].(string))
		}
		got := strings.Join(types, ",")
		if strings.Count(got, "tool.called") != 1 || strings.Count(got, "turn.parked") != 1 || strings.Count(got, "turn.resumed") != 1 ||
			strings.Count(got, "tool.completed") != 1 || strings.Contains(got, "tool.failed") {
			t.Fatalf("%s: events of the turn: %s", instance, got)
		}
	}

	ask(t, "thread-1", 1) // the first consent
	current := func(t *testing.T) string {
		t.Helper()
		ready := srv.token(t, tokenReq{App: "e2e-user", User: "demo:user:alice", Instance: "thread-1"})
		if ready["status"] != "ready" {
			t.Fatalf("the grant: %v", ready)
		}
		return ready["accessToken"].(string)
	}
	queued := func() int { return strings.Count(srv.Stdout.String(), `"msg":"auth.revoked queued"`) }

	t.Run("the app revoked at the provider", func(t *testing.T) {
		// RFC 7009 on the broker's access token ends every token of the
		// grant, its refresh token too.
		tok := current(t)
		if err := p.Revoke(ctx, clientID, clientSecret, tok, "access_token"); err != nil {
			t.Fatal(err)
		}
		if _, status, err := p.UserInfo(ctx, tok); err != nil || status != 401 {
			t.Fatalf("userinfo with the revoked token: %d %v, want 401", status, err)
		}
		before := queued()
		resumedOnce(t, "thread-2", ask(t, "thread-2", 1))
		if n := queued() - before; n != 1 {
			t.Errorf("%d auth.revoked events queued, want 1", n)
		}
	})
	t.Run("the provider restarted (make run)", func(t *testing.T) {
		// It keeps its tokens in memory: it forgot every one.
		tok := current(t)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		p = e2ekit.StartProvider(t, popts)
		if _, status, err := p.UserInfo(ctx, tok); err != nil || status != 401 {
			t.Fatalf("userinfo at the restarted provider: %d %v, want 401", status, err)
		}
		before := queued()
		resumedOnce(t, "thread-3", ask(t, "thread-3", 1))
		if n := queued() - before; n != 1 {
			t.Errorf("%d auth.revoked events queued, want 1", n)
		}
	})

	logs := srv.Stdout.String()
	for i, tok := range seenTokens {
		if strings.Contains(logs, tok) || strings.Contains(srv.Stderr.String(), tok) {
			t.Errorf("token %d appears in the server's logs", i)
		}
		for _, r := range srv.responses {
			if r.what != "ready" && strings.Contains(string(r.body), tok) {
				t.Errorf("token %d appears in the response of %s", i, r.what)
			}
		}
	}
}

// waitForFirst polls the instance until one of its turns emitted an event
// of one of types and returns that turn's id and the first such event.
func (s *server) waitForFirst(ctx context.Context, t *testing.T, instance string, types ...string) (string, map[string]any) {
	t.Helper()
	for ctx.Err() == nil {
		code, out := s.call(t, "GET", "/v1/instances/default/"+instance+"/assistant", nil)
		if code == 200 {
			for _, tr := range out["recentTurns"].([]any) {
				id := tr.(map[string]any)["id"].(string)
				for _, e := range s.turnEvents(t, instance, id) {
					if slices.Contains(types, e["type"].(string)) {
						return id, e
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %v on instance %s", types, instance)
	return "", nil
}
