// The one place the SDK talks HTTP: credentials, timeouts, retries and
// the mapping of agentauth's error body to typed errors. Every route
// method of the client goes through Transport.send or Transport.open.
// Browser-safe: fetch, AbortController and timers only.

import {
  AbortedError,
  type AgentauthError,
  AgentauthTimeoutError,
  type ErrorBody,
  errorFromBody,
  InvalidRequestError,
  MissingCredentialError,
  NetworkError,
  UnexpectedResponseError,
} from "./errors.js";
import type { RequestSigner } from "./sigv4.js";
import { VERSION } from "./version.js";

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Which credential a route takes. */
export type RouteCredential =
  /** The runtime routes (`/v1/oauth/*`, `/v1/instances/*`): the runtime token, or SigV4 on AWS. */
  | "runtime"
  /** The tool routes (`/v1/agents/*`, `/v1/tools/invoke`): the agent JWT. */
  | "agent";

export interface TransportConfig {
  url: string;
  /** Where url came from, for messages: `AGENTAUTH_URL`, `the url option` or `the default url`. */
  urlSource: string;
  streamUrl: string | undefined;
  /** Where streamUrl came from: `AGENTAUTH_STREAM_URL` or `the streamUrl option`. */
  streamUrlSource?: string;
  runtimeToken: string | undefined;
  agentToken: string | (() => string | Promise<string>) | undefined;
  /** Set when the runtime routes are signed (AWS); undefined for the bearer runtime token. */
  signer: (() => Promise<RequestSigner>) | undefined;
  fetch: FetchLike;
  timeoutMs: number;
  maxRetries: number;
  /** Waits of a retry: base * 2^attempt, at most max, with jitter. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** A Retry-After longer than this is not waited for: the error is thrown. */
  maxRetryAfterMs: number;
}

export interface RequestSpec {
  method: "GET" | "POST" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined> | undefined;
  body?: unknown;
  credential: RouteCredential;
  /**
   * Safe to send again when no answer, or a 502/503/504, came: the request
   * has no effect, or the server makes a repeat of it a no-op. A request
   * that is not is still retried on 429, which the server answers before
   * acting.
   */
  idempotent: boolean;
  /** The stream URL (AGENTAUTH_STREAM_URL) when one is set, signed for `lambda`. */
  stream?: boolean;
  headers?: Record<string, string>;
  timeoutMs?: number | undefined;
  /**
   * When the whole call must be over (epoch ms), retries included: no
   * attempt's time limit runs past it, and no retry waits past it.
   */
  deadline?: number | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * One attempt's answer, its time limit and the caller's signal still
 * armed: read (the body, under them) then done (clears the timer).
 */
interface Exchange {
  res: Response;
  read(): Promise<string>;
  done(): void;
  /** The server asked: its origin and where its URL came from. */
  server: { origin: string; source: string };
}

const retryableStatus = new Set([429, 502, 503, 504]);

/**
 * The most bytes of an answer's body the SDK reads (4 MiB): every JSON
 * answer (a route's, an error's, followTurn's JSON form) is read whole
 * into memory, and no agentauth answer comes near it. A larger 2xx is an
 * UnexpectedResponseError naming the limit, not a process out of memory;
 * a larger error answer's body is not read (its status says what failed).
 * Event streams are not bounded by it: they are read event by event.
 */
export const maxBodyBytes = 4 * 1024 * 1024;

/** maxBodyBytes for messages: "4 MiB (4194304 bytes)". */
const maxBodyText = `${maxBodyBytes / (1024 * 1024)} MiB (${maxBodyBytes} bytes)`;

/** readBody's error for a body over maxBodyBytes; turned into an UnexpectedResponseError by its reader. */
class BodyTooLarge extends Error {}

/** The User-Agent sent under Node (a browser sets its own), worked out once. */
const nodeUserAgent: string | undefined = (() => {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return p?.versions?.node ? `agentauth-client-ts/${VERSION} node/${p.versions.node}` : undefined;
})();

/** Sleeps ms, or throws AbortedError when signal aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted(signal));
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      reject(aborted(signal as AbortSignal));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export function aborted(signal: AbortSignal): AbortedError {
  return new AbortedError({ code: "aborted", message: "the call was aborted", cause: signal.reason });
}

/** The wait before retry number attempt (0-based): exponential, capped, half of it random. */
export function backoff(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const d = Math.min(maxMs, baseMs * 2 ** attempt);
  return d / 2 + random() * (d / 2);
}

/** Retry-After as milliseconds (seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now: number = Date.now()): number | undefined {
  if (!value) {
    return undefined;
  }
  if (/^\s*\d+\s*$/.test(value)) {
    return Number(value) * 1000;
  }
  // An HTTP date starts with its day name; Date.parse alone takes "-1" for a year.
  const at = /^\s*[A-Za-z]{3},/.test(value) ? Date.parse(value) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * One path segment, escaped. A segment of `.` or `..` cannot be sent:
 * docs/turns.md has it sent as `%2E`/`%2E%2E`, but the WHATWG URL parser
 * every fetch uses removes those as dot segments too, so the request
 * would reach another route.
 */
export function segment(s: string, what = "path segment"): string {
  if (s === "." || s === "..") {
    throw new InvalidRequestError({
      code: "invalidRequest",
      message: `${what} ${JSON.stringify(s)} cannot be sent by fetch (the URL parser drops "." and ".." segments, escaped or not)`,
    });
  }
  if (s === "") {
    throw new InvalidRequestError({ code: "invalidRequest", message: `${what} is empty` });
  }
  return encodeURIComponent(s);
}

export class Transport {
  readonly #cfg: TransportConfig;

