"""What the sync and the async client share: settings, request building,
answer parsing, the retry rule, the SSE parser and the follow state.

Nothing here does I/O: the two clients only send the requests built here
(``httpx.Client`` or ``httpx.AsyncClient``) and sleep (``time.sleep`` or
``asyncio.sleep``), so the rules live in one place.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx

from . import errors
from ._version import __version__
from .models import (
    AccessToken,
    Actor,
    AuthSessionStatus,
    Instance,
    InstanceDeleted,
    InstanceList,
    InstanceRecord,
    PendingAuthorization,
    PostedEvent,
    ResumeTarget,
    RevokeResult,
    Secret,
    Skill,
    ToolError,
    ToolInvocation,
    ToolManifestEntry,
    TurnAuth,
    TurnEvent,
    TurnSummary,
    each,
    parse_time,
)

T = TypeVar("T")

Credential = Literal["runtime", "agent", "stream", "none"]

USER_AGENT = f"agentauth-python/{__version__}"

# The server's bound of one long poll of a session (GET /v1/oauth/sessions/{id}?wait=N).
MAX_WAIT_CHUNK = 55
# How long past a wait's deadline its last request may take: a long poll the
# server holds until the deadline still gets its answer in.
DEADLINE_GRACE = 2.0


# --- settings ----------------------------------------------------------------


@dataclass(frozen=True)
class Timeouts:
    """Seconds. ``read`` bounds one wait for bytes; long polls add their wait to it,
    and a tool call :data:`TOOL_READ_MARGIN` (the server's own call of an http
    tool may take 20 s); a stream's ``stream_read`` is longer than the server's
    15 s keep-alive, so a silent stream is a dropped one."""

    connect: float = 5.0
    read: float = 30.0
    write: float = 30.0
    pool: float = 10.0
    stream_read: float = 45.0

    def httpx(self, read: float | None = None) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=read or self.read, write=self.write, pool=self.pool)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter (each wait between half and all of its step);
    ``Retry-After`` honoured up to ``max_retry_after``.

    ``max_attempts`` counts the first try. A retry happens only where it is
    safe (:func:`retry_delay`).
    """

    max_attempts: int = 4
    base_delay: float = 0.25
    max_delay: float = 8.0
    # As the TypeScript SDK's: a longer Retry-After is not waited for (the error is raised).
    max_retry_after: float = 60.0
    # follow_turn(): connections in a row that fail with nothing heard from the
    # server (no event, no keep-alive) before it gives up.
    max_reconnects: int = 8

    def backoff(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1, 2, …)."""
        cap = min(self.max_delay, self.base_delay * (2 ** max(0, attempt - 1)))
        return random.uniform(cap / 2, cap)  # noqa: S311 - jitter, not a secret


AuthMode = Literal["token", "sigv4"]

# The agent JWT as a function asked on every request (a JWT that renews);
# an AsyncClient's may be a coroutine function.
TokenSource = Callable[[], "str | Awaitable[str]"]


DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class Settings:
    base_url: str
    auth: AuthMode
    runtime_token: Secret | None
    agent_token: Secret | TokenSource | None
    stream_url: str | None
    region: str | None
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Where base_url and stream_url came from: "base_url" (the argument),
    # "AGENTAUTH_URL" or "default"; "stream_url" or "AGENTAUTH_STREAM_URL".
    base_url_from: str = "base_url"
    stream_url_from: str = "stream_url"

    def __repr__(self) -> str:
        # No user:pass@ of a URL (tokens are Secrets, which redact themselves).
        stream = redact_url(self.stream_url) if self.stream_url else None
        return (
            f"Settings(base_url={redact_url(self.base_url)!r}, auth={self.auth!r}, stream_url={stream!r},"
            f" region={self.region!r}, runtime_token={self.runtime_token!r}, agent_token={self.agent_token!r})"
        )

    def origin_of(self, credential: Credential) -> tuple[str, str]:
        """The address a request with ``credential`` goes to, as scheme://host[:port]
        (never a path, query or userinfo), and the setting it came from."""
        if credential == "stream" and self.stream_url:
            return origin(self.stream_url), self.stream_url_from
        return origin(self.base_url), self.base_url_from

    @classmethod
    def resolve(
        cls,
        *,
        base_url: str | None,
        runtime_token: str | Secret | None,
        agent_token: str | Secret | TokenSource | None,
        auth: str | None,
        stream_url: str | None,
        region: str | None,
        timeouts: Timeouts | None,
        retry: RetryPolicy | None,
        env: Mapping[str, str] | None,
    ) -> Settings:
        """Arguments first, then ``AGENTAUTH_*`` (and ``AWS_REGION``) from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        url_from = "base_url" if base_url else "AGENTAUTH_URL" if env.get("AGENTAUTH_URL") else "default"
        url = base_url or env.get("AGENTAUTH_URL") or DEFAULT_URL
        mode = (auth or env.get("AGENTAUTH_AUTH") or "token").strip().lower()
        if mode not in ("token", "sigv4"):
            raise errors.AgentauthError(
                f"auth must be 'token' (a runtime token) or 'sigv4' (AWS IAM), not {mode!r}",
                code="invalidConfiguration",
            )
        rt = _secret(runtime_token) or _secret(env.get("AGENTAUTH_RUNTIME_TOKEN"))
        at: Secret | TokenSource | None
        at = agent_token if callable(agent_token) else _secret(agent_token) or _secret(env.get("AGENTAUTH_AGENT_TOKEN"))
        stream = stream_url or env.get("AGENTAUTH_STREAM_URL") or None
        stream_from = "stream_url" if stream_url else "AGENTAUTH_STREAM_URL"
        reg = region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None
        return cls(
            base_url=_check_url(url, "base_url (AGENTAUTH_URL)"),
            auth=mode,  # type: ignore[arg-type]
            runtime_token=rt,
            agent_token=at,
            stream_url=_check_url(stream, "stream_url (AGENTAUTH_STREAM_URL)") if stream else None,
            region=reg,
            timeouts=timeouts or Timeouts(),
            retry=retry or RetryPolicy(),
            base_url_from=url_from,
            stream_url_from=stream_from,
        )


