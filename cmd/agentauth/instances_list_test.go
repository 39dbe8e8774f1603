package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/config"
)

// TestInstancesListShowsTheUnreadable: `instances list` prints, after the
// table, a line for each instance the server could not read — by key when
// the server knows it (and then only when it passes the filters), by the
// store's id otherwise.
func TestInstancesListShowsTheUnreadable(t *testing.T) {
	const tok = "cli-list-runtime-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/instances" || r.Header.Get("Authorization") != "Bearer "+tok {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[{"swarm":"support","instanceKey":"thread-1","agent":"assistant","status":"active","updatedAt":"2026-11-24T10:00:02Z"}],
			"unreadable":[{"swarm":"support","instanceKey":"thread-2","agent":"billing","id":"4f1a2b","reason":"corrupt record: journal line at byte 926: invalid JSON at byte 32"},
			              {"id":"9c8d7e","reason":"corrupt record: snapshot: truncated JSON"}]}`))
	}))
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "runtime-token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.RuntimeToken, "")
	for _, tc := range []struct {
		name    string
		filters []string
		want    []string
		not     []string
	}{
		{"all", nil, []string{
			"thread-1  assistant  active",
			"unreadable: support/thread-2/billing (4f1a2b): corrupt record: journal line at byte 926: invalid JSON at byte 32",
			"unreadable: instance 9c8d7e: corrupt record: snapshot: truncated JSON",
		}, nil},
		{"one agent", []string{"--agent", "assistant"}, []string{"thread-1", "unreadable: instance 9c8d7e"}, []string{"thread-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCmd(t, append([]string{"instances", "list", "--url", srv.URL, "--home", home}, tc.filters...)...)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("%q in:\n%s", n, out)
				}
			}
		})
	}
}
