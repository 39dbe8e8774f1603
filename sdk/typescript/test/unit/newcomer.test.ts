// What a newcomer's test of the SDK ran into (.tools/newcomer-sdk-report.md):
// the turn of a posted event found by its id, errors that say where the
// client went and what answered, a default URL, Python habits and option
// typos refused with a TypeError that says what is taken, request ids in
// messages, the defaults shared with the Python SDK, and the README's
// install, turns and tools sections.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import {
  AgentauthClient,
  type AgentauthError,
  AgentauthTimeoutError,
  AuthorizationRequired,
  InternalError,
  NetworkError,
  NotFoundError,
  UnauthenticatedError,
  UnexpectedResponseError,
  withAccessToken,
} from "../../src/index.js";
import { client, json, scriptedFetch } from "./fakes.js";

const pkg = new URL("../../../", import.meta.url); // dist/test/unit → sdk/typescript

function turn(id: string, inputEventId: string, status = "completed") {
  return { id, inputEventId, status, inputType: "user.input" };
}

/** Runs fn with Date.now moved on by skipMs once moveOn() is called (a wait's deadline passes at once). */
async function withClock<T>(fn: (moveOn: (ms: number) => void) => Promise<T>): Promise<T> {
  const real = Date.now;
  let offset = 0;
  Date.now = () => real() + offset;
  try {
    return await fn((ms) => {
      offset += ms;
    });
  } finally {
    Date.now = real;
  }
}

describe("waitForTurn with the posted event's id (P3)", () => {
  it("returns the turn whose inputEventId is the event's, not the newest turn (an earlier message's)", async () => {
    const { fetch, sent } = scriptedFetch([
      // The worker is still on the earlier message: its turn is the newest.
      json(200, {
        status: "active",
        backlog: 1,
        activeTurn: turn("turn-earlier", "ev-earlier", "running"),
        recentTurns: [turn("turn-earlier", "ev-earlier", "running"), turn("turn-old", "ev-old")],
      }),
      // Then the posted event's turn starts.
      json(200, {
        status: "active",
        backlog: 0,
        activeTurn: turn("turn-mine", "ev-mine", "running"),
        recentTurns: [
          turn("turn-mine", "ev-mine", "running"),
          turn("turn-earlier", "ev-earlier"),
          turn("turn-old", "ev-old"),
        ],
      }),
    ]);
    const id = await client(fetch).waitForTurn("default", "k", "assistant", { eventId: "ev-mine" });
    assert.equal(id, "turn-mine");
    assert.equal(sent.length, 2, "it waited past the earlier message's turn");
  });

  it("finds the event's turn among the ended ones too, whatever is newer", async () => {
    const { fetch } = scriptedFetch([
      json(200, {
        status: "active",
        backlog: 0,
        activeTurn: turn("turn-later", "ev-later", "running"),
        recentTurns: [turn("turn-later", "ev-later", "running"), turn("turn-mine", "ev-mine")],
      }),
    ]);
    assert.equal(
      await client(fetch).waitForTurn("default", "k", "assistant", { eventId: "ev-mine" }),
      "turn-mine",
    );
  });

  it("a server whose turns name no inputEventId is an error, not a wait until the time limit", async () => {
    const { fetch } = scriptedFetch([
      json(200, { status: "active", backlog: 0, recentTurns: [{ id: "turn-1", status: "completed" }] }),
    ]);
    await assert.rejects(
      client(fetch).waitForTurn("default", "k", "assistant", { eventId: "ev-mine" }),
      (e: unknown) => e instanceof UnexpectedResponseError && /inputEventId/.test(e.message),
    );
  });

  it("a misspelt eventId is a TypeError, not a silent wait for any turn", async () => {
    const { fetch } = scriptedFetch([]);
    await assert.rejects(
      client(fetch).waitForTurn("default", "k", "assistant", { eventID: "ev-mine" } as never),
      (e: unknown) =>
        e instanceof TypeError && /unknown option "eventID" \(did you mean eventId\?\)/.test(e.message),
    );
  });

  it("the turn type names its inputEventId", () => {
    const dts = readFileSync(new URL("dist/src/types.d.ts", pkg), "utf8");
    assert.match(dts, /inputEventId: string;/);
  });
});

