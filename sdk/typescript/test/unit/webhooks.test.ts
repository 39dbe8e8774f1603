import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { describe, it } from "node:test";
import { verifyWebhook, type WebhookCheck, WebhookVerificationError } from "../../src/index.js";

const secret = "whsec-test-secret";
const body = JSON.stringify({
  connector: "chat-ui",
  swarm: "default",
  instanceKey: "1712345678.000100",
  agent: "assistant",
  turnId: "turn-9a",
  traceId: "4bf9",
  event: { type: "turn.completed", seq: 8, at: "2026-11-24T10:00:09Z", data: { final: "You are alice." } },
  origin: { connector: "chat-ui", channel: "C123" },
});
const now = new Date("2026-11-24T10:00:10Z");
const ts = String(Math.floor(now.getTime() / 1000));

function sign(s: string, t: string, b: string | Buffer): string {
  return `v1=${createHmac("sha256", s).update(`${t}.`).update(b).digest("hex")}`;
}

describe("verifyWebhook", () => {
  it("a delivery signed with the secret verifies, with its deliveryKey", async () => {
    for (const raw of [body, Buffer.from(body), new TextEncoder().encode(body)]) {
      const d = await verifyWebhook(secret, ts, sign(secret, ts, body), raw, { now });
      assert.equal(d.deliveryKey, "turn-9a:8");
      assert.equal(d.event.type, "turn.completed");
      assert.equal(d.origin?.channel, "C123");
    }
    // A Uint8Array secret, and a timestamp at the edge of the window.
    const old = String(Number(ts) - 300);
    await verifyWebhook(new TextEncoder().encode(secret), old, sign(secret, old, body), body, { now });
  });

  const refused: Array<[string, string | undefined, string | undefined, string, string, WebhookCheck]> = [
    [
      "one byte of the body changed",
      ts,
      sign(secret, ts, body),
      body.replace("alice", "alicf"),
      secret,
      "signature_mismatch",
    ],
    ["another secret", ts, sign("other", ts, body), body, secret, "signature_mismatch"],
    [
      "an old timestamp",
      String(Number(ts) - 301),
      sign(secret, String(Number(ts) - 301), body),
      body,
      secret,
      "timestamp_out_of_window",
    ],
    [
      "a timestamp from the future",
      String(Number(ts) + 3600),
      sign(secret, String(Number(ts) + 3600), body),
      body,
      secret,
      "timestamp_out_of_window",
    ],
    [
      "the timestamp changed",
      String(Number(ts) - 1),
      sign(secret, ts, body),
      body,
      secret,
      "signature_mismatch",
    ],
    ["no timestamp", undefined, sign(secret, ts, body), body, secret, "malformed_timestamp"],
    ["a signed timestamp", `+${ts}`, sign(secret, ts, body), body, secret, "malformed_timestamp"],
    ["no signature", ts, undefined, body, secret, "malformed_signature"],
    [
      "uppercase hex",
      ts,
      sign(secret, ts, body).toUpperCase().replace("V1=", "v1="),
      body,
      secret,
      "malformed_signature",
    ],
    ["another scheme", ts, sign(secret, ts, body).replace("v1=", "v0="), body, secret, "malformed_signature"],
    ["a signed body that is not a delivery", ts, sign(secret, ts, "{}"), "{}", secret, "malformed_body"],
  ];
  for (const [name, t, sig, b, s, check] of refused) {
    it(`refuses ${name}: ${check}`, async () => {
      await assert.rejects(verifyWebhook(s, t, sig, b, { now }), (e: unknown) => {
        assert.ok(e instanceof WebhookVerificationError);
        assert.equal(e.check, check);
        return true;
      });
    });
  }

  it("a wider tolerance takes an older delivery", async () => {
    const old = String(Number(ts) - 600);
    await verifyWebhook(secret, old, sign(secret, old, body), body, { now, toleranceSeconds: 900 });
  });
});
