// sdk/TESTING.md 3 and 4: a turn followed live through the proxy — park,
// a forced disconnect, consent, resume, completion, every seq once — the
// lifecycle on an instance of its own, and (locally) the turn's webhook
// deliveries verified and tampered copies refused.

import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import {
  AgentauthClient,
  InstanceTerminatedError,
  NotFoundError,
  type TurnEvent,
  verifyWebhook,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  WebhookVerificationError,
} from "../../src/index.js";
import {
  agent,
  assertHarness,
  claims,
  connector,
  consent,
  deliveries,
  drop,
  fresh,
  header,
  newClient,
  proxyUrl,
  skipUnlessHarness,
  sleep,
  subjectPrefix,
  swarm,
  webhookSecret,
} from "./harness.js";

const needs = [
  "AGENTAUTH_TEST_SWARM",
  "AGENTAUTH_TEST_AGENT",
  "AGENTAUTH_TEST_SUBJECT_PREFIX",
  "AGENTAUTH_TEST_PROXY_URL",
];

describe("turns", { skip: skipUnlessHarness(...needs) }, () => {
  // The followed turn, for the webhook tests.
  let followed: { turnId: string; events: TurnEvent[] } | undefined;

  it("the harness is there", () => assertHarness(...needs));

  it("a turn followed live through park, a dropped connection, consent, resume and completion", async () => {
    const c = newClient();
    const login = fresh("ts-turn");
    const subject = subjectPrefix + login;
    const key = fresh("ts-thread");
    const posted = await c.postEvent(swarm, key, {
      text: "who am I?",
      agent,
      auth: {
        actor: { type: "user", id: subject },
        subjects: { user: subject },
        claims: { sub: login, ...claims },
      },
      origin: connector ? { connector, channel: "sdk-typescript" } : { channel: "sdk-typescript" },
    });
    assert.equal(posted.instanceKey, key);
    assert.equal(posted.agent, agent);
    const turnId = await c.waitForTurn(swarm, key, agent, { eventId: posted.eventId, timeoutMs: 60_000 });

    // The stream goes through the harness's proxy, which /drop cuts.
    const viaProxy = new AgentauthClient({ streamUrl: proxyUrl });
    const events: TurnEvent[] = [];
    let consented: Promise<unknown> | undefined;
    let dropped = -1;
    for await (const ev of viaProxy.followTurn(swarm, key, agent, turnId, {
      signal: AbortSignal.timeout(180_000),
    })) {
      events.push(ev);
      if (ev.type === "turn.parked") {
        const url = ev.data?.authorizationUrl;
        assert.equal(typeof url, "string", "turn.parked carries the consent link");
        // The instance's pending consents list the same session and link.
        const pending = await c.pendingAuthorizations({ swarm, instanceKey: key, agent });
        const mine = pending.find((p) => p.authSessionId === ev.data?.authSessionId);
        assert.equal(mine?.authorizationUrl, url, JSON.stringify(pending.map((p) => p.authSessionId)));
        // Cut the live stream, then consent while the iterator reconnects by itself.
        dropped = await drop();
        consented = consent(url as string, login);
      }
    }
    assert.ok(consented, `the turn parked on consent: ${events.map((e) => e.type).join(", ")}`);
    await consented;
    assert.ok(dropped >= 1, `the drop cut the live stream (${dropped} connections)`);

    const seqs = events.map((e) => e.seq);
    assert.deepEqual(
      seqs,
      seqs.map((_, i) => i),
      `every seq once, in order: ${seqs.join(",")}`,
    );
    const types = events.map((e) => e.type);
    assert.ok(types.includes("turn.resumed"), types.join(", "));
    assert.equal(types.at(-1), "turn.completed", types.join(", "));
    assert.ok(events.every((e) => e.turnId === turnId));

    // The JSON form holds the same events.
    const stored = await c.turnEvents(swarm, key, agent, turnId);
    assert.deepEqual(
      stored.map((e) => `${e.seq}:${e.type}`),
      events.map((e) => `${e.seq}:${e.type}`),
    );
    const after = await c.turnEvents(swarm, key, agent, turnId, { after: 2 });
    assert.equal(after[0]?.seq, 3);

    // Followed again without a stream URL: on agentauth serve the stream is
    // at AGENTAUTH_URL; behind API Gateway the stream route answers 406 and
    // the iterator polls the JSON form instead. Same events either way.
    const direct = new AgentauthClient({ streamUrl: "" });
    const again: string[] = [];
    for await (const ev of direct.followTurn(swarm, key, agent, turnId, { after: 1, pollIntervalMs: 200 })) {
      again.push(`${ev.seq}:${ev.type}`);
    }
    assert.deepEqual(
      again,
      events.slice(2).map((e) => `${e.seq}:${e.type}`),
    );

    const inst = await c.getInstance(swarm, key, agent);
    const done = inst.recentTurns.find((t) => t.id === turnId);
    assert.equal(done?.status, "completed");
    assert.ok(done?.finalAnswer, "the completed turn has its final answer");
    followed = { turnId, events };
  });

  it("lifecycle: inspect, pause, resume, terminate, delete on an instance of its own", async () => {
    const c = newClient();
    const key = fresh("ts-life");
    const posted = await c.postEvent(swarm, key, { text: "hello", agent, auth: {} });
    const turnId = await c.waitForTurn(swarm, key, agent, { eventId: posted.eventId, timeoutMs: 60_000 });
    assert.ok(turnId);

    const list = await c.listInstances();
    assert.ok(list.data.some((i) => i.instanceKey === key && i.swarm === swarm && i.agent === agent));

    assert.equal((await c.pauseInstance(swarm, key, agent)).status, "paused");
    assert.equal((await c.getInstance(swarm, key, agent)).status, "paused");
    assert.equal(
      (await c.pauseInstance(swarm, key, agent)).status,
      "paused",
      "pausing twice changes nothing",
    );
    assert.equal((await c.resumeInstance(swarm, key, agent)).status, "active");

    assert.equal((await c.terminateInstance(swarm, key, agent, { reason: "sdk test" })).status, "terminated");
    await assert.rejects(
      c.postEvent(swarm, key, { text: "again", agent, auth: {} }),
      InstanceTerminatedError,
    );
    await assert.rejects(c.pauseInstance(swarm, key, agent), (e: unknown) => {
      assert.ok(e instanceof InstanceTerminatedError);
      assert.equal(e.status, 409);
      assert.ok(e.requestId);
      return true;
    });

    const del = await c.deleteInstance(swarm, key, agent);
    assert.deepEqual(del, { deleted: true, oauthGrantsKept: true });
    await assert.rejects(c.getInstance(swarm, key, agent), NotFoundError);
  });

  describe("webhooks", {
    skip: connector && webhookSecret ? false : "no connector (webhook tests are local only)",
  }, () => {
    let mine: Array<{ headers: Record<string, string>; body: string }> = [];

    before(async () => {
      assert.ok(followed, "the followed turn ran");
      const want = followed.turnId;
      // Deliveries go out asynchronously: wait for the parked and the completed one.
      for (let i = 0; i < 60; i++) {
        mine = (await deliveries(connector)).filter((d) => {
          try {
            return (JSON.parse(d.body) as { turnId?: string }).turnId === want;
          } catch {
            return false;
          }
        });
        const types = mine.map((d) => (JSON.parse(d.body) as { event: { type: string } }).event.type);
        if (types.includes("turn.parked") && types.includes("turn.completed")) break;
        await sleep(500);
      }
    });

    it("the turn's deliveries verify, with their delivery keys", async () => {
      const types: string[] = [];
      for (const d of mine) {
        const v = await verifyWebhook(
          webhookSecret,
          header(d, WEBHOOK_TIMESTAMP_HEADER),
          header(d, WEBHOOK_SIGNATURE_HEADER),
          d.body,
        );
        assert.equal(v.turnId, followed?.turnId);
        assert.equal(v.connector, connector);
        assert.equal(v.deliveryKey, `${v.turnId}:${v.event.seq}`);
        const ev = followed?.events.find((e) => e.seq === v.event.seq);
        assert.equal(ev?.type, v.event.type, "the delivery is the followed event");
        types.push(v.event.type);
      }
      assert.ok(types.includes("turn.parked") && types.includes("turn.completed"), types.join(", "));
    });

    it("a tampered body, another secret and an old timestamp are refused", async () => {
      const d = mine[0];
      assert.ok(d);
      const ts = header(d, WEBHOOK_TIMESTAMP_HEADER) ?? "";
      const sig = header(d, WEBHOOK_SIGNATURE_HEADER) ?? "";
      const i = d.body.indexOf(":") + 2;
      const tampered =
        d.body.slice(0, i) + String.fromCharCode(d.body.charCodeAt(i) ^ 1) + d.body.slice(i + 1);
      assert.equal(tampered.length, d.body.length);
      const cases: Array<[string, () => Promise<unknown>, string]> = [
        ["one byte of the body", () => verifyWebhook(webhookSecret, ts, sig, tampered), "signature_mismatch"],
        ["another secret", () => verifyWebhook(`${webhookSecret}x`, ts, sig, d.body), "signature_mismatch"],
        [
          "an old timestamp",
          () => verifyWebhook(webhookSecret, String(Number(ts) - 600), sig, d.body),
          "timestamp_out_of_window",
        ],
        [
          "a replay later than the window",
          () => verifyWebhook(webhookSecret, ts, sig, d.body, { now: new Date((Number(ts) + 301) * 1000) }),
          "timestamp_out_of_window",
        ],
      ];
      for (const [name, verify, check] of cases) {
        await assert.rejects(verify, (e: unknown) => {
          assert.ok(e instanceof WebhookVerificationError, name);
          assert.equal(e.check, check, name);
          return true;
        });
      }
    });
  });
});