def _secret(value: str | Secret | None) -> Secret | None:
    if value is None:
        return None
    if isinstance(value, Secret):
        return value if value.reveal() else None
    value = value.strip()
    return Secret(value) if value else None


def _check_url(url: str, what: str) -> str:
    try:
        parsed: httpx.URL | None = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise errors.AgentauthError(
            f"{what} must be an http(s) URL, not {redact_url(url, invalid=True)!r}", code="invalidConfiguration"
        )
    return url.rstrip("/")


def redact_url(url: str, *, invalid: bool = False) -> str:
    """url as it may be shown: the userinfo of its authority (``user:pass@``)
    reads ``[redacted]@``; of an ``invalid`` URL, all up to its last ``@``."""
    scheme, sep, tail = url.partition("://")
    if not sep:
        scheme, tail = "", url
    head = scheme + sep
    ends = [i for i in (tail.find(c) for c in "/?#") if i >= 0]
    end = min(ends) if ends else len(tail)
    authority, rest = tail[:end], tail[end:]
    if "@" in authority:
        return head + "[redacted]@" + authority.rpartition("@")[2] + rest
    if invalid and "@" in tail:  # a password with a "/" in it ends the authority early
        return head + "[redacted]@" + tail.rpartition("@")[2]
    return url


def origin(url: str) -> str:
    """scheme://host[:port] of url: no path, query or userinfo."""
    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii', 'replace')}"


def where(settings: Settings, credential: Credential) -> tuple[str, str, str]:
    """The address a request goes to (scheme://host[:port]), the setting it came
    from as a message says it, and the question that setting's value raises."""
    address, source = settings.origin_of(credential)
    if source == "default":
        return (
            address,
            "the default: AGENTAUTH_URL is not set",
            "set AGENTAUTH_URL (or pass base_url) to agentauth's address",
        )
    if source in ("stream_url", "AGENTAUTH_STREAM_URL"):
        return address, source, f"is {source} the turn function's URL (TurnStreamUrl)?"
    return address, source, f"is {source} agentauth's address?"


def join_url(base: str, path: str) -> str:
    """base (which may hold a path: API Gateway's ``/_aws/execute-api/<id>/$default``) + an absolute path."""
    return base.rstrip("/") + path


# --- requests ----------------------------------------------------------------


def segment(value: str, what: str) -> str:
    """One path segment, escaped; ``.`` and ``..`` as ``%2E``/``%2E%2E`` (docs/turns.md, *HTTP API and CLI*)."""
    if not value:
        raise errors.InvalidRequest(f"{what} is empty")
    if value == ".":
        return "%2E"
    if value == "..":
        return "%2E%2E"
    return quote(value, safe="")


@dataclass(frozen=True)
class Call:
    """One request: where, with which credential, and whether repeating it is safe."""

    method: str
    path: str
    credential: Credential
    idempotent: bool
    query: Mapping[str, str] | None = None
    body: Any = None
    has_body: bool = False
    read_timeout: float | None = None
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Op(Generic[T]):
    """A request and how to read its answer."""

    call: Call
    parse: Callable[[httpx.Response], T]


def build_request(
    client: httpx.Client | httpx.AsyncClient, settings: Settings, call: Call, deadline: float | None = None
) -> httpx.Request:
    """The request of call; with a ``deadline`` (``time.monotonic()``), its timeouts end there at the latest."""
    base = settings.base_url
    read = call.read_timeout
    if call.credential == "stream":
        base = settings.stream_url or settings.base_url
        read = read or settings.timeouts.stream_read
    timeout = settings.timeouts.httpx(read)
    if deadline is not None:
        left = max(0.001, deadline - time.monotonic())
        timeout = httpx.Timeout(
            connect=min(left, timeout.connect or left),
            read=min(left, timeout.read or left),
            write=min(left, timeout.write or left),
            pool=min(left, timeout.pool or left),
        )
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    headers.update(call.headers or {})
    kwargs: dict[str, Any] = {}
    if call.has_body:
        # Compact, deterministic bytes: what SigV4 signs is what is sent.
        kwargs["content"] = json.dumps(call.body, separators=(",", ":"), ensure_ascii=False).encode()
        headers["Content-Type"] = "application/json"
    return client.build_request(
        call.method,
        join_url(base, call.path),
        params=dict(call.query) if call.query else None,
        headers=headers,
        timeout=timeout,
        **kwargs,
    )


