import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { inspect } from "node:util";
import {
  AbortedError,
  AccessToken,
  AgentauthClient,
  AgentauthError,
  AgentauthTimeoutError,
  AuthorizationFailed,
  AuthorizationRequired,
  ConfigurationError,
  errorClasses,
  ForbiddenError,
  GrantNotFoundError,
  InstanceTerminatedError,
  InternalError,
  InvalidRequestError,
  MissingCredentialError,
  NetworkError,
  NotFoundError,
  OAuthAppNotFoundError,
  RateLimitedError,
  RefreshFailedError,
  ScopeNotGrantedError,
  UnauthenticatedError,
  VERSION,
  withAccessToken,
} from "../../src/index.js";
import { client, json, scriptedFetch } from "./fakes.js";

const root = new URL("../../../", import.meta.url); // dist/test/unit → sdk/typescript

describe("package", () => {
  it("has the project's version", () => {
    const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as { version: string };
    const project = readFileSync(new URL("../../VERSION", root), "utf8").trim();
    assert.equal(pkg.version, project);
    assert.equal(VERSION, project);
  });

  it("pins every dependency exactly", () => {
    const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as {
      devDependencies: Record<string, string>;
      dependencies?: Record<string, string>;
    };
    for (const [name, v] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
      assert.match(v, /^\d+\.\d+\.\d+$/, `${name}@${v} is not pinned`);
    }
  });
});

describe("connect", () => {
  it("reads the URL and credentials from the environment", async () => {
    const { fetch, sent } = scriptedFetch([json(200, { data: [] }), json(200, { data: [] })]);
    const c = new AgentauthClient({
      env: {
        AGENTAUTH_URL: "http://env.test/",
        AGENTAUTH_RUNTIME_TOKEN: "aat_env",
        AGENTAUTH_AGENT_TOKEN: "jwt.env",
      },
      fetch,
    });
    await c.listInstances();
    await c.listTools();
    assert.equal(sent[0]?.url.toString(), "http://env.test/v1/instances");
    assert.equal(sent[0]?.headers.authorization, "Bearer aat_env");
    assert.equal(sent[1]?.headers.authorization, "Bearer jwt.env");
  });

  it("options win over the environment", async () => {
    const { fetch, sent } = scriptedFetch([json(200, { data: [] })]);
    const c = new AgentauthClient({
      url: "http://opt.test",
      runtimeToken: "aat_opt",
      env: { AGENTAUTH_URL: "http://env.test", AGENTAUTH_RUNTIME_TOKEN: "aat_env" },
      fetch,
    });
    await c.listInstances();
    assert.equal(sent[0]?.url.host, "opt.test");
    assert.equal(sent[0]?.headers.authorization, "Bearer aat_opt");
  });

  it("says which setting is missing", async () => {
    const { fetch } = scriptedFetch([]);
    const c = new AgentauthClient({ url: "http://x.test", env: {}, fetch });
    await assert.rejects(c.listInstances(), (e: unknown) => {
      assert.ok(e instanceof MissingCredentialError);
      assert.match(e.message, /AGENTAUTH_RUNTIME_TOKEN/);
      return true;
    });
    await assert.rejects(c.listTools(), (e: unknown) => {
      assert.ok(e instanceof MissingCredentialError);
      assert.match(e.message, /AGENTAUTH_AGENT_TOKEN/);
      return true;
    });
  });

  it("takes an agent token function, asked on each request", async () => {
    let n = 0;
    const { fetch, sent } = scriptedFetch([json(200, { data: [] }), json(200, { data: [] })]);
    const c = client(fetch, { agentToken: async () => `jwt-${++n}` });
    await c.listTools();
    await c.listTools();
    assert.deepEqual(
      sent.map((s) => s.headers.authorization),
      ["Bearer jwt-1", "Bearer jwt-2"],
    );
  });

  it("never prints its credentials", () => {
    const { fetch } = scriptedFetch([]);
    const c = client(fetch);
    assert.doesNotMatch(inspect(c), /aat_runtime|agent\.jwt/);
    assert.doesNotMatch(JSON.stringify(c), /aat_runtime|agent\.jwt/);
  });
});

