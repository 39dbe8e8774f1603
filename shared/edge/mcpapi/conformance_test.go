package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var modes = []struct {
	name      string
	stateless bool
}{{"with sessions (serve)", false}, {"stateless (Lambda)", true}}

// TestHTTPOriginIsValidated (issue 17, point 5): a request from a browser
// origin not on the allow list is refused with 403 before anything else;
// one from an allowed origin, and one with no Origin (no browser), pass.
// By default no origin is allowed.
func TestHTTPOriginIsValidated(t *testing.T) {
	allowing := newHarness(t, harnessConfig{stateless: true, origins: []string{"https://app.example.test", "http://localhost:5173"}})
	byDefault := newHarness(t, harnessConfig{stateless: true})
	for _, tc := range []struct {
		name   string
		h      *harness
		origin []string
		status int
	}{
		{"no Origin", byDefault, nil, 200},
		{"any Origin, none allowed", byDefault, []string{"http://localhost:5173"}, 403},
		{"an allowed origin", allowing, []string{"https://app.example.test"}, 200},
		{"an allowed origin, in capitals", allowing, []string{"HTTPS://App.Example.Test"}, 200},
		{"an allowed origin with its port", allowing, []string{"http://localhost:5173"}, 200},
		{"another port", allowing, []string{"http://localhost:8080"}, 403},
		{"another scheme", allowing, []string{"http://app.example.test"}, 403},
		{"another host", allowing, []string{"https://evil.example.test"}, 403},
		{"the opaque origin", allowing, []string{"null"}, 403},
		{"two Origin headers", allowing, []string{"https://app.example.test", "https://evil.example.test"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", tc.h.url+Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			// No token: an Origin refusal comes before the bearer check.
			if tc.status == 200 {
				req.Header.Set("Authorization", "Bearer tok-alice")
			}
			for _, o := range tc.origin {
				req.Header.Add("Origin", o)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status ||
				tc.status == 403 && (!strings.Contains(string(body), `"code":"forbidden"`) || !strings.Contains(string(body), "browser origin")) {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.status)
			}
		})
	}
}

func TestParseOrigins(t *testing.T) {
	for _, bad := range []string{"app.example.test", "https://app.example.test/path", "ftp://app.example.test", "null", "https://user@app.example.test", "https://"} {
		if _, err := ParseOrigins([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
		s, _ := New(Config{Tools: &fakeTools{}})
		if _, err := s.Routes(HTTPConfig{Verifier: tokens, Resource: resource, AllowedOrigins: []string{bad}}); err == nil {
			t.Errorf("Routes took the allowed origin %q", bad)
		}
	}
	set, err := ParseOrigins([]string{"HTTPS://App.Example.Test/", "http://localhost:5173"})
	if err != nil || !set["https://app.example.test"] || !set["http://localhost:5173"] || len(set) != 2 {
		t.Fatalf("%v %v", set, err)
	}
}

// TestHTTPBodyLimitIsTheRESTOne (issue 17, point 6): a call's arguments
// take POST /v1/tools/invoke's limit (toolsapi.MaxToolBody), with or
// without a Content-Length, in both modes.
func TestHTTPBodyLimitIsTheRESTOne(t *testing.T) {
	call := func(size int) string {
		return `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"q":"` + strings.Repeat("a", size) + `"}}}`
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{stateless: m.stateless})
			c := h.raw(t, "tok-alice")
			if !m.stateless {
				c.open()
			}
			for _, tc := range []struct {
				name    string
				size    int
				chunked bool
				status  int
			}{
				{"under the limit", MaxBody - 1024, false, 200},
				{"over it", MaxBody + 1, false, 413},
				{"over it, chunked", MaxBody + 1, true, 413},
				{"far over it (4 MiB, the SDK's own limit)", 4<<20 - 1024, false, 413},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var body io.Reader = strings.NewReader(call(tc.size))
					if tc.chunked {
						body = io.MultiReader(body) // no length: sent chunked
					}
					req, _ := http.NewRequest("POST", h.url+Path, body)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Authorization", "Bearer tok-alice")
					req.Header.Set("Mcp-Protocol-Version", c.version)
					if c.session != "" {
						req.Header.Set("Mcp-Session-Id", c.session)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != tc.status {
						t.Fatalf("%d %.300s, want %d", resp.StatusCode, out, tc.status)
					}
				})
			}
		})
	}
}

