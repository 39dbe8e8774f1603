import assert from "node:assert/strict";
import type { ServerResponse } from "node:http";
import { describe, it } from "node:test";
import { AbortedError, NetworkError, NotFoundError, type TurnEvent } from "../../src/index.js";
import { SseParser } from "../../src/sse.js";
import { client, json, scriptedFetch, serve } from "./fakes.js";

const types = [
  "turn.started",
  "step.started",
  "tool.called",
  "turn.parked",
  "turn.resumed",
  "tool.completed",
];

function event(seq: number, type?: string): TurnEvent {
  return {
    turnId: "turn-1",
    seq,
    type: type ?? types[seq] ?? "step.completed",
    at: "2026-11-24T10:00:00Z",
    data: {},
  };
}

function send(res: ServerResponse, ev: TurnEvent): void {
  res.write(`id: ${ev.seq}\nevent: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`);
}

describe("SSE parser", () => {
  it("reads events split anywhere, CRLF and CR line ends, comments and multi-line data", () => {
    const text = ": keep-alive\r\nid: 1\r\nevent: a\r\ndata: x\r\ndata: y\r\n\r\nid: 2\rdata: z\r\r: bye\n\n";
    for (let cut = 0; cut <= text.length; cut++) {
      const p = new SseParser();
      const got = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
      assert.deepEqual(
        got,
        [
          { id: "1", event: "a", data: "x\ny" },
          { id: "2", event: "message", data: "z" },
        ],
        `cut at ${cut}`,
      );
    }
  });

  it("drops an event the stream ended in the middle of", () => {
    const p = new SseParser();
    assert.deepEqual(p.push("id: 1\ndata: {}\n"), []);
  });
});

describe("followTurn", () => {
  it("reconnects with Last-Event-ID after a cut, yields each seq once, ends at turn.completed", async () => {
    const seen: Array<{ lastEventId: string | undefined; after: string | null; accept: string | undefined }> =
      [];
    let n = 0;
    const srv = await serve((req, res) => {
      const u = new URL(req.url ?? "/", "http://x");
      seen.push({
        lastEventId: req.headers["last-event-id"] as string | undefined,
        after: u.searchParams.get("after"),
        accept: req.headers.accept,
      });
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      n++;
      if (n === 1) {
        // Starts after 0 (the caller's after), is cut mid-event.
        for (const s of [1, 2, 3]) send(res, event(s));
        res.write(': keep-alive\n\nid: 4\nevent: turn.resumed\ndata: {"tu');
        setTimeout(() => res.socket?.destroy(), 20);
      } else if (n === 2) {
        // A server that repeats what the client has: the client drops it.
        for (const s of [3, 4, 5]) send(res, event(s));
        res.end(": stream limit reached; reconnect with Last-Event-ID to go on\n\n");
      } else {
        send(res, event(5));
        send(res, event(6, "turn.completed"));
        send(res, event(7, "turn.started")); // never read: the turn ended
        res.end();
      }
    });
    try {
      const c = client(undefined, { url: "http://unused.test", streamUrl: srv.url, env: false });
      const got: number[] = [];
      for await (const ev of c.followTurn("default", "k 1", "assistant", "turn-1", { after: 0 })) {
        got.push(ev.seq);
      }
      assert.deepEqual(got, [1, 2, 3, 4, 5, 6]);
      assert.deepEqual(
        seen.map((s) => [s.lastEventId, s.after]),
        [
          [undefined, "0"],
          ["3", null],
          ["5", null],
        ],
      );
      assert.equal(seen[0]?.accept, "text/event-stream");
    } finally {
      await srv.close();
    }
  });

  it("falls back to polling the JSON form on 406 (API Gateway)", async () => {
    const { fetch, sent } = scriptedFetch([
      json(406, { error: { code: "notAcceptable", message: "streams are on the function URL" } }),
      json(200, { data: [event(0), event(1)] }),
      json(200, { data: [event(1), event(2, "turn.failed")] }),
    ]);
    const c = client(fetch);
    const got: string[] = [];
    for await (const ev of c.followTurn("default", "k", "assistant", "turn-1", { pollIntervalMs: 1 })) {
      got.push(`${ev.seq}:${ev.type}`);
    }
    assert.deepEqual(got, ["0:turn.started", "1:step.started", "2:turn.failed"]);
    assert.deepEqual(
      sent.map((s) => s.url.search),
      ["", "", "?after=1"],
    );
    assert.equal(sent[1]?.headers.accept, "application/json");
  });

  it("polling skips an event without a seq, as the stream does, and asks after the last seq", async () => {
    const noSeq = { turnId: "turn-1", type: "step.started" } as unknown as TurnEvent;
    const { fetch, sent } = scriptedFetch([
      json(406, { error: { code: "notAcceptable", message: "streams are on the function URL" } }),
      json(200, { data: [event(0), noSeq] }),
      json(200, { data: [noSeq, event(1, "turn.completed")] }),
    ]);
    const got: number[] = [];
    for await (const ev of client(fetch).followTurn("default", "k", "assistant", "turn-1", {
      pollIntervalMs: 1,
    })) {
      got.push(ev.seq);
    }
    assert.deepEqual(got, [0, 1]);
    assert.equal(sent[2]?.url.search, "?after=0");
  });

  it("gives up after maxReconnects cuts in a row without a new event", async () => {
    let n = 0;
    const srv = await serve((_req, res) => {
      n++;
      res.socket?.destroy();
    });
    try {
      const c = client(undefined, { url: srv.url, env: false });
      const it = c.followTurn("default", "k", "assistant", "turn-1", { maxReconnects: 2 });
      await assert.rejects(it.next(), NetworkError);
      assert.equal(n, 3);
    } finally {
      await srv.close();
    }
  });

  it("a turn that is not there is NotFoundError, not a reconnect", async () => {
    const { fetch } = scriptedFetch([json(404, { error: { code: "notFound", message: "no such turn" } })]);
    const it = client(fetch).followTurn("default", "k", "assistant", "turn-x");
    await assert.rejects(it.next(), NotFoundError);
  });

  it("a silent stream is dropped and reconnected; abort ends the follow", async () => {
    let n = 0;
    const srv = await serve((_req, res) => {
      n++;
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.flushHeaders();
      if (n === 1) send(res, event(0));
      // then nothing, not even a keep-alive
    });
    try {
      const ctl = new AbortController();
      const c = client(undefined, { url: srv.url, env: false });
      const got: number[] = [];
      await assert.rejects(
        (async () => {
          for await (const ev of c.followTurn("default", "k", "assistant", "turn-1", {
            idleTimeoutMs: 50,
            // Connections that lived are not failures in a row: this never gives up.
            maxReconnects: 1,
            signal: ctl.signal,
          })) {
            got.push(ev.seq);
            setTimeout(() => ctl.abort(), 1000);
          }
        })(),
        AbortedError,
      );
      assert.deepEqual(got, [0]);
      assert.ok(n >= 4, `reconnected ${n - 1} times`);
    } finally {
      await srv.close();
    }
  });

  it("breaking out of the loop closes the connection", async () => {
    let closed = false;
    const srv = await serve((req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      send(res, event(0));
      req.socket.on("close", () => {
        closed = true;
      });
    });
    try {
      const c = client(undefined, { url: srv.url, env: false });
      for await (const ev of c.followTurn("default", "k", "assistant", "turn-1")) {
        assert.equal(ev.seq, 0);
        break;
      }
      for (let i = 0; i < 50 && !closed; i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(closed);
    } finally {
      await srv.close();
    }
  });
});
