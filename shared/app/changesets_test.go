package app

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/local/bundlerepo"
	"github.com/agentauth/agentauth/shared/local/embedded"
	"github.com/agentauth/agentauth/shared/local/queueworker"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// selfChangingBundle: an assistant whose swarm lets it change tools/**,
// selecting every tool of source seed, shown to every caller with a sub.
var selfChangingBundle = map[string]string{
	"agents.yaml": `apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: "MODEL/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec:
  modelRef: Model/scripted
  tools: {selectors: [{source: seed}]}
  changesets: {allowed: {files: ["tools/**"]}}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec:
  agents: [Agent/assistant]
  entrypoint: Agent/assistant
  policy: {changesets: {enabled: true, allowed: {files: ["tools/**", "agents.yaml"]}}}
`,
	"access.yaml": `apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: seed}
spec: {selectors: [{source: seed}]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: sub, operator: exists}], allowedGroupIds: [seed]}
`,
	"tools/alpha.yaml": `apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: alpha}
spec: {id: "seed:alpha", name: alpha, description: the alpha tool, inputSchema: {type: object}, sourceId: seed, transport: native}
`,
}

const gammaTool = "apiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: gamma}\nspec: {id: \"seed:gamma\", name: gamma, description: the gamma tool, inputSchema: {type: object}, sourceId: seed, transport: native}\n"

// selfChangingScript: open a changeset, write tools/gamma.yaml, commit,
// then say what landed — the scripted model (not a language model)
// carries the changeset id from each result to the next call.
func selfChangingScript(path, content string) scripted.Script {
	args, _ := json.Marshal(map[string]string{"changesetId": "{{result.changesetId}}", "path": path, "content": content})
	return scripted.Script{Turns: []scripted.Turn{
		{ToolResult: "swarmBundle.commitChangeset", ResultHas: "newRef", Text: "committed {{result.newRef}}"},
		{ToolResult: "swarmBundle.commitChangeset", Text: "not committed: {{result.code}}"},
		{ToolResult: "swarmBundle.writeFile", ResultHas: "written", ToolCalls: []scripted.ToolCall{{Name: "swarmBundle.commitChangeset",
			Args: json.RawMessage(`{"changesetId":"{{result.changesetId}}","message":"add gamma"}`)}}},
		{ToolResult: "swarmBundle.writeFile", Text: "not written: {{result.code}}"},
		{ToolResult: "swarmBundle.openChangeset", ResultHas: "changesetId", ToolCalls: []scripted.ToolCall{{Name: "swarmBundle.writeFile", Args: args}}},
		{UserContains: "change yourself", ToolCalls: []scripted.ToolCall{{Name: "swarmBundle.openChangeset"}}},
		{UserContains: "what now", Text: "nothing"},
	}}
}

type changesetRig struct {
	app    *App
	home   *embedded.Backends
	model  *scripted.Server
	w      *queueworker.Worker
	cfg    config.Config
	events []turn.TurnEvent
}

