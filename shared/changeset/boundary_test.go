package changeset_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// TestLimitsAtTheirBoundaries: a file of exactly MaxFileBytes, the
// MaxEdits-th file, a space in a path and a path of MaxPathBytes are
// taken; one byte, one file or one character more is refused; Log
// answers exactly n revisions.
func TestLimitsAtTheirBoundaries(t *testing.T) {
	ctx := context.Background()
	repo, recs := memBackends(t)
	if _, err := changeset.CommitTree(ctx, repo, changesettest.Seed(), "seed\n", time.Now()); err != nil {
		t.Fatal(err)
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: changesettest.Validate}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "i", Agent: "a"}, Policy: changesettest.Everyone}
	o, err := m.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	code := func(err error) string {
		var ce *changeset.Error
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	if got := code(m.WriteFile(ctx, c, o.ChangesetID, "notes/full.txt", []byte(strings.Repeat("x", changeset.MaxFileBytes)))); got != "" {
		t.Fatalf("a file of exactly MaxFileBytes: %s", got)
	}
	if got := code(m.WriteFile(ctx, c, o.ChangesetID, "notes/over.txt", []byte(strings.Repeat("x", changeset.MaxFileBytes+1)))); got != "E_FILE_TOO_LARGE" {
		t.Fatalf("one byte more: %s", got)
	}
	for _, tc := range []struct{ path, want string }{
		{"notes/a b.txt", ""},
		{"notes/" + strings.Repeat("p", changeset.MaxPathBytes-len("notes/")), ""},
		{"notes/" + strings.Repeat("p", changeset.MaxPathBytes-len("notes/")+1), "E_PATH_INVALID"},
		{"notes/a\x1fb.txt", "E_PATH_INVALID"},
		{"notes/a\x7fb.txt", "E_PATH_INVALID"},
		{"notes/a~b.txt", ""},
	} {
		if got := code(m.WriteFile(ctx, c, o.ChangesetID, tc.path, []byte("x"))); got != tc.want {
			t.Errorf("path %q: %q, want %q", tc.path, got, tc.want)
		}
	}
	// Up to MaxEdits files; the next new one is refused, another write of
	// one already changed is not.
	o2, err := m.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range changeset.MaxEdits {
		if got := code(m.WriteFile(ctx, c, o2.ChangesetID, fmt.Sprintf("notes/n%03d.txt", i), []byte("x"))); got != "" {
			t.Fatalf("file %d: %s", i+1, got)
		}
	}
	if got := code(m.WriteFile(ctx, c, o2.ChangesetID, "notes/one-more.txt", []byte("x"))); got != "E_CHANGESET_LIMIT" {
		t.Fatalf("file %d: %s", changeset.MaxEdits+1, got)
	}
	if got := code(m.WriteFile(ctx, c, o2.ChangesetID, "notes/n000.txt", []byte("y"))); got != "" {
		t.Fatalf("rewriting a changed file at the limit: %s", got)
	}
	// Log n.
	for _, n := range []int{1, 2} {
		if _, err := m.Commit(ctx, c, o2.ChangesetID, ""); err != nil {
			t.Fatal(err)
		}
		log, err := changeset.Log(ctx, repo, n)
		if err != nil || len(log) != n {
			t.Fatalf("Log(%d): %d entries, %v", n, len(log), err)
		}
	}
}

// TestCommitMessageKeepsItsLines: the agent's message keeps its line
// breaks and loses other control characters; trailer values stay on
// their line.
func TestCommitMessageKeepsItsLines(t *testing.T) {
	ctx := context.Background()
	repo, recs := memBackends(t)
	if _, err := changeset.CommitTree(ctx, repo, changesettest.Seed(), "seed\n", time.Now()); err != nil {
		t.Fatal(err)
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: changesettest.Validate}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "thread\x1b1\x7f", Agent: "a"}, TurnID: "t\n1", Policy: changesettest.Everyone}
	o, err := m.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WriteFile(ctx, c, o.ChangesetID, "tools/gamma.yaml", []byte(changesettest.Tool("gamma"))); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, c, o.ChangesetID, "add gamma\nbecause\x07 we need it\x7f"); err != nil {
		t.Fatal(err)
	}
	log, err := changeset.Log(ctx, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	msg := log[0].Message
	if !strings.HasPrefix(msg, "add gamma\nbecause  we need it \n\n") || !strings.Contains(msg, "Agentauth-Instance: thread 1 \n") ||
		!strings.Contains(msg, "Agentauth-Turn: t 1\n") {
		t.Fatalf("the message:\n%q", msg)
	}
}