describe("where the client went (P4, P5, P7)", () => {
  const refused = () => {
    throw new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED 127.0.0.1:8089") });
  };

  it("a NetworkError names the base URL (no path, query or userinfo), where it came from, and asks if agentauth runs there", async () => {
    for (const [opts, origin, source] of [
      [{ env: { AGENTAUTH_URL: "http://127.0.0.1:8089" } }, "http://127.0.0.1:8089", "AGENTAUTH_URL"],
      [{ url: "http://user:pw@127.0.0.1:8089/prefix", env: {} }, "http://127.0.0.1:8089", "the url option"],
      [{ env: {} }, "http://127.0.0.1:8080", "the default url"],
    ] as const) {
      const { fetch } = scriptedFetch([refused]);
      const c = new AgentauthClient({ ...opts, runtimeToken: "aat_x", fetch, maxRetries: 0 });
      await assert.rejects(c.listInstances(), (e: unknown) => {
        assert.ok(e instanceof NetworkError, String(e));
        assert.ok(
          e.message.includes(`no answer from ${origin} (${source}): is agentauth running there?`),
          e.message,
        );
        assert.match(e.message, /ECONNREFUSED/);
        assert.doesNotMatch(e.message, /pw|user:|8089\/prefix/);
        return true;
      });
    }
  });

  it("the default url is make run's, http://127.0.0.1:8080", async () => {
    const { fetch, sent } = scriptedFetch([json(200, { data: [] })]);
    const c = new AgentauthClient({ env: {}, runtimeToken: "aat_x", fetch });
    assert.equal(c.url, "http://127.0.0.1:8080");
    await c.listInstances();
    assert.equal(sent[0]?.url.toString(), "http://127.0.0.1:8080/v1/instances");
  });

  it("an error answer without agentauth's error body or X-Request-Id is an UnexpectedResponseError that says so", async () => {
    const { fetch } = scriptedFetch([
      new Response("404 page not found\n", { status: 404, headers: { "Content-Type": "text/plain" } }),
    ]);
    const c = new AgentauthClient({
      env: { AGENTAUTH_URL: "http://127.0.0.1:9090" },
      runtimeToken: "aat_x",
      fetch,
    });
    await assert.rejects(c.getAccessToken({ app: "demo-user" }), (e: unknown) => {
      assert.ok(e instanceof UnexpectedResponseError, String(e));
      assert.ok(!(e instanceof NotFoundError));
      assert.equal(e.status, 404);
      assert.match(
        e.message,
        /the server at http:\/\/127\.0\.0\.1:9090 did not answer as agentauth .*is AGENTAUTH_URL agentauth's address\?/,
      );
      return true;
    });
  });

  it("agentauth's own 404 stays a NotFoundError, and so does AWS's front door (x-amzn-RequestId)", async () => {
    const { fetch } = scriptedFetch([
      new Response(JSON.stringify({ error: { code: "notFound", message: 'no swarm "x"' } }), { status: 404 }),
      new Response(JSON.stringify({ message: "Not Found" }), {
        status: 404,
        headers: { "x-amzn-RequestId": "amzn-1" },
      }),
    ]);
    const c = client(fetch);
    await assert.rejects(c.getInstance("x", "k", "a"), NotFoundError);
    await assert.rejects(
      c.getInstance("x", "k", "a"),
      (e: unknown) => e instanceof NotFoundError && e.requestId === "amzn-1",
    );
  });

  it("a proxy's 502 without either stays a server error (retried, then thrown as such)", async () => {
    const { fetch } = scriptedFetch([new Response("Bad Gateway", { status: 502 })]);
    await assert.rejects(client(fetch, { maxRetries: 0 }).getInstance("x", "k", "a"), InternalError);
  });
});

