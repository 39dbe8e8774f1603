// Production failure modes: a body that stalls after its headers, a long
// poll's total deadline, a clean stream end without the turn's end (a
// buffered window), secrets in an error's cause, credential providers
// asked once per expiry, a chunk that decodes to nothing.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { inspect } from "node:util";
import { authorizationRequiredResult } from "../../src/ai.js";
import {
  AbortedError,
  AgentauthClient,
  AgentauthError,
  AgentauthTimeoutError,
  AuthorizationRequired,
  NetworkError,
  type TurnEvent,
  UnavailableError,
  UnexpectedResponseError,
} from "../../src/index.js";
import { makeSigV4Signer } from "../../src/sigv4.js";
import { SseParser } from "../../src/sse.js";
import { client, json, scriptedFetch } from "./fakes.js";

function stalledBody(status = 200, headers: Record<string, string> = { "Content-Type": "application/json" }) {
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      ctl.enqueue(new TextEncoder().encode('{"status":'));
    },
    cancel() {
      cancelled = true;
    },
  });
  return { res: new Response(body, { status, headers }), cancelled: () => cancelled };
}

/** A fetch that never answers, until its signal aborts. */
const hangingFetch = (input: string, init: RequestInit): Promise<Response> =>
  new Promise((_, reject) => {
    void input;
    init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")), {
      once: true,
    });
  });

function turnEvent(seq: number, type = "step.started"): TurnEvent {
  return { turnId: "t", seq, type, at: "2026-11-28T10:00:00Z" };
}

function sse(...evs: TurnEvent[]): Response {
  const text = evs.map((ev) => `id: ${ev.seq}\nevent: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`).join("");
  return new Response(text, { headers: { "Content-Type": "text/event-stream" } });
}

describe("the time limit covers the answer's body", () => {
  it("a body that stalls after the headers is an AgentauthTimeoutError, and the body is cancelled", async () => {
    const stalled = stalledBody();
    const { fetch } = scriptedFetch([stalled.res]);
    const c = client(fetch, { maxRetries: 0 });
    const started = Date.now();
    await assert.rejects(c.authorizationStatus("s1", { timeoutMs: 100 }), AgentauthTimeoutError);
    assert.ok(Date.now() - started < 2_000);
    assert.ok(stalled.cancelled());
  });

  it("an abort while the body is read is an AbortedError", async () => {
    const stalled = stalledBody();
    const { fetch } = scriptedFetch([stalled.res]);
    const c = client(fetch);
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(new Error("user stop")), 50);
    await assert.rejects(c.authorizationStatus("s1", { signal: ctl.signal }), AbortedError);
    assert.ok(stalled.cancelled());
  });
});

describe("waitForAuthorization's total deadline", () => {
  it("holds when the server never answers: no poll outlives the deadline", async () => {
    const c = client(hangingFetch);
    const started = Date.now();
    await assert.rejects(c.waitForAuthorization("s1", { timeoutMs: 300 }), AgentauthTimeoutError);
    const took = Date.now() - started;
    assert.ok(took < 4_000, `took ${took} ms`);
  });

  it("holds across retries of a failing poll", async () => {
    let n = 0;
    const fetch = async () => {
      n++;
      return json(503, { error: { code: "unavailable", message: "try again" } }, { "Retry-After": "1" });
    };
    const c = client(fetch, { maxRetries: 50 });
    const started = Date.now();
    // The last answer's error: the wait ended while the server refused.
    await assert.rejects(c.waitForAuthorization("s1", { timeoutMs: 300 }), UnavailableError);
    const took = Date.now() - started;
    assert.ok(took < 4_000, `took ${took} ms`);
    // Retried within the wait's grace (a Retry-After of 1 s fits), not given up at the first 503.
    assert.ok(n >= 2, `${n} requests`);
  });
});

describe("waitForAuthorization against a server that does not hold the poll", () => {
  it("asks about once a second, not in a busy loop", async () => {
    let n = 0;
    const fetch = async () => {
      n++;
      return json(200, { status: "pending", expiresAt: "2026-11-28T11:00:00Z" });
    };
    const c = client(fetch);
    await assert.rejects(c.waitForAuthorization("s1", { timeoutMs: 1_500 }), AgentauthTimeoutError);
    assert.ok(n <= 3, `${n} requests in 1.5 s`);
  });
});