  constructor(cfg: TransportConfig) {
    this.#cfg = cfg;
  }

  get url(): string {
    return this.#cfg.url;
  }

  get hasStreamUrl(): boolean {
    return this.#cfg.streamUrl !== undefined;
  }

  /** Sends spec and returns the parsed JSON answer of a 2xx; throws the typed error otherwise. */
  async send<T>(spec: RequestSpec): Promise<T> {
    return (await this.sendWithId<T>(spec)).data;
  }

  /** send, with the answer's X-Request-Id (for errors a 200 carries, as a token request's). */
  async sendWithId<T>(spec: RequestSpec): Promise<{ data: T; requestId: string | undefined }> {
    return jsonOf<T>(await this.#exchange(spec), spec);
  }

  /**
   * Sends spec for an event stream. A 2xx answered as
   * `text/event-stream` is returned with its body unread: the caller reads
   * it with its own limits (the time limit covers the wait for its
   * headers). Any other 2xx (a proxy that ignored Accept, a server that
   * answers the JSON form) is read as send reads an answer — its body
   * under the request's time limit and signal, at most maxBodyBytes, a
   * JSON object — and returned as json.
   */
  async openStream<T>(
    spec: RequestSpec,
  ): Promise<{ stream: Response; json?: undefined } | { stream?: undefined; json: T }> {
    const ex = await this.#exchange(spec);
    if ((ex.res.headers.get("Content-Type") ?? "").includes("text/event-stream")) {
      ex.done();
      return { stream: ex.res };
    }
    return { json: (await jsonOf<T>(ex, spec)).data };
  }

  async #exchange(spec: RequestSpec): Promise<Exchange> {
    const cfg = this.#cfg;
    for (let attempt = 0; ; attempt++) {
      const canRetry = attempt < cfg.maxRetries;
      // Whether a wait of ms before the next attempt still ends before the deadline.
      const fits = (ms: number) => spec.deadline === undefined || Date.now() + ms < spec.deadline;
      let ex: Exchange;
      try {
        ex = await this.#attempt(spec);
      } catch (err) {
        if (
          canRetry &&
          spec.idempotent &&
          (err instanceof NetworkError || err instanceof AgentauthTimeoutError)
        ) {
          const wait = backoff(attempt, cfg.backoffBaseMs, cfg.backoffMaxMs);
          if (fits(wait)) {
            await sleep(wait, spec.signal);
            continue;
          }
        }
        throw err;
      }
      if (ex.res.ok) {
        return ex;
      }
      // Read once: the error carries it, and a retry waits for it.
      const after = retryAfterMs(ex.res.headers.get("Retry-After"));
      let err: AgentauthError;
      try {
        err = await errorOf(ex, spec, after);
      } finally {
        ex.done();
      }
      if (canRetry && retryableStatus.has(ex.res.status) && (spec.idempotent || ex.res.status === 429)) {
        const wait = after ?? backoff(attempt, cfg.backoffBaseMs, cfg.backoffMaxMs);
        if ((after === undefined || after <= cfg.maxRetryAfterMs) && fits(wait)) {
          await sleep(wait, spec.signal);
          continue;
        }
      }
      throw err;
    }
  }