describe("Python habits and typos (P9, P10)", () => {
  it("waitForAuthorization takes the AuthorizationRequired error itself", async () => {
    const { fetch, sent } = scriptedFetch([json(200, { status: "completed", expiresAt: "x" })]);
    const needed = new AuthorizationRequired({ authorizationUrl: "http://p/auth", sessionId: "as-1" });
    const st = await client(fetch).waitForAuthorization(needed);
    assert.equal(st.status, "completed");
    assert.equal(sent[0]?.url.pathname, "/v1/oauth/sessions/as-1");
  });

  it("waitForAuthorization refuses anything else with a TypeError naming what it takes", async () => {
    const { fetch, sent } = scriptedFetch([]);
    for (const bad of [new Error("x"), 42, undefined, { sessionId: 1 }]) {
      await assert.rejects(
        client(fetch).waitForAuthorization(bad as never),
        (e: unknown) =>
          e instanceof TypeError &&
          /takes the auth session id \(a string\) or the AuthorizationRequired error/.test(e.message),
      );
    }
    assert.equal(sent.length, 0);
  });

  it("postEvent given a string says it takes {text, auth, …}; auth is required", async () => {
    const { fetch, sent } = scriptedFetch([]);
    const c = client(fetch);
    await assert.rejects(
      c.postEvent("default", "k", "hi" as never),
      (e: unknown) => e instanceof TypeError && /postEvent takes \{text, auth, …\}/.test(e.message),
    );
    await assert.rejects(
      c.postEvent("default", "k", { text: "hi" } as never),
      (e: unknown) => e instanceof TypeError && /auth is required/.test(e.message),
    );
    assert.equal(sent.length, 0);
  });

  it("an unknown client option is a TypeError with the nearest known one", () => {
    assert.throws(
      () => new AgentauthClient({ runtimeTokn: "aat_x", env: {} } as never),
      (e: unknown) =>
        e instanceof TypeError &&
        e.message === 'new AgentauthClient: unknown option "runtimeTokn" (did you mean runtimeToken?)',
    );
    assert.throws(
      () => new AgentauthClient({ URL: "http://x.test", env: {} } as never),
      /unknown option "URL" \(did you mean url\?\)/,
    );
  });

  it("an unknown getAccessToken (and withAccessToken) option is a TypeError with the nearest known one", async () => {
    const { fetch, sent } = scriptedFetch([]);
    const c = client(fetch);
    await assert.rejects(
      c.getAccessToken({ app: "demo-user", minTtl: 300 } as never),
      (e: unknown) =>
        e instanceof TypeError && /unknown option "minTtl" \(did you mean minTtlSeconds\?\)/.test(e.message),
    );
    assert.throws(
      () => withAccessToken(c, { app: "a", onAuthorizationURL: () => {} } as never, async () => 1),
      /unknown option "onAuthorizationURL" \(did you mean onAuthorizationUrl\?\)/,
    );
    assert.equal(sent.length, 0);
  });
});