describe("errors", () => {
  it("one class per documented code, with the request id", () => {
    for (const [code, cls] of Object.entries(errorClasses)) {
      const e = new cls({ code, message: "m", status: 400, requestId: "r" });
      assert.ok(e instanceof AgentauthError);
      assert.equal(e.code, code);
      assert.equal(e.name, cls.name);
    }
    const codes = Object.keys(errorClasses);
    for (const code of [
      "invalidRequest",
      "unauthenticated",
      "forbidden",
      "notFound",
      "methodNotAllowed",
      "notAcceptable",
      "payloadTooLarge",
      "unsupportedMediaType",
      "internal",
      "tooManyStreams",
      "instanceTerminated",
      "conflict",
      "rate_limited",
      "unavailable",
      "limitReached",
      "uploadsDisabled",
      "oauthAppNotFound",
      "subjectUnavailable",
      "scopeNotAllowed",
      "tokenRevoked",
      "refreshFailed",
      "deviceCodeUnsupported",
      "configurationError",
      "grantUnreadable",
      "scopeNotGranted",
      "grantNotFound",
    ]) {
      assert.ok(codes.includes(code), code);
    }
  });

  const cases: Array<[string, Response, new (...a: never[]) => AgentauthError, string, string]> = [
    [
      "a body's code and request id",
      json(400, {
        error: { code: "invalidRequest", message: 'unknown field "scope"', requestId: "req-body" },
      }),
      InvalidRequestError,
      "invalidRequest",
      "req-body",
    ],
    [
      "the header's request id when the body has none",
      json(409, { error: { code: "instanceTerminated", message: "terminated" } }),
      InstanceTerminatedError,
      "instanceTerminated",
      "req-header",
    ],
    [
      "a 401 with its reason",
      json(401, {
        error: { code: "unauthenticated", message: "m", details: { reason: "expired" }, requestId: "q" },
      }),
      UnauthenticatedError,
      "unauthenticated",
      "q",
    ],
    ["API Gateway's own 404", json(404, { message: "Not Found" }), NotFoundError, "notFound", "req-header"],
    [
      "a 403",
      json(403, { error: { code: "forbidden", message: "m", requestId: "q" } }),
      ForbiddenError,
      "forbidden",
      "q",
    ],
    [
      "a 500 that is not JSON",
      new Response("<html>oops</html>", { status: 500, headers: { "X-Request-Id": "req-500" } }),
      InternalError,
      "internal",
      "req-500",
    ],
  ];
  for (const [name, res, cls, code, rid] of cases) {
    it(name, async () => {
      const { fetch } = scriptedFetch([res]);
      const c = client(fetch, { maxRetries: 0 });
      await assert.rejects(c.getInstance("default", "k", "assistant"), (e: unknown) => {
        assert.ok(e instanceof cls, `${String(e)} is not a ${cls.name}`);
        assert.equal((e as AgentauthError).code, code);
        assert.equal((e as AgentauthError).requestId, rid);
        assert.equal((e as AgentauthError).status, res.status);
        return true;
      });
    });
  }

  it("the tool routes' 401 reason", async () => {
    const { fetch } = scriptedFetch([
      json(401, { error: { code: "unauthenticated", message: "m", details: { reason: "expired" } } }),
    ]);
    await assert.rejects(client(fetch).listTools(), (e: unknown) => {
      assert.ok(e instanceof UnauthenticatedError);
      assert.equal(e.reason, "expired");
      return true;
    });
  });
});