# --- answers -----------------------------------------------------------------


def request_id(response: httpx.Response, body: Any = None) -> str | None:
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("requestId"), str):
            return str(err["requestId"])
    return response.headers.get("X-Request-Id") or response.headers.get("x-amzn-requestid") or None


def retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (delta or HTTP date), or None."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # not str.isdigit alone: "²" is a digit float() refuses
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def error_from_response(response: httpx.Response) -> errors.AgentauthError:
    """The typed error of a non-2xx answer: agentauth's one error body, API Gateway's
    ``{"message"}``, or the status alone."""
    body: Any = None
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    code: str | None = None
    message = ""
    details: Mapping[str, Any] | None = None
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping):
            code = str(err["code"]) if isinstance(err.get("code"), str) else None
            message = str(err["message"]) if isinstance(err.get("message"), str) else ""
            details = err["details"] if isinstance(err.get("details"), Mapping) else None
        elif isinstance(body.get("message"), str):  # API Gateway's own answers
            message = str(body["message"])
        elif isinstance(body.get("Message"), str):
            message = str(body["Message"])
    if not message:
        text = response.text.strip() if body is None else ""
        reason = response.reason_phrase or "error"
        message = f"HTTP {response.status_code} {reason}" + (f": {text[:200]}" if text else "")
    cls = errors.error_class_for(code, response.status_code)
    return cls(
        message,
        code=code or None,
        status=response.status_code,
        request_id=request_id(response, body),
        details=details,
        retry_after=retry_after(response),
    )


def read_json(response: httpx.Response) -> Any:
    """The body of a 2xx answer as JSON; any other answer raised as its typed error."""
    if not response.is_success:
        raise error_from_response(response)
    try:
        return response.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.UnexpectedResponse(
            f"{response.request.method} {response.request.url.path}: HTTP {response.status_code} is not JSON",
            status=response.status_code,
            request_id=request_id(response),
        ) from exc


def read_object(response: httpx.Response) -> dict[str, Any]:
    body = read_json(response)
    if not isinstance(body, dict):
        raise errors.UnexpectedResponse(
            f"{response.request.url.path}: expected a JSON object",
            status=response.status_code,
            request_id=request_id(response),
        )
    return body


def read_data_list(response: httpx.Response) -> list[dict[str, Any]]:
    body = read_object(response)
    data = body.get("data")
    if not isinstance(data, list):
        raise errors.UnexpectedResponse(
            f"{response.request.url.path}: expected {{'data': [...]}}",
            status=response.status_code,
            request_id=request_id(response),
        )
    return [d for d in data if isinstance(d, dict)]


# --- retries -----------------------------------------------------------------

# Statuses a safe request is tried again on. 500 is not among them: agentauth
# answers 500 for a failure that a retry will most likely meet again.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


def retry_delay(
    policy: RetryPolicy,
    call: Call,
    attempt: int,
    outcome: httpx.Response | Exception,
    deadline: float | None = None,
) -> float | None:
    """How long to wait before trying ``call`` again after ``outcome``, or None to stop.

    What is safe to repeat:

    - a request that never reached the server (the connection could not be
      made): always;
    - a 429: always, after Retry-After — agentauth refuses it before doing
      anything (a tool's rate limit, too many streams; API Gateway's throttle);
    - a 502/503/504 or a connection lost after sending: only for a request
      whose repeat changes nothing (``Call.idempotent``): the GETs;
      ``POST /v1/oauth/token`` (asked again before consent it answers the
      same pending session, README *HTTP API*; a ready token is read again);
      a posted event (each carries an ``id``, the caller's or the SDK's:
      the queue takes it once, docs/turns.md *Posting an event*); pause and terminate (again changes
      nothing, docs/turns.md *Lifecycle*). Never a tool invocation (the tool
      may have acted), a resume (each queues a wake-up: :func:`lifecycle`), a revoke
      or a delete (a repeat answers 404).

    With a ``deadline`` (``time.monotonic()``), no retry whose wait ends past it.
    """
    delay = _retry_delay(policy, call, attempt, outcome)
    if delay is not None and deadline is not None and time.monotonic() + delay >= deadline:
        return None
    return delay


