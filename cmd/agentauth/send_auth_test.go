package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSendAuth (issue 18.3): send passes who the turn acts for — --user,
// --claims (a JSON object, else a usage error naming the flag), or the
// whole auth object from --auth-file (- for stdin), read strictly — and
// the server queues exactly that. Without claims no access policy
// matches the turn, so the demo's agent saw no tool.
func TestSendAuth(t *testing.T) {
	p, url, home := turnServer(t)
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const whole = `{"actor":{"type":"user","id":"slack:U1"},"subjects":{"global":"demo:team:T1","user":"demo:user:alice"},
		"claims":{"sub":"alice","tenant_id":"acme","realm_access":{"roles":["staff"]}}}`
	for _, tc := range []struct {
		name  string
		flags []string
		stdin string
		// auth is what is queued (JSON), when it works; else the error
		// says says, a usage error or not.
		auth, says string
		usage      bool
	}{
		{"user and claims", []string{"--user", "demo:user:alice", "--claims", `{"sub":"alice","scope":"profile.read"}`}, "",
			`{"actor":{"type":"user","id":"demo:user:alice"},"subjects":{"user":"demo:user:alice"},"claims":{"scope":"profile.read","sub":"alice"}}`, "", false},
		{"claims alone", []string{"--claims", ` {"sub":"bob"} `}, "", `{"claims":{"sub":"bob"}}`, "", false},
		{"no one", nil, "", `{}`, "", false},
		{"auth file", []string{"--auth-file", file("auth.json", whole)}, "",
			`{"actor":{"type":"user","id":"slack:U1"},"subjects":{"global":"demo:team:T1","user":"demo:user:alice"},"claims":{"realm_access":{"roles":["staff"]},"sub":"alice","tenant_id":"acme"}}`, "", false},
		{"auth from stdin", []string{"--auth-file", "-"}, `{"claims":{"sub":"carol"}}`, `{"claims":{"sub":"carol"}}`, "", false},

		{"claims not JSON", []string{"--claims", `{sub:alice}`}, "", "", "--claims: want the user's claims as a JSON object", true},
		{"claims an array", []string{"--claims", `["sub"]`}, "", "", "--claims", true},
		{"claims null", []string{"--claims", `null`}, "", "", "--claims", true},
		{"claims and more", []string{"--claims", `{"sub":"a"} {"sub":"b"}`}, "", "", "--claims", true},
		{"auth file and claims", []string{"--auth-file", file("a2.json", whole), "--claims", `{"sub":"a"}`}, "", "", "--auth-file holds the whole auth object", true},
		{"auth file and user", []string{"--auth-file", "-", "--user", "alice"}, whole, "", "--auth-file holds the whole auth object", true},
		{"auth file missing", []string{"--auth-file", filepath.Join(dir, "nope.json")}, "", "", "--auth-file", false},
		{"auth file with a typo", []string{"--auth-file", file("typo.json", `{"subject":{"user":"alice"}}`)}, "", "", `typo.json: json: unknown field "subject"`, false},
		{"auth file not an object", []string{"--auth-file", "-"}, `"alice"`, "", "--auth-file stdin: want one JSON object", false},
		{"auth file empty", []string{"--auth-file", "-"}, "", "", "want one JSON object", false},
		{"auth file too large", []string{"--auth-file", "-"}, `{"claims":{"x":"` + strings.Repeat("x", maxAuthFile) + `"}}`, "", "more than 64 KiB", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(p.Queue.Pending())
			args := append(append([]string{"send", "--swarm", "support", "--instance", "k1", "--url", url, "--home", home}, tc.flags...), "hi")
			_, _, err := runCmdIn(t, tc.stdin, args...)
			q := p.Queue.Pending()
			if tc.says != "" {
				var ue usageError
				if err == nil || !strings.Contains(err.Error(), tc.says) || asUsage(err, &ue) != tc.usage || len(q) != before {
					t.Fatalf("%v (usage error %v), want one saying %q; queued %d", err, asUsage(err, &ue), tc.says, len(q)-before)
				}
				return
			}
			if err != nil || len(q) != before+1 {
				t.Fatalf("%v; queued %d", err, len(q)-before)
			}
			got, _ := json.Marshal(q[len(q)-1].Auth)
			if string(got) != tc.auth {
				t.Fatalf("queued auth %s, want %s", got, tc.auth)
			}
		})
	}
}