// TestHTTPRequestWithoutSessionIs400 (issue 17, point 6): a server that
// issues sessions answers a request without Mcp-Session-Id (other than
// initialize) with 400 and a JSON-RPC error, not 200 with error code 0.
func TestHTTPRequestWithoutSessionIs400(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := h.raw(t, "tok-alice")
	for _, tc := range []struct{ name, body string }{
		{"a request", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := c.post(tc.body)
			_, code, msg := rpcAnswer(t, body)
			if resp.StatusCode != 400 || code != jsonrpc.CodeInvalidRequest || !strings.Contains(msg, "Mcp-Session-Id") {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
	if resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"`); resp.StatusCode != 400 {
		t.Fatalf("a body that is not JSON: %d %s", resp.StatusCode, body)
	}
	if n := h.rt.reg.count(); n != 0 {
		t.Fatalf("%d sessions opened by requests that were not initialize", n)
	}
	c.open()
}

// TestHTTPUnsupportedProtocolVersion (issue 17, point 6): a protocol
// revision the server does not negotiate is 400, and the error lists the
// revisions it does — on serve, not the sessionless 2026-07-28, which its
// sessions cannot speak.
func TestHTTPUnsupportedProtocolVersion(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{stateless: m.stateless})
			c := h.raw(t, "tok-alice")
			if !m.stateless {
				c.open()
			}
			c.version = "2024-01-01"
			resp, body := c.call("tools/list", `{}`)
			var answer struct {
				Error struct {
					Code int
					Data mcp.UnsupportedProtocolVersionData
				}
			}
			_ = json.Unmarshal([]byte(body), &answer)
			lists := strings.Join(answer.Error.Data.Supported, ",")
			if resp.StatusCode != 400 || answer.Error.Code != mcp.CodeUnsupportedProtocolVersion || !strings.Contains(lists, "2025-11-25") ||
				strings.Contains(lists, "2026-07-28") == !m.stateless || !strings.Contains(body, "2024-11-05") {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestConsentMessageEndsOnce (issue 17, point 6): a consent message that
// ends with a period reads with one, not "..".
func TestConsentMessageEndsOnce(t *testing.T) {
	for _, elicit := range []bool{false, true} {
		tools := &fakeTools{consentMessage: "Connect your demo account."}
		cs := connect(t, tools, elicit)
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		msg := ""
		var rpcErr *jsonrpc.Error
		switch {
		case elicit && errors.As(err, &rpcErr):
			var data struct{ Elicitations []mcp.ElicitParams }
			_ = json.Unmarshal(rpcErr.Data, &data)
			if len(data.Elicitations) == 1 {
				msg = data.Elicitations[0].Message
			}
		case !elicit && err == nil:
			msg = text(r)
		}
		if msg == "" || strings.Contains(msg, "..") || !strings.Contains(msg, "Connect your demo account") {
			t.Fatalf("URL elicitation %v: %q (%v)", elicit, msg, err)
		}
	}
}

// TestToolsCallResultTypeOnTheSessionlessRevision: a tools/call answered
// to a client on protocol 2026-07-28 (the tools function's stateless
// mode) carries "resultType":"complete", which that revision requires
// (SEP-2322; the official Python SDK refuses a result without it); older
// revisions get none.
func TestToolsCallResultTypeOnTheSessionlessRevision(t *testing.T) {
	h := newHarness(t, harnessConfig{stateless: true})
	for _, tc := range []struct {
		version string
		want    bool
	}{{"2026-07-28", true}, {"2025-11-25", false}} {
		c := h.raw(t, "tok-alice")
		c.version = tc.version
		meta := ""
		if tc.version == "2026-07-28" {
			meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"}}`
		}
		resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}`+meta+`}}`,
			"Mcp-Method", "tools/call", "Mcp-Name", "echo")
		if resp.StatusCode != 200 || !strings.Contains(body, `"result"`) {
			t.Fatalf("%s: %d %s", tc.version, resp.StatusCode, body)
		}
		if got := strings.Contains(body, `"resultType":"complete"`); got != tc.want {
			t.Fatalf("%s: resultType present %v, want %v: %s", tc.version, got, tc.want, body)
		}
	}
}
