// The bound on JSON answers (4 MiB, every JSON answer the SDK reads) and
// followTurn's JSON form (a 200 that is not text/event-stream: a proxy
// that ignored Accept), read under the request's time limit and signal.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AbortedError, AgentauthError, type TurnEvent, UnexpectedResponseError } from "../../src/index.js";
import { client, json, scriptedFetch } from "./fakes.js";

const MiB = 1024 * 1024;

/** A 200 JSON answer of about size bytes, sent in 64 KiB chunks with no Content-Length. */
function bigJson(size: number, status = 200): Response {
  const ev: TurnEvent = { turnId: "t", seq: 1, type: "turn.completed", at: "2026-11-28T10:00:00Z" };
  const head = new TextEncoder().encode(`{"data":[${JSON.stringify(ev)}],"pad":"`);
  const tail = new TextEncoder().encode('"}');
  const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
  let sent = head.byteLength + tail.byteLength;
  let done = false;
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      ctl.enqueue(head);
    },
    pull(ctl) {
      if (done) {
        return;
      }
      if (sent + chunk.byteLength > size) {
        ctl.enqueue(tail);
        ctl.close();
        done = true;
        return;
      }
      sent += chunk.byteLength;
      ctl.enqueue(chunk);
    },
  });
  return new Response(body, {
    status,
    headers: { "Content-Type": "application/json", "X-Request-Id": "req-big" },
  });
}

function stalledJson(): { res: Response; cancelled: () => boolean } {
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      ctl.enqueue(new TextEncoder().encode('{"data":['));
    },
    cancel() {
      cancelled = true;
    },
  });
  return {
    res: new Response(body, { headers: { "Content-Type": "application/json" } }),
    cancelled: () => cancelled,
  };
}

function sse(...evs: TurnEvent[]): Response {
  const text = evs.map((ev) => `id: ${ev.seq}\nevent: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`).join("");
  return new Response(text, { headers: { "Content-Type": "text/event-stream" } });
}

async function drain(it: AsyncIterable<TurnEvent>): Promise<TurnEvent[]> {
  const out: TurnEvent[] = [];
  for await (const ev of it) {
    out.push(ev);
  }
  return out;
}

const isTooLarge = (e: unknown) => {
  assert.ok(e instanceof UnexpectedResponseError, String(e));
  assert.match(e.message, /larger than 4 MiB \(4194304 bytes\), the most the SDK reads/);
  return true;
};

describe("JSON answers are read up to 4 MiB", () => {
  it("a larger answer of a route is an UnexpectedResponseError naming the limit, with the request id", async () => {
    const { fetch } = scriptedFetch([bigJson(5 * MiB)]);
    await assert.rejects(client(fetch).authorizationStatus("s1"), (e: unknown) => {
      isTooLarge(e);
      assert.equal((e as UnexpectedResponseError).status, 200);
      assert.equal((e as UnexpectedResponseError).requestId, "req-big");
      return true;
    });
  });

  it("an answer that declares a larger Content-Length is refused before it is read", async () => {
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(ctl) {
        pulled++;
        ctl.enqueue(new TextEncoder().encode("{}"));
        ctl.close();
      },
    });
    const res = new Response(body, {
      headers: { "Content-Type": "application/json", "Content-Length": String(5 * MiB) },
    });
    const { fetch } = scriptedFetch([res]);
    await assert.rejects(client(fetch).authorizationStatus("s1"), isTooLarge);
    assert.ok(pulled <= 1);
  });

  it("an answer just under the limit is read", async () => {
    const { fetch } = scriptedFetch([bigJson(4 * MiB - 1024)]);
    const events = await client(fetch).turnEvents("s", "k", "a", "t");
    assert.equal(events[0]?.type, "turn.completed");
  });

  it("a larger error answer is the status's error: its body is not read", async () => {
    const { fetch } = scriptedFetch([bigJson(5 * MiB, 503)]);
    await assert.rejects(client(fetch, { maxRetries: 0 }).authorizationStatus("s1"), (e: unknown) => {
      assert.ok(e instanceof AgentauthError && !(e instanceof UnexpectedResponseError), String(e));
      assert.equal(e.status, 503);
      return true;
    });
  });
});

describe("followTurn's JSON form (a 200 that is not text/event-stream)", () => {
  it("larger than 4 MiB is an UnexpectedResponseError naming the limit", async () => {
    const { fetch } = scriptedFetch([bigJson(5 * MiB)]);
    await assert.rejects(drain(client(fetch).followTurn("s", "k", "a", "t")), isTooLarge);
  });

  it("is read under the request's time limit: a stalled one is dropped and the follow goes on", async () => {
    const stalled = stalledJson();
    const done: TurnEvent = { turnId: "t", seq: 1, type: "turn.completed", at: "2026-11-28T10:00:00Z" };
    const { fetch } = scriptedFetch([stalled.res, sse(done)]);
    const started = Date.now();
    const evs = await drain(client(fetch, { timeoutMs: 100 }).followTurn("s", "k", "a", "t"));
    assert.deepEqual(
      evs.map((e) => e.seq),
      [1],
    );
    assert.ok(Date.now() - started < 3_000);
    assert.ok(stalled.cancelled());
  });

  it("is read under the follow's signal: an abort while it stalls is an AbortedError", {
    timeout: 5_000,
  }, async () => {
    const stalled = stalledJson();
    const { fetch } = scriptedFetch([stalled.res]);
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(new Error("user stop")), 50);
    await assert.rejects(
      drain(client(fetch).followTurn("s", "k", "a", "t", { signal: ctl.signal })),
      AbortedError,
    );
    assert.ok(stalled.cancelled());
  });

  it("a small one is still one window of events, then polling", async () => {
    const ev = (seq: number, type = "step.started"): TurnEvent => ({
      turnId: "t",
      seq,
      type,
      at: "2026-11-28T10:00:00Z",
    });
    const { fetch, sent } = scriptedFetch([
      json(200, { data: [ev(1), ev(2)] }),
      json(200, { data: [ev(2), ev(3, "turn.completed")] }),
    ]);
    const evs = await drain(client(fetch).followTurn("s", "k", "a", "t", { pollIntervalMs: 1 }));
    assert.deepEqual(
      evs.map((e) => e.seq),
      [1, 2, 3],
    );
    assert.equal(sent[1]?.url.searchParams.get("after"), "2");
  });
});
