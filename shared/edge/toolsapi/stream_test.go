package toolsapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/testkit/ssetest"
)

// revocable is the fake verifier with tokens that can be made to fail
// while a stream runs (as an expired one would).
type revocable struct {
	fakeVerifier
	mu      sync.Mutex
	expired map[string]bool
}

func (v *revocable) Verify(ctx context.Context, raw string) (jwtauth.Claims, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.expired[raw] {
		return nil, &jwtauth.Error{Reason: jwtauth.ReasonExpired}
	}
	return v.fakeVerifier.Verify(ctx, raw)
}

func (v *revocable) expire(raw string) {
	v.mu.Lock()
	v.expired[raw] = true
	v.mu.Unlock()
}

// sseFrame is one block of an event stream.
type sseFrame = ssetest.Frame

// sseClient reads a stream frame by frame.
type sseClient struct {
	t    *testing.T
	resp *http.Response
	br   *bufio.Reader
}

// openStream starts GET /v1/agents/stream on srv as token; the request
// ends with the test's 10 s bound.
func openStream(t *testing.T, srv *httptest.Server, token, query string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/agents/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseClient{t: t, resp: resp, br: bufio.NewReader(resp.Body)}
}

// next is the next frame other than a keep-alive; ok is false at the
// stream's end.
func (c *sseClient) next() (sseFrame, bool) {
	c.t.Helper()
	for range 1000 {
		f, err := ssetest.Read(c.br)
		if errors.Is(err, io.EOF) {
			return f, false
		}
		if err != nil {
			c.t.Fatal(err)
		}
		if f.Comment != httpx.CommentKeepAlive {
			return f, true
		}
	}
	c.t.Fatal("only keep-alives in 1000 frames")
	return sseFrame{}, false
}

// streamServer serves the harness's routes with fast streams.
func streamServer(t *testing.T, hs *harness, every time.Duration, lim httpx.StreamLimits) *httptest.Server {
	t.Helper()
	cfg := hs.api.cfg
	cfg.StreamEvery, cfg.Stream = every, lim
	api, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// toolsBody is GET /v1/agents/tools's body as token, without its newline.
func toolsBody(t *testing.T, h http.Handler, token string) string {
	t.Helper()
	rec, _ := call(t, h, "GET", "/v1/agents/tools", token, "")
	if rec.Code != 200 {
		t.Fatalf("tools: %d %s", rec.Code, rec.Body)
	}
	return strings.TrimSuffix(rec.Body.String(), "\n")
}

// TestToolsStreamPushesChanges: the manifest comes at once, exactly as GET
// /v1/agents/tools answers it, and again only when it changes — a tenant
// upload, then its deletion.
func TestToolsStreamPushesChanges(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), false)
	srv := streamServer(t, hs, 10*time.Millisecond, httpx.StreamLimits{KeepAlive: 20 * time.Millisecond})
	c := openStream(t, srv, "alice", "")
	if c.resp.StatusCode != 200 || c.resp.Header.Get("Content-Type") != "text/event-stream" || c.resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v", c.resp.StatusCode, c.resp.Header)
	}
	before := toolsBody(t, hs.h, "alice")
	first, ok := c.next()
	if !ok || first.Event != EventTools || first.Data != before || first.ID != manifestID([]byte(before)) || len(first.ID) != 16 {
		t.Fatalf("first frame %+v, want the manifest %s", first, before)
	}

	tool := `{"id":"orders:list","name":"list_orders","description":"lists orders","inputSchema":{"type":"object"},"sourceId":"orders","sourcePath":"/orders","method":"GET","transport":"http","url":"` + hs.upstream.URL + `","tags":["tenant"]}`
	// Let the stream re-evaluate an unchanged manifest a few times first:
	// nothing may be sent for it (the next frame must be the upload's).
	time.Sleep(50 * time.Millisecond)
	if rec, m := call(t, hs.h, "POST", "/v1/admin/tenants/a/tools", "admin-a", tool); rec.Code != 201 {
		t.Fatalf("upload: %d %v", rec.Code, m)
	}
	after := toolsBody(t, hs.h, "alice")
	pushed, ok := c.next()
	if !ok || pushed.Event != EventTools || pushed.Data != after || pushed.ID != manifestID([]byte(after)) || pushed.ID == first.ID || !strings.Contains(pushed.Data, `"list_orders"`) {
		t.Fatalf("after the upload %+v, want %s", pushed, after)
	}

	if rec, _ := call(t, hs.h, "DELETE", "/v1/admin/tenants/a/tools/orders:list", "admin-a", ""); rec.Code != 204 {
		t.Fatalf("delete: %d", rec.Code)
	}
	back, ok := c.next()
	if !ok || back.Data != before || back.ID != first.ID {
		t.Fatalf("after the delete %+v, want the first manifest again", back)
	}
}

func TestToolsStreamEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  httpx.StreamLimits
		expire  bool
		comment string
	}{
		{"maximum duration", httpx.StreamLimits{MaxDuration: 50 * time.Millisecond}, false, httpx.CommentMaxStream},
		{"the token expires", httpx.StreamLimits{}, true, commentTokenInvalid + jwtauth.ReasonExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &revocable{fakeVerifier: defaultVerifier(), expired: map[string]bool{}}
			hs := newHarness(t, v, false)
			srv := streamServer(t, hs, 5*time.Millisecond, tc.limits)
			c := openStream(t, srv, "alice", "")
			if f, ok := c.next(); !ok || f.Event != EventTools {
				t.Fatalf("first frame %+v", f)
			}
			if tc.expire {
				v.expire("alice")
			}
			last, ok := c.next()
			if !ok || last.Comment != tc.comment {
				t.Fatalf("last frame %+v, want the comment %q", last, tc.comment)
			}
			if f, ok := c.next(); ok {
				t.Fatalf("a frame after the end: %+v", f)
			}
		})
	}
}

func TestToolsStreamRefusals(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), false)
	for _, tc := range []struct {
		name, token, query string
		status             int
		code, reason       string
	}{
		{"no token", "", "", 401, "unauthenticated", "missing_token"},
		{"forged", "forged", "", 401, "unauthenticated", "bad_signature"},
		{"admin flag without admin", "alice", "?include_disabled=true", 403, "forbidden", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, m := call(t, hs.h, "GET", "/v1/agents/stream"+tc.query, tc.token, "")
			e, _ := m["error"].(map[string]any)
			if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/json" || e["code"] != tc.code {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if d, _ := e["details"].(map[string]any); tc.reason != "" && d["reason"] != tc.reason {
				t.Fatalf("details %v, want reason %s", d, tc.reason)
			}
		})
	}
	// An admin may stream with the flags, as it may GET the manifest.
	srv := streamServer(t, hs, time.Second, httpx.StreamLimits{})
	c := openStream(t, srv, "admin-a", "?include_disabled=true")
	if f, ok := c.next(); !ok || !strings.Contains(f.Data, `"old"`) {
		t.Fatalf("admin with include_disabled: %+v", f)
	}
}

// TestToolsStreamsCappedPerPrincipal: one caller may hold only so many
// tools streams at once (issue 17, item 11); another caller is not
// affected, and a closed stream frees its place.
func TestToolsStreamsCappedPerPrincipal(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), false)
	gate := httpx.NewStreamGate(2, 10)
	srv := streamServer(t, hs, 10*time.Millisecond, httpx.StreamLimits{KeepAlive: 20 * time.Millisecond, Gate: gate})
	first := openStream(t, srv, "alice", "")
	second := openStream(t, srv, "alice", "")
	for _, c := range []*sseClient{first, second} {
		if _, ok := c.next(); !ok || c.resp.StatusCode != 200 {
			t.Fatalf("a stream under the cap: %d", c.resp.StatusCode)
		}
	}
	third := openStream(t, srv, "alice", "")
	if third.resp.StatusCode != 429 || third.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third stream of alice: %d", third.resp.StatusCode)
	}
	if other := openStream(t, srv, "bob", ""); other.resp.StatusCode != 200 {
		t.Fatalf("bob was refused for alice's streams: %d", other.resp.StatusCode)
	}
	first.resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for { // alice's two and bob's one are open until the server sees the close
		if total, _ := gate.Open(""); total < 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream kept its place")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if again := openStream(t, srv, "alice", ""); again.resp.StatusCode != 200 {
		t.Fatalf("after one closed: %d", again.resp.StatusCode)
	}
}
