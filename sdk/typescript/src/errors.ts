// The errors of the SDK: one class per error code agentauth documents
// (README "HTTP API", docs/tools.md "Routes", docs/turns.md "HTTP API and
// CLI"), all extending AgentauthError, so a caller can branch with
// instanceof or on .code. Messages are the server's, which never hold a
// secret; the SDK adds none (no token, no body) to what it throws.

/** What the server sent as `{"error": {...}}`, kept for callers that need the details. */
export interface ErrorBody {
  code?: string;
  message?: string;
  details?: Record<string, unknown>;
  requestId?: string;
  scopes?: string[];
}

export interface AgentauthErrorInit {
  code: string;
  message: string;
  /** The HTTP status; 200 for a token request's `{"status":"error"}` result, 0 when no answer came. */
  status?: number;
  requestId?: string | undefined;
  details?: Record<string, unknown> | undefined;
  /** The answer's Retry-After, in seconds. */
  retryAfter?: number | undefined;
  cause?: unknown;
  /** The message as given, without the ` (HTTP …, request …)` the SDK appends when there is a request id. */
  bareMessage?: boolean;
}

/** message, ending with the status and request id when there is one — as the Python SDK's str(e). */
function withRequestId(message: string, status: number, requestId: string | undefined): string {
  if (!requestId) {
    return message;
  }
  return `${message} (${status ? `HTTP ${status}, ` : ""}request ${requestId})`;
}

/**
 * The base of every error the SDK throws. Its message ends with the
 * status and the request id when the answer had one (`… (HTTP 401,
 * request d8caf…)`), as the Python SDK's `str(e)` does.
 */
export class AgentauthError extends Error {
  /** The error code: the server's (`invalidRequest`, `refreshFailed`, …) or the SDK's own (`timeout`, `network`, …). */
  readonly code: string;
  /** The HTTP status of the answer; 0 when none came (a timeout, a network error, a check made locally). */
  readonly status: number;
  /** The request's id (`requestId` in the body or `X-Request-Id`): quote it when reporting a problem. */
  readonly requestId: string | undefined;
  /** `details` of the error body, where the route has more to say. */
  readonly details: Record<string, unknown> | undefined;
  /** The answer's `Retry-After`, in seconds (a 429 or 503): when to ask again. */
  readonly retryAfter: number | undefined;

  constructor(init: AgentauthErrorInit) {
    super(
      init.bareMessage ? init.message : withRequestId(init.message, init.status ?? 0, init.requestId),
      init.cause === undefined ? undefined : { cause: init.cause },
    );
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status ?? 0;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
  }
}

// Edge errors (shared/edge/httpx): every route.

/** 400 `invalidRequest`: the message names the field and where it is. */
export class InvalidRequestError extends AgentauthError {}
/** 401 `unauthenticated`: no valid credential; on the tool routes `reason` says why (`expired`, `malformed`, …). */
export class UnauthenticatedError extends AgentauthError {
  /** `details.reason` of the tool routes (`missing_token`, `expired`, `wrong_audience`, …). */
  get reason(): string | undefined {
    const r = this.details?.reason;
    return typeof r === "string" ? r : undefined;
  }
}
/** 403 `forbidden`: a tool's required scope is missing, or an admin-only flag or route. */
export class ForbiddenError extends AgentauthError {}
/** 404 `notFound`: an unknown route, swarm, instance, turn or auth session. */
export class NotFoundError extends AgentauthError {}
/** 405 `methodNotAllowed`. */
export class MethodNotAllowedError extends AgentauthError {}
/** 406 `notAcceptable`: a stream asked where answers are buffered (API Gateway: use the stream URL). */
export class NotAcceptableError extends AgentauthError {}
/** 413 `payloadTooLarge`. */
export class PayloadTooLargeError extends AgentauthError {}
/** 415 `unsupportedMediaType`. */
export class UnsupportedMediaTypeError extends AgentauthError {}
/** 500 `internal`: the server log line with the request id has the cause. */
export class InternalError extends AgentauthError {}
/** 429 `tooManyStreams`: too many event streams on one instance or the process. */
export class TooManyStreamsError extends AgentauthError {}

