//go:build e2eaws

package e2eaws

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/aws/awsbackends"
	"github.com/agentauth/agentauth/shared/aws/gitstore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// bundlePrefix is where the stack keeps the git bundle in the turn bucket
// (infra/stack.BundleRepoPrefix).
const bundlePrefix = "bundle/"

// pickupBound is AGENTAUTH_UPLOADS_CHECK_SECONDS as the stack leaves it
// (the default): how long a function may run on a revision after another
// one landed.
const pickupBound = 10 * time.Second

// TestDeployedGitBundle: the deployed functions run their bundle as a git
// repository in the turn bucket and the table. The history's first commit
// is an import of the packaged bundle, the newest import is the package
// deployed now, and a revision that adds an OAuthApp — landed the way a
// changeset lands, by compare-and-swap of the head — is served by the
// token and callback routes within the bound, without a deploy or a cold
// start. Scripted agents (not language models) change the bundle through
// changesets on the deployed turn function (deployedChangesets), and
// `agentauth bundle export` copies the history out for the real git.
// Every revision is taken back after, so the stack's bundle is as the
// package made it.
func TestDeployedGitBundle(t *testing.T) {
	st := loadStack(t)
	if st.TurnBucket == "" {
		skipOrFail(t, "stack %s has no turn bucket: the git bundle comes with turns=1", st.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	must, timed := steps(t)
	gw := newGateway(st.Endpoint, st.APIHost, nil)
	// A request starts the functions if they are not running: the cold
	// start imports the package.
	if a, err := gw.do(ctx, http.MethodGet, "/healthz", nil, false); err != nil || a.Code != 200 {
		t.Fatalf("GET /healthz: %v %d %.300s (is outputs.json stale? run make deploy-local)", err, a.Code, a.Body)
	}
	be, err := awsbackends.Open(ctx, awsbackends.Settings{Table: st.TableName, KMSKeyID: st.KeyArn, QueueURL: st.QueueURL,
		SessionKeysSecret: st.SessionKeys, SecretPrefix: st.SecretPrefix, BundleBucket: st.TurnBucket, BundlePrefix: bundlePrefix}, nil)
	if err != nil {
		t.Fatalf("open the stack's git bundle on the emulator: %v", err)
	}
	repo := be.BundleRepo

	must(timed("history: the first commit and the newest import are packaged bundles", func(t *testing.T) {
		log, err := changeset.Log(ctx, repo, 1000)
		if err != nil || len(log) == 0 {
			t.Fatalf("bundle log: %d entries, %v", len(log), err)
		}
		root := log[len(log)-1]
		if root.Parent != "" || root.Trailers.ImportTree == "" || !strings.HasPrefix(root.Subject, "import ") {
			t.Fatalf("first commit %s %q (import tree %q): not an import of the packaged bundle", root.Ref, root.Subject, root.Trailers.ImportTree)
		}
		var newest changeset.Entry
		for _, e := range log {
			if e.Trailers.ImportTree != "" {
				newest = e
				break
			}
		}
		want := packagedFiles(t)
		h, err := changeset.ParseRef(newest.Ref)
		if err != nil {
			t.Fatal(err)
		}
		files, err := changeset.BundleFiles(repo, h)
		if err != nil {
			t.Fatalf("files of %s: %v", newest.Ref, err)
		}
		got := map[string]string{}
		for _, f := range files {
			got[f.Name] = string(f.Data)
		}
		for name, data := range want {
			if got[name] != data {
				t.Errorf("%s: the newest import %s does not hold the packaged file", name, newest.Ref)
			}
		}
		t.Logf("FIGURE bundle history: %d revisions, first %s (%s), active %s, newest import %s", len(log), root.Ref, root.Subject, log[0].Ref, newest.Ref)
		// The same history through the deployed gettoken's bundle routes
		// (IAM-signed), as an operator reads it: `bundle log` on AWS.
		a, err := gw.do(ctx, http.MethodGet, "/v1/bundle/revisions?limit=200", nil, true)
		if err != nil || a.Code != http.StatusOK {
			t.Fatalf("GET /v1/bundle/revisions: %v %d %.300s", err, a.Code, a.Body)
		}
		var out struct {
			Revisions []changeset.Entry `json:"revisions"`
		}
		if err := json.Unmarshal(a.Body, &out); err != nil || len(out.Revisions) == 0 || out.Revisions[0].Ref != log[0].Ref || !out.Revisions[0].Active {
			t.Fatalf("GET /v1/bundle/revisions: %v, %d revisions, want the active %s first", err, len(out.Revisions), log[0].Ref)
		}
		if len(log) <= 200 {
			if last := out.Revisions[len(out.Revisions)-1]; last.Ref != root.Ref {
				t.Errorf("GET /v1/bundle/revisions ends at %s, want the first commit %s", last.Ref, root.Ref)
			}
		}
	}))

	must(timed("a new OAuthApp is served by the token and callback routes within the bound", func(t *testing.T) {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		app := "e2eaws-" + hex.EncodeToString(b)
		req := tokenReq{App: app, Global: "e2eaws:" + app, User: "u-" + app, Instance: "i-" + app, Channel: "c"}
		if res, _, err := gw.token(ctx, req); err != nil || res.Error == nil || res.Error.Code != "oauthAppNotFound" {
			t.Fatalf("before the commit: %s, %v", res.describe(), err)
		}
		callback := "/oauth/callback/" + app
		if a, err := gw.do(ctx, http.MethodGet, callback, nil, false); err != nil || a.Code != 404 {
			t.Fatalf("callback before the commit: %v %d", err, a.Code)
		}
		before, err := repo.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		files, err := changeset.BundleFiles(repo, before)
		if err != nil {
			t.Fatal(err)
		}
		var tree []changeset.ImportFile
		for _, f := range files {
			tree = append(tree, changeset.ImportFile{Path: f.Name, Data: f.Data})
		}
		added := append(slices.Clone(tree), changeset.ImportFile{Path: "e2eaws/" + app + ".yaml", Data: []byte(oauthApp(app))})
		rev, err := changeset.CommitTree(ctx, repo, added, "e2eaws: add OAuthApp/"+app, time.Now())
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
		committed := time.Now()
		t.Cleanup(func() {
			// Take the revision back (a new commit with the tree before).
			if _, err := changeset.CommitTree(context.Background(), repo, tree, "e2eaws: remove OAuthApp/"+app, time.Now()); err != nil {
				t.Errorf("take back %s: %v", changeset.Ref(rev), err)
			}
		})
		var tokenAt, callbackAt time.Duration
		for tokenAt == 0 || callbackAt == 0 {
			if time.Since(committed) > pickupBound+20*time.Second {
				t.Fatalf("not served %s after the commit (bound %s): token %s, callback %s", time.Since(committed).Round(time.Millisecond), pickupBound, tokenAt, callbackAt)
			}
			if tokenAt == 0 {
				if res, _, err := gw.token(ctx, req); err == nil && res.Status == "authorization_required" {
					tokenAt = time.Since(committed)
				}
			}
			if callbackAt == 0 {
				if a, err := gw.do(ctx, http.MethodGet, callback, nil, false); err == nil && a.Code != 404 {
					callbackAt = time.Since(committed)
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		// Each warm environment checks the head on an invocation at most
		// once per bound; the answers add the gateway's and the rebuild's
		// time.
		slack := 3 * time.Second
		if tokenAt > pickupBound+slack || callbackAt > pickupBound+slack {
			t.Errorf("served after %s (token) and %s (callback): bound %s", tokenAt, callbackAt, pickupBound)
		}
		t.Logf("FIGURE pickup of a new revision on the deployed stack: token route %s, callback route %s after the commit (bound %s)",
			tokenAt.Round(time.Millisecond), callbackAt.Round(time.Millisecond), pickupBound)
	}))

	must(timed("a scripted agent's turn commits a changeset on the deployed turn function", func(t *testing.T) {
		selfChangingTurn(ctx, t, st, gw, repo)
	}))

	must(timed("scripted agents' changesets: refused, merged, conflicting, 20 at once; exported", func(t *testing.T) {
		deployedChangesets(ctx, t, st, gw, repo)
	}))

	timed("the functions' logs: import at cold start, revisions taken up", func(t *testing.T) {
		// Figures of this deploy's code only: the log groups outlive it.
		var since int64
		if fi, err := os.Stat(st.outputsPath); err == nil {
			since = fi.ModTime().UnixMilli()
		}
		for _, fn := range []string{st.GetToken, st.Callback} {
			events, err := st.logEvents(ctx, "/aws/lambda/"+fn)
			if err != nil {
				t.Fatal(err)
			}
			// Every cold start of the log group imported; the figures are
			// of those since the deploy (a deploy that changed no function
			// started none).
			var imported, taken, starts int
			var inits, imports []int64
			for _, e := range events {
				var line struct {
					Msg    string `json:"msg"`
					InitMs int64  `json:"initMs"`
					Ms     int64  `json:"ms"`
				}
				if json.Unmarshal([]byte(e.Message), &line) != nil {
					continue
				}
				recent := e.Timestamp >= since
				switch line.Msg {
				case "packaged bundle imported":
					imported++
					if recent {
						imports = append(imports, line.Ms)
					}
				case "bundle revision taken up":
					taken++
				case "initialized":
					starts++
					if recent {
						inits = append(inits, line.InitMs)
					}
				}
				if strings.Contains(e.Message, "packaged bundle not imported") {
					t.Errorf("%s: %s", fn, e.Message)
				}
			}
			if imported != starts || taken == 0 {
				t.Errorf("%s: %d cold starts, %d imports, %d revisions taken up in its log", fn, starts, imported, taken)
			}
			slices.Sort(inits)
			slices.Sort(imports)
			if len(inits) > 0 && len(imports) > 0 {
				t.Logf("FIGURE %s since the deploy: %d cold starts with the git bundle, init p50 %d ms, max %d ms, of which the import p50 %d ms, max %d ms; %d revisions taken up",
					fn, len(inits), inits[len(inits)/2], inits[len(inits)-1], imports[len(imports)/2], imports[len(imports)-1], taken)
			} else {
				t.Logf("%s: no cold start since the deploy (%d before it, each with its import)", fn, starts)
			}
		}
	})
}

// packagedFiles are the bundle files of the gettoken package deploy-local
// uploaded (build/lambda/gettoken/bundle).
func packagedFiles(t *testing.T) map[string]string {
	t.Helper()
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "build", "lambda", "gettoken", "bundle")
	out := map[string]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("the packaged bundle %s: %d files, %v (make deploy-local builds it)", dir, len(out), err)
	}
	return out
}

// oauthApp is an OAuthApp at the demo provider the test never consents to:
// the token route starts a consent for it and no more.
func oauthApp(name string) string {
	return `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: ` + name + `}
spec:
  provider: e2eaws
  flow: authorizationCode
  subjectMode: global
  client:
    clientId: {value: ` + name + `}
    clientSecret: {value: not-a-secret}
  endpoints:
    authorizationUrl: http://127.0.0.1:9090/auth
    tokenUrl: http://127.0.0.1:9090/token
  scopes: [read]
  redirect: {callbackPath: /oauth/callback/` + name + `}
`
}

// selfChangeScript is what the scripted model (NOT a language model: a
// fixed script) answers the selfchange swarm's editor
// (localstack/bundle/selfchange.yaml): open a changeset, write path,
// commit, then say what landed; it carries the changeset id from each
// tool result into the next call.
func selfChangeScript(path, content string) scripted.Script {
	args, _ := json.Marshal(map[string]string{"changesetId": "{{result.changesetId}}", "path": path, "content": content})
	return scripted.Script{Turns: []scripted.Turn{
		{ToolResult: "swarmBundle.commitChangeset", ResultHas: "newRef", Text: "committed {{result.newRef}}"},
		{ToolResult: "swarmBundle.commitChangeset", Text: "not committed: {{result.code}}"},
		{ToolResult: "swarmBundle.writeFile", ResultHas: "written", ToolCalls: []scripted.ToolCall{{Name: "swarmBundle.commitChangeset",
			Args: json.RawMessage(`{"changesetId":"{{result.changesetId}}","message":"e2eaws: add a tool"}`)}}},
		{ToolResult: "swarmBundle.writeFile", Text: "not written: {{result.code}}"},
		{ToolResult: "swarmBundle.openChangeset", ResultHas: "changesetId", ToolCalls: []scripted.ToolCall{{Name: "swarmBundle.writeFile", Args: args}}},
		{ToolResult: "swarmBundle.openChangeset", Text: "not opened: {{result.code}}"},
		{UserContains: "change yourself", ToolCalls: []scripted.ToolCall{{Name: "swarmBundle.openChangeset"}}},
	}}
}

// selfChangingTurn posts "change yourself" to an instance of the
// selfchange swarm: the deployed turn function runs the editor, whose
// scripted model opens a changeset, writes a Tool and commits it, and the
// commit lands in the git bundle (its trailers name the changeset, the
// swarm, the instance and the agent). The revision is taken back after.
func selfChangingTurn(ctx context.Context, t *testing.T, st *stack, gw *gateway, repo *gitstore.Repo) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "e2eaws-" + hex.EncodeToString(b)
	path := "tools/" + name + ".yaml"
	tool := `apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: ` + name + `}
spec: {id: "e2eaws:` + name + `", name: ` + name + `, description: a tool an agent added, inputSchema: {type: object}, sourceId: e2eaws, transport: native}
`
	sm, err := scripted.New(selfChangeScript(path, tool), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, bedrockProxyPort, "the scripted model (MiniStack's MINISTACK_BEDROCK_PROXY_URL)")
	srv := &http.Server{Handler: sm, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close() // before the turn tests listen there

	before, err := repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files, err := changeset.BundleFiles(repo, before)
	if err != nil {
		t.Fatal(err)
	}
	var tree []changeset.ImportFile
	for _, f := range files {
		tree = append(tree, changeset.ImportFile{Path: f.Name, Data: f.Data})
	}
	inst := name
	base := "/v1/instances/selfchange/" + url.PathEscape(inst)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		_, _ = gw.do(cctx, http.MethodDelete, base+"/editor", nil, true)
		head, err := repo.Head(cctx)
		if err == nil && head != before {
			if _, err := changeset.CommitTree(cctx, repo, tree, "e2eaws: remove "+path, time.Now()); err != nil {
				t.Errorf("take back the agent's commit: %v", err)
			}
		}
	})
	body, _ := json.Marshal(map[string]any{"id": "m-" + inst, "text": "change yourself", "auth": map[string]any{
		"actor": map[string]string{"type": "user", "id": "operator"}, "claims": map[string]any{"sub": "operator"}}})
	posted := time.Now()
	if a, err := gw.do(ctx, http.MethodPost, base+"/events", body, true); err != nil || a.Code != http.StatusAccepted {
		t.Fatalf("post: %v %d %.300s", err, a.Code, a.Body)
	}
	var final string
	for final == "" {
		if time.Since(posted) > 90*time.Second {
			t.Fatalf("the turn did not end within 90 s; the model was asked %d times", len(sm.Requests()))
		}
		time.Sleep(500 * time.Millisecond)
		a, err := gw.do(ctx, http.MethodGet, base+"/editor", nil, true)
		if err != nil || a.Code != http.StatusOK {
			continue
		}
		var in struct {
			RecentTurns []struct {
				Status      string `json:"status"`
				FinalAnswer string `json:"finalAnswer"`
			} `json:"recentTurns"`
		}
		if json.Unmarshal(a.Body, &in) == nil {
			for _, tr := range in.RecentTurns {
				if tr.Status != "" && tr.Status != "running" && tr.Status != "parked" {
					final = fmt.Sprintf("%s: %s", tr.Status, tr.FinalAnswer)
				}
			}
		}
	}
	took := time.Since(posted)
	rev, ok := strings.CutPrefix(final, "completed: committed ")
	if !ok {
		for i, r := range sm.Requests() {
			if len(r.Messages) == 0 {
				t.Logf("model call %d (%s): %d bytes, no message read", i+1, r.Wire, len(r.Body))
				_ = os.WriteFile(filepath.Join(os.TempDir(), "e2eaws-unread-model-call.json"), r.Body, 0o600)
			}
			if n := len(r.Messages); n > 0 {
				last, _ := json.Marshal(r.Messages[n-1])
				t.Logf("model call %d (%s): last message %.900s", i+1, r.Wire, last)
			}
		}
		t.Fatalf("the turn: %q (%d model calls)", final, len(sm.Requests()))
	}
	log, err := changeset.Log(ctx, repo, 5)
	if err != nil || len(log) == 0 {
		t.Fatalf("bundle log: %v", err)
	}
	var landed *changeset.Entry
	for i := range log {
		if log[i].Ref == rev {
			landed = &log[i]
		}
	}
	if landed == nil || landed.Trailers.ChangesetID == "" || landed.Trailers.Swarm != "selfchange" || landed.Trailers.Instance != inst ||
		landed.Trailers.Agent != "editor" || landed.Trailers.Turn == "" {
		t.Fatalf("the agent's commit %s in the history: %+v", rev, landed)
	}
	h, _ := changeset.ParseRef(rev)
	after, err := changeset.BundleFiles(repo, h)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range after {
		found = found || f.Name == path && string(f.Data) == tool
	}
	if !found {
		t.Fatalf("%s is not in %s", path, rev)
	}
	t.Logf("FIGURE a scripted agent's changeset on the deployed stack: %s committed %s (changeset %s) %s after the post, %d model calls",
		path, rev, landed.Trailers.ChangesetID, took.Round(time.Millisecond), len(sm.Requests()))
}
