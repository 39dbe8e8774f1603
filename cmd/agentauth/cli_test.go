package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/config"
)

// TestEveryCommandHelp (issue 18.5): `<command> --help`, `-h` and
// `help <command>` print that command's usage — its synopsis, what it
// does, every flag — to stdout, run nothing and succeed; so they do with
// an environment the command would refuse. (They were a usage error
// printing the command list to stderr.)
func TestEveryCommandHelp(t *testing.T) {
	t.Setenv(config.AllowPrivateUpstreams, "maybe") // a bad environment
	for _, c := range commands() {
		fs, _ := c.flags(&config.Config{})
		for _, how := range [][]string{{"--help"}, {"-h"}, {"-help"}} {
			args := append(strings.Fields(c.name), how...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				home := t.TempDir()
				if fs.Lookup("home") != nil {
					args = append(append(strings.Fields(c.name), "--home", home), how...)
				}
				out, errOut, err := runCmd(t, args...)
				if err != nil || errOut != "" {
					t.Fatalf("%v, stderr %q", err, errOut)
				}
				if !strings.HasPrefix(out, "usage: agentauth "+c.name) || !strings.Contains(strings.Join(strings.Fields(out), " "), capitalize(c.summary)) || strings.Contains(out, home) {
					t.Fatalf("not %s's usage:\n%s", c.name, out)
				}
				synopsis, flags, _ := strings.Cut(out, "\nflags:\n")
				fs.VisitAll(func(f *flag.Flag) {
					if !strings.Contains(synopsis, "--"+f.Name) || !strings.Contains("\n"+flags, "\n  --"+f.Name+" ") {
						t.Errorf("--%s is not in the usage:\n%s", f.Name, out)
					}
				})
				if entries, _ := os.ReadDir(home); len(entries) != 0 {
					t.Errorf("--help ran the command: the home holds %v", entries)
				}
			})
		}
		for _, how := range []string{"help", "--help"} {
			t.Run(how+" "+c.name, func(t *testing.T) {
				out, _, err := runCmd(t, append([]string{how}, strings.Fields(c.name)...)...)
				if err != nil || !strings.HasPrefix(out, "usage: agentauth "+c.name) {
					t.Fatalf("%v:\n%s", err, out)
				}
			})
		}
	}
	// The bad environment stops the command itself.
	if _, _, err := runCmd(t, "runtime-token", "--home", t.TempDir()); err == nil || !strings.Contains(err.Error(), config.AllowPrivateUpstreams) {
		t.Fatalf("runtime-token in a bad environment: %v", err)
	}
}

// TestGroupsListTheirCommands (issue 18.5): a group's name alone
// ("instances") is a usage error — exit 2, the group's commands on
// stderr, as `go mod` does and as a missing required flag is here —
// and with --help, -h or help before or after it, that list on stdout
// and exit 0. (Alone they were "unknown command".)
func TestGroupsListTheirCommands(t *testing.T) {
	groups := map[string][]string{}
	for _, c := range commands() {
		if g, v, ok := strings.Cut(c.name, " "); ok {
			groups[g] = append(groups[g], v)
		}
	}
	for _, g := range []string{"instances", "grants", "keys", "events", "sessions"} {
		verbs := groups[g]
		if len(verbs) == 0 {
			t.Fatalf("no group %s", g)
		}
		t.Run(g, func(t *testing.T) {
			out, _, err := runCmd(t, g)
			var ue usageError
			if !errors.As(err, &ue) || out != "" || !strings.Contains(ue.msg, g+": missing command") {
				t.Fatalf("%s alone: %v, stdout %q", g, err, out)
			}
			for _, v := range verbs {
				if !strings.Contains(ue.msg, v) || !strings.Contains(ue.usage, "agentauth "+g+" "+v) {
					t.Errorf("%s alone does not list %s: %q\n%s", g, v, ue.msg, ue.usage)
				}
			}
			for _, args := range [][]string{{g, "--help"}, {g, "-h"}, {g, "help"}, {"help", g}} {
				out, errOut, err := runCmd(t, args...)
				if err != nil || errOut != "" || out != ue.usage {
					t.Errorf("%v: %v %q\n%s", args, err, errOut, out)
				}
			}
			if _, _, err := runCmd(t, g, "frobnicate"); !errors.As(err, &ue) || !strings.Contains(ue.msg, `unknown command "`+g+` frobnicate"`) {
				t.Errorf("unknown %s command: %v", g, err)
			}
		})
	}
}

