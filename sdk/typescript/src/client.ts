// AgentauthClient: agentauth's routes as methods — tokens and consent,
// tools, turns and their lifecycle. Configuration is read once, here,
// from the options and else the AGENTAUTH_* environment (when there is
// one: a browser has none). Browser-safe: no node: import.

import {
  AgentauthError,
  AgentauthTimeoutError,
  AuthorizationFailed,
  AuthorizationRequired,
  type ErrorBody,
  errorFromBody,
  InternalError,
  NetworkError,
  NotAcceptableError,
  NotFoundError,
  TooManyStreamsError,
  UnexpectedResponseError,
} from "./errors.js";
import { aborted, backoff, type FetchLike, type RequestSpec, segment, sleep, Transport } from "./http.js";
import {
  type AwsCredentialProvider,
  type AwsCredentials,
  makeSigV4Signer,
  type RequestSigner,
} from "./sigv4.js";
import { readSse, SseParser } from "./sse.js";
import { AccessToken, type ReadyTokenWire } from "./token.js";
import {
  type Actor,
  type AuthSessionStatus,
  type Instance,
  type InstanceList,
  type InstanceRecord,
  type ObjectRef,
  type PendingAuthorization,
  type PostEventInput,
  type PostedEvent,
  type ResumeTarget,
  type RevokeResult,
  type Skill,
  type Subjects,
  type ToolInvocation,
  type ToolManifestEntry,
  TURN_END_TYPES,
  type TurnEvent,
  type TurnSummary,
} from "./types.js";

export interface ClientOptions {
  /**
   * agentauth's base URL (`AGENTAUTH_URL`): `agentauth serve`'s, or the API's on AWS.
   * Default `http://127.0.0.1:8080` (`make run`'s address), as the Python SDK's.
   */
  url?: string;
  /**
   * Where turn event streams are served when not at url (`AGENTAUTH_STREAM_URL`): on
   * AWS, the turn function's URL (TurnStreamUrl), signed for `lambda`. `""` for none.
   */
  streamUrl?: string;
  /** The runtime token for the runtime routes: tokens, consent, turns, instances (`AGENTAUTH_RUNTIME_TOKEN`). */
  runtimeToken?: string;
  /**
   * An agent JWT for the tool routes — listTools, searchSkills, invokeTool
   * (`AGENTAUTH_AGENT_TOKEN`) — or a function that returns a fresh one
   * (asked on each request: a JWT expires, `make run`'s after 1 h).
   */
  agentToken?: string | (() => string | Promise<string>);
  /** `"token"` (default) or `"sigv4"` (`AGENTAUTH_AUTH`): the runtime routes signed with AWS credentials. */
  auth?: "token" | "sigv4";
  /** The AWS region for SigV4 (`AWS_REGION`, else `AWS_DEFAULT_REGION`). */
  region?: string;
  /** AWS credentials for SigV4; default: the AWS SDK's default provider chain. */
  credentials?: AwsCredentials | AwsCredentialProvider;
  /** The environment to read the defaults from; default `process.env` where there is one, `false` for none. */
  env?: Record<string, string | undefined> | false;
  /** fetch to use (tests, a proxy agent); default the global fetch. */
  fetch?: FetchLike;
  /** The time limit of one request, in ms (default 30,000); long polls add their wait to it. */
  timeoutMs?: number;
  /** Retries of a request that may be sent again (default 3). */
  maxRetries?: number;
  /** The first retry's wait, in ms (default 250), doubled each retry up to 8,000 ms, half of it random. */
  retryBaseMs?: number;
}

/** What every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
  /** This call's time limit, in ms. */
  timeoutMs?: number;
}

export interface GetAccessTokenOptions extends CallOptions {
  /** The OAuthApp: `"OAuthApp/<name>"`, its name alone, or `{kind, name}`. */
  app: ObjectRef;
  /** The subjects the token belongs to (`user` and/or `global`, as the app's subjectMode asks). */
  subjects?: Subjects;
  /**
   * Who asks (the user, a service): recorded with the consent session and
   * the audit, and the actor of the turn a consent resumes. The runtime
   * vouches for it, as for subjects.
   */
  actor?: Actor;
  /**
   * The end user's verified claims (`{sub, scope, …}`), which the bundle's
   * access policies match; kept with the consent for the turn it resumes.
   * Not the agent JWT: the tool routes take that (agentToken).
   */
  claims?: Record<string, unknown>;
  /** Scopes to ask for; default the app's. */
  scopes?: string[];
  /** The least lifetime the token must have left (server default 300). */
  minTtlSeconds?: number;
  /** The agent instance to wake when the user consents. */
  resume?: ResumeTarget;
  /** The origin the woken turn keeps for its answer's delivery. */
  origin?: Record<string, unknown>;
}

export interface WaitOptions extends CallOptions {
  /** How long to wait in all, in ms (default 10 minutes, as the Python SDK's); the wait is long polls of at most 55 s. */
  timeoutMs?: number;
}

