package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/config"
)

// On a local home the command refuses, saying why: serve builds the
// home's list index.
func TestBackfillListIndexRefusesAHome(t *testing.T) {
	t.Setenv(config.Table, "")
	t.Setenv("AGENTAUTH_HOME", t.TempDir())
	_, _, err := runCmd(t, "admin", "backfill-list-index")
	var ue usageError
	if err == nil || errors.As(err, &ue) ||
		!strings.Contains(err.Error(), "the home's list index is built by serve itself; this command is for the AWS table") {
		t.Fatalf("on a home: %v", err)
	}
}

// fakeBackfill reports pages of progress, pausing between them, then
// returns what it was given.
type fakeBackfill struct {
	pages      []dynamostore.BackfillProgress
	pause      time.Duration
	n          int
	bad        []error
	err        error
	gotBlobs   dynamostore.Blobs
	calledWith bool
}

func (f *fakeBackfill) BackfillListIndexProgress(ctx context.Context, blobs dynamostore.Blobs, progress func(dynamostore.BackfillProgress)) (int, []error, error) {
	f.calledWith, f.gotBlobs = true, blobs
	for _, p := range f.pages {
		progress(p)
		time.Sleep(f.pause)
	}
	return f.n, f.bad, f.err
}

var progressLine = regexp.MustCompile(`^backfill-list-index: \d+ items examined, \d+ set, \d+ unreadable so far$`)

func TestBackfillListIndexOutput(t *testing.T) {
	pages := []dynamostore.BackfillProgress{
		{Examined: 100}, {Examined: 100, Set: 1}, {Examined: 200, Set: 1, Unreadable: []string{"grant#grant-bad"}},
		{Examined: 300, Set: 2, Unreadable: []string{"grant#grant-bad"}},
	}
	cases := []struct {
		name    string
		fake    fakeBackfill
		wantOut string
		wantErr string
	}{
		{name: "all set", fake: fakeBackfill{pages: pages[:2], n: 1},
			wantOut: "set the list attributes on 1 item (100 examined)\n"},
		{name: "one unreadable", fake: fakeBackfill{pages: pages, n: 2, bad: []error{errors.New("dynamostore: backfill list index: item \"grant#grant-bad\": corrupt record")}},
			wantOut: "set the list attributes on 2 items (300 examined)\nunreadable: grant#grant-bad\n",
			wantErr: "1 item could not be read, and the console does not list it (keys above)"},
		{name: "the scan fails", fake: fakeBackfill{pages: pages[:2], n: 1, err: errors.New("dynamostore: backfill list index: throttled")},
			wantErr: "stopped after 100 items examined, 1 set: dynamostore: backfill list index: throttled (run it again to finish"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.fake.pause = 15 * time.Millisecond
			var out, errb bytes.Buffer
			err := backfillListIndex(context.Background(), &tc.fake, nil, 5*time.Millisecond, stdio{out: &out, err: &errb})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if out.String() != tc.wantOut {
				t.Errorf("stdout %q, want %q", out.String(), tc.wantOut)
			}
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			if errb.Len() == 0 {
				t.Error("no progress line over pauses of 3 intervals each")
			}
			for _, l := range lines {
				if !progressLine.MatchString(l) {
					t.Errorf("progress line %q", l)
				}
			}
			if !tc.fake.calledWith || tc.fake.gotBlobs != nil {
				t.Errorf("called %v with blobs %v", tc.fake.calledWith, tc.fake.gotBlobs)
			}
		})
	}
}

// The progress goes out at least every backfillEvery, however long a
// page takes: a ticker, not the pages, paces it.
func TestBackfillProgressInterval(t *testing.T) {
	if backfillEvery > 5*time.Second {
		t.Fatalf("progress every %s, want at most 5s", backfillEvery)
	}
	f := &fakeBackfill{pages: []dynamostore.BackfillProgress{{Examined: 7}}, pause: 150 * time.Millisecond}
	var out, errb bytes.Buffer
	if err := backfillListIndex(context.Background(), f, nil, 10*time.Millisecond, stdio{out: &out, err: &errb}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(errb.String(), "backfill-list-index: 7 items examined, 0 set, 0 unreadable so far\n"); n < 3 {
		t.Fatalf("%d progress lines during one 150ms page at 10ms:\n%s", n, errb.String())
	}
}

// listIndexDocCommands are the agentauth commands of docs/deploy.md's
// "Upgrading a stack: the list indexes" section (the infra tests
// synthesize its cdk deploys).
func listIndexDocCommands(t *testing.T) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(raw), "\n## Upgrading a stack: the list indexes\n")
	if !ok {
		t.Fatal("docs/deploy.md has no section \"Upgrading a stack: the list indexes\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var cmds [][]string
	for {
		_, rest, ok := strings.Cut(sec, "```sh\n")
		if !ok {
			break
		}
		block, after, _ := strings.Cut(rest, "```")
		for _, l := range strings.Split(block, "\n") {
			if w := strings.Fields(l); len(w) > 0 && w[0] == "agentauth" {
				cmds = append(cmds, w[1:])
			}
		}
		sec = after
	}
	if len(cmds) != 1 || strings.Join(cmds[0], " ") != "admin backfill-list-index" {
		t.Fatalf("the section's agentauth commands: %q, want admin backfill-list-index", cmds)
	}
	return cmds
}

// The documented command, on a home, refuses (the emulator test runs it on
// a table).
func TestListIndexDocCommandOnAHome(t *testing.T) {
	t.Setenv(config.Table, "")
	t.Setenv("AGENTAUTH_HOME", t.TempDir())
	for _, args := range listIndexDocCommands(t) {
		if _, _, err := runCmd(t, args...); err == nil || !strings.Contains(err.Error(), "this command is for the AWS table") {
			t.Fatalf("%q: %v", args, err)
		}
	}
}