// Turn routes (shared/edge/turnsapi).

/** 409 `instanceTerminated`: the instance is terminated; delete it to start the conversation over. */
export class InstanceTerminatedError extends AgentauthError {}
/** 409 `conflict`. */
export class ConflictError extends AgentauthError {}

// Tool routes (shared/edge/toolsapi).

/** 429 `rate_limited`: the per-(principal, tool) rate limit. */
export class RateLimitedError extends AgentauthError {}
/** 503 `unavailable`: the rate limit could not be checked, so the call was refused. */
export class UnavailableError extends AgentauthError {}
/** 409 `limitReached`: a tenant's upload limit. */
export class LimitReachedError extends AgentauthError {}
/** 501 `uploadsDisabled`: the server has no tenant store. */
export class UploadsDisabledError extends AgentauthError {}

// OAuth runtime routes (shared/oauth, shared/edge/httpapi): a token
// request answers these as `{"status":"error"}` with HTTP 200; revoke as 404.

/** `oauthAppNotFound`: unknown app, malformed ref, or a kind other than OAuthApp. */
export class OAuthAppNotFoundError extends AgentauthError {}
/** `subjectUnavailable`: the request lacks the subject the app's subjectMode needs. */
export class SubjectUnavailableError extends AgentauthError {}
/** `scopeNotAllowed`: the scopes are not a subset of the app's. */
export class ScopeNotAllowedError extends AgentauthError {}
/** `tokenRevoked`. */
export class TokenRevokedError extends AgentauthError {}
/** `refreshFailed`: a refresh failed and the grant is kept; the message says where. */
export class RefreshFailedError extends AgentauthError {}
/** `deviceCodeUnsupported`. */
export class DeviceCodeUnsupportedError extends AgentauthError {}
/** `configurationError`: the session could not be started, or minTtlSeconds < 0. */
export class ConfigurationError extends AgentauthError {}
/** `grantUnreadable`: one stored grant cannot be read; it needs an operator, not a new consent. */
export class GrantUnreadableError extends AgentauthError {}
/** `scopeNotGranted`: the last consent did not grant these API scopes; revoke the grant to ask again. */
export class ScopeNotGrantedError extends AgentauthError {
  readonly scopes: string[];
  constructor(init: AgentauthErrorInit & { scopes?: string[] | undefined }) {
    super(init);
    this.scopes = init.scopes ?? [];
  }
}
/** 404 `grantNotFound`: revoke found no grant for that app and subject. */
export class GrantNotFoundError extends AgentauthError {}

// The SDK's own.

/**
 * The user must consent first: open (or show) `authorizationUrl`, then
 * `waitForAuthorization(sessionId)` and ask again. Thrown by getAccessToken
 * and by invokeTool for an `authorization_required` result.
 */
export class AuthorizationRequired extends AgentauthError {
  readonly authorizationUrl: string;
  readonly sessionId: string;
  readonly expiresAt: Date | undefined;
  /** The OAuthApp the consent is for (tool invocations name it). */
  readonly oauthAppRef: string | undefined;
  /** The device code prompt, for an app using the device code flow. */
  readonly deviceCode: { verificationUri: string; userCode: string; interval: number } | undefined;

  constructor(init: {
    authorizationUrl: string;
    sessionId: string;
    expiresAt?: Date | undefined;
    message?: string | undefined;
    oauthAppRef?: string | undefined;
    deviceCode?: { verificationUri: string; userCode: string; interval: number } | undefined;
    requestId?: string | undefined;
    status?: number;
  }) {
    super({
      code: "authorization_required",
      message: init.message || "the user must consent: open authorizationUrl",
      status: init.status ?? 200,
      requestId: init.requestId,
      // The message is for the user (or the model) to read: no request id in it.
      bareMessage: true,
    });
    this.authorizationUrl = init.authorizationUrl;
    this.sessionId = init.sessionId;
    this.expiresAt = init.expiresAt;
    this.oauthAppRef = init.oauthAppRef;
    this.deviceCode = init.deviceCode;
  }
}

