package bundlerepo

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// emptyRepo is a fresh repository on branch main with no commit
// (InitEmpty), and records under another directory (the home).
func emptyRepo(tb testing.TB) (changeset.Repo, changeset.Records) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "bundle")
	if err := InitEmpty(dir); err != nil {
		tb.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	recs, err := NewRecords(filepath.Join(tb.TempDir(), "home", "changesets"))
	if err != nil {
		tb.Fatal(err)
	}
	return r, recs
}

func TestConformance(t *testing.T) {
	changesettest.Run(t, func(t *testing.T) (changeset.Repo, changeset.Records) { return emptyRepo(t) })
}

// TestGitReadsTheHistory: the git command line checks the repository a
// changeset committed to (fsck --strict) and its log shows the commit
// with its trailers; a ref git itself moved is what Head reads next.
func TestGitReadsTheHistory(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git command on this machine")
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range changesettest.Seed() {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f.Path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Path), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first, err := Init(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := NewRecords(filepath.Join(t.TempDir(), "changesets"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := &changeset.Manager{Repo: r, Records: recs, Validate: changesettest.Validate}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "default", Instance: "thread-1", Agent: "assistant"}, TurnID: "turn-1", Policy: changesettest.Everyone}
	o, err := m.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if o.BaseRef != changeset.Ref(first) {
		t.Fatalf("base %s, want the first commit %s", o.BaseRef, first)
	}
	if err := m.WriteFile(ctx, c, o.ChangesetID, "tools/gamma.yaml", []byte(changesettest.Tool("gamma"))); err != nil {
		t.Fatal(err)
	}
	res, err := m.Commit(ctx, c, o.ChangesetID, "add gamma")
	if err != nil || res.Status != changeset.StatusOK {
		t.Fatalf("%+v %v", res, err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(gitBin, append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("fsck", "--strict")
	log := run("log", "--format=%H%n%an <%ae>%n%B")
	for _, want := range []string{strings.TrimPrefix(res.NewRef, changeset.RefPrefix), "agent assistant <assistant@default.agents.agentauth.invalid>",
		"add gamma", "Changeset-Id: " + o.ChangesetID, "Agentauth-Instance: thread-1", "the bundle as agentauth found it"} {
		if !strings.Contains(log, want) {
			t.Errorf("git log lacks %q:\n%s", want, log)
		}
	}
	if got := run("show", "HEAD:tools/gamma.yaml"); got != changesettest.Tool("gamma") {
		t.Fatalf("git show: %q", got)
	}
	// The working tree and the index follow the commit: git sees nothing
	// to commit, and the new file is on disk.
	if st := run("status", "--porcelain"); st != "" {
		t.Fatalf("git status after a changeset landed:\n%s", st)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "tools", "gamma.yaml")); err != nil || string(data) != changesettest.Tool("gamma") {
		t.Fatalf("the working file: %q %v", data, err)
	}
	// A file changed by hand stays as it is when a changeset changes
	// another, and when one changes it too.
	hand := strings.Replace(changesettest.Tool("alpha"), "The alpha tool.", "Alpha, by hand.", 1)
	if err := os.WriteFile(filepath.Join(dir, "tools", "alpha.yaml"), []byte(hand), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, edit := range []struct{ path, data string }{
		{"tools/beta.yaml", strings.Replace(changesettest.Tool("beta"), "The beta tool.", "Beta, by a changeset.", 1)},
		{"tools/alpha.yaml", strings.Replace(changesettest.Tool("alpha"), "The alpha tool.", "Alpha, by a changeset.", 1)},
	} {
		o, err := m.Open(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.WriteFile(ctx, c, o.ChangesetID, edit.path, []byte(edit.data)); err != nil {
			t.Fatal(err)
		}
		if r, err := m.Commit(ctx, c, o.ChangesetID, "edit "+edit.path); err != nil || r.Status != changeset.StatusOK {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if st := run("status", "--porcelain"); st != " M tools/alpha.yaml\n" {
		t.Fatalf("git status with a file changed by hand:\n%q", st)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "tools", "alpha.yaml")); string(data) != hand {
		t.Fatalf("the hand-edited file was overwritten: %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "tools", "beta.yaml")); !strings.Contains(string(data), "Beta, by a changeset.") {
		t.Fatalf("the other file did not follow: %q", data)
	}
	rep, err := r.Sync()
	if err != nil || strings.Join(rep.Dirty, ",") != "tools/alpha.yaml" || len(rep.Updated) != 0 {
		t.Fatalf("sync: %+v %v", rep, err)
	}
	// Dropping the hand edit gives the active revision's file.
	run("checkout", "--", "tools/alpha.yaml")
	if data, _ := os.ReadFile(filepath.Join(dir, "tools", "alpha.yaml")); !strings.Contains(string(data), "Alpha, by a changeset.") {
		t.Fatalf("after git checkout: %q", data)
	}
	if rep, err := r.Sync(); err != nil || len(rep.Updated) != 0 || len(rep.Dirty) != 0 {
		t.Fatalf("sync after the hand edit was dropped: %+v %v", rep, err)
	}
	if st := run("status", "--porcelain"); st != "" {
		t.Fatalf("git status at the end:\n%s", st)
	}
	// git moves the branch; Head follows, and a swap from the stale value
	// loses.
	run("-c", "user.name=op", "-c", "user.email=op@example.com", "commit", "--allow-empty", "-q", "-m", "by hand")
	h, err := r.Head(ctx)
	if err != nil || changeset.Ref(h) == res.NewRef {
		t.Fatalf("head after git commit: %s %v", h, err)
	}
	stale, _ := changeset.ParseRef(res.NewRef)
	if err := r.SwapHead(ctx, stale, first); !errors.Is(err, changeset.ErrHeadMoved) {
		t.Fatalf("a swap from a stale head: %v", err)
	}
}

// TestSwapHeadLock: a lock file another writer holds makes SwapHead wait
// and fail with what to do; one a crash left (older than staleLock) is
// taken over.
func TestSwapHeadLock(t *testing.T) {
	repo, _ := emptyRepo(t)
	r := repo.(*Repo)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	lock := filepath.Join(r.gitDir, "refs", "heads", "main.lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := changeset.CommitTree(context.Background(), noSwap{r}, changesettest.Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SwapHead(ctx, plumbing.ZeroHash, c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("under a held lock: %v", err)
	}
	old := time.Now().Add(-2 * staleLock)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	if err := r.SwapHead(context.Background(), plumbing.ZeroHash, c); err != nil {
		t.Fatalf("over a stale lock: %v", err)
	}
	if h, _ := r.Head(context.Background()); h != c {
		t.Fatalf("head %s, want %s", h, c)
	}
	if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the lock file is left: %v", err)
	}
}

// noSwap writes objects but never moves the ref (the test moves it).
type noSwap struct{ *Repo }

func (noSwap) SwapHead(context.Context, plumbing.Hash, plumbing.Hash) error { return nil }

// TestSyncIndexLock: a fresh index.lock (a git command) makes Sync skip
// and say why; one a crash left (older than staleLock) is taken over and
// the working tree catches up.
func TestSyncIndexLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := InitEmpty(dir); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := changeset.CommitTree(context.Background(), r, changesettest.Seed(), "seed\n", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tools", "alpha.yaml")); err == nil {
		t.Fatal("the working tree followed under a held index.lock")
	}
	if rep, err := r.Sync(); err != nil || !strings.Contains(rep.Skipped, "index.lock is held") {
		t.Fatalf("sync under a fresh lock: %+v %v", rep, err)
	}
	old := time.Now().Add(-2 * staleLock)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Sync()
	if err != nil || rep.Skipped != "" || len(rep.Updated) != len(changesettest.Seed()) {
		t.Fatalf("sync over a stale lock: %+v %v", rep, err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "tools", "alpha.yaml")); err != nil || string(data) != changesettest.Tool("alpha") {
		t.Fatalf("the working tree after the takeover: %q %v", data, err)
	}
	if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the lock is left: %v", err)
	}
}

// A sync killed between a file's temporary copy and its rename leaves the
// copy in the working tree; the next sync removes it (and nothing of the
// person's: a hidden file of their own stays).
func TestSyncRemovesACrashedWritesCopy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := InitEmpty(dir); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := changeset.CommitTree(context.Background(), r, changesettest.Seed(), "seed\n", time.Now()); err != nil {
		t.Fatal(err)
	}
	copyLeft := filepath.Join(dir, "tools", ".beta.yaml.tmp-0123456789abcdef")
	mine := filepath.Join(dir, "tools", ".notes")
	for _, f := range []string{copyLeft, mine} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyLeft); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the crashed write's copy is still there: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("a hidden file of the person's is gone: %v", err)
	}
}