describe("messages, docs and defaults (P16)", () => {
  it("an error's message and String() end with the status and request id, as Python's str(e)", async () => {
    const { fetch } = scriptedFetch([
      json(
        401,
        { error: { code: "unauthenticated", message: "a valid runtime credential is required" } },
        {
          "X-Request-Id": "d8caf964b3db5fcb",
        },
      ),
    ]);
    await assert.rejects(client(fetch).listInstances(), (e: unknown) => {
      assert.ok(e instanceof UnauthenticatedError);
      assert.equal(e.message, "a valid runtime credential is required (HTTP 401, request d8caf964b3db5fcb)");
      assert.equal(String(e), `UnauthenticatedError: ${e.message}`);
      assert.equal(e.requestId, "d8caf964b3db5fcb");
      return true;
    });
  });

  it("an answer without a message gets the route and status, once", async () => {
    const { fetch } = scriptedFetch([json(404, { error: { code: "notFound" } }, { "X-Request-Id": "r1" })]);
    await assert.rejects(client(fetch).getInstance("d", "k", "a"), (e: unknown) => {
      assert.equal((e as AgentauthError).message, "GET /v1/instances/d/k/a (HTTP 404, request r1)");
      return true;
    });
  });

  it("AuthorizationRequired's message is for the user: no request id in it", () => {
    const e = new AuthorizationRequired({
      authorizationUrl: "u",
      sessionId: "s",
      message: "Connect your demo account.",
      requestId: "r1",
    });
    assert.equal(e.message, "Connect your demo account.");
    assert.equal(e.requestId, "r1");
  });

  it("waitForAuthorization waits 10 minutes by default, as Python's", async () => {
    await withClock(async (moveOn) => {
      const { fetch } = scriptedFetch([
        () => {
          moveOn(10 * 60_000);
          return json(200, { status: "pending", expiresAt: "x" });
        },
      ]);
      await assert.rejects(
        client(fetch).waitForAuthorization("as-1"),
        (e: unknown) => e instanceof AgentauthTimeoutError && /after 600000 ms/.test(e.message),
      );
    });
  });

  it("waitForTurn waits 60 s by default, as Python's", async () => {
    await withClock(async (moveOn) => {
      const { fetch } = scriptedFetch([
        () => {
          moveOn(60_000);
          return json(200, { status: "active", backlog: 1, recentTurns: [] });
        },
      ]);
      await assert.rejects(
        client(fetch).waitForTurn("d", "k", "a", { eventId: "ev-1" }),
        (e: unknown) => e instanceof AgentauthTimeoutError && /within 60000 ms/.test(e.message),
      );
    });
  });

  it("the declarations say which options and methods take the agent JWT, and what actor and claims are", () => {
    const dts = readFileSync(new URL("dist/src/client.d.ts", pkg), "utf8");
    for (const method of ["listTools", "searchSkills", "invokeTool"]) {
      const at = dts.indexOf(`    ${method}(`);
      assert.ok(at > 0, method);
      const doc = dts.slice(dts.lastIndexOf("/**", at), at);
      assert.match(doc, /agent JWT/, `${method}'s doc comment`);
    }
    for (const field of ["actor", "claims"]) {
      const at = dts.indexOf(`    ${field}?: `);
      assert.ok(at > 0, field);
      assert.match(dts.slice(at - 400, at), /\*\/\s*$/, `${field} has a doc comment`);
    }
    assert.match(dts, /Default `http:\/\/127\.0\.0\.1:8080`/);
  });
});

describe("the README (P1, P3, P12, P14, tools)", () => {
  const readme = readFileSync(new URL("README.md", pkg), "utf8");
  const block = (name: string) => {
    const m = readme.match(
      new RegExp(`<!-- sdk test runs this: ${name} -->\\s*\\n\`\`\`ts\\n([\\s\\S]*?)\\n\`\`\``),
    );
    assert.ok(m, `the README has the ${name} block`);
    return m[1] ?? "";
  };
  const section = (title: string) => {
    const at = readme.indexOf(`\n## ${title}\n`);
    assert.ok(at >= 0, title);
    const end = readme.indexOf("\n## ", at + 1);
    return readme.slice(at, end < 0 ? undefined : end);
  };

  it("Install: the tarball packed into the app, and how to run and type-check the snippets", () => {
    const install = section("Install");
    assert.match(install, /npm pack --pack-destination \S*vendor/);
    assert.match(install, /npm install \.\/vendor\/agentauth-client-0\.21\.0\.tgz/);
    assert.match(install, /npx tsx app\.mts/);
    assert.match(install, /"type": "module"/);
    assert.match(install, /npx tsc --noEmit/);
  });

  it("turns: waits for the posted event's turn, and names no Connector make run lacks", () => {
    const turns = block("turns");
    assert.match(turns, /const posted = await client\.postEvent\(/);
    assert.match(turns, /waitForTurn\(swarm, instanceKey, agent, \{ eventId: posted\.eventId \}\)/);
    assert.match(turns, /origin: \{ channel: "C123" \}, \/\/ .*connector/);
    assert.doesNotMatch(turns, /connector: "/);
  });

  it("lifecycle: its post passes auth", () => {
    assert.match(block("lifecycle"), /postEvent\(swarm, instanceKey, \{ text: "are you there\?", auth: /);
  });

  it("tools: the agent JWT exported, its hour, a renewing function, a skill query make run's demo answers", () => {
    const tools = section("Tools");
    assert.match(tools, /export AGENTAUTH_AGENT_TOKEN=/);
    assert.match(tools, /1 h/);
    assert.match(tools, /function as `agentToken`/);
    const demo = readFileSync(new URL("../../examples/bundle/tools.yaml", pkg), "utf8");
    assert.match(demo, /name: connect-demo/);
    assert.match(block("tools"), /searchSkills\("connect demo", \{ topK: 3 \}\).*\/\/ \[ 'connect-demo' \]/);
  });
});