func newChangesetRig(t *testing.T, script scripted.Script) *changesetRig {
	t.Helper()
	sm, err := scripted.New(script, nil)
	if err != nil {
		t.Fatal(err)
	}
	modelURL, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	cfg := setup(t, "")
	if err := os.Remove(filepath.Join(cfg.BundleDir, "app.yaml")); err != nil {
		t.Fatal(err)
	}
	for name, data := range selfChangingBundle {
		p := filepath.Join(cfg.BundleDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(data, "MODEL", modelURL)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bundlerepo.Init(cfg.BundleDir, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := &changesetRig{model: sm, cfg: cfg}
	if r.home, err = embedded.Open(context.Background(), cfg.Home, "", true); err != nil {
		t.Fatal(err)
	}
	if r.app, err = Build(context.Background(), cfg, localGitBackends(t, cfg, r.home), nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if r.app.Changesets == nil {
		t.Fatal("a bundle that is a git repository has no changesets")
	}
	e := r.app.Turns.Engine
	e.Notify = chainNotify(e.Notify, func(_ context.Context, _ turn.Turn, evs []turn.TurnEvent) { r.events = append(r.events, evs...) })
	r.w = &queueworker.Worker{Queue: r.home.Queue, Handle: e.Handle, KeyOf: engine.KeyOf, Dir: filepath.Join(cfg.Home, "worker")}
	return r
}

// localGitBackends are the home's backends with the bundle repository's
// changesets, as serve opens them.
func localGitBackends(t *testing.T, cfg config.Config, h *embedded.Backends) *Backends {
	t.Helper()
	be := FromEmbedded(h, cfg.LocalSecrets())
	repo, recs, err := bundlerepo.OpenLocal(context.Background(), cfg.BundleDir, h.Home, nil)
	if err != nil || repo == nil {
		t.Fatalf("the bundle repository: %v", err)
	}
	be.Changesets = &Changesets{Repo: repo, Records: recs, Describe: "git main"}
	return be
}

func (r *changesetRig) turn(t *testing.T, key, text string) turn.Turn {
	t.Helper()
	auth := domain.TurnAuth{Claims: map[string]any{"sub": "alice"}}
	if _, err := r.app.Turns.Post(context.Background(), "default", key, Incoming{Text: text, Auth: auth}); err != nil {
		t.Fatal(err)
	}
	if err := r.w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := r.app.Turns.Inspect(context.Background(), turn.InstanceKey{Swarm: "default", Key: key, Agent: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	var last turn.Turn
	for _, tr := range st.Turns {
		if tr.StartedAt.After(last.StartedAt) || last.ID == "" {
			last = tr
		}
	}
	return last
}

func (r *changesetRig) eventsText() string {
	var b strings.Builder
	for _, ev := range r.events {
		b.WriteString("\n" + ev.Type + " " + string(ev.Data))
	}
	return b.String()
}

// offered lists the tools request i offered the model.
func (r *changesetRig) offered(i int) []string {
	var out []string
	for _, tl := range r.model.Requests()[i].Tools {
		out = append(out, tl.Name)
	}
	return out
}

func hasTool(offered []string, name string) bool {
	return slices.ContainsFunc(offered, func(n string) bool { return n == name || strings.Contains(n, name) })
}

// TestAgentChangesItsOwnTools: a scripted agent (not a language model)
// opens a changeset, adds a tool to its own selection and commits: the
// step after the commit offers the new tool, the steps before it do not;
// the commit is in the bundle's git history with its changeset id,
// instance and turn; the turn's events say changeset.committed and
// swarmBundle.revisionChanged; the routes' plane and a new turn run on
// the new revision.
func TestAgentChangesItsOwnTools(t *testing.T) {
	r := newChangesetRig(t, selfChangingScript("tools/gamma.yaml", gammaTool))
	first, err := r.app.Active(context.Background())
	if err != nil || !changeset.IsGitRef(first.Revision) {
		t.Fatalf("the active revision %q: %v", first.Revision, err)
	}
	tr := r.turn(t, "thread-1", "change yourself")
	if tr.Status != turn.TurnCompleted || !strings.HasPrefix(tr.Final, "committed git:") {
		t.Fatalf("turn %s: %q %+v; events %s", tr.Status, tr.Final, tr, r.eventsText())
	}
	reqs := r.model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4 (open, write, commit, answer)", len(reqs))
	}
	for i := range 3 {
		if o := r.offered(i); hasTool(o, "gamma") || !hasTool(o, "alpha") || !hasTool(o, "openChangeset") {
			t.Fatalf("step %d (before the commit took effect) offered %v", i+1, o)
		}
	}
	if o := r.offered(3); !hasTool(o, "gamma") || !hasTool(o, "alpha") {
		t.Fatalf("the step after the commit offered %v", o)
	}
	newRef := strings.TrimPrefix(tr.Final, "committed ")
	now, err := r.app.Active(context.Background())
	if err != nil || now.Revision != newRef || now.Tools["seed:gamma"] == nil {
		t.Fatalf("the active revision after the commit: %q (%v), want %s with gamma", now.Revision, err, newRef)
	}
	// The history: the commit names the changeset, the instance, the turn.
	repo, err := bundlerepo.Open(r.cfg.BundleDir)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := changeset.ParseRef(newRef)
	cm, err := object.GetCommit(repo.Objects(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"add gamma\n", "Changeset-Id: cs_", "Agentauth-Swarm: default", "Agentauth-Instance: thread-1", "Agentauth-Agent: assistant", "Agentauth-Turn: " + tr.ID, "Trace-Id: " + tr.TraceID} {
		if !strings.Contains(cm.Message, want) {
			t.Errorf("the commit message lacks %q:\n%s", want, cm.Message)
		}
	}
	var types []string
	for _, ev := range r.events {
		types = append(types, ev.Type)
		if ev.Type == turn.EvChangesetCommitted || ev.Type == turn.EvRevisionChanged {
			if !strings.Contains(string(ev.Data), newRef) {
				t.Errorf("%s does not name the new revision: %s", ev.Type, ev.Data)
			}
		}
	}
	joined := strings.Join(types, " ")
	if strings.Count(joined, turn.EvChangesetCommitted) != 1 || strings.Count(joined, turn.EvRevisionChanged) != 1 {
		t.Fatalf("events: %s", joined)
	}
	// /healthz reports the active revision.
	rec := httptest.NewRecorder()
	r.app.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if !strings.Contains(rec.Body.String(), `"bundleRevision":"`+newRef+`"`) {
		t.Fatalf("/healthz after the commit: %s", rec.Body)
	}
	// The routes' plane and the next turn are on the new revision.
	if got := r.app.toolPlane().Snapshot(context.Background()).BundleRevision(); got != newRef {
		t.Fatalf("the routes' plane is on %s", got)
	}
	r.turn(t, "thread-2", "what now?")
	if o := r.offered(len(r.model.Requests()) - 1); !hasTool(o, "gamma") {
		t.Fatalf("a new turn offered %v", o)
	}
}

// TestAgentChangesetRefused: a write outside the agent's allowed.files is
// refused with its code, and nothing moves.
func TestAgentChangesetRefused(t *testing.T) {
	r := newChangesetRig(t, selfChangingScript("access.yaml", "a: 1\n"))
	before, _ := r.app.Active(context.Background())
	tr := r.turn(t, "thread-1", "change yourself")
	if tr.Status != turn.TurnCompleted || tr.Final != "not written: E_PATH_NOT_ALLOWED" {
		t.Fatalf("turn %s: %q", tr.Status, tr.Final)
	}
	after, _ := r.app.Active(context.Background())
	if after.Revision != before.Revision {
		t.Fatalf("the revision moved: %s → %s", before.Revision, after.Revision)
	}
}

// TestChangesetsDocPolicy: docs/changesets.md's policy example loads (with
// the Model it names) and means what the page says.
func TestChangesetsDocPolicy(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "changesets.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "```yaml\n")
	if !ok {
		t.Fatal("docs/changesets.md has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	model := "apiVersion: agents.example.io/v1alpha1\nkind: Model\nmetadata: {name: gpt}\nspec: {provider: openai, model: m, endpoint: \"http://127.0.0.1:1/v1\"}\n"
	b, err := bundle.Parse([]bundle.File{{Name: "doc.yaml", Data: []byte(block)}, {Name: "model.yaml", Data: []byte(model)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := b.Swarms["default"].ChangesetPolicy(b.Agents["assistant"])
	if !p.Enabled || !p.EmitRevisionChanged || !p.Allows("tools/weather.yaml") || p.Allows("prompts/a.yaml") || p.Allows("agents.yaml") {
		t.Fatalf("the documented policy: %+v", p)
	}
}

// TestBundleRoutes: the history routes, behind the runtime token, after a
// scripted agent's commit: the revisions, one revision, the diff, a
// revert; bad input is a 400 that names the field; no token is a 401.
func TestBundleRoutes(t *testing.T) {
	r := newChangesetRig(t, selfChangingScript("tools/gamma.yaml", gammaTool))
	tr := r.turn(t, "thread-1", "change yourself")
	newRef := strings.TrimPrefix(tr.Final, "committed ")
	// The rig's app refuses every runtime caller (Options{}): build one
	// with a token on the same home.
	a, err := Build(context.Background(), r.cfg, localGitBackends(t, r.cfg, r.home), nil,
		Options{RuntimeAuth: httpapi.BearerToken{Token: domain.NewSecret("tok")}})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	call := func(method, path, body, token string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, _ := call("GET", "/v1/bundle/revisions", "", ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	code, body := call("GET", "/v1/bundle/revisions?limit=5", "", "tok")
	var log struct{ Revisions []changeset.Entry }
	if code != 200 || json.Unmarshal([]byte(body), &log) != nil || len(log.Revisions) != 2 || log.Revisions[0].Ref != newRef ||
		log.Revisions[0].Trailers.Turn != tr.ID || !log.Revisions[0].Active {
		t.Fatalf("revisions: %d %s", code, body)
	}
	code, body = call("GET", "/v1/bundle/revisions/active", "", "tok")
	if code != 200 || !strings.Contains(body, `"filesAdded":["tools/gamma.yaml"]`) {
		t.Fatalf("show: %d %s", code, body)
	}
	code, body = call("GET", "/v1/bundle/diff?from=active~1", "", "tok")
	if code != 200 || !strings.Contains(body, "+++ b/tools/gamma.yaml") {
		t.Fatalf("diff: %d %s", code, body)
	}
	for _, bad := range []struct{ method, path, body, want string }{
		{"GET", "/v1/bundle/revisions?limit=0", "", "limit"},
		{"GET", "/v1/bundle/revisions/HEAD", "", "ref"},
		{"GET", "/v1/bundle/diff", "", "from"},
		{"POST", "/v1/bundle/revert", `{"ref":"active"}`, "operator"},
		{"POST", "/v1/bundle/revert", `{"ref":"active","operator":"alice","force":true}`, "force"},
	} {
		if code, body := call(bad.method, bad.path, bad.body, "tok"); code != 400 || !strings.Contains(body, bad.want) {
			t.Errorf("%s %s %s: %d %s", bad.method, bad.path, bad.body, code, body)
		}
	}
	if code, body := call("GET", "/v1/bundle/revisions/git:"+strings.Repeat("ab", 20), "", "tok"); code != 404 {
		t.Fatalf("an unknown revision: %d %s", code, body)
	}
	code, body = call("POST", "/v1/bundle/revert", `{"ref":"`+newRef+`","operator":"alice"}`, "tok")
	if code != 200 || !strings.Contains(body, `"status":"ok"`) || !strings.Contains(body, `"filesDeleted":["tools/gamma.yaml"]`) {
		t.Fatalf("revert: %d %s", code, body)
	}
	now, _ := a.Active(context.Background())
	if now.Tools["seed:gamma"] != nil {
		t.Fatal("the reverted tool is still active")
	}
}