// TestUsageTexts: every flag of every command is in its usage, each
// value flag with the name of what it takes; every command is in the
// command list with its flags (the shared --home and --url are named in
// the section headings), exactly once; and README.md's "Admin commands"
// block is that list as `agentauth --help` prints it.
func TestUsageTexts(t *testing.T) {
	list, _, err := runCmd(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range sections {
		listed = append(listed, s.names...)
		for _, n := range s.names {
			if _, ok := lookup(commands(), n); !ok {
				t.Errorf("the command list names %q, which is no command", n)
			}
		}
	}
	for _, c := range commands() {
		if n := slices.Index(listed, c.name); n < 0 || slices.Index(listed[n+1:], c.name) >= 0 {
			t.Errorf("%s is in the command list %d times", c.name, strings.Count(strings.Join(listed, ","), c.name))
		}
		entry := c.usageLine("  ", false)
		if !strings.Contains(list, entry) {
			t.Errorf("the command list lacks %q", entry)
		}
		fs, _ := c.flags(&config.Config{})
		fs.VisitAll(func(f *flag.Flag) {
			name, text := flagDoc(f)
			_, isBool := f.Value.(interface{ IsBoolFlag() bool })
			if !isBool && (name == "" || name == "string" || name == "int" || name == "duration" || name == "value") {
				t.Errorf("%s --%s: its usage %q names no argument (`NAME`)", c.name, f.Name, f.Usage)
			}
			if text == "" {
				t.Errorf("%s --%s has no description", c.name, f.Name)
			}
			if !slices.Contains(sharedFlags, f.Name) && !strings.Contains(c.synopsis(false), "--"+f.Name) {
				t.Errorf("%s --%s is not in its synopsis %q", c.name, f.Name, c.synopsis(false))
			}
		})
		for _, line := range strings.Split(c.help(&config.Config{}), "\n") {
			if len([]rune(line)) > usageWidth && !strings.Contains(strings.TrimSpace(line), " ") {
				continue // one word longer than a line
			}
			if len([]rune(line)) > usageWidth {
				t.Errorf("%s --help: a line of %d columns: %q", c.name, len([]rune(line)), line)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "## Admin commands\n\n```\n$ agentauth --help\n"+list+"```\n") {
		t.Errorf("README.md's Admin commands block is not `agentauth --help`; it prints:\n%s", list)
	}
}

// TestPrintVersion (issue 18.5): the version the linker set wins over
// the module's, the commit and its time come from the VCS settings with
// "+ local changes" when the tree was modified, and the Go release is
// the running one.
func TestPrintVersion(t *testing.T) {
	goLine := "go        " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "262fe79c0ffee"}, {Key: "vcs.time", Value: "2026-11-24T10:00:02Z"}}
	for _, tc := range []struct {
		name, linked string
		bi           *debug.BuildInfo
		want         string
	}{
		{"linked version and a clean checkout", "v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124100002-262fe79c0ffe"}, Settings: vcs},
			"agentauth v1.4.0\ncommit    262fe79c0ffee (2026-11-24T10:00:02Z)\n" + goLine},
		{"the module's version, local changes", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124100002-262fe79c0ffe+dirty"},
			Settings: append(slices.Clone(vcs), debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			"agentauth v0.0.0-20261124100002-262fe79c0ffe+dirty\ncommit    262fe79c0ffee (2026-11-24T10:00:02Z) + local changes\n" + goLine},
		{"outside a checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"agentauth (devel)\ncommit    unknown (the build has no vcs.revision)\n" + goLine},
		{"no build info", "", nil, "agentauth (devel)\ncommit    unknown (the build has no vcs.revision)\n" + goLine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printVersion(&b, tc.linked, tc.bi); err != nil || b.String() != tc.want {
				t.Fatalf("%v\n%s\nwant\n%s", err, b.String(), tc.want)
			}
		})
	}
	out, _, err := runCmd(t, "version")
	if err != nil || !strings.HasPrefix(out, "agentauth ") || !strings.HasSuffix(out, goLine) {
		t.Fatalf("version: %v %q", err, out)
	}
	if again, _, err := runCmd(t, "--version"); err != nil || again != out {
		t.Fatalf("--version: %v %q, want %q", err, again, out)
	}
}