def _retry_delay(policy: RetryPolicy, call: Call, attempt: int, outcome: httpx.Response | Exception) -> float | None:
    if attempt >= policy.max_attempts:
        return None
    if isinstance(outcome, httpx.Response):
        status = outcome.status_code
        if status not in RETRY_STATUSES or (status != 429 and not call.idempotent):
            return None
        after = retry_after(outcome)
        if after is not None:
            return after if after <= policy.max_retry_after else None
        return policy.backoff(attempt)
    if isinstance(outcome, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return policy.backoff(attempt)
    if isinstance(outcome, httpx.TransportError) and call.idempotent:
        return policy.backoff(attempt)
    return None


def connection_error(call: Call, exc: Exception, settings: Settings) -> errors.AgentauthError:
    """The error of a request that got no answer: it names the address tried
    (scheme://host[:port], never a path, query or userinfo) and the setting it came from."""
    kind = type(exc).__name__
    address, source, _ = where(settings, call.credential)
    at = f" from {address} ({source})"
    running = ": is agentauth running there?" if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)) else ""
    if isinstance(exc, httpx.DecodingError):
        return errors.UnexpectedResponse(f"{call.method} {call.path}: an answer that cannot be decoded ({kind}: {exc})")
    if isinstance(exc, httpx.TimeoutException):
        return errors.Timeout(f"{call.method} {call.path}: no answer{at} in time{running} ({kind})")
    # A LocalProtocolError is about what was sent: its text may quote a header, credential and all.
    text = "" if isinstance(exc, httpx.LocalProtocolError) else f": {exc}"
    return errors.NetworkError(f"{call.method} {call.path}: no answer{at}{running} ({kind}{text})")


# The headers an answer of agentauth (or of its AWS deployment's API Gateway
# and function URLs, whose own answers carry no agentauth error body) has.
_AGENTAUTH_HEADERS = ("X-Request-Id", "x-amzn-requestid", "apigw-requestid")


def foreign_answer(
    response: httpx.Response, settings: Settings, credential: Credential
) -> errors.AgentauthError | None:
    """An error answer that is not agentauth's — neither its error body
    (``{"error": {"code": …}}``) nor an ``X-Request-Id`` — as an
    :class:`~agentauth.errors.UnexpectedResponse` that names the address and
    its setting (another server there: a 404 that is not agentauth's
    ``notFound``); None for agentauth's answers."""
    if response.is_success or any(response.headers.get(h) for h in _AGENTAUTH_HEADERS):
        return None
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping) and "code" in body["error"]:
        return None
    address, source, question = where(settings, credential)
    request = response.request
    reason = response.reason_phrase or "error"
    return errors.UnexpectedResponse(
        f"{request.method} {request.url.path}: the server at {address} ({source}) did not answer as agentauth"
        f" (HTTP {response.status_code} {reason}, with no X-Request-Id and no agentauth error body): {question}",
        status=response.status_code,
        retry_after=retry_after(response),
    )


# --- operations ----------------------------------------------------------------


def app_ref(app: str) -> str:
    """``name`` or ``OAuthApp/name`` → ``OAuthApp/name``."""
    if not app:
        raise errors.InvalidRequest("app is empty: name an OAuthApp of the bundle")
    return app if "/" in app else f"OAuthApp/{app}"


