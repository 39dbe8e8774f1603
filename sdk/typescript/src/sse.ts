// A Server-Sent Events parser (the WHATWG event stream format) over a
// fetch body: agentauth's turn streams send `id:`, `event:` and `data:`
// lines and `:` comments. Browser-safe.

/** One dispatched event. `id` is the last event id seen, as the spec keeps it. */
export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

/** Parses text chunks into events, fed with push (an event the stream ends before its blank line is never dispatched, as the spec says). */
export class SseParser {
  #buf = "";
  #data: string[] = [];
  #event = "";
  #id: string | undefined;
  #sawCr = false;
  #retry: number | undefined;

  /** The last `retry:` field's reconnection time, in ms; undefined until one came. */
  get retryMs(): number | undefined {
    return this.#retry;
  }

  /** The events complete after chunk. */
  push(chunk: string): SseEvent[] {
    if (chunk === "") {
      // A read that decoded to nothing (half of a UTF-8 character) is no
      // boundary: a CR before it still pairs with an LF after it.
      return [];
    }
    let text = chunk;
    if (this.#sawCr && text.startsWith("\n")) {
      // The \n of a \r\n split across two chunks.
      text = text.slice(1);
    }
    this.#sawCr = text.endsWith("\r");
    this.#buf += text;
    const out: SseEvent[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buf);
      if (!m) {
        break;
      }
      const line = this.#buf.slice(0, m.index);
      this.#buf = this.#buf.slice(m.index + m[0].length);
      const ev = this.#line(line);
      if (ev) {
        out.push(ev);
      }
    }
    return out;
  }

  #line(line: string): SseEvent | undefined {
    if (line === "") {
      if (this.#data.length === 0) {
        this.#event = "";
        return undefined;
      }
      const ev = { id: this.#id, event: this.#event || "message", data: this.#data.join("\n") };
      this.#data = [];
      this.#event = "";
      return ev;
    }
    if (line.startsWith(":")) {
      return undefined;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    switch (field) {
      case "data":
        this.#data.push(value);
        break;
      case "event":
        this.#event = value;
        break;
      case "id":
        if (!value.includes("\0")) {
          this.#id = value;
        }
        break;
      case "retry":
        if (/^\d+$/.test(value)) {
          this.#retry = Number(value);
        }
        break;
      default:
        // Unknown fields are ignored, as the spec says.
        break;
    }
    return undefined;
  }
}

/**
 * The events of body, as they arrive. An event not yet ended by a blank
 * line when the body ends is dropped, as the spec says (the stream was
 * cut mid-event). idleMs: a body that sends nothing — not even a
 * keep-alive comment — for that long is cancelled and onIdle is thrown;
 * so is it when signal aborts (the signal's reason is thrown). parser
 * is the caller's when it wants the stream's `retry:` afterwards.
 */
export async function* readSse(
  body: ReadableStream<Uint8Array>,
  idleMs: number,
  onIdle: () => Error,
  signal?: AbortSignal,
  parser: SseParser = new SseParser(),
): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      let onAbort: (() => void) | undefined;
      const stop = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onIdle()), idleMs);
        onAbort = () => reject(signal?.reason ?? new Error("aborted"));
        signal?.addEventListener("abort", onAbort, { once: true });
      });
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        if (signal?.aborted) {
          throw signal.reason ?? new Error("aborted");
        }
        r = await Promise.race([reader.read(), stop]);
      } finally {
        clearTimeout(timer);
        if (onAbort) {
          signal?.removeEventListener("abort", onAbort);
        }
      }
      if (r.done) {
        return;
      }
      for (const ev of parser.push(decoder.decode(r.value, { stream: true }))) {
        yield ev;
      }
    }
  } finally {
    // Cancel on every way out (the caller's break, an error, idle) so the
    // connection is released; a cancel of a failed stream may itself fail.
    reader.cancel().catch(() => undefined);
  }
}
