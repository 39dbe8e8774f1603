package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

// The session a request starts records the edge it came through; a
// request that reuses the pending session, from whatever edge, leaves it.
func TestSessionRecordsWhoStartedIt(t *testing.T) {
	for _, via := range []string{domain.StartedByTurn, domain.StartedByTool, domain.StartedByMCP, domain.StartedByREST, ""} {
		t.Run("via "+cmpOr(via, "none"), func(t *testing.T) {
			h := newHarness(t)
			first := h.request("global", func(r *TokenRequest) { r.Via = via })
			if first.Status != StatusAuthorizationRequired {
				t.Fatalf("first request: %+v", first)
			}
			s, err := h.store.GetSession(context.Background(), first.AuthSessionID)
			if err != nil || s.StartedBy != via {
				t.Fatalf("StartedBy %q (err %v), want %q", s.StartedBy, err, via)
			}
			again := h.request("global", func(r *TokenRequest) { r.Via = domain.StartedByREST + "-again" })
			if again.AuthSessionID != first.AuthSessionID {
				t.Fatalf("not reused: %s, want %s", again.AuthSessionID, first.AuthSessionID)
			}
			if s, _ := h.store.GetSession(context.Background(), first.AuthSessionID); s.StartedBy != via {
				t.Fatalf("a reuse changed StartedBy to %q, want %q", s.StartedBy, via)
			}
		})
	}
}

