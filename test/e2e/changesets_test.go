package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// selfChangeBundle: an assistant on the scripted model (a fixed script,
// not a language model) whose swarm and itself let it change tools/**,
// selecting the tools of source demo — the group every caller with a sub
// sees — with one tool, alpha, written the way the self-change script
// writes its tools.
func selfChangeBundle(modelURL string) map[string]string {
	return map[string]string{
		"agents.yaml": fmt.Sprintf(`apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: %q}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec:
  modelRef: Model/scripted
  tools: {selectors: [{source: demo}]}
  changesets:
    allowed: {files: ["tools/**"]}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec:
  agents: [Agent/assistant]
  entrypoint: Agent/assistant
  policy: {changesets: {enabled: true, allowed: {files: ["tools/**"]}}}
`, modelURL+"/v1"),
		"access.yaml": `apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: demo}
spec: {selectors: [{source: demo}]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: sub, operator: exists}], allowedGroupIds: [demo]}
`,
		"tools/alpha.yaml": strings.NewReplacer("{{user.tool|gamma}}", "alpha", "{{user.source|demo}}", "demo",
			"{{user.description|a tool the agent added to itself}}", "the alpha tool").Replace(scripted.SelfChangeTool),
	}
}

// changesetRig is the real `agentauth serve` on a bundle that is a git
// repository and the real `agentauth scripted-model --script self-change`.
type changesetRig struct {
	srv      *server
	modelURL string
	bundle   string
	home     string
	posted   int
}

