// sdk/TESTING.md 5: every block of README.md marked
// `<!-- sdk test runs this: NAME -->` is run against the real agentauth,
// as a newcomer would run it: transpiled, written into the package (so
// `@agentauth/client` resolves to this build), and run by node. A
// consent link it prints is consented through the harness, as the user
// would; the webhook server gets a real delivery and a tampered copy.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import ts from "typescript";
import {
  app,
  assertHarness,
  claims,
  connector,
  consent,
  deliveries,
  fresh,
  header,
  missing,
  skipUnlessHarness,
  subjectPrefix,
  toolLogin,
  toolName,
  webhookSecret,
} from "./harness.js";

const pkg = new URL("../../../", import.meta.url); // dist/test/integration → sdk/typescript
const readme = readFileSync(new URL("README.md", pkg), "utf8");

interface Snippet {
  name: string;
  code: string;
}

function snippets(text: string): Snippet[] {
  const out: Snippet[] = [];
  const re = /<!-- sdk test runs this: (\S+) -->\s*\n```(?:ts|typescript|js)\n([\s\S]*?)\n```/g;
  for (const m of text.matchAll(re)) {
    out.push({ name: m[1] ?? "", code: m[2] ?? "" });
  }
  return out;
}

// What each snippet needs, and as whom its consent links are approved.
const plans: Record<string, { needs: string[]; login: "fresh" | "tool" | "none"; server?: boolean }> = {
  connect: { needs: [], login: "none" },
  tokens: { needs: ["AGENTAUTH_TEST_APP"], login: "fresh" },
  "with-access-token": { needs: ["AGENTAUTH_TEST_APP"], login: "fresh" },
  tools: { needs: ["AGENTAUTH_AGENT_TOKEN", "AGENTAUTH_TEST_TOOL", "AGENTAUTH_TEST_LOGIN"], login: "tool" },
  "ai-sdk": { needs: ["AGENTAUTH_AGENT_TOKEN"], login: "none" },
  turns: { needs: ["AGENTAUTH_TEST_SWARM", "AGENTAUTH_TEST_AGENT"], login: "fresh" },
  lifecycle: { needs: ["AGENTAUTH_TEST_SWARM", "AGENTAUTH_TEST_AGENT"], login: "none" },
  webhooks: {
    needs: ["AGENTAUTH_TEST_CONNECTOR", "AGENTAUTH_TEST_WEBHOOK_SECRET"],
    login: "none",
    server: true,
  },
};

// The README's example names, and this run's values for them.
const instanceKey = fresh("ts-readme");

function localise(code: string, login: string): string {
  let out = code
    .replaceAll('"OAuthApp/demo-user"', JSON.stringify(app))
    .replaceAll("demo:user:alice", subjectPrefix + login)
    .replaceAll('"thread-1"', JSON.stringify(instanceKey))
    .replaceAll(
      'claims: { sub: "alice", scope: "profile.read" }',
      `claims: ${JSON.stringify({ sub: login, ...claims })}`,
    )
    .replaceAll('"whoami"', JSON.stringify(toolName || "whoami"));
  // The harness's Connector gets the turn snippet's outcome (the webhooks snippet verifies a delivery).
  if (connector)
    out = out.replaceAll(
      'origin: { channel: "C123" }',
      `origin: { connector: ${JSON.stringify(connector)}, channel: "C123" }`,
    );
  const sw = process.env.AGENTAUTH_TEST_SWARM;
  const ag = process.env.AGENTAUTH_TEST_AGENT;
  if (sw && ag)
    out = out
      .replaceAll('["default", ', `[${JSON.stringify(sw)}, `)
      .replaceAll('"assistant"]', `${JSON.stringify(ag)}]`);
  return out;
}

function write(s: Snippet, login: string): string {
  const js = ts.transpileModule(localise(s.code, login), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    reportDiagnostics: true,
  });
  assert.deepEqual(js.diagnostics ?? [], [], `the ${s.name} snippet does not parse`);
  const dir = new URL("dist/readme/", pkg);
  mkdirSync(dir, { recursive: true });
  const file = new URL(`${s.name}.mjs`, dir);
  writeFileSync(file, js.outputText);
  return file.pathname;
}

