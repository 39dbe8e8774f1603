// sdk/TESTING.md 1: tokens through a real consent, and the higher-order
// function form. Runs locally (runtime token) and on AWS (SigV4).

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inspect } from "node:util";
import {
  AccessToken,
  AgentauthClient,
  AuthorizationRequired,
  GrantNotFoundError,
  NotFoundError,
  OAuthAppNotFoundError,
  UnauthenticatedError,
  withAccessToken,
} from "../../src/index.js";
import {
  app,
  assertHarness,
  consent,
  fresh,
  newClient,
  onAws,
  skipUnlessHarness,
  subjectPrefix,
} from "./harness.js";

const needs = ["AGENTAUTH_TEST_APP", "AGENTAUTH_TEST_SUBJECT_PREFIX"];

describe("tokens", { skip: skipUnlessHarness(...needs) }, () => {
  it("the harness is there", () => assertHarness(...needs));

  it("getAccessToken → AuthorizationRequired → consent → waitForAuthorization → ready", async () => {
    const c = newClient();
    const login = fresh("ts-tok");
    const subject = subjectPrefix + login;
    let required: AuthorizationRequired | undefined;
    try {
      await c.getAccessToken({ app, subjects: { user: subject } });
    } catch (err) {
      if (!(err instanceof AuthorizationRequired)) throw err;
      required = err;
    }
    assert.ok(required, "a new subject's first token request must need consent");
    assert.match(required.authorizationUrl, /^https?:\/\//);
    assert.match(required.sessionId, /.+/);
    assert.ok(
      required.expiresAt && required.expiresAt.getTime() > Date.now(),
      "the session expires in the future",
    );

    // Asked again before the consent: the same pending session.
    await assert.rejects(c.getAccessToken({ app, subjects: { user: subject } }), (e: unknown) => {
      assert.ok(e instanceof AuthorizationRequired);
      assert.equal(e.sessionId, required?.sessionId);
      return true;
    });

    const waiting = c.waitForAuthorization(required.sessionId, { timeoutMs: 120_000 });
    await consent(required.authorizationUrl, login);
    const st = await waiting;
    assert.equal(st.status, "completed");

    const token = await c.getAccessToken({ app, subjects: { user: subject } });
    assert.ok(token instanceof AccessToken);
    assert.ok(token.accessToken.length > 0);
    assert.ok(!inspect(token).includes(token.accessToken), "inspect prints no token");
    assert.ok(!JSON.stringify(token).includes(token.accessToken), "JSON holds no token");

    const revoked = await c.revoke(app, subject);
    assert.equal(revoked.revoked, true);
    assert.match(revoked.grantId, /.+/);
    // A subject that never consented has no grant.
    await assert.rejects(c.revoke(app, subjectPrefix + fresh("ts-none")), GrantNotFoundError);
  });

  it("withAccessToken: the callback gets the URL, the consent lands, the function runs with the token", async () => {
    const c = newClient();
    const login = fresh("ts-hof");
    const subject = subjectPrefix + login;
    const urls: string[] = [];
    const callProvider = withAccessToken(
      c,
      {
        app,
        subjects: { user: subject },
        onAuthorizationUrl: async (url) => {
          urls.push(url);
          await consent(url, login);
        },
        waitTimeoutMs: 120_000,
      },
      async (token, greeting: string) => `${greeting}: ${token.accessToken.length > 0 ? "a token" : "none"}`,
    );
    assert.equal(await callProvider("ran"), "ran: a token");
    assert.equal(urls.length, 1);
    // Once granted, no consent is asked again.
    assert.equal(await callProvider("again"), "again: a token");
    assert.equal(urls.length, 1);
    await c.revoke(app, subject);
  });

  it("typed errors with the request id", async () => {
    const c = newClient();
    await assert.rejects(
      c.getAccessToken({ app: "OAuthApp/no-such-app-sdk", subjects: { user: "x" } }),
      (e: unknown) => {
        assert.ok(e instanceof OAuthAppNotFoundError);
        return true;
      },
    );
    await assert.rejects(c.authorizationStatus("as-0000000000000000"), (e: unknown) => {
      assert.ok(e instanceof NotFoundError, String(e));
      assert.ok(e.requestId, "a 404 carries the request id");
      return true;
    });
    if (!onAws) {
      const bad = new AgentauthClient({ runtimeToken: "aat_not-the-token" });
      await assert.rejects(bad.listInstances(), (e: unknown) => {
        assert.ok(e instanceof UnauthenticatedError);
        assert.equal(e.status, 401);
        assert.ok(e.requestId);
        return true;
      });
    }
  });
});