  async #attempt(spec: RequestSpec): Promise<Exchange> {
    const cfg = this.#cfg;
    const useStream = spec.stream === true && cfg.streamUrl !== undefined;
    const base = (useStream ? (cfg.streamUrl as string) : cfg.url).replace(/\/+$/, "");
    const url = new URL(base + spec.path);
    // Where the request went, for messages: scheme://host:port only — no
    // path, query or userinfo (which may hold a secret).
    const server = {
      origin: url.origin,
      source: useStream ? (cfg.streamUrlSource ?? "streamUrl") : cfg.urlSource,
    };
    for (const [k, v] of Object.entries(spec.query ?? {})) {
      if (v !== undefined) {
        url.searchParams.set(k, String(v));
      }
    }
    const headers: Record<string, string> = { Accept: "application/json", ...spec.headers };
    if (nodeUserAgent) {
      headers["User-Agent"] = nodeUserAgent;
    }
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = JSON.stringify(spec.body);
      headers["Content-Type"] = "application/json";
    }
    const secrets: string[] = [];
    if (spec.credential === "agent") {
      const token = await this.#agentToken(spec);
      secrets.push(token);
      headers.Authorization = `Bearer ${token}`;
    } else if (cfg.signer) {
      const signer = await cfg.signer();
      const signed = await signer.sign(useStream ? "lambda" : "execute-api", {
        method: spec.method,
        url,
        headers,
        body,
      });
      Object.assign(headers, signed);
      for (const [k, v] of Object.entries(signed)) {
        if (k.toLowerCase() === "x-amz-security-token" || k.toLowerCase() === "authorization") {
          secrets.push(v);
        }
      }
    } else if (cfg.runtimeToken) {
      secrets.push(cfg.runtimeToken);
      headers.Authorization = `Bearer ${cfg.runtimeToken}`;
    } else {
      throw new MissingCredentialError({
        code: "missingCredential",
        message: `${spec.method} ${spec.path} takes the runtime credential: pass runtimeToken (AGENTAUTH_RUNTIME_TOKEN), or auth: "sigv4" (AGENTAUTH_AUTH=sigv4) for the AWS deployment`,
      });
    }
    let timeoutMs = spec.timeoutMs ?? cfg.timeoutMs;
    if (spec.deadline !== undefined) {
      timeoutMs = Math.min(timeoutMs, spec.deadline - Date.now());
    }
    const what = `${spec.method} ${url.pathname}`;
    const timeoutError = (cause?: unknown) =>
      new AgentauthTimeoutError({
        code: "timeout",
        message: `${what}: no answer within ${Math.max(0, timeoutMs)} ms`,
        cause: cause === undefined ? undefined : safeCause(cause, secrets),
      });
    if (timeoutMs <= 0) {
      throw timeoutError();
    }
    const ctl = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctl.abort();
    }, timeoutMs);
    const onAbort = () => ctl.abort();
    spec.signal?.addEventListener("abort", onAbort, { once: true });
    if (spec.signal?.aborted) {
      ctl.abort();
    }
    const done = () => {
      clearTimeout(timer);
      spec.signal?.removeEventListener("abort", onAbort);
    };
    // What a failed fetch or body read is: the caller's abort, the time
    // limit, or the connection. Its cause is a copy without the request
    // (a fetch error may carry it, headers and all) and without a token.
    const failure = (err: unknown, during: string): AgentauthError => {
      if (spec.signal?.aborted) {
        return aborted(spec.signal);
      }
      if (timedOut) {
        return timeoutError(err);
      }
      const message =
        during === ""
          ? `${what}: no answer from ${server.origin} (${server.source}): is agentauth running there? (${describe(err)})`
          : `${what}: the answer from ${server.origin} (${server.source}) was cut: ${describe(err)}`;
      return new NetworkError({
        code: "network",
        message: redact(message, secrets),
        cause: safeCause(err, secrets),
      });
    };
    let res: Response;
    try {
      // Called unbound: a browser's fetch passed as `fetch: window.fetch`
      // throws "Illegal invocation" when called as a method of another object.
      const fetchFn = cfg.fetch;
      res = await fetchFn(url.toString(), { method: spec.method, headers, body, signal: ctl.signal });
    } catch (err) {
      done();
      throw failure(err, "");
    }
    const read = async (): Promise<string> => {
      try {
        return await readBody(res, ctl.signal, maxBodyBytes);
      } catch (err) {
        if (err instanceof BodyTooLarge && !spec.signal?.aborted && !timedOut) {
          throw new UnexpectedResponseError({
            code: "unexpectedResponse",
            message: `${what}: the answer is larger than ${maxBodyText}, the most the SDK reads (${err.message})`,
            status: res.status,
            requestId: headerRequestId(res),
          });
        }
        throw failure(err, "the answer was cut: ");
      }
    };
    return { res, read, done, server };
  }

  async #agentToken(spec: RequestSpec): Promise<string> {
    const t = this.#cfg.agentToken;
    const token = typeof t === "function" ? await t() : t;
    if (!token) {
      throw new MissingCredentialError({
        code: "missingCredential",
        message: `${spec.method} ${spec.path} takes an agent JWT: pass agentToken (AGENTAUTH_AGENT_TOKEN)`,
      });
    }
    return token;
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}

