// Randomised tests of the parsers of untrusted input (the event stream,
// webhook deliveries, Retry-After) with a fixed seed, and the rule that
// the browser entry imports no Node module.

import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { backoff, retryAfterMs } from "../../src/http.js";
import { verifyWebhook, WebhookVerificationError } from "../../src/index.js";
import { SseParser } from "../../src/sse.js";

// mulberry32: a small seeded generator, so a failure replays.
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const alphabet = ["a", " ", ":", "\n", "\r", "\r\n", "id", "data", "event", "é", "{}", "\0", "😀"];

describe("parsers of untrusted input", () => {
  it("the SSE parser never throws, and the way a stream is cut into chunks changes nothing", () => {
    const r = rng(21);
    for (let n = 0; n < 500; n++) {
      let text = "";
      const len = Math.floor(r() * 60);
      for (let i = 0; i < len; i++) text += alphabet[Math.floor(r() * alphabet.length)];
      const whole = new SseParser().push(text);
      const p = new SseParser();
      const pieces: ReturnType<SseParser["push"]> = [];
      for (let i = 0; i < text.length; ) {
        const step = 1 + Math.floor(r() * 5);
        pieces.push(...p.push(text.slice(i, i + step)));
        i += step;
      }
      assert.deepEqual(pieces, whole, JSON.stringify(text));
    }
  });

  it("verifyWebhook refuses any mangled delivery with a WebhookVerificationError, never another error", async () => {
    const r = rng(7);
    const secret = "s3cret";
    const body = JSON.stringify({ turnId: "turn-1", event: { type: "turn.completed", seq: 3 } });
    const now = new Date("2026-11-24T10:00:00Z");
    const ts = String(now.getTime() / 1000);
    const sig = `v1=${createHmac("sha256", secret).update(`${ts}.${body}`).digest("hex")}`;
    const mangle = (s: string) => {
      const i = Math.floor(r() * (s.length + 1));
      const c = String.fromCharCode(Math.floor(r() * 128));
      return r() < 0.5 ? s.slice(0, i) + c + s.slice(i + 1) : s.slice(0, i) + s.slice(i + 1);
    };
    for (let n = 0; n < 300; n++) {
      const which = Math.floor(r() * 3);
      const [t, g, b] = [
        which === 0 ? mangle(ts) : ts,
        which === 1 ? mangle(sig) : sig,
        which === 2 ? mangle(body) : body,
      ];
      if (t === ts && g === sig && b === body) continue;
      await assert.rejects(
        verifyWebhook(secret, t, g, b, { now }),
        WebhookVerificationError,
        JSON.stringify([t, g, b]),
      );
    }
    assert.equal((await verifyWebhook(secret, ts, sig, body, { now })).deliveryKey, "turn-1:3");
  });

  it("Retry-After: seconds or an HTTP date; anything else is ignored", () => {
    const now = Date.parse("2026-11-24T10:00:00Z");
    assert.equal(retryAfterMs("5", now), 5000);
    assert.equal(retryAfterMs(" 0 ", now), 0);
    assert.equal(retryAfterMs("Tue, 24 Nov 2026 10:00:30 GMT", now), 30_000);
    assert.equal(retryAfterMs("Tue, 24 Nov 2026 09:00:00 GMT", now), 0);
    assert.equal(retryAfterMs(null, now), undefined);
    assert.equal(retryAfterMs("soon", now), undefined);
    assert.equal(retryAfterMs("-1", now), undefined);
  });

  it("backoff doubles up to its cap, with up to half of it random", () => {
    for (const [attempt, lo, hi] of [
      [0, 50, 100],
      [1, 100, 200],
      [3, 400, 800],
      [10, 4000, 8000],
    ] as const) {
      assert.equal(
        backoff(attempt, 100, 8000, () => 0),
        lo,
      );
      assert.equal(
        backoff(attempt, 100, 8000, () => 1),
        hi,
      );
    }
  });
});

describe("browser entry", () => {
  it("no module of the package imports a Node module (the AWS packages load on demand)", () => {
    const dir = new URL("../../src/", import.meta.url);
    for (const f of readdirSync(dir).filter((f) => f.endsWith(".js"))) {
      const js = readFileSync(new URL(f, dir), "utf8");
      assert.doesNotMatch(js, /from\s+["']node:|require\(/, f);
      assert.doesNotMatch(
        js,
        /from\s+["']@(smithy|aws-sdk|aws-crypto)\//,
        `${f} imports an AWS package statically`,
      );
    }
  });
});