// A session stored before StartedBy was kept reads as "" and round-trips
// without the field.
func TestStartedByOmittedWhenUnknown(t *testing.T) {
	b, err := json.Marshal(domain.Session{ID: "as-1"})
	if err != nil || strings.Contains(string(b), "startedBy") {
		t.Fatalf("%s %v", b, err)
	}
	var s domain.Session
	if err := json.Unmarshal([]byte(`{"status":"pending","startedBy":"mcp"}`), &s); err != nil || s.StartedBy != domain.StartedByMCP {
		t.Fatalf("%+v %v", s, err)
	}
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// A provider answering 503 twice then 200: each failed refresh is counted
// on the grant with its reason code and time, the success resets them;
// the list index keys (tenant, revoked, creation) and UpdatedAt stay.
func TestRefreshFailuresRecordedThenReset(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	id := GrantID(appRef("global"), "demo:team:T1")
	before, _ := h.store.GetGrant(context.Background(), id)
	h.clock.Advance(time.Hour)
	h.p.tokenStatus = http.StatusServiceUnavailable
	for want := 1; want <= 2; want++ {
		if res := h.request("global"); res.Status != StatusError || res.Error.Code != CodeRefreshFailed {
			t.Fatalf("refresh %d: %+v", want, res)
		}
		g, err := h.store.GetGrant(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if g.RefreshFailures != want || g.LastRefreshError != "server_error" || g.LastRefreshFailedAt == nil || !g.LastRefreshFailedAt.Equal(h.clock.Now()) {
			t.Fatalf("after failure %d: failures %d, error %q, at %v", want, g.RefreshFailures, g.LastRefreshError, g.LastRefreshFailedAt)
		}
		if g.Revoked || g.Tenant != before.Tenant || !g.CreatedAt.Equal(before.CreatedAt) || !g.UpdatedAt.Equal(before.UpdatedAt) || g.Token.AccessToken != before.Token.AccessToken {
			t.Fatalf("a failure record changed more than the failure fields:\n got %+v\nwant %+v", g, before)
		}
		h.clock.Advance(time.Minute)
	}
	h.p.tokenStatus = 0
	res := h.request("global")
	if res.Status != StatusReady {
		t.Fatalf("after the outage: %+v", res)
	}
	g, _ := h.store.GetGrant(context.Background(), id)
	if g.RefreshFailures != 0 || g.LastRefreshError != "" || g.LastRefreshFailedAt != nil {
		t.Fatalf("a successful refresh kept the failures: %d %q %v", g.RefreshFailures, g.LastRefreshError, g.LastRefreshFailedAt)
	}
	if h.p.refreshes() != 1 {
		t.Fatalf("%d successful refreshes, want 1", h.p.refreshes())
	}
}

// A recorded failure bumps the grant's version but keeps its token: a
// second process that read the grant before it still refreshes, instead
// of taking the unchanged token for another's refresh.
func TestFailureRecordIsNotARefresh(t *testing.T) {
	h := newHarness(t)
	first := h.consent("global", "team")
	id := GrantID(appRef("global"), "demo:team:T1")
	seen, _ := h.store.GetGrant(context.Background(), id)
	h.clock.Advance(time.Hour)
	h.p.tokenStatus = http.StatusServiceUnavailable
	if res := h.request("global"); res.Status != StatusError {
		t.Fatalf("%+v", res)
	}
	h.p.tokenStatus = 0
	other := h.newManager(h.store)
	got, err := other.refresh(context.Background(), other.app(appRef("global")), seen)
	if err != nil {
		t.Fatal(err)
	}
	if got.RefreshFailures != 0 || h.p.refreshes() != 1 {
		t.Fatalf("refresh from the older read: failures %d, %d refreshes", got.RefreshFailures, h.p.refreshes())
	}
	if tok, _ := h.keyring.Open(context.Background(), got.Token.AccessToken, domain.GrantBinding(got, domain.FieldAccessToken)); string(tok) == first.AccessToken.Reveal() {
		t.Fatal("the old token came back as refreshed")
	}
}

// invalid_grant still revokes, and is not counted as a failure.
func TestInvalidGrantRevokesWithoutCounting(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	h.p.refreshError = "invalid_grant"
	h.clock.Advance(time.Hour)
	if res := h.request("global"); res.Status != StatusAuthorizationRequired {
		t.Fatalf("%+v", res)
	}
	g, _ := h.store.GetGrant(context.Background(), GrantID(appRef("global"), "demo:team:T1"))
	if !g.Revoked || g.RevokedReason != domain.RevokedRefreshRejected || g.RefreshFailures != 0 || g.LastRefreshError != "" {
		t.Fatalf("got %+v", g)
	}
}

// What a provider writes in a failed answer never reaches the grant: not
// its description, not a token it echoes, not an unregistered code.
func TestRefreshFailureHoldsNoProviderText(t *testing.T) {
	h := newHarness(t)
	first := h.consent("global", "team")
	id := GrantID(appRef("global"), "demo:team:T1")
	h.clock.Advance(time.Hour)
	leak := first.AccessToken.Reveal()
	h.p.tokenStatus = http.StatusBadGateway
	h.p.tokenBody = fmt.Sprintf(`{"error":%q,"error_description":"upstream said %s"}`, strings.ToLower(leak), leak)
	if res := h.request("global"); res.Status != StatusError {
		t.Fatalf("%+v", res)
	}
	g, _ := h.store.GetGrant(context.Background(), id)
	if g.LastRefreshError != "http_502" || g.RefreshFailures != 1 {
		t.Fatalf("failures %d, error %q", g.RefreshFailures, g.LastRefreshError)
	}
	raw, _ := json.Marshal(g)
	for _, bad := range []string{leak, strings.ToLower(leak), "upstream said"} {
		if strings.Contains(string(raw), bad) {
			t.Fatalf("the stored grant holds %q: %s", bad, raw)
		}
	}
}

func TestRefreshFailureCode(t *testing.T) {
	answer := func(status int, code string) error {
		return fmt.Errorf("%w: refresh: %w", errProvider, &oauth2.RetrieveError{Response: &http.Response{StatusCode: status}, ErrorCode: code, Body: []byte("at-secret")})
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"registered code", answer(503, "temporarily_unavailable"), "temporarily_unavailable"},
		{"client refused", answer(401, "invalid_client"), "invalid_client"},
		{"no code", answer(503, ""), "http_503"},
		{"unregistered code", answer(500, "at-secret"), "http_500"},
		{"timeout", atProvider("refresh", &url.Error{Op: "Post", URL: "https://p/token", Err: context.DeadlineExceeded}), domain.RefreshFailedTimeout},
		{"unreachable", atProvider("refresh", &url.Error{Op: "Post", URL: "https://p/token", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}), domain.RefreshFailedUnreachable},
		{"no access token", fmt.Errorf("%w: token response has no access_token", errProvider), domain.RefreshFailedUnusable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refreshFailureCode(tc.err); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