export interface FollowTurnOptions {
  /** Start after this seq (the last one seen); default from the first event. */
  after?: number;
  signal?: AbortSignal;
  /**
   * Failed reconnects in a row (a cut or a refused request within 5 s, without a new event)
   * before giving up (default 8). A stream the server ends before the turn does is no failure.
   */
  maxReconnects?: number;
  /** A stream silent for this long (no event, no keep-alive) is dropped and reconnected (default 45,000 ms). */
  idleTimeoutMs?: number;
  /** The poll interval when streams are not available (406 behind API Gateway; default 1,000 ms). */
  pollIntervalMs?: number;
}

export interface WaitForTurnOptions extends CallOptions {
  /**
   * The posted event's id (`eventId` of postEvent's answer): wait for the
   * turn that handles it (its `inputEventId`), never another.
   */
  eventId?: string;
  /** Without eventId: turn ids to pass over (turns that existed before the event was posted). */
  ignore?: Iterable<string>;
  /** How long to wait, in ms (default 60,000, as the Python SDK's). */
  timeoutMs?: number;
}

const maxSessionWaitSeconds = 55;

/** The default of url (`make run`'s address, the Python SDK's default). */
const defaultUrl = "http://127.0.0.1:8080";

// The keys each options object takes, for JavaScript callers that no
// type checker tells about a typo: an unknown key is a TypeError (a
// misspelt option would otherwise be ignored, its default used).
const clientOptionKeys: Record<keyof ClientOptions, true> = {
  url: true,
  streamUrl: true,
  runtimeToken: true,
  agentToken: true,
  auth: true,
  region: true,
  credentials: true,
  env: true,
  fetch: true,
  timeoutMs: true,
  maxRetries: true,
  retryBaseMs: true,
};

export const getAccessTokenOptionKeys: Record<keyof GetAccessTokenOptions, true> = {
  app: true,
  subjects: true,
  actor: true,
  claims: true,
  scopes: true,
  minTtlSeconds: true,
  resume: true,
  origin: true,
  signal: true,
  timeoutMs: true,
};

const waitForTurnOptionKeys: Record<keyof WaitForTurnOptions, true> = {
  eventId: true,
  ignore: true,
  timeoutMs: true,
  signal: true,
};

/** Throws a TypeError naming an unknown key of opts and the known one nearest to it. */
export function checkOptionKeys(what: string, opts: unknown, known: Readonly<Record<string, true>>): void {
  if (opts === undefined) {
    return;
  }
  if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
    throw new TypeError(`${what} takes an options object, not ${describeValue(opts)}`);
  }
  for (const key of Object.keys(opts)) {
    if (!Object.hasOwn(known, key)) {
      throw new TypeError(
        `${what}: unknown option ${JSON.stringify(key)} (did you mean ${nearest(key, Object.keys(known))}?)`,
      );
    }
  }
}

