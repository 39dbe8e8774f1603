"""Credentials on requests: the runtime token or SigV4 for the runtime routes,
the agent JWT for the tool routes.

``serve`` takes ``Authorization: Bearer <runtime token>`` on its runtime
routes (``/v1/oauth/*``, ``/v1/instances*``); the AWS deployment authorizes
them with IAM, so they are signed with SigV4 for ``execute-api``, and the
turn event stream, served by the turn function's URL, for ``lambda``. The
tool routes (``/v1/agents/*``, ``/v1/tools/invoke``) take an agent JWT from
the identity provider on both. A route whose credential is missing raises
:class:`~agentauth.errors.MissingCredential` before anything is sent.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncGenerator, Generator
from typing import Any, Protocol

import httpx

from . import errors
from ._core import Credential, Settings, TokenSource
from .models import Secret

_RUNTIME_MISSING = (
    "this route takes the runtime token: set AGENTAUTH_RUNTIME_TOKEN or pass runtime_token=… "
    "(for the AWS deployment, set AGENTAUTH_AUTH=sigv4 or pass auth='sigv4')"
)
_AGENT_MISSING = (
    "this route takes an agent JWT from your identity provider: set AGENTAUTH_AGENT_TOKEN or pass agent_token=…"
)


class AwsCredentials(Protocol):
    """AWS credentials for SigV4, as the TypeScript SDK's ``AwsCredentials``:
    botocore's (``botocore.session.get_session().get_credentials()``; a
    role's refreshable credentials are read again, refreshed when due, on
    every request) or a frozen set (``botocore.credentials.ReadOnlyCredentials``)."""

    @property
    def access_key(self) -> str | None: ...

    @property
    def secret_key(self) -> str | None: ...

    @property
    def token(self) -> str | None: ...


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>``; a callable is asked on every request (a JWT that renews)."""

    def __init__(self, token: Secret | TokenSource, what: str) -> None:
        self._token = token
        self._what = what

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raw = self._token.reveal() if isinstance(self._token, Secret) else self._token()
        if inspect.isawaitable(raw):
            if inspect.iscoroutine(raw):
                raw.close()
            raise errors.MissingCredential(f"{self._what} is an async function: it takes an agentauth.AsyncClient")
        value = _header_value(raw)
        del raw  # the frames an error is raised through hold no token
        request.headers["Authorization"] = "Bearer " + _usable(value, self._what)
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        raw = self._token.reveal() if isinstance(self._token, Secret) else self._token()
        if inspect.isawaitable(raw):
            raw = await raw
        value = _header_value(raw)
        del raw  # the frames an error is raised through hold no token
        request.headers["Authorization"] = "Bearer " + _usable(value, self._what)
        yield request


def _usable(value: str | None, what: str) -> str:
    """A token that is no header value refuses the request before it is sent:
    the HTTP layer's own error would quote the header, token and all."""
    if value is None:
        raise errors.MissingCredential(
            f"{what} is not usable as a bearer token (empty, or it holds a space, a control or a non-ASCII"
            " character); the value is not shown"
        )
    return value


def _header_value(raw: object) -> str | None:
    """The token fit for a header, surrounding whitespace (a file's newline) dropped; None when it is not."""
    value = raw.strip() if isinstance(raw, str) else ""
    if not value or not value.isascii() or not value.isprintable() or " " in value:
        return None
    return value


class SigV4Auth(httpx.Auth):
    """AWS Signature Version 4 with botocore's standard credential chain (``agentauth[aws]``).

    The credentials are read for every request (botocore refreshes a role's
    when due: a blocking call to STS or the instance metadata), so an
    AsyncClient signs in a worker thread, never on the event loop.
    """

    requires_request_body = True

    def __init__(self, service: str, resolver: Credentials) -> None:
        self._service = service
        self._resolver = resolver

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.read()
        request.headers.update(self._signed(request))
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await request.aread()
        request.headers.update(await asyncio.to_thread(self._signed, request))
        yield request

    def _signed(self, request: httpx.Request) -> dict[str, str]:
        credentials, region = self._resolver.aws()
        failure: str | None = None
        try:
            signed = _sign(credentials, self._service, region, request)
        except Exception as exc:  # any failure of botocore's, told without its frames
            failure = f"{type(exc).__name__}: {exc}"
            signed = {}
        if failure is not None:
            # Raised outside the except block, so that neither the botocore
            # exception nor the frames whose locals hold the credentials
            # (what error trackers record) travel with the error.
            raise errors.MissingCredential(f"SigV4 for {self._service}: signing failed ({failure[:300]})")
        return signed


def _sign(credentials: AwsCredentials, service: str, region: str, request: httpx.Request) -> dict[str, str]:
    """The SigV4 headers of request, with the credentials of this moment."""
    from botocore.auth import SigV4Auth as BotoSigV4
    from botocore.awsrequest import AWSRequest

    refresh = getattr(credentials, "get_frozen_credentials", None)
    frozen: Any = refresh() if callable(refresh) else credentials
    headers = {"Host": request.headers["Host"]}
    if "Content-Type" in request.headers:
        headers["Content-Type"] = request.headers["Content-Type"]
    aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
    BotoSigV4(frozen, service, region).add_auth(aws)
    out: dict[str, str] = {}
    for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-SHA256"):
        value = aws.headers.get(name)
        if value is not None:
            out[name] = str(value)
    return out


class Credentials:
    """Picks each request's credential from the settings; botocore is loaded once, when first needed."""

    def __init__(self, settings: Settings, aws_credentials: AwsCredentials | None = None) -> None:
        self._settings = settings
        self._aws = aws_credentials
        self._region = settings.region
        self._lock = threading.Lock()

    def aws(self) -> tuple[AwsCredentials, str]:
        """The credentials and region SigV4 signs with, found once (botocore's chain)."""
        with self._lock:
            if self._aws is None or self._region is None:
                try:
                    import botocore.session
                except ImportError as exc:
                    raise errors.MissingCredential(
                        "AGENTAUTH_AUTH=sigv4 needs botocore: pip install 'agentauth[aws]'"
                    ) from exc
                session = botocore.session.get_session()
                if self._aws is None:
                    self._aws = session.get_credentials()
                if self._region is None:
                    self._region = session.get_config_variable("region")
            if self._aws is None:
                raise errors.MissingCredential(
                    "SigV4 needs AWS credentials: none found in the standard chain "
                    "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a role)"
                )
            if not self._region:
                raise errors.MissingCredential("SigV4 needs a region: set AWS_REGION or pass region=…")
            return self._aws, self._region

    def auth(self, credential: Credential) -> httpx.Auth | None:
        s = self._settings
        if credential == "none":
            return None
        if credential == "agent":
            if s.agent_token is None:
                raise errors.MissingCredential(_AGENT_MISSING)
            return BearerAuth(s.agent_token, "the agent token (agent_token / AGENTAUTH_AGENT_TOKEN)")
        if s.auth == "sigv4":
            # Found when the request is signed: an AsyncClient looks for them off the event loop.
            return SigV4Auth("lambda" if credential == "stream" and s.stream_url else "execute-api", self)
        if s.runtime_token is None:
            raise errors.MissingCredential(_RUNTIME_MISSING)
        return BearerAuth(s.runtime_token, "the runtime token (runtime_token / AGENTAUTH_RUNTIME_TOKEN)")