/** The consent did not complete: the session ended `failed` or `expired` (`reason`: the callback's reason code). */
export class AuthorizationFailed extends AgentauthError {
  /** The session's status: `failed` or `expired`. */
  readonly sessionStatus: string;
  /** The session's `statusReason` (`provider_error`, `session_expired`, `subject_mismatch`, …), when it has one. */
  readonly reason: string | undefined;
  readonly sessionId: string;
  constructor(sessionId: string, sessionStatus: string, reason: string | undefined, requestId?: string) {
    super({
      code: sessionStatus === "expired" ? "authorization_expired" : "authorization_failed",
      message: `auth session ${sessionId} ${sessionStatus}${reason ? `: ${reason}` : ""}`,
      status: 200,
      requestId,
    });
    this.sessionStatus = sessionStatus;
    this.reason = reason;
    this.sessionId = sessionId;
  }
}

/** A request (or a wait) ran past its time limit. */
export class AgentauthTimeoutError extends AgentauthError {}
/** No answer came: the connection failed or was cut. */
export class NetworkError extends AgentauthError {}
/** The caller's AbortSignal ended the call; `cause` is the signal's reason. */
export class AbortedError extends AgentauthError {}
/** A route needs a credential the client was not given (the message names the option and the env variable). */
export class MissingCredentialError extends AgentauthError {}
/** The server answered something that is not agentauth's documented shape. */
export class UnexpectedResponseError extends AgentauthError {}

type ErrorClass = new (init: AgentauthErrorInit) => AgentauthError;

/** The class of each documented error code. */
export const errorClasses: Readonly<Record<string, ErrorClass>> = {
  invalidRequest: InvalidRequestError,
  unauthenticated: UnauthenticatedError,
  forbidden: ForbiddenError,
  notFound: NotFoundError,
  methodNotAllowed: MethodNotAllowedError,
  notAcceptable: NotAcceptableError,
  payloadTooLarge: PayloadTooLargeError,
  unsupportedMediaType: UnsupportedMediaTypeError,
  internal: InternalError,
  tooManyStreams: TooManyStreamsError,
  instanceTerminated: InstanceTerminatedError,
  conflict: ConflictError,
  rate_limited: RateLimitedError,
  unavailable: UnavailableError,
  limitReached: LimitReachedError,
  uploadsDisabled: UploadsDisabledError,
  oauthAppNotFound: OAuthAppNotFoundError,
  subjectUnavailable: SubjectUnavailableError,
  scopeNotAllowed: ScopeNotAllowedError,
  tokenRevoked: TokenRevokedError,
  refreshFailed: RefreshFailedError,
  deviceCodeUnsupported: DeviceCodeUnsupportedError,
  configurationError: ConfigurationError,
  grantUnreadable: GrantUnreadableError,
  scopeNotGranted: ScopeNotGrantedError,
  grantNotFound: GrantNotFoundError,
};

// The code an answer without agentauth's error body stands for (API
// Gateway's own 404 or 5xx, a proxy's 502).
const codeOfStatus: Record<number, string> = {
  400: "invalidRequest",
  401: "unauthenticated",
  403: "forbidden",
  404: "notFound",
  405: "methodNotAllowed",
  406: "notAcceptable",
  413: "payloadTooLarge",
  415: "unsupportedMediaType",
  429: "rate_limited",
  500: "internal",
};

/** The typed error for an error body (or a bare status). */
export function errorFromBody(
  status: number,
  body: ErrorBody | undefined,
  headerRequestId?: string | null,
  retryAfter?: number,
  fallbackMessage?: string,
): AgentauthError {
  const code = body?.code || codeOfStatus[status] || `http_${status}`;
  const message = body?.message || fallbackMessage || `HTTP ${status}`;
  const init = {
    code,
    message,
    status,
    requestId: body?.requestId || headerRequestId || undefined,
    details: body?.details,
    retryAfter,
  };
  if (code === "scopeNotGranted") {
    return new ScopeNotGrantedError({ ...init, scopes: body?.scopes });
  }
  const cls = errorClasses[code] ?? (status >= 500 ? InternalError : AgentauthError);
  return new cls(init);
}