/** The known name nearest to key: edit distance, case-insensitive; a name containing key (or key it) first. */
function nearest(key: string, known: readonly string[]): string {
  const k = key.toLowerCase();
  let best = known[0] ?? "";
  let bestScore = Number.POSITIVE_INFINITY;
  for (const name of known) {
    const n = name.toLowerCase();
    const contains = n.includes(k) || k.includes(n);
    const score = editDistance(k, n) - (contains ? 100 : 0);
    if (score < bestScore) {
      best = name;
      bestScore = score;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const sub = (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      cur.push(Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, sub));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/** A value's kind for a TypeError: a string's value is not repeated (it may be a secret). */
function describeValue(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return `an object (${(v as object).constructor?.name ?? "Object"})`;
  return `a ${typeof v}`;
}

/** The longest Retry-After a follow's reconnect waits for. */
const maxReconnectAfterMs = 60_000;

/** How long past a wait's deadline the answer of its last request is waited for. */
const deadlineGraceMs = 2_000;

const inspectSymbol = Symbol.for("nodejs.util.inspect.custom");

function defaultEnv(): Record<string, string | undefined> {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env ?? {};
}

// A URL without its scheme ("localhost:8080") parses as one with the
// scheme "localhost:"; it would fail each request, retried, as a network error.
function checkUrl(url: string, what: string): void {
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    // Named below.
  }
  if (!u || (u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname) {
    throw new AgentauthError({
      code: "invalidOption",
      message: `${what} must be an http(s) URL, not ${JSON.stringify(url)}`,
    });
  }
}

function appRef(app: ObjectRef): ObjectRef {
  if (typeof app === "string" && !app.includes("/")) {
    return `OAuthApp/${app}`;
  }
  return app;
}

function swarmRef(swarm: string): string {
  return swarm.includes("/") ? swarm : `Swarm/${swarm}`;
}

function randomId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) {
    return `sdk-${c.randomUUID()}`;
  }
  return `sdk-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

export class AgentauthClient {
  readonly #http: Transport;
  readonly #auth: "token" | "sigv4";

  constructor(options: ClientOptions = {}) {
    checkOptionKeys("new AgentauthClient", options, clientOptionKeys);
    const env = options.env === false ? {} : (options.env ?? defaultEnv());
    const [url, urlSource] = options.url
      ? [options.url, "the url option"]
      : env.AGENTAUTH_URL
        ? [env.AGENTAUTH_URL, "AGENTAUTH_URL"]
        : [defaultUrl, "the default url"];
    checkUrl(url, "url (AGENTAUTH_URL)");
    // "" is "none": streamUrl: "" keeps the streams on url even when AGENTAUTH_STREAM_URL is set.
    const streamUrl = (options.streamUrl ?? env.AGENTAUTH_STREAM_URL) || undefined;
    const streamUrlSource = options.streamUrl ? "the streamUrl option" : "AGENTAUTH_STREAM_URL";
    if (streamUrl !== undefined) {
      checkUrl(streamUrl, "streamUrl (AGENTAUTH_STREAM_URL)");
    }
    const authEnv = env.AGENTAUTH_AUTH;
    const auth = options.auth ?? (authEnv === "sigv4" ? "sigv4" : "token");
    if (options.auth === undefined && authEnv && authEnv !== "sigv4" && authEnv !== "token") {
      throw new AgentauthError({
        code: "invalidOption",
        message: `AGENTAUTH_AUTH is "token" or "sigv4", not ${JSON.stringify(authEnv)}`,
      });
    }
    this.#auth = auth;
    let signer: (() => Promise<RequestSigner>) | undefined;
    if (auth === "sigv4") {
      const region = options.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
      let made: Promise<RequestSigner> | undefined;
      signer = () => {
        if (made === undefined) {
          made = makeSigV4Signer(region, options.credentials);
          // A failed load is not cached: the caller may install the package and try again.
          made.catch(() => {
            made = undefined;
          });
        }
        return made;
      };
    }
    const f = options.fetch ?? (globalThis.fetch?.bind(globalThis) as FetchLike | undefined);
    if (!f) {
      throw new AgentauthError({ code: "invalidOption", message: "no fetch: pass the fetch option" });
    }
    this.#http = new Transport({
      url,
      urlSource,
      streamUrl,
      streamUrlSource,
      runtimeToken: (options.runtimeToken ?? env.AGENTAUTH_RUNTIME_TOKEN) || undefined,
      agentToken: (options.agentToken ?? env.AGENTAUTH_AGENT_TOKEN) || undefined,
      signer,
      fetch: f,
      timeoutMs: options.timeoutMs ?? 30_000,
      maxRetries: options.maxRetries ?? 3,
      backoffBaseMs: options.retryBaseMs ?? 250,
      backoffMaxMs: 8_000,
      maxRetryAfterMs: 60_000,
    });
  }

  /** agentauth's base URL. */
  get url(): string {
    return this.#http.url;
  }

  toString(): string {
    return `AgentauthClient(${this.#http.url}, auth ${this.#auth})`;
  }

  [inspectSymbol](): string {
    return this.toString();
  }

  toJSON(): Record<string, string> {
    return { url: this.#http.url, auth: this.#auth };
  }

  // Tokens and consent.

  /**
   * A ready token for app and subjects; throws AuthorizationRequired (the
   * consent URL, session id and expiry) when the user must consent first,
   * or the typed error of an error result (RefreshFailedError, …).
   *
   * Retried like a read: asked again before the user has consented, the
   * server answers with the same pending session, and a ready token is
   * only read (or refreshed once).
   */
  async getAccessToken(opts: GetAccessTokenOptions): Promise<AccessToken> {
    checkOptionKeys("getAccessToken", opts, getAccessTokenOptionKeys);
    if (opts === undefined) {
      throw new TypeError("getAccessToken takes {app, subjects, …}");
    }
    const auth: Record<string, unknown> = {};
    if (opts.actor) auth.actor = opts.actor;
    if (opts.subjects) auth.subjects = opts.subjects;
    if (opts.claims) auth.claims = opts.claims;
    const turn: Record<string, unknown> = { auth };
    if (opts.origin) turn.origin = opts.origin;
    if (opts.resume) {
      turn.resume = {
        swarmRef: swarmRef(opts.resume.swarm),
        instanceKey: opts.resume.instanceKey,
        agentName: opts.resume.agent,
      };
    }
    const body: Record<string, unknown> = { oauthAppRef: appRef(opts.app), turn };
    if (opts.scopes) body.scopes = opts.scopes;
    if (opts.minTtlSeconds !== undefined) body.minTtlSeconds = opts.minTtlSeconds;
    const { data: res, requestId } = await this.#http.sendWithId<TokenWire>({
      method: "POST",
      path: "/v1/oauth/token",
      body,
      credential: "runtime",
      idempotent: true,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
    switch (res?.status) {
      case "ready":
        return new AccessToken(res as ReadyTokenWire);
      case "authorization_required":
        throw authorizationRequired(
          res,
          typeof opts.app === "string" ? appRef(opts.app).toString() : `${opts.app.kind}/${opts.app.name}`,
          { deviceCode: res.deviceCode, requestId },
        );
      case "error":
        throw errorFromBody(200, res.error, requestId);
      default:
        throw new UnexpectedResponseError({
          code: "unexpectedResponse",
          message: `POST /v1/oauth/token: unknown status ${JSON.stringify(res?.status)}`,
          status: 200,
          requestId,
        });
    }
  }

  /** An auth session's status now (`pending`, `exchanging`, `completed`, `failed`, `expired`). */
  async authorizationStatus(sessionId: string, opts: CallOptions = {}): Promise<AuthSessionStatus> {
    return this.#send<AuthSessionStatus>(
      {
        method: "GET",
        path: `/v1/oauth/sessions/${segment(sessionId, "sessionId")}`,
        credential: "runtime",
        idempotent: true,
      },
      opts,
    );
  }

  /**
   * Waits until the user has consented (the session `completed`), by long
   * polls of at most 55 s. Takes the session id, or the
   * AuthorizationRequired error itself (as the Python SDK does). Throws
   * AuthorizationFailed when the session ends `failed` or `expired`
   * (`reason` says why), AgentauthTimeoutError when timeoutMs (default
   * 10 minutes) passes first.
   */
  async waitForAuthorization(
    sessionIdOrError: string | AuthorizationRequired,
    opts: WaitOptions = {},
  ): Promise<AuthSessionStatus> {
    const sessionId = sessionIdOf(sessionIdOrError);
    const timeoutMs = opts.timeoutMs ?? 10 * 60_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      const wait = Math.max(0, Math.min(maxSessionWaitSeconds, Math.ceil(left / 1000)));
      const polled = Date.now();
      let st: AuthSessionStatus;
      try {
        st = await this.#send<AuthSessionStatus>(
          {
            method: "GET",
            path: `/v1/oauth/sessions/${segment(sessionId, "sessionId")}`,
            query: { wait },
            credential: "runtime",
            idempotent: true,
            timeoutMs: wait * 1000 + 30_000,
            // No poll, nor a retry of one, outlives the wait: the last
            // poll's answer gets a little time to arrive, no more.
            deadline: deadline + deadlineGraceMs,
          },
          { signal: opts.signal },
        );
      } catch (err) {
        if (err instanceof AgentauthTimeoutError && Date.now() >= deadline) {
          throw new AgentauthTimeoutError({
            code: "timeout",
            message: `auth session ${sessionId}: no answer that it left pending within ${timeoutMs} ms`,
          });
        }
        throw err;
      }
      switch (st.status) {
        case "completed":
          return st;
        case "failed":
        case "expired":
          throw new AuthorizationFailed(sessionId, st.status, st.statusReason);
        default:
          if (Date.now() >= deadline) {
            throw new AgentauthTimeoutError({
              code: "timeout",
              message: `auth session ${sessionId} still ${st.status} after ${timeoutMs} ms`,
            });
          }
          if (Date.now() - polled < 1000) {
            // A server (or proxy) that does not hold the poll: no busy loop.
            await sleep(Math.min(1000, Math.max(0, deadline - Date.now())), opts.signal);
          }
      }
    }
  }

  /**
   * Revokes the grant of app for subject (at the provider too, where it
   * can). Throws GrantNotFoundError when there is none. Not retried after
   * a lost answer: a second revoke of a revoked grant answers 404.
   */
  async revoke(app: ObjectRef, subject: string, opts: CallOptions = {}): Promise<RevokeResult> {
    return this.#send<RevokeResult>(
      {
        method: "POST",
        path: "/v1/oauth/revoke",
        body: { oauthAppRef: appRef(app), subject },
        credential: "runtime",
        idempotent: false,
      },
      opts,
    );
  }

  /** The pending consents of one agent instance (URL, expiry, message; no secret). */
  async pendingAuthorizations(target: ResumeTarget, opts: CallOptions = {}): Promise<PendingAuthorization[]> {
    const res = await this.#send<{ items?: PendingAuthorization[] }>(
      {
        method: "GET",
        path: "/v1/oauth/pending",
        query: { swarmRef: swarmRef(target.swarm), instanceKey: target.instanceKey, agentName: target.agent },
        credential: "runtime",
        idempotent: true,
      },
      opts,
    );
    return res.items ?? [];
  }

  // Tools (the agent JWT).

  /** The tools the agent's claims may see. Takes the agent JWT (agentToken, `AGENTAUTH_AGENT_TOKEN`). */
  async listTools(opts: CallOptions = {}): Promise<ToolManifestEntry[]> {
    const res = await this.#send<{ data: ToolManifestEntry[] }>(
      { method: "GET", path: "/v1/agents/tools", credential: "agent", idempotent: true },
      opts,
    );
    return res.data ?? [];
  }

  /** The skills the agent may read, ranked for query. Takes the agent JWT (agentToken, `AGENTAUTH_AGENT_TOKEN`). */
  async searchSkills(query: string, opts: CallOptions & { topK?: number } = {}): Promise<Skill[]> {
    const res = await this.#send<{ data: Skill[] }>(
      {
        method: "GET",
        path: "/v1/agents/skills",
        query: { q: query, top_k: opts.topK },
        credential: "agent",
        idempotent: true,
      },
      opts,
    );
    return res.data ?? [];
  }

  /**
   * Calls a tool through agentauth's tool hooks, with the agent JWT
   * (agentToken, `AGENTAUTH_AGENT_TOKEN`; not the runtime token). Returns the invocation
   * (an `ok` or `error` result: an error result is for the model to read,
   * not thrown); throws AuthorizationRequired when the tool's OAuth app
   * needs the user's consent first — consent, then call it again.
   *
   * Not retried after a lost answer or a 5xx: the tool may have acted.
   * A 429 (the rate limit: the tool did not run) is retried after its
   * Retry-After.
   */
  async invokeTool(
    toolName: string,
    args: Record<string, unknown> = {},
    opts: CallOptions & { callId?: string } = {},
  ): Promise<ToolInvocation> {
    const body: Record<string, unknown> = { toolName, args };
    if (opts.callId) body.callId = opts.callId;
    const res = await this.#send<ToolInvocation>(
      { method: "POST", path: "/v1/tools/invoke", body, credential: "agent", idempotent: false },
      opts,
    );
    const r = res.result as { status: string; authorization?: AuthorizationWire };
    if (r?.status === "authorization_required") {
      const a = r.authorization ?? {};
      throw authorizationRequired(a, refString(a.oauthAppRef));
    }
    return res;
  }

  // Turns.

  /**
   * Posts an event (a user's message) to an agent instance; the swarm's
   * ingress rules pick the agent unless input.agent names one. Throws
   * InstanceTerminatedError when that instance is terminated.
   *
   * Safe to retry: the event carries an id (input.id, else one the SDK
   * makes up), and the server queues a retried post with the same id once.
   * Its answer's `eventId` finds the turn: `waitForTurn(…, {eventId})`.
   */
  async postEvent(
    swarm: string,
    instanceKey: string,
    input: PostEventInput,
    opts: CallOptions = {},
  ): Promise<PostedEvent> {
    if (typeof input !== "object" || input === null || Array.isArray(input)) {
      throw new TypeError(
        `postEvent takes {text, auth, …} as its third argument, not ${describeValue(input)}: ` +
          `postEvent(swarm, instanceKey, { text: "hi", auth: { subjects: { user: "…" } } })`,
      );
    }
    if (input.auth === undefined) {
      throw new TypeError(
        "postEvent: auth is required — who the turn acts for ({actor, subjects, claims}); {} for no one, and then the turn sees no tool",
      );
    }
    const body: Record<string, unknown> = { ...input, auth: input.auth ?? {}, id: input.id ?? randomId() };
    return this.#send<PostedEvent>(
      {
        method: "POST",
        path: `/v1/instances/${segment(swarm, "swarm")}/${segment(instanceKey, "instanceKey")}/events`,
        body,
        credential: "runtime",
        idempotent: true,
      },
      opts,
    );
  }

  /** Every agent instance, and those the store could not read (`unreadable`). */
  async listInstances(opts: CallOptions = {}): Promise<InstanceList> {
    const res = await this.#send<InstanceList>(
      { method: "GET", path: "/v1/instances", credential: "runtime", idempotent: true },
      opts,
    );
    return { data: res.data ?? [], unreadable: res.unreadable ?? [] };
  }

  /** One instance: status, active turn, backlog, recent turns with their final answers. */
  async getInstance(
    swarm: string,
    instanceKey: string,
    agent: string,
    opts: CallOptions = {},
  ): Promise<Instance> {
    return this.#send<Instance>(
      {
        method: "GET",
        path: instancePath(swarm, instanceKey, agent),
        credential: "runtime",
        idempotent: true,
      },
      opts,
    );
  }

  /** Holds the instance: a running turn stops at its next step; events wait. Pausing twice changes nothing. */
  async pauseInstance(
    swarm: string,
    instanceKey: string,
    agent: string,
    opts: CallOptions = {},
  ): Promise<InstanceRecord> {
    return this.#lifecycle("POST", "/pause", swarm, instanceKey, agent, true, opts);
  }

  /**
   * Runs the instance again; a wake-up carries the interrupted turn on.
   * Not retried after a lost answer: each resume queues a wake-up.
   */
  async resumeInstance(
    swarm: string,
    instanceKey: string,
    agent: string,
    opts: CallOptions = {},
  ): Promise<InstanceRecord> {
    return this.#lifecycle("POST", "/resume", swarm, instanceKey, agent, false, opts);
  }

  /** Ends the instance for good (its active turn is interrupted). Terminating twice changes nothing. */
  async terminateInstance(
    swarm: string,
    instanceKey: string,
    agent: string,
    opts: CallOptions & { reason?: string } = {},
  ): Promise<InstanceRecord> {
    const body = opts.reason === undefined ? {} : { reason: opts.reason };
    return this.#lifecycle("POST", "/terminate", swarm, instanceKey, agent, true, opts, body);
  }

  /**
   * Removes the instance and its history; its OAuth grants are kept.
   * Not retried after a lost answer: a second delete answers 404.
   */
  async deleteInstance(
    swarm: string,
    instanceKey: string,
    agent: string,
    opts: CallOptions = {},
  ): Promise<{ deleted: true; oauthGrantsKept: boolean }> {
    return this.#lifecycle("DELETE", "", swarm, instanceKey, agent, false, opts);
  }

  // One lifecycle request on an instance: its path plus action ("/pause", … or "" for the instance itself).
  async #lifecycle<T>(
    method: "POST" | "DELETE",
    action: string,
    swarm: string,
    instanceKey: string,
    agent: string,
    idempotent: boolean,
    opts: CallOptions,
    body?: Record<string, unknown>,
  ): Promise<T> {
    return this.#send<T>(
      {
        method,
        path: `${instancePath(swarm, instanceKey, agent)}${action}`,
        body,
        credential: "runtime",
        idempotent,
      },
      opts,
    );
  }

  /** A turn's events with seq > after (all without), as JSON. */
  async turnEvents(
    swarm: string,
    instanceKey: string,
    agent: string,
    turnId: string,
    opts: CallOptions & { after?: number } = {},
  ): Promise<TurnEvent[]> {
    const res = await this.#send<{ data: TurnEvent[] }>(
      {
        method: "GET",
        path: turnEventsPath(swarm, instanceKey, agent, turnId),
        query: { after: opts.after !== undefined && opts.after >= 0 ? opts.after : undefined },
        credential: "runtime",
        idempotent: true,
      },
      opts,
    );
    return res.data ?? [];
  }

  /**
   * The id of the turn of a posted event, once a worker has started it:
   * with opts.eventId (postEvent's answer's `eventId`), the turn whose
   * `inputEventId` it is — never another, though the newest turn may
   * still be an earlier message's while this one waits in the backlog.
   * Without it, the instance's newest turn not in opts.ignore.
   */
  async waitForTurn(
    swarm: string,
    instanceKey: string,
    agent: string,
    opts: WaitForTurnOptions = {},
  ): Promise<string> {
    checkOptionKeys("waitForTurn", opts, waitForTurnOptionKeys);
    const eventId = opts.eventId;
    if (eventId !== undefined && (typeof eventId !== "string" || eventId === "")) {
      throw new TypeError(
        `waitForTurn: eventId is the posted event's eventId (a string), not ${describeValue(eventId)}`,
      );
    }
    const ignore = new Set(opts.ignore ?? []);
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const inst = await this.#send<Instance>(
          {
            method: "GET",
            path: instancePath(swarm, instanceKey, agent),
            credential: "runtime",
            idempotent: true,
            // No request, nor a retry of one, outlives the wait.
            deadline: deadline + deadlineGraceMs,
          },
          { signal: opts.signal },
        );
        const turns = [inst.activeTurn, ...(inst.recentTurns ?? [])].filter(
          (t): t is TurnSummary => t !== undefined && t !== null,
        );
        if (eventId !== undefined) {
          const mine = turns.find((t) => t.inputEventId === eventId);
          if (mine) {
            return mine.id;
          }
          if (turns.length > 0 && turns.every((t) => t.inputEventId === undefined)) {
            throw new UnexpectedResponseError({
              code: "unexpectedResponse",
              message: `GET ${instancePath(swarm, instanceKey, agent)}: the turns name no inputEventId (an agentauth older than this SDK): wait with ignore instead of eventId`,
              status: 200,
            });
          }
        } else {
          const id = turns.map((t) => t.id).find((t) => t !== undefined && !ignore.has(t));
          if (id) {
            return id;
          }
        }
      } catch (err) {
        // The instance is made when its first event is handled.
        if (!(err instanceof NotFoundError)) {
          throw err;
        }
      }
      if (Date.now() >= deadline) {
        throw new AgentauthTimeoutError({
          code: "timeout",
          message:
            eventId !== undefined
              ? `no turn for event ${eventId} on ${swarm}/${instanceKey}/${agent} within ${timeoutMs} ms (it may still wait in the backlog)`
              : `no new turn on ${swarm}/${instanceKey}/${agent} within ${timeoutMs} ms`,
        });
      }
      await sleep(250, opts.signal);
    }
  }

  /**
   * A turn's events as they happen, from the stream route (Server-Sent
   * Events), ending after the turn's last event (`turn.completed`,
   * `turn.failed` or `turn.interrupted`). A dropped connection is
   * reconnected with Last-Event-ID (backing off, after a Retry-After, at
   * most maxReconnects times in a row without a new event); a stream the
   * server ends before the turn (its time limit, a buffered window) is
   * asked again, at the stream's `retry:` or the poll interval's pace,
   * and is no failure. No event is yielded twice. Where
   * streams are not served (406, API Gateway with no stream URL) it polls
   * the JSON form instead. Break out of the loop or abort the signal to
   * stop.
   */
  async *followTurn(
    swarm: string,
    instanceKey: string,
    agent: string,
    turnId: string,
    opts: FollowTurnOptions = {},
  ): AsyncGenerator<TurnEvent, void, undefined> {
    const path = turnEventsPath(swarm, instanceKey, agent, turnId);
    const maxReconnects = opts.maxReconnects ?? 8;
    const idleMs = opts.idleTimeoutMs ?? 45_000;
    const pollMs = opts.pollIntervalMs ?? 1000;
    let last = opts.after ?? -1;
    let failures = 0;
    let first = true;
    let poll = false;
    // The last `retry:` a stream of this follow sent (it holds for later streams).
    let retryMs: number | undefined;
    // Whether ev comes after the last one yielded (it is then the last): no event is yielded twice.
    const isNew = (ev: TurnEvent): boolean => {
      if (typeof ev.seq !== "number" || ev.seq <= last) return false;
      last = ev.seq;
      return true;
    };
    for (;;) {
      if (opts.signal?.aborted) {
        throw aborted(opts.signal);
      }
      if (poll) {
        let evs: TurnEvent[];
        try {
          evs = await this.turnEvents(swarm, instanceKey, agent, turnId, {
            after: last,
            signal: opts.signal,
          });
        } catch (err) {
          // The same budget as the stream's reconnects: an outage of a few
          // seconds does not end a follow that polls.
          if (opts.signal?.aborted || !reconnectable(err) || ++failures > maxReconnects) {
            throw err;
          }
          await sleep(reconnectWait(err, failures), opts.signal);
          continue;
        }
        failures = 0;
        for (const ev of evs) {
          if (!isNew(ev)) continue;
          yield ev;
          if (TURN_END_TYPES.has(ev.type)) return;
        }
        await sleep(pollMs, opts.signal);
        continue;
      }
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      if (!first && last >= 0) {
        headers["Last-Event-ID"] = String(last);
      }
      let progressed = false;
      let opened = 0;
      // The server ended the stream (no error, no turn end): its time
      // limit, or a buffered window (an answer sent whole) with nothing new.
      let ended = false;
      // Why the stream failed (a refused reconnect's Retry-After is waited for).
      let cut: unknown;
      const started = Date.now();
      const parser = new SseParser();
      try {
        const answer = await this.#http.openStream<{ data?: TurnEvent[] }>({
          method: "GET",
          path,
          query: { after: first && last >= 0 ? last : undefined },
          headers,
          credential: "runtime",
          // Reconnects are this loop's: one attempt each (a 429 aside).
          idempotent: false,
          stream: true,
          signal: opts.signal,
        });
        first = false;
        opened = Date.now();
        if (answer.json !== undefined) {
          // A server that answered JSON (a proxy that ignored Accept): one
          // window of events, read as every JSON answer is — under the
          // request's time limit and signal, at most 4 MiB.
          for (const ev of answer.json.data ?? []) {
            if (!isNew(ev)) continue;
            progressed = true;
            yield ev;
            if (TURN_END_TYPES.has(ev.type)) return;
          }
          poll = true;
          continue;
        }
        const res = answer.stream;
        if (!res.body) {
          throw new UnexpectedResponseError({ code: "unexpectedResponse", message: `GET ${path}: no body` });
        }
        for await (const sse of readSse(
          res.body,
          idleMs,
          () =>
            new NetworkError({
              code: "network",
              message: `GET ${path}: the stream was silent for ${idleMs} ms`,
            }),
          opts.signal,
          parser,
        )) {
          let ev: TurnEvent;
          try {
            ev = JSON.parse(sse.data) as TurnEvent;
          } catch {
            throw new UnexpectedResponseError({
              code: "unexpectedResponse",
              message: `GET ${path}: an event's data is not JSON (id ${sse.id ?? "none"})`,
            });
          }
          if (!isNew(ev)) continue;
          progressed = true;
          failures = 0;
          yield ev;
          if (TURN_END_TYPES.has(ev.type)) return;
        }
        ended = true;
      } catch (err) {
        if (opts.signal?.aborted) {
          throw aborted(opts.signal);
        }
        if (err instanceof NotAcceptableError) {
          poll = true;
          continue;
        }
        // An error that is not the SDK's came from reading the body: the
        // connection was cut mid-stream.
        if (err instanceof AgentauthError && !reconnectable(err)) {
          throw err;
        }
        cut = err;
      }
      if (opts.signal?.aborted) {
        throw aborted(opts.signal);
      }
      if (!progressed && ended) {
        // Not a failure: the server ends streams on purpose (its
        // 10-minute limit; behind a buffering proxy, every few seconds —
        // and such an answer's headers come at its end, so how long it
        // seemed to last says nothing). Ask again after the stream's
        // `retry:`, else at once — at the poll interval's pace when it
        // came back at once.
        failures = 0;
        retryMs = parser.retryMs ?? retryMs;
        const lived = Date.now() - started;
        const wait = retryMs ?? Math.max(0, pollMs - lived);
        if (wait > 0) {
          await sleep(wait, opts.signal);
        }
        continue;
      }
      if (!progressed) {
        // A connection that lived — a parked turn's stream that reached its
        // time limit, an idle cut — is not a failure in a row: only quick
        // failures count towards maxReconnects.
        if (opened > 0 && Date.now() - opened >= Math.min(5_000, idleMs)) {
          failures = 0;
        }
        failures++;
        if (failures > maxReconnects) {
          throw new NetworkError({
            code: "network",
            message: `GET ${path}: the stream failed ${failures} times in a row without a new event`,
          });
        }
        await sleep(reconnectWait(cut, failures), opts.signal);
      }
    }
  }

  async #send<T>(spec: RequestSpec, opts: CallOptions): Promise<T> {
    return this.#http.send<T>({ ...spec, signal: opts.signal, timeoutMs: spec.timeoutMs ?? opts.timeoutMs });
  }
}