interface Run {
  child: ChildProcess;
  lines: string[];
  done: Promise<number | null>;
  waitFor: (re: RegExp, ms: number) => Promise<string>;
}

function run(file: string, env: Record<string, string>, onLine: (line: string) => void): Run {
  const child = spawn(process.execPath, [file], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  const waiters: Array<{ re: RegExp; resolve: (l: string) => void }> = [];
  let buf = "";
  const take = (chunk: Buffer) => {
    buf += chunk.toString();
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      lines.push(line);
      console.log(`  | ${line}`);
      onLine(line);
      for (const w of waiters.filter((w) => w.re.test(line))) w.resolve(line);
    }
  };
  child.stdout?.on("data", take);
  child.stderr?.on("data", take);
  const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const waitFor = (re: RegExp, ms: number) =>
    new Promise<string>((resolve, reject) => {
      const found = lines.find((l) => re.test(l));
      if (found) return resolve(found);
      const t = setTimeout(() => reject(new Error(`no line matching ${re} within ${ms} ms`)), ms);
      waiters.push({
        re,
        resolve: (l) => {
          clearTimeout(t);
          resolve(l);
        },
      });
    });
  return { child, lines, done, waitFor };
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

const all = snippets(readme);

describe("README snippets", { skip: skipUnlessHarness() }, () => {
  it("the README has runnable snippets, each with a plan", () => {
    assertHarness();
    assert.ok(all.length >= 8, `${all.length} marked snippets`);
    for (const s of all) assert.ok(plans[s.name], `no plan for the README snippet ${s.name}`);
  });

  for (const s of all) {
    const plan = plans[s.name];
    const why = plan ? missing(...plan.needs) : undefined;
    // The tool and webhook snippets are local only (their env is unset on AWS).
    const skip = why ? `${s.name}: ${why}` : false;
    it(`README: ${s.name}`, { skip, timeout: 180_000 }, async () => {
      assert.ok(plan);
      const login = plan.login === "tool" ? toolLogin : fresh(`ts-readme-${s.name}`);
      const file = write(s, login);
      const consents: Array<Promise<unknown>> = [];
      const seen = new Set<string>();
      const onLine = (line: string) => {
        // A consent link the snippet prints for its user: approve it as they would.
        for (const url of line.match(/https?:\/\/\S+/g) ?? []) {
          if (plan.login !== "none" && url.includes("client_id=") && !seen.has(url)) {
            seen.add(url);
            consents.push(consent(url, login));
          }
        }
      };
      if (!plan.server) {
        const r = run(file, {}, onLine);
        const timer = setTimeout(() => r.child.kill("SIGKILL"), 150_000);
        const code = await r.done;
        clearTimeout(timer);
        await Promise.all(consents);
        assert.equal(code, 0, `the ${s.name} snippet exited ${code}:\n${r.lines.join("\n")}`);
        return;
      }
      // The webhook server: a real delivery of this run, and a tampered copy.
      const port = await freePort();
      const r = run(file, { PORT: String(port), WEBHOOK_SECRET: webhookSecret }, onLine);
      try {
        await r.waitFor(/listening/, 30_000);
        const ds = await deliveries(connector);
        const d = ds.at(-1);
        assert.ok(d, "the harness has a delivery of this run");
        const post = (body: string) =>
          fetch(`http://127.0.0.1:${port}/hook`, {
            method: "POST",
            headers: {
              "Content-Type": "application/json",
              "X-Agentauth-Timestamp": header(d, "X-Agentauth-Timestamp") ?? "",
              "X-Agentauth-Signature": header(d, "X-Agentauth-Signature") ?? "",
            },
            body,
          });
        assert.equal((await post(d.body)).status, 204);
        await r.waitFor(/^delivery \S+:\d+: /, 10_000);
        assert.equal(
          (await post(d.body.replace(/"seq":(\d)/, (_, n) => `"seq":${(Number(n) + 1) % 10}`))).status,
          400,
        );
        await r.waitFor(/^refused: signature_mismatch$/, 10_000);
      } finally {
        r.child.kill();
        await r.done;
      }
    });
  }
});
