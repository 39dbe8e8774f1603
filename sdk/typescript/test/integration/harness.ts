// The integration suites' side of sdk/TESTING.md: the contract's
// environment, the skip rule, and the Go test's control server (consent
// in Chromium, /drop, /deliveries).

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { AgentauthClient, type ClientOptions } from "../../src/index.js";

const env = process.env;

export const required = env.AGENTAUTH_SDK_REQUIRE === "1";
export const harnessUrl = env.AGENTAUTH_TEST_HARNESS;

/**
 * Why the suite cannot run (undefined when it can). Without the harness
 * the suites are skipped — unless AGENTAUTH_SDK_REQUIRE=1, where each
 * suite fails on its first test instead.
 */
export function missing(...names: string[]): string | undefined {
  const absent = ["AGENTAUTH_TEST_HARNESS", "AGENTAUTH_URL", ...names].filter((n) => !env[n]);
  return absent.length ? `${absent.join(", ")} unset (sdk/TESTING.md)` : undefined;
}

/** The node:test skip option: skip without the harness unless required (then the check test fails). */
export function skipUnlessHarness(...names: string[]): string | false {
  const why = missing(...names);
  return why && !required ? `no harness: ${why}` : false;
}

/** A test that fails when the harness is required and absent. */
export function assertHarness(...names: string[]): void {
  const why = missing(...names);
  assert.equal(why, undefined, `AGENTAUTH_SDK_REQUIRE=1 and ${why}`);
}

export const app = env.AGENTAUTH_TEST_APP ?? "";
export const subjectPrefix = env.AGENTAUTH_TEST_SUBJECT_PREFIX ?? "";
export const toolLogin = env.AGENTAUTH_TEST_LOGIN ?? "";
export const toolName = env.AGENTAUTH_TEST_TOOL ?? "";
export const swarm = env.AGENTAUTH_TEST_SWARM ?? "";
export const agent = env.AGENTAUTH_TEST_AGENT ?? "";
export const claims = JSON.parse(env.AGENTAUTH_TEST_CLAIMS || "{}") as Record<string, unknown>;
export const connector = env.AGENTAUTH_TEST_CONNECTOR ?? "";
export const webhookSecret = env.AGENTAUTH_TEST_WEBHOOK_SECRET ?? "";
export const proxyUrl = env.AGENTAUTH_TEST_PROXY_URL ?? "";
export const onAws = env.AGENTAUTH_AUTH === "sigv4";

/** A fresh name for this run: its own logins and instance keys. */
export function fresh(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString("hex")}`;
}

/** The client of the contract's environment (AGENTAUTH_*), with options on top. */
export function newClient(opts: ClientOptions = {}): AgentauthClient {
  return new AgentauthClient(opts);
}

async function harness<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${harnessUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  const text = await res.text();
  assert.ok(res.ok, `harness ${method} ${path}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

/** Consents as login at the provider's real pages (Chromium); returns the callback page. */
export async function consent(
  authorizationUrl: string,
  login: string,
): Promise<{ title: string; text: string }> {
  const page = await harness<{ title: string; text: string }>("POST", "/consent", {
    authorizationUrl,
    login,
  });
  assert.equal(
    page.title,
    "Connected",
    `consent as ${login}: the callback page says ${page.title}: ${page.text}`,
  );
  return page;
}

/** Cuts every connection open through the proxy. */
export async function drop(): Promise<number> {
  return (await harness<{ dropped: number }>("POST", "/drop")).dropped;
}

export interface HarnessDelivery {
  headers: Record<string, string>;
  body: string;
}

/** The webhook deliveries the harness received for connector, oldest first. */
export async function deliveries(name: string): Promise<HarnessDelivery[]> {
  return (
    await harness<{ data: HarnessDelivery[] }>("GET", `/deliveries?connector=${encodeURIComponent(name)}`)
  ).data;
}

export function header(d: HarnessDelivery, name: string): string | undefined {
  const k = Object.keys(d.headers).find((h) => h.toLowerCase() === name.toLowerCase());
  return k === undefined ? undefined : d.headers[k];
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
