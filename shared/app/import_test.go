package app

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/local/bundlerepo"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// packaged writes files as a function package's bundle directory.
func packaged(t *testing.T, files []changeset.ImportFile) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gitBackends are backends whose git bundle is an empty repository (the
// local one: ImportPackaged sees only the Repo port, as on AWS).
func gitBackends(t *testing.T) (*Backends, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := bundlerepo.InitEmpty(dir); err != nil {
		t.Fatal(err)
	}
	return &Backends{Changesets: openRepo(t, dir), Secrets: bundle.DirSecrets{Dir: t.TempDir()}}, dir
}

func openRepo(t *testing.T, dir string) *Changesets {
	t.Helper()
	repo, err := bundlerepo.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Changesets{Repo: repo, Describe: "git " + dir}
}

// TestImportPackaged: a cold start imports the packaged bundle — the
// first commit of an empty repository, unchanged after, merged with what
// agents committed; a conflict or a result that would not load is logged
// and the active revision runs; with no revision at all it is an error.
func TestImportPackaged(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	be, _ := gitBackends(t)
	seed := changesettest.Seed()
	cfg := config.Config{BundleDir: packaged(t, seed)}
	if err := ImportPackaged(ctx, cfg, be, true, log); err != nil {
		t.Fatal(err)
	}
	entries, err := changeset.Log(ctx, be.Changesets.Repo, 10)
	if err != nil || len(entries) != 1 || entries[0].Parent != "" || entries[0].Trailers.ImportTree == "" {
		t.Fatalf("after the first import: %+v, %v", entries, err)
	}
	if err := ImportPackaged(ctx, cfg, be, true, log); err != nil || !strings.Contains(logs.String(), `"status":"unchanged"`) {
		t.Fatalf("again: %v\n%s", err, logs.String())
	}
	// An agent's commit (another file) and a new package (a new tool):
	// both stay.
	agent := append(append([]changeset.ImportFile(nil), seed...), changeset.ImportFile{Path: "tools/agent.yaml", Data: []byte(changesettest.Tool("agent"))})
	if _, err := changeset.CommitTree(ctx, be.Changesets.Repo, agent, "an agent's commit", time.Now()); err != nil {
		t.Fatal(err)
	}
	next := append(append([]changeset.ImportFile(nil), seed...), changeset.ImportFile{Path: "tools/deploy.yaml", Data: []byte(changesettest.Tool("deploy"))})
	cfg.BundleDir = packaged(t, next)
	if err := ImportPackaged(ctx, cfg, be, true, log); err != nil {
		t.Fatal(err)
	}
	b, err := changeset.NewBundles(be.Changesets.Repo, loader(bundle.Options{}, true)).Head(ctx)
	if err != nil || b.Tools["seed:agent"] == nil || b.Tools["seed:deploy"] == nil {
		t.Fatalf("merged head: %v, %v", b, err)
	}
	// The same lines changed on both sides: logged, nothing changes.
	clash := func(desc string) []changeset.ImportFile {
		out := append([]changeset.ImportFile(nil), next...)
		out = append(out, changeset.ImportFile{Path: "tools/agent.yaml", Data: []byte(strings.Replace(changesettest.Tool("agent"), "The agent tool.", desc, 1))})
		return out
	}
	if _, err := changeset.CommitTree(ctx, be.Changesets.Repo, clash("Agents say so."), "an agent's edit", time.Now()); err != nil {
		t.Fatal(err)
	}
	head, _ := be.Changesets.Repo.Head(ctx)
	logs.Reset()
	cfg.BundleDir = packaged(t, clash("The deploy says otherwise."))
	if err := ImportPackaged(ctx, cfg, be, true, log); err != nil {
		t.Fatalf("a conflict stops the start: %v", err)
	}
	if now, _ := be.Changesets.Repo.Head(ctx); now != head || !strings.Contains(logs.String(), "packaged bundle not imported; running the active revision") ||
		!strings.Contains(logs.String(), "tools/agent.yaml") {
		t.Fatalf("conflict: head moved %v\n%s", now != head, logs.String())
	}
	// A package that would not load: logged, the active revision runs.
	cfg.BundleDir = packaged(t, append(append([]changeset.ImportFile(nil), next...), changeset.ImportFile{Path: "tools/bad.yaml", Data: []byte("kind: Tool\n")}))
	if err := ImportPackaged(ctx, cfg, be, true, log); err != nil {
		t.Fatal(err)
	}
	// An empty repository and a package that would not load: nothing to
	// run.
	empty, _ := gitBackends(t)
	if err := ImportPackaged(ctx, cfg, empty, true, log); err == nil || !strings.Contains(err.Error(), "import the packaged bundle") {
		t.Fatalf("empty repository, bad package: %v", err)
	}
	// No git bundle: nothing to do.
	if err := ImportPackaged(ctx, cfg, &Backends{}, true, log); err != nil {
		t.Fatal(err)
	}
}

// TestImportPackagedConcurrentColdStarts: functions starting at once on
// one empty repository (each its own handle, as Lambdas are) all start;
// the package lands once, as the first commit.
func TestImportPackagedConcurrentColdStarts(t *testing.T) {
	ctx := context.Background()
	_, dir := gitBackends(t)
	cfg := config.Config{BundleDir: packaged(t, changesettest.Seed())}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be := &Backends{Changesets: openRepo(t, dir), Secrets: bundle.DirSecrets{Dir: t.TempDir()}}
			errs[i] = ImportPackaged(ctx, cfg, be, true, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	entries, err := changeset.Log(ctx, openRepo(t, dir).Repo, 10)
	if err != nil || len(entries) != 1 {
		t.Fatalf("history: %d entries, %v", len(entries), err)
	}
}

// countingRepo counts the objects written to a repository.
type countingRepo struct {
	changeset.Repo
	objs *countingObjects
}

func (r countingRepo) Objects() storer.EncodedObjectStorer { return r.objs }

type countingObjects struct {
	storer.EncodedObjectStorer
	mu     sync.Mutex
	writes int
}

func (c *countingObjects) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.EncodedObjectStorer.SetEncodedObject(o)
}

// TestImportPackagedWritesOnlyWhatLands: a cold start that finds its
// package imported, or whose import conflicts, writes no object (on S3:
// no PutObject per package file); one that lands writes its blobs, trees
// and commit before the ref moves.
func TestImportPackagedWritesOnlyWhatLands(t *testing.T) {
	ctx := context.Background()
	be, _ := gitBackends(t)
	objs := &countingObjects{EncodedObjectStorer: be.Changesets.Repo.Objects()}
	be.Changesets.Repo = countingRepo{Repo: be.Changesets.Repo, objs: objs}
	seed := changesettest.Seed()
	cfg := config.Config{BundleDir: packaged(t, seed)}
	if err := ImportPackaged(ctx, cfg, be, true, nil); err != nil {
		t.Fatal(err)
	}
	// 4 blobs, 2 trees (root, tools/), 1 commit.
	if objs.writes != 7 {
		t.Fatalf("first import wrote %d objects, want 7", objs.writes)
	}
	head, _ := be.Changesets.Repo.Head(ctx)
	if _, err := changeset.BundleFiles(be.Changesets.Repo, head); err != nil {
		t.Fatalf("the landed revision reads back: %v", err)
	}
	for i := range 3 {
		objs.writes = 0
		if err := ImportPackaged(ctx, cfg, be, true, nil); err != nil || objs.writes != 0 {
			t.Fatalf("cold start %d on an imported package wrote %d objects (%v)", i+2, objs.writes, err)
		}
	}
	// A conflicting package writes nothing either.
	clash := func(desc string) []changeset.ImportFile {
		return append(slices.Clone(seed), changeset.ImportFile{Path: "tools/x.yaml", Data: []byte(strings.Replace(changesettest.Tool("x"), "The x tool.", desc, 1))})
	}
	if _, err := changeset.CommitTree(ctx, be.Changesets.Repo, clash("Agents say so."), "an agent's edit", time.Now()); err != nil {
		t.Fatal(err)
	}
	objs.writes = 0
	cfg.BundleDir = packaged(t, clash("The deploy says otherwise."))
	if err := ImportPackaged(ctx, cfg, be, true, nil); err != nil || objs.writes != 0 {
		t.Fatalf("a conflicting import wrote %d objects (%v)", objs.writes, err)
	}
}
