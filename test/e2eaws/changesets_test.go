//go:build e2eaws

package e2eaws

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentauth/agentauth/shared/aws/gitstore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// editors drives instances of the selfchange swarm's editor
// (localstack/bundle/selfchange.yaml) on the deployed turn function:
// events posted through the gateway (SigV4), turns and their events read
// back the same way. The editor's model is the scripted model serving
// scripted.SelfChangeScript — a fixed script, NOT a language model — so
// one script serves every instance at once: the tool, file and
// description it writes come from KEY=VALUE words of the user's message.
type editors struct {
	gw   *gateway
	repo *gitstore.Repo
	run  string // this run's prefix (e2eaws-<hex>): instances, tools, files
	seq  atomic.Int64

	mu      sync.Mutex
	posted  map[string]bool // instances, deleted at the end
	commits []agentCommit   // every commit an agent answered, for the export
}

// agentCommit is a commit an agent's turn answered, with the trailers it
// must carry.
type agentCommit struct {
	ref, changesetID, instance, turn string
}

func (e *editors) base(inst string) string { return "/v1/instances/selfchange/" + url.PathEscape(inst) }

// post sends text to instance inst as the operator.
func (e *editors) post(ctx context.Context, t *testing.T, inst, text string) {
	t.Helper()
	if err := e.send(ctx, inst, text); err != nil {
		t.Fatal(err)
	}
}

// send is post for any goroutine. A post the gateway answered with a 5xx
// is sent again, at most twice more: MiniStack fails every environment of
// a function when one cold start fails (README's emulator notes), and 20
// posts at once start up to 20. The message keeps its id, so a post that
// did land is queued once.
func (e *editors) send(ctx context.Context, inst, text string) error {
	e.mu.Lock()
	e.posted[inst] = true
	e.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("m%d-%s", e.seq.Add(1), inst), "text": text, "auth": map[string]any{
		"actor": map[string]string{"type": "user", "id": "operator"}, "claims": map[string]any{"sub": "operator"}}})
	var a answer
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		a, err = e.gw.do(ctx, http.MethodPost, e.base(inst)+"/events", body, true)
		if err == nil && a.Code == http.StatusAccepted {
			return nil
		}
		if err == nil && a.Code < 500 {
			break
		}
	}
	return fmt.Errorf("post to %s: %v %d %.300s", inst, err, a.Code, a.Body)
}

