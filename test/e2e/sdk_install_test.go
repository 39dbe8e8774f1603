package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// TestSDKPackagesInstall runs the README's SDK install block as a user
// does, from the root of a checkout (the SDKs' files as git has them) — `pip install ./sdk/python` (the pip
// of a fresh virtual environment first on PATH), `npm ci && npm pack` in
// sdk/typescript, the two exports — then installs the tarball it made into
// an empty npm project and imports each SDK where it was installed: the
// packages carry what a user needs (the typed marker, the compiled ESM
// with its declarations), their version is the project's (VERSION), and a
// client prints no token. The suites run the SDKs from their source trees;
// this is what a user installs.
func TestSDKPackagesInstall(t *testing.T) {
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(b))
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- test/e2e runs this: sdk-install -->\n```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no block marked `test/e2e runs this: sdk-install`")
	}
	block := string(m[1])
	// The block's comment names the tarball npm pack makes: the version's.
	if want := "agentauth-client-" + version + ".tgz"; !strings.Contains(block, want) {
		t.Errorf("README.md's sdk-install block does not name %s, the tarball npm pack makes at VERSION %s", want, version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	venv := filepath.Join(tmp, "venv")
	env := e2ekit.SDKEnv("PIP_DISABLE_PIP_VERSION_CHECK=1", "npm_config_fund=false", "npm_config_audit=false", "npm_config_update_notifier=false",
		"PATH="+filepath.Join(venv, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"), "AGENTAUTH_HOME="+filepath.Join(tmp, "home"))
	run := func(t *testing.T, dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(t, root, "python3", "-m", "venv", venv)
	// A checkout of the SDKs as git has them (no node_modules, no build
	// output), so the block's npm ci never touches the working tree's.
	checkout := filepath.Join(tmp, "checkout")
	files := strings.Fields(run(t, root, "git", "ls-files", "sdk"))
	if len(files) == 0 {
		t.Fatal("git ls-files sdk: nothing")
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(filepath.Join(root, f))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(checkout, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(checkout, f), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	tgz := filepath.Join(checkout, "sdk", "typescript", "agentauth-client-"+version+".tgz")
	// The block as written, from the checkout's root, with bin/agentauth
	// where the README has it (make run builds it; this package's
	// TestMain built its own).
	script := strings.ReplaceAll(block, "$(bin/agentauth ", "$("+agentauthBin+" ")
	out := run(t, checkout, "bash", "-euo", "pipefail", "-c", script+`
echo "AGENTAUTH_URL=$AGENTAUTH_URL"; [ -n "$AGENTAUTH_RUNTIME_TOKEN" ] && echo "runtime token set"`)
	if !strings.Contains(out, "AGENTAUTH_URL=http://127.0.0.1:8080") || !strings.Contains(out, "runtime token set") {
		t.Fatalf("the README's block did not set what it says:\n%s", out)
	}

	py := filepath.Join(venv, "bin", "python")
	got := run(t, t.TempDir(), py, "-c", `import importlib.metadata, importlib.resources, agentauth
assert (importlib.resources.files("agentauth") / "py.typed").is_file(), "no py.typed"
assert not (importlib.resources.files("agentauth") / "tests").is_dir()
print(agentauth.__version__, importlib.metadata.version("agentauth"), agentauth.__file__)
c = agentauth.Client(base_url="http://127.0.0.1:9", runtime_token="rt-secret-value")
print(repr(c))
c.close()`)
	if f := strings.Fields(got); len(f) < 3 || f[0] != version || f[1] != version || !strings.HasPrefix(f[2], venv) {
		t.Fatalf("installed agentauth: %q, want version %s from %s", got, version, venv)
	}
	if strings.Contains(got, "rt-secret-value") {
		t.Errorf("the client's repr shows its runtime token: %s", got)
	}
	t.Logf("pip install ./sdk/python: agentauth %s imports from a fresh venv", version)

	if _, err := os.Stat(tgz); err != nil {
		t.Fatalf("npm pack made no %s: %v\n%s", filepath.Base(tgz), err, out)
	}
	app := t.TempDir()
	run(t, app, "npm", "init", "-y")
	run(t, app, "npm", "install", "--silent", tgz)
	got = run(t, app, "node", "--input-type=module", "-e", `
import { AgentauthClient, AuthorizationRequired, verifyWebhook, VERSION } from "@agentauth/client";
import { readFileSync } from "node:fs";
const pkg = JSON.parse(readFileSync("node_modules/@agentauth/client/package.json", "utf8"));
const types = readFileSync("node_modules/@agentauth/client/dist/src/index.d.ts", "utf8");
if (!types.includes("AgentauthClient")) throw new Error("no type declarations");
const c = new AgentauthClient({ url: "http://127.0.0.1:9", runtimeToken: "rt-secret-value" });
if (String(c).includes("rt-secret-value") || JSON.stringify(c).includes("rt-secret-value")) throw new Error("the client prints its token");
console.log(VERSION, pkg.version, typeof AuthorizationRequired, typeof verifyWebhook);`)
	if f := strings.Fields(got); len(f) != 4 || f[0] != version || f[1] != version || f[2] != "function" || f[3] != "function" {
		t.Fatalf("installed @agentauth/client: %q, want version %s and its exports", got, version)
	}
	t.Logf("npm install %s: @agentauth/client %s imports in an empty project", filepath.Base(tgz), version)
}
