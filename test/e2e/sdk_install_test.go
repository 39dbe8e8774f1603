package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// TestSDKPackagesInstall installs each SDK as the README says a user
// does — `pip install ./sdk/python` into a fresh virtual environment, and
// the tarball `npm pack` makes installed into an empty npm project — and
// imports it there: the packages carry what a user needs (the typed
// marker, the compiled ESM with its declarations) and their version is
// the project's (VERSION). The suites run the SDKs from their source
// trees; this is what a user installs.
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(t *testing.T, dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = e2ekit.SDKEnv("PIP_DISABLE_PIP_VERSION_CHECK=1", "npm_config_fund=false", "npm_config_audit=false", "npm_config_update_notifier=false")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("python", func(t *testing.T) {
		venv := filepath.Join(t.TempDir(), "venv")
		run(t, root, "python3", "-m", "venv", venv)
		py := filepath.Join(venv, "bin", "python")
		// The README's command, from the repository's root.
		run(t, root, py, "-m", "pip", "install", "-q", "./sdk/python")
		out := run(t, t.TempDir(), py, "-c", `import importlib.metadata, importlib.resources, agentauth
assert (importlib.resources.files("agentauth") / "py.typed").is_file(), "no py.typed"
assert not (importlib.resources.files("agentauth") / "tests").is_dir()
print(agentauth.__version__, importlib.metadata.version("agentauth"), agentauth.__file__)
c = agentauth.Client(base_url="http://127.0.0.1:9", runtime_token="rt-secret-value")
print(repr(c))
c.close()`)
		fields := strings.Fields(out)
		if len(fields) < 3 || fields[0] != version || fields[1] != version || !strings.Contains(fields[2], venv) {
			t.Fatalf("installed agentauth: %q, want version %s from %s", out, version, venv)
		}
		if strings.Contains(out, "rt-secret-value") {
			t.Errorf("the client's repr shows its runtime token: %s", out)
		}
		t.Logf("pip install ./sdk/python: agentauth %s imports from a fresh venv (%s)", version, strings.TrimSpace(out))
	})

	t.Run("typescript", func(t *testing.T) {
		sdk := filepath.Join(root, "sdk", "typescript")
		if _, err := os.Stat(filepath.Join(sdk, "node_modules")); err != nil {
			if os.Getenv(e2ekit.RequireEnv) == "1" {
				t.Fatal("sdk/typescript/node_modules is missing: run `make sdk-check`")
			}
			t.Skip("sdk/typescript/node_modules is missing: run `make sdk-check`")
		}
		dest := t.TempDir()
		out := run(t, sdk, "npm", "pack", "--silent", "--pack-destination", dest)
		tgz := filepath.Join(dest, strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
		if filepath.Base(tgz) != "agentauth-client-"+version+".tgz" {
			t.Fatalf("npm pack wrote %q, want agentauth-client-%s.tgz", out, version)
		}
		app := t.TempDir()
		run(t, app, "npm", "init", "-y")
		run(t, app, "npm", "install", "--silent", tgz)
		got := run(t, app, "node", "--input-type=module", "-e", `
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
	})
}