// finals waits until each instance has run n turns and runs none, and
// returns each one's latest. The instances are polled in turn, every
// 300 ms, for at most three minutes.
func (e *editors) finals(ctx context.Context, t *testing.T, n int, insts ...string) map[string]turnOut {
	t.Helper()
	out := map[string]turnOut{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(out) < len(insts) {
		for _, inst := range insts {
			if _, done := out[inst]; done {
				continue
			}
			a, err := e.gw.do(ctx, http.MethodGet, e.base(inst)+"/editor", nil, true)
			if err != nil || a.Code != http.StatusOK {
				continue // 404 until the first event is routed
			}
			var in instanceOut
			if json.Unmarshal(a.Body, &in) != nil || in.ActiveTurn != nil || in.Backlog > 0 {
				continue
			}
			var ended []turnOut
			for _, tr := range in.RecentTurns {
				if tr.Status != "" && tr.Status != "running" && tr.Status != "parked" {
					ended = append(ended, tr)
				}
			}
			if len(ended) >= n {
				sort.Slice(ended, func(i, j int) bool { return ended[i].StartedAt.Before(ended[j].StartedAt) })
				out[inst] = ended[len(ended)-1]
			}
		}
		if len(out) == len(insts) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("after 3 minutes %d of %d instances have ended %d turn(s): %v", len(out), len(insts), n, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	return out
}

// final is finals for one instance.
func (e *editors) final(ctx context.Context, t *testing.T, inst string, n int) turnOut {
	t.Helper()
	return e.finals(ctx, t, n, inst)[inst]
}

// events are the types of turn turnID's events, in order, and each
// type's data (the last of that type) as JSON.
func (e *editors) events(ctx context.Context, t *testing.T, inst, turnID string) ([]string, map[string]string) {
	t.Helper()
	a, err := e.gw.do(ctx, http.MethodGet, e.base(inst)+"/editor/turns/"+url.PathEscape(turnID)+"/events", nil, true)
	if err != nil || a.Code != http.StatusOK {
		t.Fatalf("events of %s's turn %s: %v %d %.300s", inst, turnID, err, a.Code, a.Body)
	}
	var out struct {
		Data []turnEventOut `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &out); err != nil {
		t.Fatal(err)
	}
	var types []string
	data := map[string]string{}
	for _, ev := range out.Data {
		types = append(types, ev.Type)
		b, _ := json.Marshal(ev.Data)
		data[ev.Type] = string(b)
	}
	return types, data
}

// committed is the revision tr's answer says it committed; it checks the
// commit's trailers in the history and keeps it for the export.
func (e *editors) committed(ctx context.Context, t *testing.T, inst string, tr turnOut) string {
	t.Helper()
	ref, ok := strings.CutPrefix(tr.FinalAnswer, "committed ")
	if !ok || !changeset.IsGitRef(ref) {
		t.Fatalf("%s's turn %s answered %q (%s), not a commit", inst, tr.ID, tr.FinalAnswer, tr.Status)
	}
	en, err := changeset.Show(ctx, e.repo, ref)
	if err != nil {
		t.Fatalf("%s's commit %s: %v", inst, ref, err)
	}
	tl := en.Trailers
	if tl.ChangesetID == "" || tl.Swarm != "selfchange" || tl.Instance != inst || tl.Agent != "editor" || tl.Turn != tr.ID || tl.TraceID == "" {
		t.Fatalf("%s's commit %s: trailers %+v (turn %s)", inst, ref, tl, tr.ID)
	}
	e.mu.Lock()
	e.commits = append(e.commits, agentCommit{ref: ref, changesetID: tl.ChangesetID, instance: inst, turn: tr.ID})
	e.mu.Unlock()
	return ref
}

// headFiles are the active revision and its files.
func headFiles(ctx context.Context, t *testing.T, repo *gitstore.Repo) (string, map[string]string) {
	t.Helper()
	h, err := repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return changeset.Ref(h), filesAt(t, repo, changeset.Ref(h))
}

// filesAt are revision ref's files.
func filesAt(t *testing.T, repo *gitstore.Repo, ref string) map[string]string {
	t.Helper()
	h, err := changeset.ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	files, err := changeset.BundleFiles(repo, h)
	if err != nil {
		t.Fatalf("files of %s: %v", ref, err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Name] = string(f.Data)
	}
	return out
}

// commitFiles lands files as a new revision, as an operator's git commit
// would (no changeset, no policy): only while no agent commits.
func commitFiles(ctx context.Context, t *testing.T, repo *gitstore.Repo, files map[string]string, msg string) string {
	t.Helper()
	var tree []changeset.ImportFile
	for p, d := range files {
		tree = append(tree, changeset.ImportFile{Path: p, Data: []byte(d)})
	}
	h, err := changeset.CommitTree(ctx, repo, tree, msg, time.Now())
	if err != nil {
		t.Fatalf("commit %q: %v", msg, err)
	}
	return changeset.Ref(h)
}

// since is the history from the active revision back to (not including)
// ref, by first parents, newest first: each commit's ref and changeset
// id. It fails when ref is not within 500 commits on that line (it stops
// there, however long the stack's history has grown).
func since(ctx context.Context, t *testing.T, repo *gitstore.Repo, ref string) []sinceEntry {
	t.Helper()
	h, err := repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []sinceEntry
	for range 500 {
		if changeset.Ref(h) == ref {
			return out
		}
		cm, err := object.GetCommit(repo.Objects(), h)
		if err != nil {
			t.Fatalf("commit %s: %v", h, err)
		}
		en := sinceEntry{ref: changeset.Ref(h)}
		for _, line := range strings.Split(cm.Message, "\n") {
			if id, ok := strings.CutPrefix(line, "Changeset-Id: "); ok {
				en.changesetID = id
			}
		}
		out = append(out, en)
		if len(cm.ParentHashes) == 0 {
			break
		}
		h = cm.ParentHashes[0]
	}
	t.Fatalf("%s is not within %d revisions back from the active one", ref, len(out))
	return nil
}

type sinceEntry struct{ ref, changesetID string }

// deployedChangesets is issue 19's proof on the deployed functions, with
// scripted agents (the scripted model is NOT a language model): the
// editor's turns run on the deployed turn function, their commits land in
// the git bundle in the turn bucket and the table. First, while no agent
// commits: a file outside allowed.files and a bundle that would not load
// are refused and the active revision stays; a changeset prepared under a
// wider policy is rejected after an operator narrowed it. Then, at once:
// two changesets on different files both commit; on the same lines the
// second gets conflict, writes again and commits; 20 instances commit at
// once and none is lost. Then `agentauth bundle export` copies the
// stack's history out of S3 and DynamoDB and the real git finds every
// commit with its trailers. Every revision is taken back after (a commit
// of the tree before), so the stack's bundle stays as packaged.
func deployedChangesets(ctx context.Context, t *testing.T, st *stack, gw *gateway, repo *gitstore.Repo) {
	// The CLI, built while the agents run.
	bin := filepath.Join(t.TempDir(), "agentauth")
	built := make(chan error, 1)
	go func() {
		root, err := e2ekit.ModuleRoot()
		if err == nil {
			var out []byte
			cmd := exec.Command("go", "build", "-o", bin, "./cmd/agentauth")
			cmd.Dir = root
			if out, err = cmd.CombinedOutput(); err != nil {
				err = fmt.Errorf("go build ./cmd/agentauth: %v\n%s", err, out)
			}
		}
		built <- err
	}()
	defer func() { <-built }() // the build's directory goes with t

	sm, err := scripted.New(scripted.SelfChangeScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, bedrockProxyPort, "the scripted model (MiniStack's MINISTACK_BEDROCK_PROXY_URL)")
	srv := &http.Server{Handler: sm, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close() // before the turn tests listen there

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	e := &editors{gw: gw, repo: repo, run: "e2eaws-" + hex.EncodeToString(b), posted: map[string]bool{}}
	start, packaged := headFiles(ctx, t, repo)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		// Taken back: a commit of the tree before (none when it is that).
		commitFiles(cctx, t, repo, packaged, "e2eaws: take back the changesets of "+e.run)
		for inst := range e.posted {
			_, _ = gw.do(cctx, http.MethodDelete, e.base(inst)+"/editor", nil, true)
		}
	})
	name := func(s string) string { return e.run + "-" + s }
	// The file SelfChangeScript writes for tool=NAME source=e2eaws.
	toolFile := func(tool, description string) string {
		return strings.NewReplacer("{{user.tool|gamma}}", tool, "{{user.source|demo}}", "e2eaws",
			"{{user.description|a tool the agent added to itself}}", description).Replace(scripted.SelfChangeTool)
	}

	var late string // a changeset prepared under the wider policy
	ok := t.Run("refused while no agent commits: the revision stays", func(t *testing.T) {
		t.Run("a file outside allowed.files is refused", func(t *testing.T) {
			t.Parallel()
			inst := name("out")
			e.post(ctx, t, inst, "change yourself tool="+inst+" source=e2eaws file=e2eaws/"+inst+".yaml")
			if ans := e.final(ctx, t, inst, 1).FinalAnswer; ans != "not written: E_PATH_NOT_ALLOWED" {
				t.Fatalf("%s: %q", inst, ans)
			}
		})
		t.Run("a bundle that would not load is rejected", func(t *testing.T) {
			t.Parallel()
			// A second Tool named note (localstack/bundle/e2e-tools.yaml):
			// the loader refuses the duplicate.
			inst := name("bad")
			e.post(ctx, t, inst, "change yourself tool=note source=demo file=tools/"+inst+".yaml")
			tr := e.final(ctx, t, inst, 1)
			if tr.FinalAnswer != "not committed: E_BUNDLE_INVALID" {
				t.Fatalf("%s: %q", inst, tr.FinalAnswer)
			}
			types, data := e.events(ctx, t, inst, tr.ID)
			if !slices.Contains(types, "changeset.rejected") || slices.Contains(types, "changeset.committed") ||
				!strings.Contains(data["changeset.rejected"], "E_BUNDLE_INVALID") {
				t.Fatalf("%s's events: %v; rejected %s", inst, types, data["changeset.rejected"])
			}
		})
		t.Run("a changeset prepared under the wider policy", func(t *testing.T) {
			t.Parallel()
			inst := name("late")
			e.post(ctx, t, inst, "prepare a change tool="+inst+" source=e2eaws file=tools/"+inst+"/late.yaml")
			ans := e.final(ctx, t, inst, 1).FinalAnswer
			id, ok := strings.CutPrefix(ans, "prepared ")
			if !ok || !changeset.ValidID(id) {
				t.Fatalf("%s: %q", inst, ans)
			}
			late = id
		})
	})
	if !ok {
		t.FailNow()
	}
	if ref, _ := headFiles(ctx, t, repo); ref != start {
		t.Fatalf("the active revision moved from %s to %s: nothing was to land", start, ref)
	}

	ok = t.Run("a commit of files the policy no longer allows is rejected: the revision stays", func(t *testing.T) {
		// An operator narrows the editor's files (tools/*.yaml does not
		// reach tools/<dir>/) by a commit of its own; the next step of the
		// editor's turn reads it (step.config reads the head).
		files := maps.Clone(packaged)
		var narrowed bool
		for p, d := range files {
			if strings.Contains(d, "name: editor\n") {
				n := strings.Replace(d, "  changesets:\n    allowed: {files: [\"tools/**\"]}", "  changesets:\n    allowed: {files: [\"tools/*.yaml\"]}", 1)
				narrowed = n != d
				files[p] = n
			}
		}
		if !narrowed {
			t.Fatal("the deployed bundle has no editor whose allowed.files to narrow (localstack/bundle/selfchange.yaml)")
		}
		narrowedRef := commitFiles(ctx, t, repo, files, "e2eaws: narrow the editor's files")
		inst := name("late")
		e.post(ctx, t, inst, "commit changeset="+late+" tool="+inst+" source=e2eaws file=tools/"+inst+"/late.yaml")
		tr := e.final(ctx, t, inst, 2)
		if tr.FinalAnswer != "not committed: E_PATH_NOT_ALLOWED" {
			t.Fatalf("%s's commit: %q", inst, tr.FinalAnswer)
		}
		types, data := e.events(ctx, t, inst, tr.ID)
		if !slices.Contains(types, "changeset.rejected") || !strings.Contains(data["changeset.rejected"], "tools/"+inst+"/late.yaml") {
			t.Fatalf("%s's events: %v; rejected %s", inst, types, data["changeset.rejected"])
		}
		if ref, _ := headFiles(ctx, t, repo); ref != narrowedRef {
			t.Fatalf("the active revision is %s, want the operator's %s", ref, narrowedRef)
		}
		// The operator widens it again: the tree before.
		commitFiles(ctx, t, repo, packaged, "e2eaws: widen the editor's files again")
	})
	if !ok {
		t.FailNow()
	}
	phase, _ := headFiles(ctx, t, repo)

	ok = t.Run("agents commit at once", func(t *testing.T) {
		t.Run("two changesets on different files both commit", func(t *testing.T) {
			t.Parallel()
			a, b := name("a"), name("b")
			e.post(ctx, t, a, "change yourself tool="+a+" source=e2eaws")
			e.post(ctx, t, b, "change yourself tool="+b+" source=e2eaws")
			trs := e.finals(ctx, t, 1, a, b)
			refs := map[string]string{a: e.committed(ctx, t, a, trs[a]), b: e.committed(ctx, t, b, trs[b])}
			_, head := headFiles(ctx, t, repo)
			for inst, ref := range refs {
				path := "tools/" + inst + ".yaml"
				if filesAt(t, repo, ref)[path] != toolFile(inst, "a tool the agent added to itself") || head[path] == "" {
					t.Errorf("%s: %s is not in its commit %s or not at the head", inst, path, ref)
				}
			}
		})
		t.Run("the same lines: the second conflicts, writes again and commits", func(t *testing.T) {
			t.Parallel()
			tool := name("same")
			path := "tools/" + tool + ".yaml"
			seed := name("seed")
			e.post(ctx, t, seed, "change yourself tool="+tool+" source=e2eaws description=seed")
			e.committed(ctx, t, seed, e.final(ctx, t, seed, 1))
			// Both open on a revision with the seed and change its
			// description line, two ways, before either commits.
			x, y := name("x"), name("y")
			e.post(ctx, t, x, "prepare a change tool="+tool+" source=e2eaws description=first")
			e.post(ctx, t, y, "prepare a change tool="+tool+" source=e2eaws description=second")
			ids := map[string]string{}
			for inst, tr := range e.finals(ctx, t, 1, x, y) {
				id, ok := strings.CutPrefix(tr.FinalAnswer, "prepared ")
				if !ok {
					t.Fatalf("%s: %q", inst, tr.FinalAnswer)
				}
				ids[inst] = id
			}
			e.post(ctx, t, x, "commit changeset="+ids[x]+" tool="+tool+" source=e2eaws description=first")
			xs := e.committed(ctx, t, x, e.final(ctx, t, x, 2))
			e.post(ctx, t, y, "commit changeset="+ids[y]+" tool="+tool+" source=e2eaws description=second")
			yt := e.final(ctx, t, y, 2)
			ys := e.committed(ctx, t, y, yt)
			types, data := e.events(ctx, t, y, yt.ID)
			ci, ki := slices.Index(types, "changeset.conflict"), slices.Index(types, "changeset.committed")
			if ci < 0 || ki < ci || !strings.Contains(data["changeset.conflict"], path) {
				t.Fatalf("%s's commit turn: %v; conflict %s", y, types, data["changeset.conflict"])
			}
			if !slices.ContainsFunc(since(ctx, t, repo, phase), func(en sinceEntry) bool { return en.ref == xs }) ||
				!slices.ContainsFunc(since(ctx, t, repo, xs), func(en sinceEntry) bool { return en.ref == ys }) {
				t.Fatalf("%s's commit %s does not follow %s's %s in the history", y, ys, x, xs)
			}
			if got := filesAt(t, repo, xs)[path]; got != toolFile(tool, "first") {
				t.Fatalf("%s at %s's commit:\n%s", path, x, got)
			}
			if got := filesAt(t, repo, ys)[path]; got != toolFile(tool, "second") {
				t.Fatalf("%s at %s's commit (conflict markers?):\n%s", path, y, got)
			}
		})
		t.Run("20 instances commit at once: none is lost", func(t *testing.T) {
			t.Parallel()
			const n = 20
			insts := make([]string, n)
			for i := range n {
				insts[i] = name(fmt.Sprintf("c%02d", i))
			}
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i, inst := range insts {
				wg.Go(func() { errs[i] = e.send(ctx, inst, "change yourself tool="+inst+" source=e2eaws") })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			posted := time.Now()
			trs := e.finals(ctx, t, 1, insts...)
			took := time.Since(posted)
			refs := map[string]string{}
			for _, inst := range insts {
				refs[e.committed(ctx, t, inst, trs[inst])] = inst
			}
			if len(refs) != n {
				t.Fatalf("%d distinct commits, want %d", len(refs), n)
			}
			// Linear: each of them on the first-parent line from the head
			// back to the phase's start (the export checks with git that no
			// commit has two parents), once, each with its own changeset.
			ids, seen := map[string]bool{}, map[string]int{}
			for _, en := range since(ctx, t, repo, phase) {
				if inst, ok := refs[en.ref]; ok {
					seen[inst]++
					ids[en.changesetID] = true
				}
			}
			if len(seen) != n || len(ids) != n {
				t.Fatalf("on the history since %s: %d of %d commits, %d changeset ids", phase, len(seen), n, len(ids))
			}
			_, head := headFiles(ctx, t, repo)
			for _, inst := range insts {
				if head["tools/"+inst+".yaml"] != toolFile(inst, "a tool the agent added to itself") {
					t.Errorf("%s: its file is not at the head", inst)
				}
			}
			// At once: the most of the 20 turns running at one moment.
			most := 0
			for _, a := range trs {
				at := 0
				for _, b := range trs {
					if b.EndedAt != nil && !b.StartedAt.After(a.StartedAt) && b.EndedAt.After(a.StartedAt) {
						at++
					}
				}
				most = max(most, at)
			}
			if most < 2 {
				t.Fatalf("no two of the %d turns ran at once", n)
			}
			t.Logf("FIGURE %d scripted agents' turns, one commit each, on the deployed turn function: all ended %s after the posts, up to %d at once",
				n, took.Round(time.Millisecond), most)
		})
	})
	if !ok {
		t.FailNow()
	}

	ok = t.Run("taken back: the bundle is as packaged", func(t *testing.T) {
		commitFiles(ctx, t, repo, packaged, "e2eaws: take back the changesets of "+e.run)
		if _, now := headFiles(ctx, t, repo); !maps.Equal(now, packaged) {
			t.Fatal("the active revision's files are not those before the agents' commits")
		}
	})
	if !ok {
		t.FailNow()
	}

	t.Run("agentauth bundle export from the AWS deployment: git log shows every commit", func(t *testing.T) {
		if err := <-built; err != nil {
			built <- err
			t.Fatal(err)
		}
		built <- nil
		to := filepath.Join(t.TempDir(), "bundle-history")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AGENTAUTH_") {
				env = append(env, kv) // AWS_*: the emulator's (TestMain)
			}
		}
		env = append(env, "AGENTAUTH_HOME="+t.TempDir(), "AGENTAUTH_TABLE="+st.TableName, "AGENTAUTH_KMS_KEY_ID="+st.KeyArn,
			"AGENTAUTH_QUEUE_URL="+st.QueueURL, "AGENTAUTH_SESSION_KEYS_SECRET="+st.SessionKeys, "AGENTAUTH_SECRET_PREFIX="+st.SecretPrefix,
			"AGENTAUTH_TURN_BUCKET="+st.TurnBucket, "AGENTAUTH_BUNDLE_REPO=s3://"+st.TurnBucket+"/"+bundlePrefix)
		cmd := exec.CommandContext(ctx, bin, "bundle", "export", "--to", to)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		head, _ := headFiles(ctx, t, repo)
		if err != nil || !strings.Contains(string(out), "active "+head) {
			t.Fatalf("agentauth bundle export: %v\n%s", err, out)
		}
		t.Logf("%s", bytes.TrimSpace(out))
		gitOut := func(args ...string) string {
			t.Helper()
			c := exec.CommandContext(ctx, "git", append([]string{"-C", to}, args...)...)
			c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			b, err := c.Output()
			if err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			return string(b)
		}
		if got := strings.TrimSpace(gitOut("rev-parse", "HEAD")); "git:"+got != head {
			t.Fatalf("the export's HEAD is %s, the stack's %s", got, head)
		}
		if merges := gitOut("rev-list", "--min-parents=2", "HEAD"); merges != "" {
			t.Fatalf("merge commits in the history:\n%s", merges)
		}
		gitOut("fsck", "--strict", "--no-dangling")
		messages := map[string]string{}
		for _, rec := range strings.Split(gitOut("log", "-z", "--format=%H%n%B"), "\x00") {
			if sha, msg, ok := strings.Cut(strings.TrimLeft(rec, "\n"), "\n"); ok {
				messages["git:"+sha] = msg
			}
		}
		e.mu.Lock()
		commits := slices.Clone(e.commits)
		e.mu.Unlock()
		if len(commits) < 2+2+1+20 {
			t.Fatalf("%d agent commits recorded, want at least 25", len(commits))
		}
		for _, c := range commits {
			msg, ok := messages[c.ref]
			if !ok {
				t.Errorf("%s (%s) is not in git log of the export", c.ref, c.instance)
				continue
			}
			lines := strings.Split(msg, "\n")
			for _, want := range []string{"Changeset-Id: " + c.changesetID, "Agentauth-Swarm: selfchange", "Agentauth-Instance: " + c.instance,
				"Agentauth-Agent: editor", "Agentauth-Turn: " + c.turn} {
				if !slices.Contains(lines, want) {
					t.Errorf("git log of %s lacks the trailer %q:\n%s", c.ref, want, msg)
				}
			}
			if !slices.ContainsFunc(lines, func(l string) bool { return len(l) > len("Trace-Id: ") && strings.HasPrefix(l, "Trace-Id: ") }) {
				t.Errorf("git log of %s has no Trace-Id:\n%s", c.ref, msg)
			}
		}
		t.Logf("git log of the export: %d commits, the %d of this run's agents each with its Changeset-Id, Agentauth-Instance and Agentauth-Turn",
			len(messages), len(commits))
	})
}