describe("retries", () => {
  it("a GET is retried on 502/503/504 and a network error", async () => {
    const { fetch, sent } = scriptedFetch([
      json(503, { message: "Service Unavailable" }),
      () => {
        throw new TypeError("fetch failed");
      },
      json(504, {}),
      json(200, { data: [], unreadable: [] }),
    ]);
    const list = await client(fetch).listInstances();
    assert.deepEqual(list, { data: [], unreadable: [] });
    assert.equal(sent.length, 4);
  });

  it("gives up after maxRetries with the last error", async () => {
    const { fetch, sent } = scriptedFetch([json(502, {}), json(502, {}), json(502, {})]);
    await assert.rejects(client(fetch, { maxRetries: 2 }).listInstances(), (e: unknown) => {
      assert.ok(e instanceof AgentauthError);
      assert.equal(e.status, 502);
      return true;
    });
    assert.equal(sent.length, 3);
  });

  it("a POST that is not idempotent is not retried on 503 or a network error", async () => {
    const r1 = scriptedFetch([json(503, {})]);
    await assert.rejects(
      client(r1.fetch).revoke("e2e-user", "s"),
      (e: unknown) => (e as AgentauthError).status === 503,
    );
    assert.equal(r1.sent.length, 1);
    const r2 = scriptedFetch([
      () => {
        throw new TypeError("fetch failed");
      },
    ]);
    await assert.rejects(client(r2.fetch).invokeTool("whoami"), NetworkError);
    assert.equal(r2.sent.length, 1);
  });

  it("a 429 is retried after its Retry-After, even for a POST that is not idempotent", async () => {
    const { fetch, sent } = scriptedFetch([
      json(429, { error: { code: "rate_limited", message: "slow down" } }, { "Retry-After": "0" }),
      json(200, { result: { status: "ok", output: { sub: "alice" } }, toolCalled: {}, toolReturned: {} }),
    ]);
    const inv = await client(fetch).invokeTool("whoami");
    assert.deepEqual(inv.result, { status: "ok", output: { sub: "alice" } });
    assert.equal(sent.length, 2);
  });

  it("a Retry-After longer than a minute is not waited for", async () => {
    const { fetch } = scriptedFetch([
      json(429, { error: { code: "rate_limited", message: "slow down" } }, { "Retry-After": "3600" }),
    ]);
    await assert.rejects(client(fetch).invokeTool("whoami"), RateLimitedError);
  });

  it("postEvent is retried: it sends an id the server deduplicates on, the same on every attempt", async () => {
    const { fetch, sent } = scriptedFetch([
      () => {
        throw new TypeError("fetch failed");
      },
      json(202, { eventId: "in:x", swarm: "default", instanceKey: "k", agent: "assistant" }),
    ]);
    await client(fetch).postEvent("default", "k", { text: "hi", auth: {} });
    assert.equal(sent.length, 2);
    const ids = sent.map((s) => (s.body as { id: string }).id);
    assert.match(ids[0] ?? "", /^sdk-[0-9a-f-]{36}$/);
    assert.equal(ids[0], ids[1]);
  });
});

describe("timeouts and abort", () => {
  const hang = (_req: unknown, init?: RequestInit) =>
    new Promise<Response>((_, reject) => {
      init?.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
    });

  it("a request past its time limit is an AgentauthTimeoutError", async () => {
    const fetch = (input: string, init: RequestInit) => hang(input, init);
    const c = client(fetch, { timeoutMs: 20, maxRetries: 0 });
    await assert.rejects(c.listInstances(), AgentauthTimeoutError);
  });

  it("an aborted call is an AbortedError, and not retried", async () => {
    let calls = 0;
    const fetch = (input: string, init: RequestInit) => {
      calls++;
      return hang(input, init);
    };
    const ctl = new AbortController();
    const p = client(fetch).listInstances({ signal: ctl.signal });
    setTimeout(() => ctl.abort(new Error("user left")), 10);
    await assert.rejects(p, AbortedError);
    assert.equal(calls, 1);
  });
});

