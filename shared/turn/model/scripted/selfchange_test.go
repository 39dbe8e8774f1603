package scripted

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/bundle"
)

// step is one tool call of a conversation and the result it got.
type step struct {
	tool   string
	result string // JSON
}

// conversation is a chat completions request: the user's text, then each
// step as an assistant call and its tool message, offering tools.
func conversation(t *testing.T, user string, tools []string, steps ...step) string {
	t.Helper()
	msgs := []any{map[string]any{"role": "user", "content": user}}
	for i, s := range steps {
		id := "c" + string(rune('1'+i))
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": alone(s.tool), "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": s.result})
	}
	var offered []any
	for _, name := range tools {
		offered = append(offered, map[string]any{"type": "function", "function": map[string]any{"name": alone(name), "parameters": map[string]any{"type": "object"}}})
	}
	body := map[string]any{"model": "scripted", "messages": msgs}
	if len(offered) > 0 {
		body["tools"] = offered
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSelfChangeScript: the script the end-to-end proof of changesets
// runs — open, write, commit, the answers to each outcome, a conflict
// written again, prepare and commit in two turns, what tools — and the
// file it writes loads as the Tool the user's words name.
func TestSelfChangeScript(t *testing.T) {
	srv, url := start(t, SelfChangeScript())
	changesetTools := []string{toolOpen, toolWrite, toolCommit, "demo:alpha"}
	opened := step{toolOpen, `{"changesetId":"cs_1","baseRef":"git:aaaa","workdir":"changeset:cs_1"}`}
	written := step{toolWrite, `{"changesetId":"cs_1","path":"tools/gamma.yaml","size":10,"written":true}`}
	type call struct{ name, args string }
	for _, tc := range []struct {
		name string
		body string
		text string // the answer's text, when it calls no tool
		call *call  // else its one call; args: keys that must hold these values
		want map[string]string
	}{
		{name: "change yourself opens a changeset", body: conversation(t, "change yourself", changesetTools),
			call: &call{name: toolOpen}},
		{name: "prepare a change opens a changeset", body: conversation(t, "prepare a change tool=x", changesetTools),
			call: &call{name: toolOpen}},
		{name: "the opened changeset gets tools/gamma.yaml by default", body: conversation(t, "change yourself", changesetTools, opened),
			call: &call{name: toolWrite}, want: map[string]string{"changesetId": "cs_1", "path": "tools/gamma.yaml", "content": toolYAML("gamma", "demo", "a tool the agent added to itself")}},
		{name: "tool=, source= and description= fill the file", body: conversation(t, "please change yourself tool=beta source=seed description=second", changesetTools, opened),
			call: &call{name: toolWrite}, want: map[string]string{"path": "tools/beta.yaml", "content": toolYAML("beta", "seed", "second")}},
		{name: "file= names the file", body: conversation(t, "change yourself file=access.yaml", changesetTools, opened),
			call: &call{name: toolWrite}, want: map[string]string{"path": "access.yaml", "content": toolYAML("gamma", "demo", "a tool the agent added to itself")}},
		{name: "opening refused", body: conversation(t, "change yourself", changesetTools, step{toolOpen, `{"error":{"code":"E_CHANGESETS_DISABLED"}}`}),
			text: "not opened: E_CHANGESETS_DISABLED"},
		{name: "a written file is committed", body: conversation(t, "change yourself tool=beta", changesetTools, opened, written),
			call: &call{name: toolCommit}, want: map[string]string{"changesetId": "cs_1", "message": "add the beta tool"}},
		{name: "prepare a change stops before the commit", body: conversation(t, "prepare a change tool=x", changesetTools, opened, written),
			text: "prepared cs_1"},
		{name: "a write refused", body: conversation(t, "change yourself file=access.yaml", changesetTools, opened, step{toolWrite, `{"error":{"code":"E_PATH_NOT_ALLOWED","message":"no"}}`}),
			text: "not written: E_PATH_NOT_ALLOWED"},
		{name: "a commit that landed", body: conversation(t, "change yourself", changesetTools, opened, written, step{toolCommit, `{"status":"ok","changesetId":"cs_1","newRef":"git:bbbb","previousRef":"git:aaaa"}`}),
			text: "committed git:bbbb"},
		{name: "a commit rejected", body: conversation(t, "change yourself", changesetTools, opened, written, step{toolCommit, `{"status":"rejected","changesetId":"cs_1","error":{"code":"E_BUNDLE_INVALID"}}`}),
			text: "not committed: E_BUNDLE_INVALID"},
		{name: "commit changeset= commits that changeset", body: conversation(t, "commit changeset=cs_9 tool=alpha", changesetTools),
			call: &call{name: toolCommit}, want: map[string]string{"changesetId": "cs_9", "message": "add the alpha tool"}},
		{name: "a conflict is written again and committed", body: conversation(t, "commit changeset=cs_9 tool=alpha description=second", changesetTools,
			step{toolCommit, `{"status":"conflict","changesetId":"cs_9","error":{"code":"E_CHANGESET_CONFLICT","conflictingFiles":["tools/alpha.yaml"]}}`}),
			call: &call{name: toolWrite}, want: map[string]string{"changesetId": "cs_9", "path": "tools/alpha.yaml", "content": toolYAML("alpha", "demo", "second")}},
		{name: "a conflict in a named file", body: conversation(t, "commit changeset=cs_9 file=tools/x/a.yaml", changesetTools,
			step{toolCommit, `{"status":"conflict","changesetId":"cs_9","error":{"code":"E_CHANGESET_CONFLICT","conflictingFiles":["tools/x/a.yaml"]}}`}),
			call: &call{name: toolWrite}, want: map[string]string{"path": "tools/x/a.yaml"}},
		{name: "what tools names the offered tools", body: conversation(t, "what tools do you have?", []string{"demo:alpha", "demo:gamma"}),
			text: "I am offered: " + alone("demo:alpha") + ", " + alone("demo:gamma") + ". (This answer comes from the scripted model, not a language model.)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, out := post(t, url+"/v1/chat/completions", tc.body)
			if status != http.StatusOK {
				t.Fatalf("%d %v", status, out)
			}
			msg, _ := oaAnswer(t, out)
			calls, _ := msg["tool_calls"].([]any)
			if tc.call == nil {
				if len(calls) != 0 || msg["content"] != tc.text {
					t.Fatalf("answered %v, want the text %q", msg, tc.text)
				}
				return
			}
			if len(calls) != 1 {
				t.Fatalf("answered %v, want a call of %s", msg, tc.call.name)
			}
			fn := calls[0].(map[string]any)["function"].(map[string]any)
			var args map[string]string
			if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil || fn["name"] != alone(tc.call.name) {
				t.Fatalf("called %v (%v)", fn, err)
			}
			for k, v := range tc.want {
				if args[k] != v {
					t.Errorf("%s = %q, want %q", k, args[k], v)
				}
			}
		})
	}
	// What /debug/requests shows of them: the user's words, the results
	// and calls by name, never a header.
	seen := srv.Seen()
	if len(seen) == 0 {
		t.Fatal("nothing seen")
	}
	first := seen[0]
	if first.User != "change yourself" || len(first.Calls) != 1 || first.Calls[0] != alone(toolOpen) || len(first.Tools) != 4 || first.Turn < 0 {
		t.Fatalf("seen %+v", first)
	}
	if s := seen[2]; len(s.Results) != 1 || s.Results[0] != alone(toolOpen) {
		t.Fatalf("seen %+v", s)
	}
}

// toolYAML is SelfChangeTool as the user's words fill it.
func toolYAML(name, source, description string) string {
	return strings.NewReplacer("{{user.tool|gamma}}", name, "{{user.source|demo}}", source,
		"{{user.description|a tool the agent added to itself}}", description).Replace(SelfChangeTool)
}

// TestSelfChangeToolLoads: the file the script writes is a Tool the
// bundle loader takes, as the user's words name it.
func TestSelfChangeToolLoads(t *testing.T) {
	b, err := bundle.Parse([]bundle.File{{Name: "tools/c07.yaml", Data: []byte(toolYAML("c07", "seed", "first"))}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl := b.Tools["seed:c07"]
	if tl == nil || tl.Name != "c07" || tl.Description != "first" || tl.SourceID != "seed" {
		t.Fatalf("tools %v", b.Tools)
	}
	if strings.Contains(toolYAML("x", "y", "z"), "{{") {
		t.Fatal("toolYAML leaves a placeholder")
	}
}

func TestNamedScripts(t *testing.T) {
	for _, name := range ScriptNames() {
		s, err := Named(name)
		if err != nil || len(s.Turns) == 0 {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := New(s, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := Named("gpt-4"); err == nil || !strings.Contains(err.Error(), "demo, self-change") {
		t.Fatalf("an unknown script: %v", err)
	}
}

// TestDebugRequests: the test hook answers GET from loopback with what
// was seen, no header in it; another caller is refused.
func TestDebugRequests(t *testing.T) {
	srv, url := start(t, SelfChangeScript())
	post(t, url+"/v1/chat/completions", conversation(t, "what tools", []string{"demo:alpha"}))
	resp, err := http.Get(url + DebugRequestsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Requests []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Requests) != 1 {
		t.Fatalf("%d %v %+v", resp.StatusCode, err, out)
	}
	raw, _ := json.Marshal(out)
	if r := out.Requests[0]; r["user"] != "what tools" || strings.Contains(string(raw), "sk-test-key") || strings.Contains(string(raw), "Authorization") {
		t.Fatalf("seen %s", raw)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, DebugRequestsPath, nil)
	req.RemoteAddr = "192.0.2.7:4000"
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("a caller off loopback: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodPost, DebugRequestsPath, nil)
	req.RemoteAddr = "127.0.0.1:4000"
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}
}

// TestPlaceholders: each placeholder's value, its default, and the
// escaping inside a JSON string.
func TestPlaceholders(t *testing.T) {
	r := &result{tool: "t", output: json.RawMessage(`{"out":{"id":"cs_1","n":3}}`)}
	user := `change yourself tool=beta note=say"hi"`
	for _, tc := range []struct {
		in    string
		quote bool
		want  string
	}{
		{"{{result.id}} {{result.n}} [{{result.none}}] {{result.none|dflt}}", false, "cs_1 3 [] dflt"},
		{"{{user.tool}} {{user.source|demo}} [{{user.none}}] {{user.note}}", false, `beta demo [] say"hi"`},
		{`{{user.note}} {{user.none|a\"b}}`, true, `say\"hi\" a\"b`},
		{"{{tools}}", false, "a, b"},
		{"{{nothing}} {{user.}}", false, "{{nothing}} {{user.}}"},
	} {
		if got := fill(tc.in, r, user, []string{"a", "b"}, tc.quote); got != tc.want {
			t.Errorf("fill(%q, quote %v) = %q, want %q", tc.in, tc.quote, got, tc.want)
		}
	}
	if got := fill("{{result.id|none}}", nil, "", nil, false); got != "none" {
		t.Errorf("no result: %q", got)
	}
}