interface AuthorizationWire {
  oauthAppRef?: unknown;
  authSessionId?: string;
  authorizationUrl?: string;
  expiresAt?: string;
  message?: string;
}

// A token request's answer: an authorization_required one carries the consent's fields at its top level.
interface TokenWire extends AuthorizationWire {
  status: string;
  accessToken?: string;
  deviceCode?: { verificationUri: string; userCode: string; interval: number };
  error?: ErrorBody;
}

// The AuthorizationRequired of an authorization_required answer (a token request's, a tool invocation's).
function authorizationRequired(
  a: AuthorizationWire,
  oauthAppRef: string | undefined,
  more: { deviceCode?: TokenWire["deviceCode"]; requestId?: string | undefined } = {},
): AuthorizationRequired {
  return new AuthorizationRequired({
    authorizationUrl: a.authorizationUrl ?? "",
    sessionId: a.authSessionId ?? "",
    expiresAt: a.expiresAt ? new Date(a.expiresAt) : undefined,
    message: a.message,
    oauthAppRef,
    ...more,
  });
}

function refString(ref: unknown): string | undefined {
  if (typeof ref === "string") return ref;
  if (ref && typeof ref === "object") {
    const r = ref as { kind?: string; name?: string };
    if (r.name) return `${r.kind ?? "OAuthApp"}/${r.name}`;
  }
  return undefined;
}