describe("tokens", () => {
  it("a ready token, its request, and no token in its printed forms", async () => {
    const { fetch, sent } = scriptedFetch([
      json(200, {
        status: "ready",
        accessToken: "provider-secret-token",
        tokenType: "Bearer",
        expiresAt: "2030-01-01T00:00:00Z",
        scopes: ["openid", "profile"],
        refreshable: true,
      }),
    ]);
    const tok = await client(fetch).getAccessToken({
      app: "e2e-user",
      subjects: { user: "demo:user:alice" },
      actor: { type: "user", id: "demo:user:alice" },
      scopes: ["openid"],
      minTtlSeconds: 60,
      resume: { swarm: "default", instanceKey: "k 1", agent: "assistant" },
    });
    assert.ok(tok instanceof AccessToken);
    assert.equal(tok.accessToken, "provider-secret-token");
    assert.equal(tok.authorizationHeader(), "Bearer provider-secret-token");
    assert.equal(tok.refreshable, true);
    assert.equal(tok.expiresAt?.toISOString(), "2030-01-01T00:00:00.000Z");
    for (const printed of [inspect(tok), JSON.stringify(tok), String(tok), inspect({ tok }), `${tok}`]) {
      assert.doesNotMatch(printed, /provider-secret-token/);
    }
    assert.deepEqual(sent[0]?.body, {
      oauthAppRef: "OAuthApp/e2e-user",
      scopes: ["openid"],
      minTtlSeconds: 60,
      turn: {
        auth: { actor: { type: "user", id: "demo:user:alice" }, subjects: { user: "demo:user:alice" } },
        resume: { swarmRef: "Swarm/default", instanceKey: "k 1", agentName: "assistant" },
      },
    });
    assert.equal(sent[0]?.headers["content-type"], "application/json");
  });

  it("authorization_required is the typed AuthorizationRequired", async () => {
    const { fetch } = scriptedFetch([
      json(200, {
        status: "authorization_required",
        authSessionId: "as-1",
        authorizationUrl: "http://provider.test/auth?x=1",
        expiresAt: "2030-01-01T00:10:00Z",
        message: "Connect your account",
      }),
    ]);
    await assert.rejects(client(fetch).getAccessToken({ app: "OAuthApp/e2e-user" }), (e: unknown) => {
      assert.ok(e instanceof AuthorizationRequired);
      assert.equal(e.authorizationUrl, "http://provider.test/auth?x=1");
      assert.equal(e.sessionId, "as-1");
      assert.equal(e.expiresAt?.toISOString(), "2030-01-01T00:10:00.000Z");
      assert.equal(e.message, "Connect your account");
      assert.equal(e.oauthAppRef, "OAuthApp/e2e-user");
      assert.equal(e.requestId, "req-header");
      return true;
    });
  });

  const errorResults: Array<[string, new (...a: never[]) => AgentauthError]> = [
    ["refreshFailed", RefreshFailedError],
    ["oauthAppNotFound", OAuthAppNotFoundError],
    ["configurationError", ConfigurationError],
  ];
  for (const [code, cls] of errorResults) {
    it(`an error result ${code} is a ${cls.name}`, async () => {
      const { fetch } = scriptedFetch([
        json(200, { status: "error", error: { code, message: "provider unreachable" } }),
      ]);
      await assert.rejects(client(fetch).getAccessToken({ app: "a" }), (e: unknown) => {
        assert.ok(e instanceof cls);
        assert.equal((e as AgentauthError).status, 200);
        // The message ends with the status and request id, as Python's str(e).
        assert.equal((e as AgentauthError).message, "provider unreachable (HTTP 200, request req-header)");
        assert.equal((e as AgentauthError).requestId, "req-header");
        return true;
      });
    });
  }

  it("scopeNotGranted carries the scopes", async () => {
    const { fetch } = scriptedFetch([
      json(200, { status: "error", error: { code: "scopeNotGranted", message: "m", scopes: ["write"] } }),
    ]);
    await assert.rejects(client(fetch).getAccessToken({ app: "a" }), (e: unknown) => {
      assert.ok(e instanceof ScopeNotGrantedError);
      assert.deepEqual(e.scopes, ["write"]);
      return true;
    });
  });

  it("waitForAuthorization long-polls until completed", async () => {
    const { fetch, sent } = scriptedFetch([
      json(200, { status: "pending", expiresAt: "2030-01-01T00:00:00Z" }),
      json(200, { status: "exchanging", expiresAt: "2030-01-01T00:00:00Z" }),
      json(200, { status: "completed", expiresAt: "2030-01-01T00:00:00Z" }),
    ]);
    const st = await client(fetch).waitForAuthorization("as-1", { timeoutMs: 120_000 });
    assert.equal(st.status, "completed");
    assert.equal(sent.length, 3);
    assert.equal(sent[0]?.url.pathname, "/v1/oauth/sessions/as-1");
    assert.equal(sent[0]?.url.searchParams.get("wait"), "55");
  });

  it("waitForAuthorization: a failed or expired session is AuthorizationFailed with its reason", async () => {
    const { fetch } = scriptedFetch([
      json(200, { status: "failed", expiresAt: "2030-01-01T00:00:00Z", statusReason: "subject_mismatch" }),
    ]);
    await assert.rejects(client(fetch).waitForAuthorization("as-1"), (e: unknown) => {
      assert.ok(e instanceof AuthorizationFailed);
      assert.equal(e.reason, "subject_mismatch");
      assert.equal(e.sessionStatus, "failed");
      return true;
    });
  });

  it("waitForAuthorization asks for no longer than the time left", async () => {
    const { fetch, sent } = scriptedFetch([
      async () => {
        await new Promise((r) => setTimeout(r, 20));
        return json(200, { status: "pending", expiresAt: "2030-01-01T00:00:00Z" });
      },
    ]);
    await assert.rejects(client(fetch).waitForAuthorization("as-1", { timeoutMs: 1 }), AgentauthTimeoutError);
    assert.equal(sent[0]?.url.searchParams.get("wait"), "1");
  });

  it("revoke: 404 grantNotFound", async () => {
    const { fetch, sent } = scriptedFetch([
      json(404, { error: { code: "grantNotFound", message: "no grant", requestId: "q" } }),
    ]);
    await assert.rejects(client(fetch).revoke("OAuthApp/e2e-user", "demo:user:bob"), GrantNotFoundError);
    assert.deepEqual(sent[0]?.body, { oauthAppRef: "OAuthApp/e2e-user", subject: "demo:user:bob" });
  });

  it("withAccessToken: the URL to the callback, the wait, then fn with the token and its arguments", async () => {
    const { fetch, sent } = scriptedFetch([
      json(200, {
        status: "authorization_required",
        authSessionId: "as-9",
        authorizationUrl: "http://provider.test/auth",
        expiresAt: "2030-01-01T00:10:00Z",
        message: "m",
      }),
      json(200, { status: "completed", expiresAt: "2030-01-01T00:10:00Z" }),
      json(200, { status: "ready", accessToken: "tok", tokenType: "Bearer" }),
    ]);
    const urls: string[] = [];
    const wrapped = withAccessToken(
      client(fetch),
      { app: "e2e-user", subjects: { user: "u" }, onAuthorizationUrl: (url) => void urls.push(url) },
      async (token, a: number, b: string) => `${token.accessToken}:${a}:${b}`,
    );
    assert.equal(await wrapped(1, "x"), "tok:1:x");
    assert.deepEqual(urls, ["http://provider.test/auth"]);
    assert.equal(sent[1]?.url.pathname, "/v1/oauth/sessions/as-9");
  });

  it("withAccessToken gives up after maxConsents with the last AuthorizationRequired", async () => {
    const required = () =>
      json(200, {
        status: "authorization_required",
        authSessionId: "as-7",
        authorizationUrl: "http://provider.test/auth",
        expiresAt: "2030-01-01T00:10:00Z",
      });
    const completed = () => json(200, { status: "completed", expiresAt: "2030-01-01T00:10:00Z" });
    const { fetch } = scriptedFetch([required(), completed(), required()]);
    let calls = 0;
    const wrapped = withAccessToken(
      client(fetch),
      { app: "a", maxConsents: 1, onAuthorizationUrl: () => void calls++ },
      () => "ran",
    );
    await assert.rejects(wrapped(), AuthorizationRequired);
    assert.equal(calls, 1);
  });

  it("withAccessToken passes other errors through", async () => {
    const { fetch } = scriptedFetch([
      json(200, { status: "error", error: { code: "refreshFailed", message: "m" } }),
    ]);
    const wrapped = withAccessToken(
      client(fetch),
      { app: "a", onAuthorizationUrl: () => undefined },
      () => 1,
    );
    await assert.rejects(wrapped(), RefreshFailedError);
  });

  describe("withAccessToken and a call's own signal (its last argument's `signal`)", () => {
    const required = () =>
      json(200, {
        status: "authorization_required",
        authSessionId: "as-5",
        authorizationUrl: "http://provider.test/auth",
        expiresAt: "2030-01-01T00:10:00Z",
      });
    // Answers in order; "hang" is a consent poll never answered, until its request is aborted.
    const fetchWith = (answers: Array<Response | "hang">) => {
      const sent: string[] = [];
      const fetch = async (input: string, init: RequestInit): Promise<Response> => {
        sent.push(new URL(input).pathname);
        const a = answers.shift();
        if (a === undefined) throw new Error(`unexpected request ${input}`);
        if (a !== "hang") return a;
        return new Promise((_, reject) => {
          init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")), {
            once: true,
          });
        });
      };
      return { fetch, sent };
    };

    it("a call's signal ends that call's consent wait; fn still gets the argument", {
      timeout: 5_000,
    }, async () => {
      const { fetch } = fetchWith([required(), "hang"]);
      let ran = false;
      const wrapped = withAccessToken(
        client(fetch),
        { app: "a", onAuthorizationUrl: () => undefined },
        async (_token, name: string, _opts: { signal: AbortSignal }) => {
          ran = true;
          return name;
        },
      );
      const ctl = new AbortController();
      setTimeout(() => ctl.abort(new Error("user left")), 50);
      const started = Date.now();
      await assert.rejects(wrapped("alice", { signal: ctl.signal }), (e: unknown) => {
        assert.ok(e instanceof AbortedError, String(e));
        assert.equal((e.cause as Error).message, "user left");
        return true;
      });
      assert.ok(Date.now() - started < 2_000);
      assert.equal(ran, false);
    });

    it("a call's signal passes to fn unchanged, and its token request too", async () => {
      const { fetch } = fetchWith([json(200, { status: "ready", accessToken: "tok", tokenType: "Bearer" })]);
      const wrapped = withAccessToken(
        client(fetch),
        { app: "a", onAuthorizationUrl: () => undefined },
        async (token, opts: { signal: AbortSignal; n: number }) =>
          `${token.accessToken}:${opts.n}:${opts.signal.aborted}`,
      );
      assert.equal(await wrapped({ signal: new AbortController().signal, n: 7 }), "tok:7:false");
      const done = new AbortController();
      done.abort();
      await assert.rejects(wrapped({ signal: done.signal, n: 1 }), AbortedError);
    });

    it("opts.signal still ends every call's wait, a call's signal or not; neither keeps a listener after the call", {
      timeout: 5_000,
    }, async () => {
      // The abort listeners a signal holds (the ones added and not removed).
      const listeners = new Map<AbortSignal, Set<unknown>>();
      const watch = (signal: AbortSignal) => {
        const set = new Set<unknown>();
        listeners.set(signal, set);
        const add = signal.addEventListener.bind(signal);
        const remove = signal.removeEventListener.bind(signal);
        signal.addEventListener = ((type: string, l: EventListener, o?: AddEventListenerOptions) => {
          set.add(l);
          add(type, l, o);
        }) as typeof signal.addEventListener;
        signal.removeEventListener = ((type: string, l: EventListener, o?: EventListenerOptions) => {
          set.delete(l);
          remove(type, l, o);
        }) as typeof signal.removeEventListener;
        return signal;
      };
      const held = (signal: AbortSignal) => listeners.get(signal)?.size ?? 0;
      const { fetch } = fetchWith([
        json(200, { status: "ready", accessToken: "tok", tokenType: "Bearer" }),
        required(),
        "hang",
      ]);
      const wrapperCtl = new AbortController();
      watch(wrapperCtl.signal);
      const wrapped = withAccessToken(
        client(fetch),
        { app: "a", signal: wrapperCtl.signal, onAuthorizationUrl: () => undefined },
        async (token, _opts: { signal: AbortSignal }) => token.accessToken,
      );
      const callCtl = new AbortController();
      watch(callCtl.signal);
      assert.equal(await wrapped({ signal: callCtl.signal }), "tok");
      assert.equal(held(wrapperCtl.signal), 0);
      assert.equal(held(callCtl.signal), 0);
      setTimeout(() => wrapperCtl.abort(new Error("shutdown")), 50);
      await assert.rejects(wrapped({ signal: callCtl.signal }), AbortedError);
      assert.equal(held(callCtl.signal), 0);
    });

    it("a last argument whose signal is not an AbortSignal is only fn's", async () => {
      const { fetch } = fetchWith([json(200, { status: "ready", accessToken: "tok", tokenType: "Bearer" })]);
      const wrapped = withAccessToken(
        client(fetch),
        { app: "a", onAuthorizationUrl: () => undefined },
        async (_token, opts: { signal: string }) => opts.signal,
      );
      assert.equal(await wrapped({ signal: "not one" }), "not one");
    });
  });
});