describe("an answer that is not a JSON object", () => {
  for (const [name, body] of [
    ["empty", ""],
    ["null", "null"],
    ["an array", "[]"],
  ] as const) {
    it(`${name} is an UnexpectedResponseError, not a TypeError`, async () => {
      const { fetch } = scriptedFetch([
        new Response(body, { status: 200, headers: { "Content-Type": "application/json" } }),
      ]);
      await assert.rejects(client(fetch).listTools(), UnexpectedResponseError);
    });
  }
});

describe("waitForTurn's deadline", () => {
  it("holds when the server never answers", async () => {
    const c = client(hangingFetch);
    const started = Date.now();
    await assert.rejects(
      c.waitForTurn("default", "k", "assistant", { timeoutMs: 300 }),
      AgentauthTimeoutError,
    );
    const took = Date.now() - started;
    assert.ok(took < 4_000, `took ${took} ms`);
  });
});

describe("followTurn: a stream that ends cleanly before the turn does", () => {
  it("is not a failure: buffered windows with nothing new go on past maxReconnects", async () => {
    const answers: Response[] = [sse(turnEvent(0, "turn.started"), turnEvent(1, "turn.parked"))];
    for (let i = 0; i < 6; i++) {
      answers.push(
        new Response(": stream limit reached\n\n", { headers: { "Content-Type": "text/event-stream" } }),
      );
    }
    answers.push(
      sse(turnEvent(1, "turn.parked"), turnEvent(2, "turn.resumed"), turnEvent(3, "turn.completed")),
    );
    const { fetch, sent } = scriptedFetch(answers);
    const c = client(fetch);
    const seqs: number[] = [];
    for await (const ev of c.followTurn("default", "k", "assistant", "t", {
      maxReconnects: 2,
      pollIntervalMs: 1,
    })) {
      seqs.push(ev.seq);
    }
    assert.deepEqual(seqs, [0, 1, 2, 3]);
    assert.equal(sent.length, 8);
    assert.equal(sent[7]?.headers["last-event-id"], "1");
  });

  it("a 503 mid-follow waits for its Retry-After before reconnecting", async () => {
    const { fetch, sent } = scriptedFetch([
      sse(turnEvent(0, "turn.started")),
      json(503, { error: { code: "unavailable", message: "busy" } }, { "Retry-After": "1" }),
      sse(turnEvent(1, "turn.completed")),
    ]);
    const c = client(fetch);
    const started = Date.now();
    const seqs: number[] = [];
    for await (const ev of c.followTurn("default", "k", "assistant", "t")) {
      seqs.push(ev.seq);
    }
    assert.deepEqual(seqs, [0, 1]);
    assert.equal(sent.length, 3);
    assert.ok(Date.now() - started >= 900, "the Retry-After was waited for");
  });
});

describe("followTurn polling (406)", () => {
  it("rides out a few failed polls, within maxReconnects", async () => {
    const down = () => json(503, { error: { code: "unavailable", message: "down" } });
    const { fetch } = scriptedFetch([
      json(406, { error: { code: "notAcceptable", message: "use the stream URL" } }),
      json(200, { data: [turnEvent(0, "turn.started")] }),
      ...Array.from({ length: 6 }, down),
      json(200, { data: [turnEvent(0, "turn.started"), turnEvent(1, "turn.completed")] }),
    ]);
    const c = client(fetch, { maxRetries: 1 });
    const seqs: number[] = [];
    for await (const ev of c.followTurn("default", "k", "assistant", "t", { pollIntervalMs: 1 })) {
      seqs.push(ev.seq);
    }
    assert.deepEqual(seqs, [0, 1]);
  });
});

describe("the client's URLs", () => {
  it("a URL that is not http(s) is refused when the client is made, naming the setting", () => {
    for (const [opts, what] of [
      [{ url: "localhost:8080" }, /url \(AGENTAUTH_URL\) must be an http\(s\) URL, not "localhost:8080"/],
      [{ url: "agentauth.internal" }, /url \(AGENTAUTH_URL\)/],
      [{ url: "http://ok.test", streamUrl: "ftp://x.test" }, /streamUrl \(AGENTAUTH_STREAM_URL\)/],
    ] as const) {
      assert.throws(
        () => new AgentauthClient({ env: false, runtimeToken: "t", ...opts }),
        (e: unknown) => e instanceof AgentauthError && e.code === "invalidOption" && what.test(e.message),
      );
    }
    assert.doesNotThrow(
      () => new AgentauthClient({ env: false, url: "https://x.test/_aws/execute-api/a/$default" }),
    );
  });
});