func startChangesetRig(t *testing.T) *changesetRig {
	t.Helper()
	requireCommand(t, "git")
	r := &changesetRig{modelURL: startScriptedModel(t, "self-change")}
	r.bundle = t.TempDir()
	for name, data := range selfChangeBundle(r.modelURL) {
		p := filepath.Join(r.bundle, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.home = t.TempDir()
	if out := r.cli(t, "bundle", "init", "--bundle", r.bundle); !strings.Contains(out, "first revision is git:") {
		t.Fatalf("bundle init: %s", out)
	}
	r.srv = serveBundle(t, freePort(t), r.home, r.bundle)
	return r
}

// startScriptedModel runs `agentauth scripted-model --script name` on a
// free loopback port until the test ends and returns its base URL, once
// its test hook answers.
func startScriptedModel(t *testing.T, name string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	out := &lockedBuffer{}
	cmd := exec.Command(agentauthBin, "scripted-model", "--script", name, "--addr", addr)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + scripted.DebugRequestsPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				if !strings.Contains(out.String(), "not a language model") {
					t.Fatalf("the scripted model does not say it is not a language model:\n%s", out)
				}
				return url
			}
		}
		select {
		case <-done:
			t.Fatalf("scripted-model exited:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("scripted-model did not start: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cli runs the agentauth binary.
func (r *changesetRig) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(agentauthBin, args...)
	cmd.Env = cleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentauth %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// git runs the real git binary in the bundle directory.
func (r *changesetRig) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.bundle, "-c", "user.name=e2e operator", "-c", "user.email=operator@e2e.invalid"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// head is the bundle's active revision as git names it.
func (r *changesetRig) head(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(r.git(t, "rev-parse", "HEAD"))
}

// clean checks that the working tree and the index follow the branch.
func (r *changesetRig) clean(t *testing.T) {
	t.Helper()
	if st := r.git(t, "status", "--porcelain"); st != "" {
		t.Fatalf("git status --porcelain:\n%s", st)
	}
}

// activeRef is the active revision as `agentauth bundle log` prints it.
func (r *changesetRig) activeRef(t *testing.T) string {
	t.Helper()
	var e struct {
		Ref    string `json:"ref"`
		Active bool   `json:"active"`
	}
	out := r.cli(t, "bundle", "log", "--bundle", r.bundle, "--json", "-n", "1")
	if err := json.Unmarshal([]byte(out), &e); err != nil || !e.Active {
		t.Fatalf("bundle log: %v\n%s", err, out)
	}
	return e.Ref
}

// eventBody is a user's message to an instance of the default swarm,
// from a user of its own (the tool rate limit is per principal: 60 calls
// of a tool a minute).
func (r *changesetRig) eventBody(instance, text string) map[string]any {
	r.posted++
	user := "user-" + instance
	return map[string]any{"id": fmt.Sprintf("msg-%d-%d", time.Now().UnixNano(), r.posted), "text": text,
		"auth": map[string]any{"actor": map[string]string{"type": "user", "id": user},
			"subjects": map[string]string{"user": "demo:user:" + user}, "claims": map[string]any{"sub": user}}}
}

func (r *changesetRig) post(t *testing.T, instance, text string) {
	t.Helper()
	if code, out := r.srv.call(t, "POST", "/v1/instances/default/"+instance+"/events", r.eventBody(instance, text)); code != http.StatusAccepted {
		t.Fatalf("post to %s: %d %v", instance, code, out)
	}
}

// turnOf is a turn as the inspect route shows it.
type turnOf struct {
	ID, Status, FinalAnswer string
}

// turns waits until instance has n turns, all ended, and returns them
// oldest first.
func (r *changesetRig) turns(ctx context.Context, t *testing.T, instance string, n int) []turnOf {
	t.Helper()
	var last map[string]any
	for ctx.Err() == nil {
		code, _, raw, out := r.srv.request(t, "GET", "/v1/instances/default/"+instance+"/assistant", r.srv.Token, nil, 10*time.Second)
		if code == http.StatusOK {
			last = out
			var v struct{ RecentTurns []turnOf }
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			ended := len(v.RecentTurns) >= n
			for _, tr := range v.RecentTurns {
				ended = ended && (tr.Status == "completed" || tr.Status == "failed" || tr.Status == "interrupted")
			}
			if ended {
				slices.Reverse(v.RecentTurns)
				return v.RecentTurns
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("instance %s has not ended %d turns: %v\nserve's log:\n%s", instance, n, last, r.srv.Stdout)
	return nil
}

// final is the answer of instance's n-th turn, once it completed.
func (r *changesetRig) final(ctx context.Context, t *testing.T, instance string, n int) turnOf {
	t.Helper()
	tr := r.turns(ctx, t, instance, n)[n-1]
	if tr.Status != "completed" {
		t.Fatalf("turn %d of %s: %+v", n, instance, tr)
	}
	return tr
}

// eventTypes lists a turn's event types; data[type] is the last one's data.
func (r *changesetRig) eventTypes(t *testing.T, instance, turnID string) ([]string, map[string]string) {
	t.Helper()
	var types []string
	data := map[string]string{}
	for _, e := range r.srv.turnEvents(t, instance, turnID) {
		typ, _ := e["type"].(string)
		types = append(types, typ)
		b, _ := json.Marshal(e["data"])
		data[typ] = string(b)
	}
	return types, data
}

// seen is what the scripted model received for the user's message text,
// oldest first (its test hook, GET /debug/requests).
func (r *changesetRig) seen(t *testing.T, text string) []scripted.Seen {
	t.Helper()
	resp, err := http.Get(r.modelURL + scripted.DebugRequestsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Requests []scripted.Seen }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var mine []scripted.Seen
	for _, s := range out.Requests {
		if s.User == text {
			mine = append(mine, s)
		}
	}
	return mine
}

func offers(s scripted.Seen, tool string) bool {
	return slices.ContainsFunc(s.Tools, func(n string) bool { return strings.Contains(n, tool) })
}

func committed(t *testing.T, tr turnOf) string {
	t.Helper()
	ref, ok := strings.CutPrefix(tr.FinalAnswer, "committed git:")
	if !ok {
		t.Fatalf("turn %s answered %q, not a commit", tr.ID, tr.FinalAnswer)
	}
	return ref
}

// TestAgentsChangeTheirBundle is issue 19's proof on the real binaries:
// `agentauth serve` on a bundle that is a git repository (`agentauth
// bundle init`), agents driven by `agentauth scripted-model --script
// self-change` (a fixed script, not a language model), checked through
// the HTTP API, the model's test hook, `agentauth bundle log` and the
// real git: a tool an agent adds is offered from the step after its
// commit, never in the step of it; the commit is a git commit with its
// trailers and the working tree follows; commits of other files merge,
// the same lines conflict and the agent writes them again; a file outside
// allowed.files and a bundle that would not load are refused and the
// active revision stays; 20 concurrent commits all land, linearly, also
// from two servers on one home; a policy narrowed by an operator's git
// commit rejects a changeset prepared before; a changeset is its
// instance's and a repeated commit answers the same; git gc, an
// operator's revert and a hand edit live alongside; serve killed while
// agents commit loses and repeats none. Every wait polls with a deadline.
func TestAgentsChangeTheirBundle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := startChangesetRig(t)
	var gammaSha, xID, xSha string // for the probes at the end

	t.Run("the tool an agent adds is offered from the step after its commit", func(t *testing.T) {
		first := r.head(t)
		r.post(t, "i-gamma", "change yourself")
		tr := r.final(ctx, t, "i-gamma", 1)
		sha := committed(t, tr)
		gammaSha = sha
		if got := r.head(t); got != sha {
			t.Fatalf("HEAD is %s, the agent committed %s", got, sha)
		}
		if parent := strings.TrimSpace(r.git(t, "rev-parse", "HEAD^")); parent != first {
			t.Fatalf("the commit's parent is %s, the revision before was %s", parent, first)
		}
		types, data := r.eventTypes(t, "i-gamma", tr.ID)
		joined := strings.Join(types, " ")
		if strings.Count(joined, "changeset.committed") != 1 || strings.Count(joined, "swarmBundle.revisionChanged") != 1 ||
			slices.Index(types, "changeset.committed") > slices.Index(types, "swarmBundle.revisionChanged") {
			t.Fatalf("the turn's events: %s", joined)
		}
		for _, typ := range []string{"changeset.committed", "swarmBundle.revisionChanged"} {
			if !strings.Contains(data[typ], sha) {
				t.Errorf("%s does not name git:%s: %s", typ, sha, data[typ])
			}
		}
		// What the model was offered, step by step: open, write, commit
		// without gamma; the answer after the commit with it.
		steps := r.seen(t, "change yourself")
		if len(steps) != 4 {
			t.Fatalf("%d model requests for the turn, want 4 (open, write, commit, answer): %+v", len(steps), steps)
		}
		for i, want := range []string{"openChangeset", "writeFile", "commitChangeset"} {
			if s := steps[i]; len(s.Calls) != 1 || !strings.Contains(s.Calls[0], want) || offers(s, "gamma") || !offers(s, "alpha") || !offers(s, "commitChangeset") {
				t.Fatalf("step %d (up to the commit) called %v, was offered %v", i+1, s.Calls, s.Tools)
			}
		}
		if s := steps[3]; len(s.Results) != 1 || !strings.Contains(s.Results[0], "commitChangeset") || !offers(s, "gamma") || !offers(s, "alpha") {
			t.Fatalf("the step after the commit: results %v, offered %v", s.Results, s.Tools)
		}
		// The history, as git reads it.
		msg := r.git(t, "log", "-1", "--format=%B", "HEAD")
		for _, want := range []string{"add the gamma tool\n", "Changeset-Id: cs_", "Agentauth-Swarm: default", "Agentauth-Instance: i-gamma",
			"Agentauth-Agent: assistant", "Agentauth-Turn: " + tr.ID, "Trace-Id: "} {
			if !strings.Contains(msg, want) {
				t.Errorf("git log lacks %q:\n%s", want, msg)
			}
		}
		if files := r.git(t, "show", "--name-status", "--format=", "HEAD"); strings.TrimSpace(files) != "A\ttools/gamma.yaml" {
			t.Fatalf("the commit changed:\n%s", files)
		}
		r.clean(t)
		if b, err := os.ReadFile(filepath.Join(r.bundle, "tools", "gamma.yaml")); err != nil || !strings.Contains(string(b), `id: "demo:gamma"`) {
			t.Fatalf("the working tree's tools/gamma.yaml: %v %q", err, b)
		}
		r.git(t, "fsck", "--strict", "--no-dangling")
		if r.activeRef(t) != "git:"+sha {
			t.Fatalf("bundle log's active revision is not git:%s", sha)
		}
		// Another instance's turn runs on the new revision.
		r.post(t, "i-ask", "what tools")
		if ans := r.final(ctx, t, "i-ask", 1).FinalAnswer; !strings.Contains(ans, "gamma") || !strings.Contains(ans, "alpha") || !strings.Contains(ans, "not a language model") {
			t.Fatalf("what tools: %q", ans)
		}
	})

	t.Run("two instances committing different files both land", func(t *testing.T) {
		before := r.head(t)
		r.post(t, "i-beta", "change yourself tool=beta")
		r.post(t, "i-delta", "change yourself tool=delta")
		b := committed(t, r.final(ctx, t, "i-beta", 1))
		d := committed(t, r.final(ctx, t, "i-delta", 1))
		if n := strings.TrimSpace(r.git(t, "rev-list", "--count", before+"..HEAD")); n != "2" {
			t.Fatalf("%s commits since %s, want 2", n, before)
		}
		for sha, instance := range map[string]string{b: "i-beta", d: "i-delta"} {
			if !strings.Contains(r.git(t, "log", "-1", "--format=%B", sha), "Agentauth-Instance: "+instance) {
				t.Errorf("commit %s does not name %s", sha, instance)
			}
		}
		tree := r.git(t, "ls-tree", "-r", "--name-only", "HEAD")
		for _, f := range []string{"tools/alpha.yaml", "tools/beta.yaml", "tools/delta.yaml"} {
			if !strings.Contains(tree, f+"\n") {
				t.Errorf("HEAD lacks %s:\n%s", f, tree)
			}
		}
		r.clean(t)
	})

	t.Run("the same lines: the second commit conflicts, the agent writes again and commits", func(t *testing.T) {
		prepared := func(instance, description string) string {
			t.Helper()
			r.post(t, instance, "prepare a change tool=alpha description="+description)
			ans := r.final(ctx, t, instance, 1).FinalAnswer
			id, ok := strings.CutPrefix(ans, "prepared ")
			if !ok {
				t.Fatalf("%s: %q", instance, ans)
			}
			return id
		}
		// Both changesets are open on the same revision before either
		// commits: the same line of tools/alpha.yaml, two ways.
		x, y := prepared("i-x", "first"), prepared("i-y", "second")
		r.post(t, "i-x", "commit changeset="+x+" tool=alpha description=first")
		xs := committed(t, r.final(ctx, t, "i-x", 2))
		xID, xSha = x, xs
		yText := "commit changeset=" + y + " tool=alpha description=second"
		r.post(t, "i-y", yText)
		yt := r.final(ctx, t, "i-y", 2)
		ys := committed(t, yt)
		types, data := r.eventTypes(t, "i-y", yt.ID)
		ci, ki := slices.Index(types, "changeset.conflict"), slices.Index(types, "changeset.committed")
		if ci < 0 || ki < ci || !strings.Contains(data["changeset.conflict"], "tools/alpha.yaml") {
			t.Fatalf("i-y's commit turn: %v; conflict %s", types, data["changeset.conflict"])
		}
		steps := r.seen(t, yText)
		var results []string
		for _, s := range steps {
			results = append(results, strings.Join(s.Results, ","))
		}
		if len(steps) != 4 || !strings.Contains(results[1], "commitChangeset") || !strings.Contains(steps[1].Calls[0], "writeFile") {
			t.Fatalf("i-y's steps: results %q", results)
		}
		if parent := strings.TrimSpace(r.git(t, "rev-parse", ys+"^")); parent != xs {
			t.Fatalf("i-y's commit sits on %s, not on i-x's %s", parent, xs)
		}
		if got := r.git(t, "show", xs+":tools/alpha.yaml"); !strings.Contains(got, "description: first\n") {
			t.Fatalf("i-x's alpha:\n%s", got)
		}
		got := r.git(t, "show", "HEAD:tools/alpha.yaml")
		if !strings.Contains(got, "description: second\n") || strings.Contains(got, "<<<<<<<") {
			t.Fatalf("HEAD's alpha:\n%s", got)
		}
		r.clean(t)
	})

	t.Run("a file outside allowed.files is refused; the revision stays", func(t *testing.T) {
		before := r.activeRef(t)
		r.post(t, "i-out", "change yourself file=access.yaml")
		if ans := r.final(ctx, t, "i-out", 1).FinalAnswer; ans != "not written: E_PATH_NOT_ALLOWED" {
			t.Fatalf("i-out: %q", ans)
		}
		if after := r.activeRef(t); after != before {
			t.Fatalf("the active revision moved: %s → %s", before, after)
		}
	})

	t.Run("a bundle that would not load is rejected; the revision stays", func(t *testing.T) {
		before := r.activeRef(t)
		// A second Tool named alpha: the loader refuses the duplicate.
		r.post(t, "i-bad", "change yourself tool=alpha file=tools/alpha-copy.yaml")
		tr := r.final(ctx, t, "i-bad", 1)
		if tr.FinalAnswer != "not committed: E_BUNDLE_INVALID" {
			t.Fatalf("i-bad: %q", tr.FinalAnswer)
		}
		if types, _ := r.eventTypes(t, "i-bad", tr.ID); !slices.Contains(types, "changeset.rejected") || slices.Contains(types, "changeset.committed") {
			t.Fatalf("i-bad's events: %v", types)
		}
		if after := r.activeRef(t); after != before {
			t.Fatalf("the active revision moved: %s → %s", before, after)
		}
		if _, err := os.Stat(filepath.Join(r.bundle, "tools", "alpha-copy.yaml")); !os.IsNotExist(err) {
			t.Fatalf("the rejected file is in the working tree: %v", err)
		}
		r.clean(t)
	})

	t.Run("20 concurrent commits all land on a linear history", func(t *testing.T) {
		r.concurrent(ctx, t, "c", 20, r.srv)
	})

	t.Run("two servers on one home: 20 concurrent commits from both land", func(t *testing.T) {
		// Their workers share the home's queue; their commits race for the
		// branch across processes (git's lock file, compare-and-swap).
		second := serveBundle(t, freePort(t), r.home, r.bundle)
		r.concurrent(ctx, t, "d", 20, r.srv, second)
	})

	t.Run("a commit of files the policy no longer allows is rejected", func(t *testing.T) {
		r.post(t, "i-late", "prepare a change tool=late file=tools/late/late.yaml")
		ans := r.final(ctx, t, "i-late", 1).FinalAnswer
		id, ok := strings.CutPrefix(ans, "prepared ")
		if !ok {
			t.Fatalf("i-late: %q", ans)
		}
		// An operator narrows the agent's files with git itself: tools/*.yaml
		// does not reach tools/late/.
		p := filepath.Join(r.bundle, "agents.yaml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		narrowed := strings.Replace(string(b), "    allowed: {files: [\"tools/**\"]}", "    allowed: {files: [\"tools/*.yaml\"]}", 1)
		if narrowed == string(b) {
			t.Fatal("agents.yaml has no agent allowed.files to narrow")
		}
		if err := os.WriteFile(p, []byte(narrowed), 0o600); err != nil {
			t.Fatal(err)
		}
		r.git(t, "commit", "-q", "-am", "narrow the assistant's files")
		narrowedRef := "git:" + r.head(t)
		r.post(t, "i-late", "commit changeset="+id+" tool=late file=tools/late/late.yaml")
		tr := r.final(ctx, t, "i-late", 2)
		if tr.FinalAnswer != "not committed: E_PATH_NOT_ALLOWED" {
			t.Fatalf("i-late's commit: %q", tr.FinalAnswer)
		}
		types, data := r.eventTypes(t, "i-late", tr.ID)
		if !slices.Contains(types, "changeset.rejected") || !strings.Contains(data["changeset.rejected"], "tools/late/late.yaml") {
			t.Fatalf("i-late's events: %v; rejected %s", types, data["changeset.rejected"])
		}
		if after := r.activeRef(t); after != narrowedRef {
			t.Fatalf("the active revision is %s, want the operator's %s", after, narrowedRef)
		}
		r.clean(t)
		// What the policy still allows lands on the operator's commit.
		r.post(t, "i-after", "change yourself tool=omega")
		if parent := strings.TrimSpace(r.git(t, "rev-parse", committed(t, r.final(ctx, t, "i-after", 1))+"^")); "git:"+parent != narrowedRef {
			t.Fatalf("the commit after the operator's sits on %s", parent)
		}
		r.clean(t)
	})

	t.Run("a changeset is its instance's; a repeated commit answers the same", func(t *testing.T) {
		if xID == "" {
			t.Skip("the conflict subtest did not run")
		}
		before := r.head(t)
		r.post(t, "i-thief", "commit changeset="+xID+" tool=alpha")
		if ans := r.final(ctx, t, "i-thief", 1).FinalAnswer; ans != "not committed: E_CHANGESET_NOT_FOUND" {
			t.Fatalf("another instance committing i-x's changeset: %q", ans)
		}
		r.post(t, "i-x", "commit changeset="+xID+" tool=alpha")
		if ans := r.final(ctx, t, "i-x", 3).FinalAnswer; ans != "committed git:"+xSha {
			t.Fatalf("i-x committing its changeset again: %q, want its first answer (git:%s)", ans, xSha)
		}
		if after := r.head(t); after != before {
			t.Fatalf("HEAD moved: %s → %s", before, after)
		}
	})

	t.Run("git gc packs the repository; commits still land", func(t *testing.T) {
		r.git(t, "gc", "--quiet")
		r.git(t, "pack-refs", "--all")
		before := r.head(t)
		r.post(t, "i-gc", "change yourself tool=packed")
		sha := committed(t, r.final(ctx, t, "i-gc", 1))
		if parent := strings.TrimSpace(r.git(t, "rev-parse", sha+"^")); parent != before {
			t.Fatalf("the commit after gc sits on %s, not %s", parent, before)
		}
		r.clean(t)
		r.git(t, "fsck", "--strict", "--no-dangling")
	})

	t.Run("an operator's revert with serve running: the next turn no longer offers the tool", func(t *testing.T) {
		if gammaSha == "" {
			t.Skip("the first subtest did not run")
		}
		out := r.cli(t, "bundle", "revert", "--bundle", r.bundle, "--home", r.home, "--as", "e2e-operator", "git:"+gammaSha)
		if !strings.HasPrefix(out, "reverted git:"+gammaSha) {
			t.Fatalf("bundle revert: %s", out)
		}
		msg := r.git(t, "log", "-1", "--format=%B")
		if !strings.Contains(msg, "Agentauth-Operator: e2e-operator") {
			t.Fatalf("the revert's message:\n%s", msg)
		}
		r.clean(t)
		if _, err := os.Stat(filepath.Join(r.bundle, "tools", "gamma.yaml")); !os.IsNotExist(err) {
			t.Fatalf("tools/gamma.yaml is still in the working tree: %v", err)
		}
		r.post(t, "i-ask", "what tools")
		if ans := r.final(ctx, t, "i-ask", 2).FinalAnswer; strings.Contains(ans, "gamma") || !strings.Contains(ans, "alpha") {
			t.Fatalf("what tools after the revert: %q", ans)
		}
	})

	t.Run("a file changed by hand stays while commits land", func(t *testing.T) {
		p := filepath.Join(r.bundle, "tools", "alpha.yaml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(b), "description: second", "description: by-hand", 1)
		if err := os.WriteFile(p, []byte(edited), 0o600); err != nil {
			t.Fatal(err)
		}
		r.post(t, "i-hand", "change yourself tool=hand")
		committed(t, r.final(ctx, t, "i-hand", 1))
		if st := r.git(t, "status", "--porcelain"); st != " M tools/alpha.yaml\n" {
			t.Fatalf("git status --porcelain:\n%s", st)
		}
		if now, _ := os.ReadFile(p); string(now) != edited {
			t.Fatalf("the hand edit was overwritten:\n%s", now)
		}
		if _, err := os.Stat(filepath.Join(r.bundle, "tools", "hand.yaml")); err != nil {
			t.Fatalf("the agent's file is not in the working tree: %v", err)
		}
		if got := r.git(t, "show", "HEAD:tools/alpha.yaml"); !strings.Contains(got, "description: second\n") {
			t.Fatalf("HEAD's alpha:\n%s", got)
		}
	})

	t.Run("serve killed while agents commit: after a restart every commit lands once", func(t *testing.T) {
		// The hand edit of the last subtest goes.
		r.git(t, "checkout", "--", ".")
		before := r.head(t)
		const n = 10
		for i := range n {
			r.post(t, fmt.Sprintf("i-k%02d", i), fmt.Sprintf("change yourself tool=k%02d", i))
		}
		for ctx.Err() == nil && strings.TrimSpace(r.git(t, "rev-list", "--count", before+"..HEAD")) == "0" {
			time.Sleep(5 * time.Millisecond)
		}
		killServe(t, r.srv)
		landed := strings.TrimSpace(r.git(t, "rev-list", "--count", before+"..HEAD"))
		// A lock the killed serve held stays, as git's own do after a
		// crash; an operator removes it, as git says to. (Left alone, a
		// ref lock fails commits for a minute and an index.lock stops the
		// working tree following: TestChangesetLocksACrashLeft.)
		syncing := false // killed while the working tree followed a commit
		for _, f := range []string{"index.lock", "refs/heads/main.lock"} {
			if err := os.Remove(filepath.Join(r.bundle, ".git", filepath.FromSlash(f))); err == nil {
				t.Logf("the killed serve left .git/%s", f)
				syncing = syncing || f == "index.lock"
			}
		}
		r.srv = serveBundle(t, freePort(t), r.home, r.bundle)
		for i := range n {
			committed(t, r.final(ctx, t, fmt.Sprintf("i-k%02d", i), 1))
		}
		if c := strings.TrimSpace(r.git(t, "rev-list", "--count", before+"..HEAD")); c != strconv.Itoa(n) {
			t.Fatalf("%s commits since %s, want %d (%s had landed at the kill)", c, before, n, landed)
		}
		ids := strings.Fields(r.git(t, "log", "--format=%(trailers:key=Changeset-Id,valueonly)", before+"..HEAD"))
		slices.Sort(ids)
		if len(slices.Compact(ids)) != n {
			t.Fatalf("changeset ids: %v", ids)
		}
		r.git(t, "fsck", "--strict", "--no-dangling")
		t.Logf("%s of %d commits had landed when serve was killed", landed, n)
		// The working tree followed, whole: Sync writes each file to a
		// temporary file and renames it, so a kill never leaves one cut
		// short (which every later sync would take for a hand edit).
		if st := r.git(t, "status", "--porcelain"); st != "" {
			t.Fatalf("git status --porcelain after the kill and the restart:\n%s", st)
		}
	})
}

// concurrent posts n messages at once, "change yourself tool=<prefix>NN"
// to instance i-<prefix>NN, spread over servers, and checks that every
// turn committed and n commits landed on a linear history, each with its
// changeset and instance, each file at HEAD.
func (r *changesetRig) concurrent(ctx context.Context, t *testing.T, prefix string, n int, servers ...*server) {
	t.Helper()
	before := r.head(t)
	name := func(i int) string { return fmt.Sprintf("%s%02d", prefix, i) }
	var wg sync.WaitGroup
	errs := make([]error, n)
	bodies := make([]map[string]any, n)
	for i := range n {
		bodies[i] = r.eventBody("i-"+name(i), "change yourself tool="+name(i))
	}
	for i := range n {
		wg.Go(func() { errs[i] = postEvent(ctx, servers[i%len(servers)], "i-"+name(i), bodies[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	shas := map[string]bool{}
	for i := range n {
		shas[committed(t, r.final(ctx, t, "i-"+name(i), 1))] = true
	}
	if len(shas) != n {
		t.Fatalf("%d distinct commits, want %d", len(shas), n)
	}
	if c := strings.TrimSpace(r.git(t, "rev-list", "--count", before+"..HEAD")); c != strconv.Itoa(n) {
		t.Fatalf("%s commits since %s, want %d", c, before, n)
	}
	if merges := r.git(t, "rev-list", "--min-parents=2", "HEAD"); merges != "" {
		t.Fatalf("merge commits: %s", merges)
	}
	for _, sha := range strings.Fields(r.git(t, "rev-list", before+"..HEAD")) {
		delete(shas, sha)
	}
	if len(shas) != 0 {
		t.Fatalf("commits the agents answered are not in the history since %s: %v", before, shas)
	}
	instances := r.git(t, "log", "--format=%(trailers:key=Agentauth-Instance,valueonly)", before+"..HEAD")
	ids := strings.Fields(r.git(t, "log", "--format=%(trailers:key=Changeset-Id,valueonly)", before+"..HEAD"))
	slices.Sort(ids)
	if len(slices.Compact(ids)) != n {
		t.Fatalf("changeset ids: %v", ids)
	}
	tree := r.git(t, "ls-tree", "-r", "--name-only", "HEAD")
	for i := range n {
		if !strings.Contains(instances, "i-"+name(i)+"\n") || !strings.Contains(tree, "tools/"+name(i)+".yaml\n") {
			t.Errorf("instance i-%s: not in the trailers or its file not at HEAD", name(i))
		}
	}
	r.clean(t)
	r.git(t, "fsck", "--strict", "--no-dangling")
}

// killServe ends serve with SIGKILL: no shutdown, whatever it was writing
// left as it was.
func killServe(t *testing.T, s *server) {
	t.Helper()
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// postEvent posts a user's message to instance without testing.T, for
// goroutines.
func postEvent(ctx context.Context, s *server, instance string, body map[string]any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/instances/default/"+instance+"/events", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST %s: %s", req.URL.Path, resp.Status)
	}
	return nil
}

// TestChangesetLocksACrashLeft: a lock file a crashed writer left in the
// bundle repository (git's lock-file protocol: nobody holds one for long)
// is taken over once it is old, so commits land and the working tree
// follows again without an operator.
func TestChangesetLocksACrashLeft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startChangesetRig(t)
	// leave makes the lock file a crash would have left two minutes ago.
	leave := func(t *testing.T, name string) string {
		t.Helper()
		p := filepath.Join(r.bundle, ".git", filepath.FromSlash(name))
		if err := os.WriteFile(p, []byte(r.head(t)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * time.Minute)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("a stale ref lock", func(t *testing.T) {
		p := leave(t, "refs/heads/main.lock")
		r.post(t, "i-ref", "change yourself tool=reflock")
		sha := committed(t, r.final(ctx, t, "i-ref", 1))
		if r.head(t) != sha {
			t.Fatalf("HEAD is not the commit %s", sha)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("the stale ref lock is still there: %v", err)
		}
		r.clean(t)
	})

	t.Run("a stale index.lock", func(t *testing.T) {
		p := leave(t, "index.lock")
		r.post(t, "i-index", "change yourself tool=indexlock")
		committed(t, r.final(ctx, t, "i-index", 1))
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the stale index.lock is still there: %v", err)
		}
		if _, err := os.Stat(filepath.Join(r.bundle, "tools", "indexlock.yaml")); err != nil {
			t.Errorf("the working tree did not follow the commit: %v", err)
		}
		if st := r.git(t, "status", "--porcelain"); st != "" {
			t.Errorf("git status --porcelain:\n%s", st)
		}
	})
}