// builtCLI is the agentauth binary built once from this checkout, with
// VCS stamping on (whatever GOFLAGS says) and main.version set as
// `go build -ldflags -X` sets it.
var builtCLI = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "agentauth-cli-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "agentauth")
	cmd := exec.Command("go", "build", "-buildvcs=true", "-ldflags", "-X main.version=v0.18.0-test", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

// cli builds the binary, or skips where no go and git can (-short).
func cli(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the binary")
	}
	for _, tool := range []string{"go", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	bin, err := builtCLI()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// TestBinaryVersionAndExitCodes (issue 18.5): the built binary says the
// version it was linked with and the commit it was built from; --help
// exits 0 with the usage on stdout, a group alone or a bad flag 2 with
// it on stderr.
func TestBinaryVersionAndExitCodes(t *testing.T) {
	bin := cli(t)
	head := func() string {
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Skipf("git rev-parse: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	before := head()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// What Go stamped into the binary is what it must say.
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	_ = printVersion(&want, "v0.18.0-test", bi)
	if string(out) != want.String() || !strings.HasPrefix(string(out), "agentauth v0.18.0-test\n") {
		t.Fatalf("version:\n%s\nwant\n%s", out, want.String())
	}
	revision := ""
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	switch {
	case revision == "":
		// Go does not stamp a git worktree's builds (its .git is a file).
		t.Logf("this checkout's builds carry no vcs.revision; version says %q", strings.Split(string(out), "\n")[1])
	case revision != before && revision != head(): // others may commit meanwhile
		t.Fatalf("stamped revision %s, HEAD %s", revision, before)
	}

	for _, tc := range []struct {
		args         []string
		code         int
		stdout, says string // what stdout starts with; what stderr holds
	}{
		{[]string{"--help"}, 0, "agentauth — ", ""},
		{[]string{"send", "--help"}, 0, "usage: agentauth send ", ""},
		{[]string{"instances", "events", "-h"}, 0, "usage: agentauth instances events ", ""},
		{[]string{"instances", "--help"}, 0, "usage: agentauth instances <command>", ""},
		{[]string{"instances"}, 2, "", "instances: missing command"},
		{[]string{"keys"}, 2, "", "agentauth keys rotate"},
		{[]string{"send", "--nope"}, 2, "", "usage: agentauth send "},
		{[]string{}, 2, "", "usage: agentauth <command>"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) || tc.stdout == "" && stdout.Len() != 0 ||
				!strings.Contains(stderr.String(), tc.says) || tc.says == "" && stderr.Len() != 0 {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
		})
	}
}

// TestBinaryServeShowsItsVersion: serve gives GET / the version the
// binary was linked with.
func TestBinaryServeShowsItsVersion(t *testing.T) {
	bin := cli(t)
	home, bundleDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bundleDir, "bench.yaml"), []byte(benchBundle), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--bundle", bundleDir, "--home", home, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), config.RuntimeToken+"=", config.JWKSURL+"=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	base := ""
	for base == "" && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "agentauth listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if base == "" {
		t.Fatal("serve did not say where it listens")
	}
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var about struct{ Version string }
	if err := json.NewDecoder(resp.Body).Decode(&about); err != nil || about.Version != "v0.18.0-test" {
		t.Fatalf("GET /: %d %+v %v", resp.StatusCode, about, err)
	}
}