/** text with each secret (a token, a signature) replaced. */
function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) {
    if (s.length >= 4) {
      out = out.split(s).join("[redacted]");
    }
  }
  return out;
}

/**
 * A copy of a fetch error for `cause`: its name and message (secrets
 * redacted), and its causes' likewise — none of its other properties, as
 * a fetch error may hold the request with its Authorization header.
 */
function safeCause(err: unknown, secrets: readonly string[], depth = 0): Error {
  const src = err instanceof Error ? err : undefined;
  const inner = src ? (src as { cause?: unknown }).cause : undefined;
  const copy = new Error(
    redact(src ? src.message : String(err), secrets),
    inner !== undefined && depth < 4 ? { cause: safeCause(inner, secrets, depth + 1) } : undefined,
  );
  copy.name = src?.name ?? "Error";
  const code = src ? (src as { code?: unknown }).code : undefined;
  if (typeof code === "string") {
    Object.defineProperty(copy, "code", { value: code, enumerable: true });
  }
  // The copy's stack is this SDK's, not the original's (which may quote the message).
  copy.stack = `${copy.name}: ${copy.message}`;
  return copy;
}

/**
 * The body as text, given up when signal aborts (the time limit, the
 * caller's abort): the read is cancelled, the connection released. A
 * body of more than maxBytes (its Content-Length, else the bytes read)
 * is BodyTooLarge, and cancelled likewise.
 */