describe("package.json", () => {
  it("each subpath export's types resolve under moduleResolution node10 too (typesVersions)", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as {
      exports: Record<string, { types?: string } | string>;
      typesVersions?: Record<string, Record<string, string[]>>;
    };
    for (const [sub, target] of Object.entries(pkg.exports)) {
      if (sub === "." || typeof target === "string" || !target.types) continue;
      assert.deepEqual(pkg.typesVersions?.["*"]?.[sub.slice(2)], [target.types], sub);
    }
  });
});

describe("the fetch option", () => {
  it("is called unbound, as a browser's window.fetch must be", async () => {
    const { fetch: scripted } = scriptedFetch([json(200, { data: [], unreadable: [] })]);
    // A browser's fetch refuses a this that is not the window (or undefined).
    const browserLike = function (this: unknown, input: string, init: RequestInit): Promise<Response> {
      if (this !== undefined && this !== globalThis) {
        throw new TypeError("Failed to execute 'fetch' on 'Window': Illegal invocation");
      }
      return (scripted as (i: string, n: RequestInit) => Promise<Response>)(input, init);
    };
    const c = client(browserLike, { maxRetries: 0 });
    assert.deepEqual(await c.listInstances(), { data: [], unreadable: [] });
  });
});

describe("secrets in errors", () => {
  it("a fetch error carrying the request (and the token in its message) does not reach the thrown error", async () => {
    const fetch = async (input: string, init: RequestInit): Promise<Response> => {
      const err = new TypeError(`fetch failed for ${input} with ${JSON.stringify(init.headers)}`);
      Object.assign(err, { request: { url: input, headers: init.headers } });
      throw Object.assign(new Error("outer"), { cause: err, config: { headers: init.headers } });
    };
    const c = client(fetch, { maxRetries: 0 });
    const err = await c.listInstances().then(
      () => assert.fail("no error"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof NetworkError);
    const printed = [
      inspect(err, { depth: Number.POSITIVE_INFINITY, showHidden: true }),
      String(err),
      (err as Error).stack ?? "",
      JSON.stringify(err),
    ].join("\n");
    assert.doesNotMatch(printed, /aat_runtime/);
    assert.match(printed, /fetch failed/);
  });

  it("the agent JWT neither", async () => {
    const fetch = async (_: string, init: RequestInit): Promise<Response> => {
      throw Object.assign(new TypeError("fetch failed"), { request: { headers: init.headers } });
    };
    const c = client(fetch, { maxRetries: 0 });
    const err = await c.listTools().then(
      () => assert.fail("no error"),
      (e: unknown) => e,
    );
    assert.doesNotMatch(
      inspect(err, { depth: Number.POSITIVE_INFINITY, showHidden: true }),
      /agent\.jwt\.value/,
    );
  });
});

describe("sigv4 credentials", () => {
  it("a credential provider is asked once, and again only when its credentials near their expiry", async () => {
    let calls = 0;
    let expiration = new Date(Date.now() + 60 * 60_000);
    const provider = async () => {
      calls++;
      return { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret", sessionToken: `s${calls}`, expiration };
    };
    const signer = await makeSigV4Signer("us-east-1", provider);
    const req = () => ({
      method: "GET",
      url: new URL("https://api.test/v1/instances"),
      headers: {},
      body: undefined,
    });
    await Promise.all([signer.sign("execute-api", req()), signer.sign("execute-api", req())]);
    await signer.sign("lambda", req());
    assert.equal(calls, 1);
    expiration = new Date(Date.now() + 60_000);
    // Still the first credentials (an hour left) until they near their end.
    calls = 0;
    const signer2 = await makeSigV4Signer("us-east-1", provider);
    const first = await signer2.sign("execute-api", req());
    const second = await signer2.sign("execute-api", req());
    assert.equal(calls, 2, "credentials a minute from expiry are asked for again");
    assert.equal(first["x-amz-security-token"], "s1");
    assert.equal(second["x-amz-security-token"], "s2");
  });

  it("a failed provider is not cached", async () => {
    let calls = 0;
    const provider = async () => {
      calls++;
      if (calls === 1) throw new Error("metadata service unreachable");
      return { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" };
    };
    const signer = await makeSigV4Signer("us-east-1", provider);
    const req = {
      method: "GET",
      url: new URL("https://api.test/v1/instances"),
      headers: {},
      body: undefined,
    };
    await assert.rejects(signer.sign("execute-api", req));
    const h = await signer.sign("execute-api", req);
    assert.match(h.authorization ?? "", /^AWS4-HMAC-SHA256/);
    assert.equal(calls, 2);
  });
});

describe("SSE parser chunks", () => {
  it("a chunk that decodes to nothing (half a character) between the CR and LF of a CRLF", () => {
    const p = new SseParser();
    const got = [...p.push("data: a\r"), ...p.push(""), ...p.push("\ndata: b\r\n\r\n")];
    assert.deepEqual(got, [{ id: undefined, event: "message", data: "a\nb" }]);
  });
});

describe("SSE retry and bytes", () => {
  it("keeps the last valid retry: field", () => {
    const p = new SseParser();
    assert.equal(p.retryMs, undefined);
    p.push("retry: 1500\n\nretry: soon\n\n");
    assert.equal(p.retryMs, 1500);
  });

  it("a stream's retry: paces the reconnect after a clean end", async () => {
    const { fetch } = scriptedFetch([
      new Response("retry: 300\n\n", { headers: { "Content-Type": "text/event-stream" } }),
      sse(turnEvent(0, "turn.completed")),
    ]);
    const c = client(fetch);
    const started = Date.now();
    for await (const _ of c.followTurn("default", "k", "assistant", "t", { pollIntervalMs: 1 })) {
      // one event
    }
    assert.ok(Date.now() - started >= 280);
  });

  it("a retry: holds for the follow's later streams too", async () => {
    const { fetch } = scriptedFetch([
      new Response("retry: 300\n\n", { headers: { "Content-Type": "text/event-stream" } }),
      new Response(": nothing new\n\n", { headers: { "Content-Type": "text/event-stream" } }),
      sse(turnEvent(0, "turn.completed")),
    ]);
    const started = Date.now();
    for await (const _ of client(fetch).followTurn("default", "k", "assistant", "t", { pollIntervalMs: 1 })) {
      // one event
    }
    assert.ok(Date.now() - started >= 580);
  });

  it("a multi-byte character split across reads", async () => {
    const ev = { ...turnEvent(0, "turn.completed"), data: { text: "héllo 👋" } };
    const bytes = new TextEncoder().encode(
      `id: 0\r\nevent: turn.completed\r\ndata: ${JSON.stringify(ev)}\r\n\r\n`,
    );
    for (const cut of [bytes.indexOf(0xc3) + 1, bytes.indexOf(0xf0) + 2]) {
      const body = new ReadableStream<Uint8Array>({
        start(ctl) {
          ctl.enqueue(bytes.slice(0, cut));
          ctl.enqueue(bytes.slice(cut));
          ctl.close();
        },
      });
      const { fetch } = scriptedFetch([
        new Response(body, { headers: { "Content-Type": "text/event-stream" } }),
      ]);
      const got: TurnEvent[] = [];
      for await (const e of client(fetch).followTurn("default", "k", "assistant", "t")) {
        got.push(e);
      }
      assert.deepEqual(got, [ev]);
    }
  });
});

describe("AI SDK adapter consent message", () => {
  it("ends the server's message with a period before asking the user", () => {
    const r = authorizationRequiredResult(
      new AuthorizationRequired({
        authorizationUrl: "https://x.test/a",
        sessionId: "s",
        message: "GitHub needs your consent: open authorizationUrl",
      }),
    );
    assert.equal(
      r.message,
      "GitHub needs your consent: open authorizationUrl. Ask the user to open the link and consent, then call the tool again.",
    );
    const done = authorizationRequiredResult(
      new AuthorizationRequired({ authorizationUrl: "u", sessionId: "s", message: "Consent needed." }),
    );
    assert.equal(
      done.message,
      "Consent needed. Ask the user to open the link and consent, then call the tool again.",
    );
  });
});