// waitForAuthorization's first argument: the session id, or the
// AuthorizationRequired error (also one of another copy of this package).
function sessionIdOf(v: unknown): string {
  if (typeof v === "string") {
    return v;
  }
  if (v instanceof AuthorizationRequired) {
    return v.sessionId;
  }
  if (
    typeof v === "object" &&
    v !== null &&
    (v as { code?: unknown }).code === "authorization_required" &&
    typeof (v as { sessionId?: unknown }).sessionId === "string"
  ) {
    return (v as { sessionId: string }).sessionId;
  }
  throw new TypeError(
    `waitForAuthorization takes the auth session id (a string) or the AuthorizationRequired error, not ${describeValue(v)}`,
  );
}

function instancePath(swarm: string, instanceKey: string, agent: string): string {
  return `/v1/instances/${segment(swarm, "swarm")}/${segment(instanceKey, "instanceKey")}/${segment(agent, "agent")}`;
}

function turnEventsPath(swarm: string, instanceKey: string, agent: string, turnId: string): string {
  return `${instancePath(swarm, instanceKey, agent)}/turns/${segment(turnId, "turnId")}/events`;
}

// The wait before a follow's next try after failures in a row: the
// error's Retry-After (at most maxReconnectAfterMs), else a backoff.
function reconnectWait(err: unknown, failures: number): number {
  if (err instanceof AgentauthError && err.retryAfter !== undefined) {
    return Math.min(err.retryAfter * 1000, maxReconnectAfterMs);
  }
  return backoff(failures - 1, 250, 5_000);
}

// What a follow reconnects after: the connection, not the request.
function reconnectable(err: unknown): boolean {
  return (
    err instanceof NetworkError ||
    err instanceof AgentauthTimeoutError ||
    err instanceof TooManyStreamsError ||
    (err instanceof InternalError && err.status >= 500) ||
    (err instanceof AgentauthError && [502, 503, 504].includes(err.status))
  );
}