describe("tools", () => {
  it("list, search, invoke", async () => {
    const { fetch, sent } = scriptedFetch([
      json(200, { data: [{ tool_id: "demo:whoami", name: "whoami", description: "who" }] }),
      json(200, {
        data: [{ name: "s", description: "d", content: "c", scope: "global", relevance_score: 1 }],
      }),
      json(200, { result: { status: "error", error: { message: "bad", code: "E_TOOL_INVALID_ARGS" } } }),
    ]);
    const c = client(fetch);
    assert.equal((await c.listTools())[0]?.name, "whoami");
    assert.equal((await c.searchSkills("who am i", { topK: 3 }))[0]?.name, "s");
    const inv = await c.invokeTool("whoami", { a: 1 }, { callId: "c1" });
    assert.equal(inv.result.status, "error");
    assert.equal(sent[1]?.url.search, "?q=who+am+i&top_k=3");
    assert.deepEqual(sent[2]?.body, { toolName: "whoami", args: { a: 1 }, callId: "c1" });
    assert.equal(sent[2]?.headers.authorization, "Bearer agent.jwt.value");
  });

  it("an authorization_required result is the typed AuthorizationRequired", async () => {
    const { fetch } = scriptedFetch([
      json(200, {
        result: {
          status: "authorization_required",
          authorization: {
            oauthAppRef: { kind: "OAuthApp", name: "demo-user" },
            authSessionId: "as-2",
            authorizationUrl: "http://provider.test/auth?y",
            expiresAt: "2030-01-01T00:00:00Z",
            message: "consent",
          },
        },
        toolCalled: {},
        toolReturned: { status: "ok" },
      }),
    ]);
    await assert.rejects(client(fetch).invokeTool("whoami"), (e: unknown) => {
      assert.ok(e instanceof AuthorizationRequired);
      assert.equal(e.sessionId, "as-2");
      assert.equal(e.oauthAppRef, "OAuthApp/demo-user");
      return true;
    });
  });
});

