package toolsapi

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/httptool"
)

type nopQueue struct{}

func (nopQueue) Enqueue(context.Context, domain.Event) error { return nil }

// brokered is the harness with a real OAuth broker on a file store: the
// menu tool's consent is an auth session stored there.
func brokered(t *testing.T) (*harness, *filestore.Store) {
	t.Helper()
	home := t.TempDir()
	st, err := filestore.New(home)
	if err != nil {
		t.Fatal(err)
	}
	kr, _, err := aesseal.Ensure(home, "", false)
	if err != nil {
		t.Fatal(err)
	}
	hs := newHarnessWith(t, defaultVerifier(), false, func(b *bundle.Bundle) httptool.TokenSource {
		mgr, err := oauth.New(oauth.Config{Bundle: b, Store: st, Sealer: kr, Queue: nopQueue{}, StateKeys: kr.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mgr.Close(context.Background()) })
		return mgr
	})
	return hs, st
}

// onlySession is the one auth session st holds.
func onlySession(t *testing.T, st *filestore.Store) domain.Session {
	t.Helper()
	list, bad, err := st.ListSessions(context.Background())
	if err != nil || len(bad) > 0 || len(list) != 1 {
		t.Fatalf("sessions: %d %v %v", len(list), bad, err)
	}
	return list[0]
}

// A consent an http tool's call starts records the edge that made the
// call: the REST tool route as tool, the MCP server (via "mcp") as mcp.
func TestToolCallConsentStartedBy(t *testing.T) {
	t.Run("REST tool route", func(t *testing.T) {
		hs, st := brokered(t)
		rec, m := call(t, hs.h, "POST", "/v1/tools/invoke", "menu-reader", `{"toolName":"get_menu","args":{"day":"mon"}}`)
		if rec.Code != 200 {
			t.Fatalf("invoke: %d %v", rec.Code, m)
		}
		if s := onlySession(t, st); s.StartedBy != domain.StartedByTool {
			t.Fatalf("StartedBy %q, want %q", s.StartedBy, domain.StartedByTool)
		}
	})
	t.Run("MCP", func(t *testing.T) {
		hs, st := brokered(t)
		c, err := defaultVerifier().Verify(context.Background(), "menu-reader")
		if err != nil {
			t.Fatal(err)
		}
		// The principal as the MCP edge builds it from the verified token.
		p := jwtauth.NewPrincipal(c, hs.api.paths)
		out := hs.api.Call(context.Background(), p, "get_menu", "call-1", json.RawMessage(`{"day":"mon"}`), "mcp")
		if out.Result == nil {
			t.Fatalf("call: %+v", out)
		}
		if s := onlySession(t, st); s.StartedBy != domain.StartedByMCP {
			t.Fatalf("StartedBy %q, want %q", s.StartedBy, domain.StartedByMCP)
		}
	})
}
