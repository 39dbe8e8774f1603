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

import threading
from collections.abc import Callable, Generator
from typing import Any, Protocol

import httpx

from . import errors
from ._core import Credential, Settings
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

    def __init__(self, token: Secret | Callable[[], str], what: str) -> None:
        self._token = token
        self._what = what

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = "Bearer " + header_token(self._token, self._what)
        yield request


def header_token(token: Secret | Callable[[], str], what: str) -> str:
    """The token's value, fit for a header: surrounding whitespace (a file's
    newline) dropped. A value that is still not one refuses the request
    before it is sent — the HTTP layer's own error would quote the header,
    token and all."""
    value = _header_value(token)
    if value is None:
        raise errors.MissingCredential(
            f"{what} is not usable as a bearer token (empty, or it holds a space, a control or a non-ASCII"
            " character); the value is not shown"
        )
    return value


def _header_value(token: Secret | Callable[[], str]) -> str | None:
    # Apart from header_token, so that the frame an error is raised from holds no value.
    raw = token.reveal() if isinstance(token, Secret) else token()
    value = raw.strip() if isinstance(raw, str) else ""
    if not value or not value.isascii() or not value.isprintable() or " " in value:
        return None
    return value


class SigV4Auth(httpx.Auth):
    """AWS Signature Version 4 with botocore's standard credential chain (``agentauth[aws]``)."""

    requires_request_body = True

    def __init__(self, service: str, region: str, credentials: AwsCredentials) -> None:
        self._service = service
        self._region = region
        self._credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        failure: str | None = None
        try:
            signed = _sign(self._credentials, self._service, self._region, request)
        except Exception as exc:  # any failure of botocore's, told without its frames
            failure = f"{type(exc).__name__}: {exc}"
            signed = {}
        if failure is not None:
            # Raised outside the except block, so that neither the botocore
            # exception nor the frames whose locals hold the credentials
            # (what error trackers record) travel with the error.
            raise errors.MissingCredential(f"SigV4 for {self._service}: signing failed ({failure[:300]})")
        request.headers.update(signed)
        yield request


def _sign(credentials: AwsCredentials, service: str, region: str, request: httpx.Request) -> dict[str, str]:
    """The SigV4 headers of request, with the credentials of this moment."""
    from botocore.auth import SigV4Auth as BotoSigV4
    from botocore.awsrequest import AWSRequest

    # botocore refreshes expiring credentials here (a role's, from IMDS or
    # STS): a short blocking call, as every botocore client does.
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

    def _aws_credentials(self) -> tuple[AwsCredentials, str]:
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
            creds, region = self._aws_credentials()
            service = "lambda" if credential == "stream" and s.stream_url else "execute-api"
            return SigV4Auth(service, region, creds)
        if s.runtime_token is None:
            raise errors.MissingCredential(_RUNTIME_MISSING)
        return BearerAuth(s.runtime_token, "the runtime token (runtime_token / AGENTAUTH_RUNTIME_TOKEN)")
