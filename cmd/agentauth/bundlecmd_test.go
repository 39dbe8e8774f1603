package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

func writeTree(t *testing.T, dir string, files []changeset.ImportFile) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBundleCommands walks the bundle commands as an operator would: a
// plain directory is told to init; import creates the repository and is
// idempotent; a changed source lands as a revision; log, show and diff
// read the history; revert undoes a revision with a new one.
func TestBundleCommands(t *testing.T) {
	home, dir, src := t.TempDir(), filepath.Join(t.TempDir(), "bundle"), t.TempDir()
	t.Setenv("AGENTAUTH_HOME", home)
	writeTree(t, src, changesettest.Seed())

	// A plain directory: log says what to do.
	writeTree(t, dir, changesettest.Seed())
	if _, _, err := runCmd(t, "bundle", "log", "--bundle", dir); err == nil || !strings.Contains(err.Error(), "agentauth bundle init --bundle "+dir) {
		t.Fatalf("log on a plain directory: %v", err)
	}
	out, _, err := runCmd(t, "bundle", "init", "--bundle", dir)
	if err != nil || !strings.Contains(out, "its first revision is git:") {
		t.Fatalf("init: %q %v", out, err)
	}
	if _, _, err := runCmd(t, "bundle", "init", "--bundle", dir); err == nil || !strings.Contains(err.Error(), "already a git repository") {
		t.Fatalf("init twice: %v", err)
	}

	// import into a directory that does not exist yet.
	repo := filepath.Join(t.TempDir(), "repo")
	out, _, err = runCmd(t, "bundle", "import", "--bundle", repo, "--from", src)
	if err != nil || !strings.Contains(out, "imported") || !strings.Contains(out, "4 added") {
		t.Fatalf("first import: %q %v", out, err)
	}
	out, _, err = runCmd(t, "bundle", "import", "--bundle", repo, "--from", src)
	if err != nil || !strings.Contains(out, "unchanged since its last import") {
		t.Fatalf("second import: %q %v", out, err)
	}
	writeTree(t, src, []changeset.ImportFile{{Path: "tools/gamma.yaml", Data: []byte(changesettest.Tool("gamma"))}})
	out, _, err = runCmd(t, "bundle", "import", "--bundle", repo, "--from", src)
	if err != nil || !strings.Contains(out, "1 added, 0 changed, 0 deleted") {
		t.Fatalf("import of a new file: %q %v", out, err)
	}
	writeTree(t, src, []changeset.ImportFile{{Path: "tools/bad.yaml", Data: []byte("kind: Tool\n")}})
	if _, _, err := runCmd(t, "bundle", "import", "--bundle", repo, "--from", src); err == nil || !strings.Contains(err.Error(), "would not load; nothing changed") ||
		!strings.Contains(err.Error(), "tools/bad.yaml") {
		t.Fatalf("import of an invalid bundle: %v", err)
	}
	if _, _, err := runCmd(t, "bundle", "import", "--bundle", repo); err == nil || !strings.Contains(err.Error(), "--from") {
		t.Fatalf("import without --from: %v", err)
	}

	out, _, err = runCmd(t, "bundle", "log", "--bundle", repo)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || !strings.HasPrefix(lines[0], "REVISION") || !strings.Contains(lines[1], "(active)") || !strings.Contains(lines[1], "import ") {
		t.Fatalf("log:\n%s %v", out, err)
	}
	out, _, err = runCmd(t, "bundle", "log", "--bundle", repo, "--json", "--n", "1")
	var e changeset.Entry
	if err != nil || json.Unmarshal([]byte(out), &e) != nil || !e.Active || e.Trailers.ImportTree == "" {
		t.Fatalf("log --json: %q %v", out, err)
	}
	out, _, err = runCmd(t, "bundle", "show", "--bundle", repo, "active")
	if err != nil || !strings.Contains(out, "(active)") || !strings.Contains(out, "added    tools/gamma.yaml") {
		t.Fatalf("show:\n%s %v", out, err)
	}
	out, _, err = runCmd(t, "bundle", "diff", "--bundle", repo, "active~1")
	if err != nil || !strings.Contains(out, "+++ b/tools/gamma.yaml") || !strings.Contains(out, "+  name: gamma") {
		t.Fatalf("diff:\n%s %v", out, err)
	}
	if _, _, err := runCmd(t, "bundle", "show", "--bundle", repo, "HEAD~1"); err == nil || !strings.Contains(err.Error(), "from active only") {
		t.Fatalf("show HEAD~1: %v", err)
	}
	out, _, err = runCmd(t, "bundle", "revert", "--bundle", repo, "--as", "alice", "active")
	if err != nil || !strings.Contains(out, "0 added, 0 changed, 1 deleted") {
		t.Fatalf("revert: %q %v", out, err)
	}
	out, _, err = runCmd(t, "bundle", "show", "--bundle", repo, "--json", "active")
	if err != nil || json.Unmarshal([]byte(out), &e) != nil || e.Trailers.Operator != "alice" || !strings.HasPrefix(e.Subject, "revert git:") {
		t.Fatalf("the revert's revision: %q %v", out, err)
	}
	if _, _, err := runCmd(t, "bundle", "revert", "--bundle", repo, "--as", "", "active"); err == nil || !strings.Contains(err.Error(), "--as") {
		t.Fatalf("revert without an operator: %v", err)
	}
}