def _seconds(value: float | timedelta | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return int(value)


def _auth_json(
    auth: TurnAuth | Mapping[str, Any] | None,
    subjects: Mapping[str, str] | None = None,
    actor: Actor | str | Mapping[str, Any] | None = None,
    claims: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(auth, TurnAuth):
        out = auth.to_json()
    elif auth is not None:
        out = dict(auth)
    if subjects:
        out["subjects"] = dict(subjects)
    if actor is not None:
        if isinstance(actor, Actor):
            out["actor"] = actor.to_json()
        elif isinstance(actor, str):
            out["actor"] = Actor(id=actor).to_json()
        else:
            out["actor"] = dict(actor)
    if claims is not None:
        out["claims"] = dict(claims)
    return out


def parse_token(response: httpx.Response) -> AccessToken:
    body = read_object(response)
    status = body.get("status")
    if status == "ready":
        return AccessToken.from_json(body)
    if status == "authorization_required":
        raise authorization_required(body, request_id(response), response.status_code)
    if status == "error":
        err = body.get("error") if isinstance(body.get("error"), Mapping) else {}
        assert isinstance(err, Mapping)
        code = str(err.get("code") or "error")
        details = {"scopes": err["scopes"]} if isinstance(err.get("scopes"), list) else None
        cls = errors.error_class_for(code)
        raise cls(
            str(err.get("message") or code),
            code=code,
            status=response.status_code,
            request_id=request_id(response),
            details=details,
        )
    raise errors.UnexpectedResponse(
        f"token answer with status {status!r}", status=response.status_code, request_id=request_id(response)
    )


def authorization_required(
    body: Mapping[str, Any], rid: str | None, status: int | None = None
) -> errors.AuthorizationRequired:
    """From a token answer (``authSessionId``, …) or a tool result's ``authorization``."""
    device = body.get("deviceCode")
    return errors.AuthorizationRequired(
        str(body.get("message") or ""),
        authorization_url=str(body.get("authorizationUrl") or ""),
        session_id=str(body.get("authSessionId") or ""),
        expires_at=parse_time(body.get("expiresAt")),
        oauth_app_ref=str(body["oauthAppRef"]) if isinstance(body.get("oauthAppRef"), str) else None,
        device_code=device if isinstance(device, Mapping) else None,
        request_id=rid,
        status=status,
    )


def get_access_token(
    app: str,
    *,
    subjects: Mapping[str, str] | None,
    scopes: Sequence[str] | None,
    min_ttl: float | timedelta | None,
    resume: ResumeTarget | None,
    actor: Actor | str | Mapping[str, Any] | None,
    claims: Mapping[str, Any] | None,
    auth: TurnAuth | Mapping[str, Any] | None,
    origin: Mapping[str, Any] | None,
) -> Op[AccessToken]:
    body: dict[str, Any] = {"oauthAppRef": app_ref(app)}
    if scopes is not None:
        body["scopes"] = list(scopes)
    ttl = _seconds(min_ttl)
    if ttl is not None:
        body["minTtlSeconds"] = ttl
    turn: dict[str, Any] = {"auth": _auth_json(auth, subjects, actor, claims)}
    if resume is not None:
        turn["resume"] = resume.to_json()
    if origin is not None:
        turn["origin"] = dict(origin)
    body["turn"] = turn
    return Op(Call("POST", "/v1/oauth/token", "runtime", idempotent=True, body=body, has_body=True), parse_token)


def authorization_status(session_id: str, wait: int | None, timeouts: Timeouts) -> Op[AuthSessionStatus]:
    query = {"wait": str(wait)} if wait else None
    read = timeouts.read + wait if wait else None
    return Op(
        Call(
            "GET",
            f"/v1/oauth/sessions/{segment(session_id, 'session_id')}",
            "runtime",
            idempotent=True,
            query=query,
            read_timeout=read,
        ),
        lambda r: AuthSessionStatus.from_json(session_id, read_object(r)),
    )


def settle(status: AuthSessionStatus) -> AuthSessionStatus:
    """A settled session: completed is returned, failed and expired are raised."""
    if status.status == "completed":
        return status
    reason = status.status_reason
    if status.status == "expired":
        raise errors.AuthorizationExpired(
            f"auth session {status.session_id} expired before the user consented" + (f" ({reason})" if reason else ""),
            session_id=status.session_id,
            reason=reason,
            status_name=status.status,
        )
    raise errors.AuthorizationFailed(
        f"auth session {status.session_id} {status.status or 'ended'}" + (f": {reason}" if reason else ""),
        session_id=status.session_id,
        reason=reason,
        status_name=status.status,
    )


def session_id_of(session: str | errors.AuthorizationRequired) -> str:
    sid = session.session_id if isinstance(session, errors.AuthorizationRequired) else session
    if not sid:
        raise errors.InvalidRequest("session_id is empty")
    return sid


class AuthWait:
    """wait_for_authorization's rule, the clients only sending and sleeping: long
    polls of at most :data:`MAX_WAIT_CHUNK` s until the session settles or
    ``timeout`` s have passed; a poll answered at once (a server that does not
    hold it) is followed by a pause of up to 1 s."""

    def __init__(self, session: str | errors.AuthorizationRequired, timeout: float, timeouts: Timeouts) -> None:
        self.session_id = session_id_of(session)
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self._timeouts = timeouts
        self._started = 0.0

    def poll(self) -> Op[AuthSessionStatus]:
        """The next long poll, waiting at most until the deadline."""
        wait = max(0, min(MAX_WAIT_CHUNK, math.floor(self.deadline - time.monotonic())))
        self._started = time.monotonic()
        return authorization_status(self.session_id, wait, self._timeouts)

    @property
    def send_deadline(self) -> float:
        """Retries and timeouts within the deadline: a lost long poll is not sent again past it."""
        return self.deadline + DEADLINE_GRACE

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def answered(self, status: AuthSessionStatus | None) -> AuthSessionStatus | None:
        """The settled session (completed returned, failed and expired raised), or None to poll
        again; ``AuthorizationTimeout`` past the deadline. ``status`` None: a poll timed out."""
        if status is not None and status.settled:
            return settle(status)
        if self.expired():
            raise errors.AuthorizationTimeout(
                f"auth session {self.session_id} still {status.status if status else 'pending'}"
                f" after {self.timeout:g} s",
                session_id=self.session_id,
            )
        return None

    def pause(self) -> float:
        """Seconds to sleep before the next poll: 0 after one the server held."""
        if time.monotonic() - self._started < 1:
            return min(1.0, max(0.0, self.deadline - time.monotonic()))
        return 0.0


def pending(target: ResumeTarget) -> Op[list[PendingAuthorization]]:
    ref = target.to_json()
    query = {"swarmRef": ref["swarmRef"], "instanceKey": target.instance_key, "agentName": target.agent}

    def parse(r: httpx.Response) -> list[PendingAuthorization]:
        return list(each(read_object(r).get("items"), PendingAuthorization.from_json))

    return Op(Call("GET", "/v1/oauth/pending", "runtime", idempotent=True, query=query), parse)


def revoke(app: str, subject: str) -> Op[RevokeResult]:
    body = {"oauthAppRef": app_ref(app), "subject": subject}
    return Op(
        Call("POST", "/v1/oauth/revoke", "runtime", idempotent=False, body=body, has_body=True),
        lambda r: RevokeResult.from_json(read_object(r)),
    )


def list_tools() -> Op[list[ToolManifestEntry]]:
    return Op(
        Call("GET", "/v1/agents/tools", "agent", idempotent=True),
        lambda r: [ToolManifestEntry.from_json(d) for d in read_data_list(r)],
    )


def search_skills(query: str, top_k: int | None) -> Op[list[Skill]]:
    q = {"q": query}
    if top_k is not None:
        q["top_k"] = str(top_k)
    return Op(
        Call("GET", "/v1/agents/skills", "agent", idempotent=True, query=q),
        lambda r: [Skill.from_json(d) for d in read_data_list(r)],
    )


def parse_tool_result(response: httpx.Response) -> ToolInvocation:
    body = read_object(response)
    result = body.get("result")
    if not isinstance(result, Mapping):
        raise errors.UnexpectedResponse(
            "tool invocation without a result", status=response.status_code, request_id=request_id(response)
        )
    status = str(result.get("status") or "")
    if status == "authorization_required":
        authz = result.get("authorization")
        raise authorization_required(
            authz if isinstance(authz, Mapping) else {}, request_id(response), response.status_code
        )
    err = result.get("error")
    tool_error = None
    if isinstance(err, Mapping):
        tool_error = ToolError(
            code=str(err.get("code") or ""),
            message=str(err.get("message") or ""),
            name=str(err.get("name") or ""),
            suggestion=str(err["suggestion"]) if isinstance(err.get("suggestion"), str) else None,
        )
    called = body.get("toolCalled")
    returned = body.get("toolReturned")
    return ToolInvocation(
        status=status,
        output=result.get("output"),
        error=tool_error,
        tool_called=dict(called) if isinstance(called, Mapping) else {},
        tool_returned=dict(returned) if isinstance(returned, Mapping) else {},
        raw=body,
    )


# How much longer than Timeouts.read a tool call's answer may take: the
# server gives an http tool's request 20 s, a refresh included.
TOOL_READ_MARGIN = 15.0


def invoke_tool(
    tool_name: str, args: Mapping[str, Any] | None, call_id: str | None, timeouts: Timeouts
) -> Op[ToolInvocation]:
    body: dict[str, Any] = {"toolName": tool_name, "args": dict(args or {})}
    if call_id:
        body["callId"] = call_id
    read = timeouts.read + TOOL_READ_MARGIN
    return Op(
        Call("POST", "/v1/tools/invoke", "agent", idempotent=False, body=body, has_body=True, read_timeout=read),
        parse_tool_result,
    )


def instance_path(swarm: str, instance_key: str, agent: str | None = None) -> str:
    path = f"/v1/instances/{segment(swarm, 'swarm')}/{segment(instance_key, 'instance_key')}"
    return path + (f"/{segment(agent, 'agent')}" if agent is not None else "")


def post_event(
    swarm: str,
    instance_key: str,
    *,
    text: str | None,
    auth: TurnAuth | Mapping[str, Any] | None,
    origin: Mapping[str, Any] | None,
    id: str | None,
    type: str | None,
    agent: str | None,
    properties: Mapping[str, str] | None,
) -> Op[PostedEvent]:
    # Every post carries an id, the caller's or one of its own (as the
    # TypeScript SDK's), so that a post whose answer was lost is sent again
    # safely: the queue takes an id once (docs/turns.md, Posting an event).
    body: dict[str, Any] = {"auth": _auth_json(auth), "id": id if id is not None else f"sdk-{uuid.uuid4()}"}
    if text is not None:
        body["text"] = text
    for key, mapping in (("origin", origin), ("properties", properties)):
        if mapping is not None:
            body[key] = dict(mapping)
    for key, value in (("type", type), ("agent", agent)):
        if value is not None:
            body[key] = value
    return Op(
        Call(
            "POST",
            instance_path(swarm, instance_key) + "/events",
            "runtime",
            idempotent=True,
            body=body,
            has_body=True,
        ),
        lambda r: PostedEvent.from_json(read_object(r)),
    )


def list_instances() -> Op[InstanceList]:
    def parse(r: httpx.Response) -> InstanceList:
        read_data_list(r)  # no data list is an UnexpectedResponse
        return InstanceList.from_json(read_object(r))

    return Op(Call("GET", "/v1/instances", "runtime", idempotent=True), parse)


def get_instance(swarm: str, instance_key: str, agent: str) -> Op[Instance]:
    return Op(
        Call("GET", instance_path(swarm, instance_key, agent), "runtime", idempotent=True),
        lambda r: Instance.from_json(read_object(r)),
    )


class TurnWait:
    """wait_for_turn's rule, the clients only sending and sleeping: the turn of
    ``event_id`` (its ``input_event_id``), else the instance's newest turn not in
    ``ignore``; :class:`~agentauth.errors.Timeout` once ``timeout`` s have passed."""

    def __init__(
        self,
        swarm: str,
        instance_key: str,
        agent: str,
        event_id: str | None,
        ignore: Collection[str],
        timeout: float,
    ) -> None:
        self.op = get_instance(swarm, instance_key, agent)
        self.deadline = time.monotonic() + timeout
        self._where = f"{swarm}/{instance_key}/{agent}"
        self._event_id = event_id
        self._ignore = ignore
        self._timeout = timeout
        # Whether any turn seen named its input event (a server before inputEventId names none).
        self._turns = 0
        self._with_input_event = 0

    @property
    def send_deadline(self) -> float:
        """Retries and timeouts within the deadline: a lost poll is not sent again past it."""
        return self.deadline + DEADLINE_GRACE

    def found(self, detail: Instance | None) -> TurnSummary | None:
        """The turn waited for in ``detail`` (None: the instance is not there yet), or None
        to look again; the Timeout raised past the deadline."""
        turns = [] if detail is None else list(detail.recent_turns)  # newest first
        if detail is not None and detail.active_turn is not None:
            turns.insert(0, detail.active_turn)
        self._turns += len(turns)
        self._with_input_event += sum(1 for t in turns if t.input_event_id)
        for summary in turns:
            if summary.id in self._ignore:
                continue
            if self._event_id is None or summary.input_event_id == self._event_id:
                return summary
        if time.monotonic() >= self.deadline:
            raise self._timed_out()
        return None

    def _timed_out(self) -> errors.Timeout:
        if self._event_id is None:
            return errors.Timeout(f"no new turn in {self._where} after {self._timeout:g} s")
        hint = ""
        if self._turns and not self._with_input_event:
            hint = " (this server names no turn's inputEventId: it is older than the SDK; pass ignore= instead)"
        return errors.Timeout(
            f"no turn of event {self._event_id} in {self._where} after {self._timeout:g} s (it may still wait"
            f" in the instance's backlog: a paused instance, a parked turn ahead of it){hint}"
        )


def lifecycle(swarm: str, instance_key: str, agent: str, action: str, reason: str | None = None) -> Op[InstanceRecord]:
    has_body = action == "terminate" and reason is not None
    return Op(
        Call(
            "POST",
            instance_path(swarm, instance_key, agent) + "/" + action,
            "runtime",
            # Pausing or terminating again changes nothing. Resuming again is
            # not a no-op: each resume queues a wake-up (docs/turns.md,
            # Lifecycle) under the instance's version of the moment, so the
            # repeat's is a new event, not one the queue drops as a duplicate;
            # it carries on whatever work is due once more — a turn left
            # running by an event that failed every attempt gets another
            # round of them, model calls included. The TypeScript SDK does
            # not resend it either.
            idempotent=action != "resume",
            body={"reason": reason} if has_body else None,
            has_body=has_body,
        ),
        lambda r: InstanceRecord.from_json(read_object(r)),
    )


def delete_instance(swarm: str, instance_key: str, agent: str) -> Op[InstanceDeleted]:
    def parse(r: httpx.Response) -> InstanceDeleted:
        body = read_object(r)
        return InstanceDeleted(bool(body.get("deleted")), bool(body.get("oauthGrantsKept")))

    return Op(Call("DELETE", instance_path(swarm, instance_key, agent), "runtime", idempotent=False), parse)


def events_path(swarm: str, instance_key: str, agent: str, turn_id: str) -> str:
    return instance_path(swarm, instance_key, agent) + f"/turns/{segment(turn_id, 'turn_id')}/events"


def turn_events(swarm: str, instance_key: str, agent: str, turn_id: str, after: int | None) -> Op[list[TurnEvent]]:
    return Op(
        Call(
            "GET",
            events_path(swarm, instance_key, agent, turn_id),
            "runtime",
            idempotent=True,
            query={"after": str(after)} if after is not None and after >= 0 else None,
        ),
        lambda r: [TurnEvent.from_json(d) for d in read_data_list(r)],
    )


# --- Server-Sent Events ----------------------------------------------------------


@dataclass(frozen=True)
class SSEMessage:
    event: str
    data: str
    id: str | None


class SSEParser:
    """The text/event-stream grammar, one line at a time (comments ignored).

    ``retry`` is the last ``retry:`` field's reconnection time (seconds; None
    until one came), as the TypeScript SDK's parser keeps it.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self.retry: float | None = None

    def feed(self, line: str) -> SSEMessage | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            msg = SSEMessage(self._event or "message", "\n".join(self._data), self._id)
            self._data, self._event = [], ""
            return msg
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value) / 1000
        return None


class FollowState:
    """Where a follow is: the last seq yielded (events at or before it are
    dropped, so none is yielded twice), whether the turn ended, and how the
    connections in a row went.

    A connection on which the server was heard (an event, a keep-alive, the
    comment a stream ends with) proves the stream works: what ends it — the
    server's limit on a stream's length (10 minutes; on Lambda, the
    invocation's end, every few seconds with a short function timeout), a
    cut after it — is no failure, however long the turn stays parked. Only
    connections that fail with nothing heard count towards
    ``RetryPolicy.max_reconnects``.
    """

    def __init__(self, after: int | None, settings: Settings) -> None:
        self.last = after if after is not None else -1
        self.done = False
        self.failures = 0
        self.quiet = 0
        self.policy = settings.retry
        self.settings = settings
        self.polling = False
        # The last ``retry:`` a stream of this follow sent (seconds): it holds
        # for the follow's later streams, as the SSE spec's reconnection time does.
        self.retry: float | None = None
        self.begin()

    def begin(self) -> None:
        """A new connection: nothing heard, nothing new, no Retry-After yet."""
        self.heard = False
        self.progressed = False
        self.ended_cleanly = False
        self.hint: float | None = None

    def accept(self, event: TurnEvent) -> bool:
        if event.seq <= self.last:
            return False
        self.last = event.seq
        self.progressed = True
        if event.terminal:
            self.done = True
        return True

    def stream_call(self, swarm: str, instance_key: str, agent: str, turn_id: str) -> Call:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last >= 0:
            headers["Last-Event-ID"] = str(self.last)
        return Call("GET", events_path(swarm, instance_key, agent, turn_id), "stream", idempotent=True, headers=headers)

    def refused(self, response: httpx.Response) -> None:
        """A stream request answered other than 200 (its body read): 406 turns to
        polling; 429 and 5xx are reconnected (after Retry-After); any other
        answer (401, 403, 404, …) is raised: asking again would not change it."""
        status = response.status_code
        if status == 406:
            self.polling = True
        elif status == 429 or status >= 500:
            self.hint = retry_after(response)
        else:
            raise foreign_answer(response, self.settings, "stream") or error_from_response(response)

    def page(self, response: httpx.Response) -> list[TurnEvent]:
        """A 200 that is not an event stream (a server or proxy that answered the
        JSON form): its new events, and the follow goes on by polling."""
        self.polling = True
        return [e for e in (TurnEvent.from_json(d) for d in read_data_list(response)) if self.accept(e)]

    def ended(self, parser: SSEParser) -> None:
        """The server ended the stream (no cut): its ``retry:``, if any, is kept."""
        self.ended_cleanly = True
        if parser.retry is not None:
            self.retry = parser.retry

    def line(self, line: str, parser: SSEParser) -> TurnEvent | None:
        """One line of the stream: the event it completes when that event is new."""
        self.heard = True
        msg = parser.feed(line)
        return self.message(msg) if msg is not None else None

    def message(self, msg: SSEMessage) -> TurnEvent | None:
        """The event of one SSE message when it is new, else None."""
        if not msg.data:
            return None
        try:
            body = json.loads(msg.data)
            event = TurnEvent.from_json(body)
        except (ValueError, TypeError) as exc:
            raise errors.UnexpectedResponse(f"turn event stream: an event that is not a turn event ({exc})") from exc
        return event if self.accept(event) else None

    def polled(self, events: Sequence[TurnEvent]) -> list[TurnEvent]:
        """A poll of the JSON form that answered: its new events (a poll that works is no failure)."""
        self.failures = 0
        return [e for e in events if self.accept(e)]

    def poll_failed(self, err: errors.AgentauthError) -> float:
        """The wait before the next poll after err (a poll of the JSON form that
        failed past its retries); err raised when asking again would not change it."""
        reconnectable = isinstance(err, (errors.NetworkError, errors.Timeout)) or (
            err.status is not None and (err.status == 429 or err.status >= 500)
        )
        if not reconnectable:
            raise err
        self.begin()
        self.hint = err.retry_after
        return self.reconnect_delay()

    def reconnect_delay(self) -> float:
        """The wait before the next connection; raises StreamFailed past the budget."""
        if self.progressed or self.heard:
            self.failures = 0
        if self.progressed:
            self.quiet = 0
        if self.heard and self.ended_cleanly:
            # The server ended a stream that worked: carry on where it
            # stopped — at once, then within a second when it keeps ending
            # with nothing new (a parked turn on Lambda); after the
            # stream's ``retry:`` when it sent one (as the TypeScript SDK).
            if self.progressed:
                return 0.0
            self.quiet += 1
            if self.retry is not None:
                return min(self.retry, self.policy.max_retry_after)
            return min(1.0, self.policy.backoff(self.quiet - 1)) if self.quiet > 1 else 0.0
        self.failures += 1
        if self.failures > self.policy.max_reconnects:
            raise errors.StreamFailed(
                f"turn event stream: {self.policy.max_reconnects} reconnects in a row failed with nothing heard"
                f" from the server (last seq {self.last})"
            )
        if self.hint is not None:
            return min(self.hint, self.policy.max_retry_after)
        return self.policy.backoff(self.failures)


def is_event_stream(response: httpx.Response) -> bool:
    ctype: str = response.headers.get("Content-Type", "")
    return ctype.split(";")[0].strip().lower() == "text/event-stream"
