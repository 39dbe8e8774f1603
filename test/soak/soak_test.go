package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// moduleRoot is the repository root: two levels up from test/soak.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// TestSoakAgainstARealServer runs the soak for a few seconds, with a
// short interval and idle period, against `agentauth serve` built from
// this tree: it prints its sample lines, the slopes, the totals and the
// idle levels, and every route of the mix answers. The verdict itself is
// not checked: a few seconds of samples judge nothing.
func TestSoakAgainstARealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and serves agentauth for about 10 s")
	}
	bin := filepath.Join(t.TempDir(), "agentauth")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentauth")
	build.Dir = moduleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build agentauth: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"--bin", bin, "--duration", "4s", "--interval", "1s", "--baseline", "500ms", "--idle", "2s",
		"--instances", "40", "--consent-subjects", "10"}, &out)
	t.Logf("soak output:\n%s", out.String())
	var verdict verdictError
	if err != nil && !errors.As(err, &verdict) {
		t.Fatalf("soak: %v", err)
	}
	for _, r := range verdict.reasons {
		if strings.Contains(r, "requests failed") || strings.Contains(r, "no successful request") {
			t.Errorf("a route of the mix failed: %s", r)
		}
	}
	got := out.String()
	samples := regexp.MustCompile(`(?m)^soak +\d+s cpu +[0-9.]+% rss +[0-9.]+MiB threads +\d+ goroutines +\d+ heap +[0-9.]+MiB fds +\d+ home +\d+ files .*\| token\.ready [0-9.]+/[0-9.]+×\d+ .* turn\.sse .* mcp\.tools/call `)
	if n := len(samples.FindAllString(got, -1)); n < 3 {
		t.Errorf("%d sample lines with every kind of load, want at least 3", n)
	}
	for _, want := range []string{
		"NOT a language model",
		"its /debug/vars and /debug/pprof on 127.0.0.1:",
		"soak: serve runs with AGENTAUTH_SESSION_RETENTION=5m and AGENTAUTH_QUEUE_DEDUP_WINDOW=5m so that a one-hour run reaches steady state",
		"the files under the home are NOT judged in this run",
		"soak: baseline (500ms idle before the load): cpu",
		"soak: slopes per hour",
		"cpu (% of a core)", "rss (MiB)", "goroutines", "heap in use (MiB)", "threads", "open files (fds)", "files under home", "turn.sse p50 ms",
		"soak: requests over the load (ok / failed): token.ready ",
		"levels vs the pre-load baseline",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if err == nil && !strings.Contains(got, "soak: PASS") {
		t.Error("no error and no PASS line")
	}
}

// TestMakeSoakIsTheDocumentedCommand keeps README.md's `make soak` true:
// the Makefile's recipe builds and runs this program with flags it has,
// SOAK_DURATION and SOAK_ARGS reach it, and the flags the README names
// exist.
func TestMakeSoakIsTheDocumentedCommand(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const documented = "make soak SOAK_DURATION=2m"
	i := bytes.Index(readme, []byte(documented))
	if i < 0 {
		t.Fatalf("README.md does not document %q", documented)
	}
	para := string(readme[i:])
	para = para[:strings.Index(para, "\n\n")]
	var o options
	fs := o.flags()
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(para, -1) {
		if fs.Lookup(m[1]) == nil {
			t.Errorf("README.md names --%s, which the soak does not have", m[1])
		}
	}

	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	for _, tc := range []struct {
		vars  []string
		check func(options) bool
	}{
		{[]string{"SOAK_DURATION=2m"}, func(o options) bool { return o.duration == 2*time.Minute && o.bin == "bin/agentauth" }},
		{nil, func(o options) bool { return o.duration == 10*time.Minute }},
		{[]string{"SOAK_ARGS=--turn-rate 20 --idle 30s"}, func(o options) bool { return o.mix.turnRate == 20 && o.idle == 30*time.Second }},
	} {
		cmd := exec.Command("make", append([]string{"-n", "--no-print-directory", "soak"}, tc.vars...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n soak %v: %v\n%s", tc.vars, err, out)
		}
		if !strings.Contains(string(out), "build -o bin/soak ./test/soak") {
			t.Errorf("make -n soak %v does not build ./test/soak:\n%s", tc.vars, out)
		}
		var args []string
		for _, line := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(line, "bin/soak "); ok {
				args = strings.Fields(rest)
			}
		}
		if args == nil {
			t.Fatalf("make -n soak %v runs no bin/soak:\n%s", tc.vars, out)
		}
		o, err := parseOptions(args)
		if err != nil || !tc.check(o) {
			t.Errorf("make -n soak %v runs bin/soak %q: %v, options %+v", tc.vars, args, err, o)
		}
	}
}