// TestChangesetsDocCommands runs docs/changesets.md's operator commands
// (its sh block) on a repository with two revisions in place of
// .agentauth/bundle: each succeeds, and the revert lands.
func TestChangesetsDocCommands(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "changesets.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "```sh\n")
	if !ok {
		t.Fatal("docs/changesets.md has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	home, src, repo := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "bundle")
	t.Setenv("AGENTAUTH_HOME", home)
	writeTree(t, src, changesettest.Seed())
	if _, _, err := runCmd(t, "bundle", "import", "--bundle", repo, "--from", src); err != nil {
		t.Fatal(err)
	}
	writeTree(t, src, []changeset.ImportFile{{Path: "tools/gamma.yaml", Data: []byte(changesettest.Tool("gamma"))}})
	if _, _, err := runCmd(t, "bundle", "import", "--bundle", repo, "--from", src); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		words := strings.Fields(strings.NewReplacer(".agentauth/bundle", repo, "./bundle-history", filepath.Join(t.TempDir(), "history")).Replace(line))
		if len(words) < 2 || words[0] != "bin/agentauth" {
			t.Fatalf("not a command: %q", line)
		}
		out, _, err := runCmd(t, words[1:]...)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if words[2] == "revert" && !strings.Contains(out, "reverted git:") {
			t.Fatalf("%s: %q", line, out)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("%d commands in the block, want log, show, diff, revert and export", n)
	}
}

// TestBundleExport: export copies the history into a new local repository
// that the git command line reads (log with the trailers, a clean status,
// fsck), and exporting again copies only what is new.
func TestBundleExport(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git command on this machine")
	}
	home, src, repo, out := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "bundle"), filepath.Join(t.TempDir(), "export")
	t.Setenv("AGENTAUTH_HOME", home)
	writeTree(t, src, changesettest.Seed())
	if _, _, err := runCmd(t, "bundle", "import", "--bundle", repo, "--from", src); err != nil {
		t.Fatal(err)
	}
	msg, _, err := runCmd(t, "bundle", "export", "--bundle", repo, "--to", out)
	if err != nil || !strings.Contains(msg, "object(s) copied") {
		t.Fatalf("export: %q %v", msg, err)
	}
	writeTree(t, src, []changeset.ImportFile{{Path: "tools/gamma.yaml", Data: []byte(changesettest.Tool("gamma"))}})
	if _, _, err := runCmd(t, "bundle", "import", "--bundle", repo, "--from", src); err != nil {
		t.Fatal(err)
	}
	msg, _, err = runCmd(t, "bundle", "export", "--bundle", repo, "--to", out)
	// The second export: the new commit, its root tree, tools/ and gamma.
	if err != nil || !strings.Contains(msg, " 4 object(s) copied") {
		t.Fatalf("the second export: %q %v", msg, err)
	}
	git := func(args ...string) string {
		b, err := exec.Command(gitBin, append([]string{"-C", out}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	git("fsck", "--strict")
	if log := git("log", "--format=%s%n%b"); strings.Count(log, "import ") != 2 || !strings.Contains(log, "Agentauth-Import-Tree: ") {
		t.Fatalf("git log of the export:\n%s", log)
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Fatalf("git status of the export:\n%s", st)
	}
	if _, err := os.Stat(filepath.Join(out, "tools", "gamma.yaml")); err != nil {
		t.Fatalf("the export's working tree: %v", err)
	}
}