async function readBody(res: Response, signal: AbortSignal, maxBytes: number): Promise<string> {
  if (!res.body) {
    return "";
  }
  const declared = Number(res.headers.get("Content-Length") ?? Number.NaN);
  if (declared > maxBytes) {
    res.body.cancel().catch(() => undefined);
    throw new BodyTooLarge(`Content-Length ${declared}`);
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const onAbort = () => {
    reader.cancel(signal.reason).catch(() => undefined);
  };
  signal.addEventListener("abort", onAbort, { once: true });
  let out = "";
  let bytes = 0;
  try {
    for (;;) {
      if (signal.aborted) {
        throw signal.reason ?? new Error("aborted");
      }
      const r = await reader.read();
      if (signal.aborted) {
        throw signal.reason ?? new Error("aborted");
      }
      if (r.done) {
        return out + decoder.decode();
      }
      bytes += r.value.byteLength;
      if (bytes > maxBytes) {
        reader.cancel().catch(() => undefined);
        throw new BodyTooLarge(`more than ${maxBytes} bytes read`);
      }
      out += decoder.decode(r.value, { stream: true });
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
    if (signal.aborted) {
      reader.cancel().catch(() => undefined);
    }
  }
}

/**
 * A 2xx exchange's answer, read and parsed: a JSON object, or an
 * UnexpectedResponseError. The time limit and the signal cover the body
 * too (a body that stalls after its headers must not hang the call), and
 * it is read up to maxBodyBytes.
 */
async function jsonOf<T>(
  ex: Exchange,
  spec: RequestSpec,
): Promise<{ data: T; requestId: string | undefined }> {
  const res = ex.res;
  const requestId = headerRequestId(res);
  let text: string;
  try {
    text = await ex.read();
  } finally {
    ex.done();
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    // "" too: every route answers a JSON object.
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    // Not the documented object (a proxy's empty 200, a page): typed,
    // rather than a TypeError where a route method reads a field of it.
    throw new UnexpectedResponseError({
      code: "unexpectedResponse",
      message: `${spec.method} ${spec.path}: the answer is not a JSON object (HTTP ${res.status}${text === "" ? ", empty" : ""})`,
      status: res.status,
      requestId,
    });
  }
  return { data: data as T, requestId };
}

/** The answer's request id: agentauth's X-Request-Id, else AWS's (API Gateway, a Lambda URL). */
function headerRequestId(res: Response): string | undefined {
  return res.headers.get("X-Request-Id") || res.headers.get("x-amzn-RequestId") || undefined;
}

/** A non-2xx exchange's typed error; retryAfter: its Retry-After, in ms. */
async function errorOf(
  ex: Exchange,
  spec: RequestSpec,
  retryAfter: number | undefined,
): Promise<AgentauthError> {
  const res = ex.res;
  let text = "";
  try {
    text = await ex.read();
  } catch (err) {
    if (spec.signal?.aborted) {
      throw err;
    }
    // The status alone still says what failed.
  }
  let body: ErrorBody | undefined;
  let agentauthBody = false;
  try {
    const parsed = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (parsed && typeof parsed.error === "object" && parsed.error !== null) {
      body = parsed.error as ErrorBody;
      agentauthBody = true;
    } else if (parsed && typeof parsed.message === "string") {
      // API Gateway's and the Lambda URL's own answers: {"message": "..."}.
      body = { message: parsed.message };
    }
  } catch {
    // Not JSON (a proxy's page): the status alone says what failed.
  }
  const requestId = headerRequestId(res);
  if (!agentauthBody && requestId === undefined && res.status < 500) {
    // Every answer of agentauth (and of its AWS front door) carries a
    // request id: this one came from another server — a URL that points
    // elsewhere (the demo provider's port, a web server). A 5xx without
    // one stays a server error: a proxy's own 502 in front of agentauth.
    const { origin, source } = ex.server;
    return new UnexpectedResponseError({
      code: "unexpectedResponse",
      message:
        `${spec.method} ${spec.path}: the server at ${origin} did not answer as agentauth ` +
        `(HTTP ${res.status}, no X-Request-Id, no agentauth error body): is ${source} agentauth's address?`,
      status: res.status,
    });
  }
  return errorFromBody(
    res.status,
    body,
    requestId,
    retryAfter === undefined ? undefined : retryAfter / 1000,
    // The status is in the message once: the request id's suffix has it.
    requestId === undefined && !body?.requestId
      ? `${spec.method} ${spec.path}: HTTP ${res.status}`
      : `${spec.method} ${spec.path}`,
  );
}