describe("instances", () => {
  it("escapes path segments; refuses . and .., which fetch cannot send", async () => {
    const answers = Array.from({ length: 7 }, () => json(200, { status: "active" }));
    const { fetch, sent } = scriptedFetch(answers);
    const c = client(fetch);
    await c.getInstance("default", "1712345678.000100 x", "assistant");
    await c.pauseInstance("default", "k.", "assistant");
    await c.resumeInstance("default", "a b:c", "assistant");
    await assert.rejects(c.pauseInstance("default", ".", "assistant"), InvalidRequestError);
    await assert.rejects(c.getInstance("default", "..", "assistant"), /instanceKey "\.\."/);
    await c.terminateInstance("default", "k/1", "assistant", { reason: "user left" });
    await c.deleteInstance("default", "k", "assistant");
    await c.turnEvents("default", "k", "assistant", "turn-1", { after: 2 });
    await c.postEvent("default", "k", { text: "hi", id: "msg-1", auth: {} });
    assert.deepEqual(
      sent.map((s) => `${s.method} ${s.url.pathname}${s.url.search}`),
      [
        "GET /v1/instances/default/1712345678.000100%20x/assistant",
        "POST /v1/instances/default/k./assistant/pause",
        "POST /v1/instances/default/a%20b%3Ac/assistant/resume",
        "POST /v1/instances/default/k%2F1/assistant/terminate",
        "DELETE /v1/instances/default/k/assistant",
        "GET /v1/instances/default/k/assistant/turns/turn-1/events?after=2",
        "POST /v1/instances/default/k/events",
      ],
    );
    assert.deepEqual(sent[3]?.body, { reason: "user left" });
    assert.deepEqual(sent[6]?.body, { text: "hi", id: "msg-1", auth: {} });
  });

  it("a post to a terminated instance is InstanceTerminatedError", async () => {
    const { fetch } = scriptedFetch([
      json(409, { error: { code: "instanceTerminated", message: "terminated; delete it", requestId: "q" } }),
    ]);
    await assert.rejects(
      client(fetch).postEvent("default", "k", { text: "x", auth: {} }),
      InstanceTerminatedError,
    );
  });

  it("waitForTurn waits for the instance and a turn it has not been told to ignore", async () => {
    const { fetch } = scriptedFetch([
      json(404, { error: { code: "notFound", message: "no such instance" } }),
      json(200, { status: "active", backlog: 1, recentTurns: [{ id: "turn-old" }] }),
      json(200, {
        status: "active",
        backlog: 0,
        activeTurn: { id: "turn-new" },
        recentTurns: [{ id: "turn-old" }],
      }),
    ]);
    const id = await client(fetch).waitForTurn("default", "k", "assistant", { ignore: ["turn-old"] });
    assert.equal(id, "turn-new");
  });
});
