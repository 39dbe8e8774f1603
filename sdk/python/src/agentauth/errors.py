"""Errors the SDK raises: one class per error code agentauth documents.

Every error is an :class:`AgentauthError` carrying ``code``, ``message``,
``status`` (the HTTP status, ``None`` for errors raised before or without an
answer) and ``request_id`` (the answer's ``X-Request-Id``: quote it when
reporting a problem, the server's log line of that id has the cause).

Codes come from three places, all documented in the repository:

- the one error body of every route (README, *HTTP API*; ``shared/edge/httpx``):
  ``invalidRequest``, ``unauthenticated``, ``forbidden``, ``notFound``,
  ``methodNotAllowed``, ``payloadTooLarge``, ``unsupportedMediaType``,
  ``notAcceptable``, ``internal``, the turn routes' ``instanceTerminated`` and
  ``tooManyStreams``, the tool routes' ``rate_limited``, ``unavailable``,
  ``conflict``, ``limitReached``, ``uploadsDisabled``, revoke's ``grantNotFound``;
- the error results of ``POST /v1/oauth/token`` (HTTP 200, ``"status":"error"``):
  ``oauthAppNotFound``, ``subjectUnavailable``, ``scopeNotAllowed``,
  ``tokenRevoked``, ``refreshFailed``, ``deviceCodeUnsupported``,
  ``configurationError``, ``grantUnreadable``, ``scopeNotGranted``;
- the SDK's own: :class:`AuthorizationRequired` (a result, raised so that a
  caller cannot mistake it for a token), the consent outcomes, webhook checks,
  a missing credential and a connection that failed.

Messages never hold a token: the server's messages hold none, and the SDK's
own name the environment variable or argument, never its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

__all__ = [
    "AgentauthError",
    "AuthorizationExpired",
    "AuthorizationFailed",
    "AuthorizationRequired",
    "AuthorizationTimeout",
    "ConfigurationError",
    "Conflict",
    "DeviceCodeUnsupported",
    "Forbidden",
    "GrantNotFound",
    "GrantUnreadable",
    "InstanceTerminated",
    "InternalError",
    "InvalidRequest",
    "LimitReached",
    "MethodNotAllowed",
    "MissingCredential",
    "NetworkError",
    "NotAcceptable",
    "NotFound",
    "OAuthAppNotFound",
    "PayloadTooLarge",
    "RateLimited",
    "RefreshFailed",
    "ScopeNotAllowed",
    "ScopeNotGranted",
    "StreamFailed",
    "SubjectUnavailable",
    "Timeout",
    "TokenRevoked",
    "TooManyStreams",
    "ToolCallFailed",
    "Unauthenticated",
    "Unavailable",
    "UnexpectedResponse",
    "UnsupportedMediaType",
    "UploadsDisabled",
    "WebhookBadSignature",
    "WebhookMalformed",
    "WebhookTooOld",
    "WebhookVerificationError",
    "error_class_for",
]


class AgentauthError(Exception):
    """Anything the SDK raises. ``code`` is agentauth's error code."""

    code_name: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.code_name or "unknown"
        self.status = status
        self.request_id = request_id
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after

    def __str__(self) -> str:
        extra = []
        if self.status is not None:
            extra.append(f"HTTP {self.status}")
        if self.request_id:
            extra.append(f"request {self.request_id}")
        text = f"{self.code}: {self.message}"
        return f"{text} ({', '.join(extra)})" if extra else text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r},"
            f" status={self.status!r}, request_id={self.request_id!r})"
        )


# --- the error body of every route -----------------------------------------


class InvalidRequest(AgentauthError):
    """400: the request does not follow the route's rules; the message names the field."""

    code_name = "invalidRequest"


class Unauthenticated(AgentauthError):
    """401: no valid credential. ``details.get("reason")`` on the tool routes (``expired``, …)."""

    code_name = "unauthenticated"


class Forbidden(AgentauthError):
    """403: the credential may not do this (a tool's required scope, an admin flag; IAM on AWS)."""

    code_name = "forbidden"


class NotFound(AgentauthError):
    """404: no such route, session, instance, turn, swarm or upload."""

    code_name = "notFound"


class MethodNotAllowed(AgentauthError):
    code_name = "methodNotAllowed"


class NotAcceptable(AgentauthError):
    """406: a stream asked where answers are buffered (API Gateway); the message names the streaming URL."""

    code_name = "notAcceptable"


class Conflict(AgentauthError):
    code_name = "conflict"


class InstanceTerminated(Conflict):
    """409: the instance is terminated; deleting it starts the conversation over on its key."""

    code_name = "instanceTerminated"


class LimitReached(Conflict):
    code_name = "limitReached"


class PayloadTooLarge(AgentauthError):
    code_name = "payloadTooLarge"


class UnsupportedMediaType(AgentauthError):
    code_name = "unsupportedMediaType"


class RateLimited(AgentauthError):
    """429 on a tool invocation (per principal and tool); ``retry_after`` in seconds when given."""

    code_name = "rate_limited"


class TooManyStreams(RateLimited):
    """429: too many event streams open on the instance or the process."""

    code_name = "tooManyStreams"


class InternalError(AgentauthError):
    """500: the message is fixed; the server's log line of ``request_id`` has the cause."""

    code_name = "internal"


class Unavailable(AgentauthError):
    """503: a dependency of the route could not be reached (the tool rate limit's store, …)."""

    code_name = "unavailable"


class UploadsDisabled(AgentauthError):
    code_name = "uploadsDisabled"


class GrantNotFound(NotFound):
    """404 from revoke: no grant for that app and subject."""

    code_name = "grantNotFound"


# --- error results of POST /v1/oauth/token ---------------------------------


class OAuthAppNotFound(NotFound):
    """Unknown app, malformed ref, or a kind other than OAuthApp."""

    code_name = "oauthAppNotFound"


class SubjectUnavailable(AgentauthError):
    """The request lacks ``subjects.<the app's subjectMode>``."""

    code_name = "subjectUnavailable"


class ScopeNotAllowed(AgentauthError):
    """The scopes asked for are not a subset of the app's."""

    code_name = "scopeNotAllowed"


class ScopeNotGranted(AgentauthError):
    """The last consent did not grant these API scopes (``scopes``); a new link would be answered the same."""

    code_name = "scopeNotGranted"

    @property
    def scopes(self) -> list[str]:
        value = self.details.get("scopes")
        return [str(s) for s in value] if isinstance(value, list) else []


class TokenRevoked(AgentauthError):
    code_name = "tokenRevoked"


class RefreshFailed(AgentauthError):
    """A refresh failed and the grant is kept; the message says where (provider, store, …)."""

    code_name = "refreshFailed"


class DeviceCodeUnsupported(AgentauthError):
    code_name = "deviceCodeUnsupported"


class ConfigurationError(AgentauthError):
    """The session could not be started, or ``min_ttl`` < 0."""

    code_name = "configurationError"


class GrantUnreadable(AgentauthError):
    """One stored grant cannot be read or decrypted: it needs an operator, not a new consent."""

    code_name = "grantUnreadable"


# --- the SDK's own -----------------------------------------------------------


class AuthorizationRequired(AgentauthError):
    """The user must consent first: show them ``authorization_url``, then
    :meth:`AsyncClient.wait_for_authorization` on ``session_id`` and ask again.

    Raised by ``get_access_token`` and by ``invoke_tool`` (whose result was
    ``authorization_required``). The URL is the provider's consent page and
    holds no secret, but whoever completes it grants the access: show it only
    to the user it is for.
    """

    code_name = "authorization_required"

    def __init__(
        self,
        message: str,
        *,
        authorization_url: str,
        session_id: str,
        expires_at: datetime | None,
        oauth_app_ref: str | None = None,
        device_code: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message or "the user must consent first", request_id=request_id, status=status)
        self.authorization_url = authorization_url
        self.session_id = session_id
        self.expires_at = expires_at
        self.oauth_app_ref = oauth_app_ref
        self.device_code: dict[str, Any] | None = dict(device_code) if device_code is not None else None

    def __str__(self) -> str:
        return f"authorization required: {self.message} (open {self.authorization_url}; session {self.session_id})"


class AuthorizationFailed(AgentauthError):
    """The consent session ended without a grant; ``reason`` is the callback's reason code
    (``provider_error``, ``subject_mismatch``, …: README, *Callback failure reasons*)."""

    code_name = "authorization_failed"

    def __init__(self, message: str, *, session_id: str, reason: str | None, status_name: str = "failed") -> None:
        super().__init__(message)
        self.session_id = session_id
        self.reason = reason
        self.session_status = status_name


class AuthorizationExpired(AuthorizationFailed):
    """The consent session expired before the user finished."""

    code_name = "authorization_expired"


class Timeout(AgentauthError, TimeoutError):
    """Something did not happen in time: an answer (a request's timeout), a consent, a turn."""

    code_name = "timeout"


class AuthorizationTimeout(Timeout):
    """``wait_for_authorization`` gave up: the session is still pending."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class MissingCredential(AgentauthError, ValueError):
    """The route needs a credential the client was not given (no request was sent)."""

    code_name = "missingCredential"


class NetworkError(AgentauthError):
    """No answer: the connection failed or was lost (after the retries that were safe);
    a request that ran out of time is a :class:`Timeout`."""

    code_name = "network"


class ToolCallFailed(AgentauthError):
    """A tool's error result, raised by ``ToolInvocation.raise_for_error()``; ``code`` is the
    tool's (``E_TOOL_UPSTREAM``, ``E_TOOL_TIMEOUT``, …: docs/tools.md, *Routes*)."""

    code_name = "E_TOOL"


class StreamFailed(AgentauthError):
    """A turn's event stream could not be resumed within the reconnect budget."""

    code_name = "streamFailed"


class UnexpectedResponse(AgentauthError):
    """An answer the SDK cannot read (not JSON, not the documented shape)."""

    code_name = "unexpectedResponse"


class WebhookVerificationError(AgentauthError):
    """An origin delivery failed verification: refuse it (answer 4xx), never act on it.

    ``check`` (also ``code``) says which check failed, as the TypeScript SDK
    says it: ``malformed_timestamp``, ``malformed_signature``,
    ``malformed_body``, ``timestamp_out_of_window``, ``signature_mismatch``.
    """

    code_name = "webhook_invalid"

    def __init__(self, message: str, *, check: str | None = None) -> None:
        super().__init__(message, code=check or self.code_name)
        self.check = self.code


class WebhookMalformed(WebhookVerificationError):
    """A header is missing or not in its documented form, or the signed body is not a delivery."""

    code_name = "malformed_body"


class WebhookTooOld(WebhookVerificationError):
    """The timestamp is outside the tolerance window: a replay, or a clock far off."""

    code_name = "timestamp_out_of_window"


class WebhookBadSignature(WebhookVerificationError):
    """The signature is not the body's under this secret: another secret, or a body or timestamp changed."""

    code_name = "signature_mismatch"


_BY_CODE: dict[str, type[AgentauthError]] = {
    cls.code_name: cls
    for cls in (
        InvalidRequest,
        Unauthenticated,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        Conflict,
        InstanceTerminated,
        LimitReached,
        PayloadTooLarge,
        UnsupportedMediaType,
        RateLimited,
        TooManyStreams,
        InternalError,
        Unavailable,
        UploadsDisabled,
        GrantNotFound,
        OAuthAppNotFound,
        SubjectUnavailable,
        ScopeNotAllowed,
        ScopeNotGranted,
        TokenRevoked,
        RefreshFailed,
        DeviceCodeUnsupported,
        ConfigurationError,
        GrantUnreadable,
    )
}

# An answer without agentauth's error body (API Gateway's own 403 or 404, a
# proxy's 502) is typed by its status.
_BY_STATUS: dict[int, type[AgentauthError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    406: NotAcceptable,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: RateLimited,
    500: InternalError,
    503: Unavailable,
}


def error_class_for(code: str | None, status: int | None = None) -> type[AgentauthError]:
    """The class of an error code; by status when the code is unknown; else AgentauthError."""
    if code and code in _BY_CODE:
        return _BY_CODE[code]
    if status is not None and status in _BY_STATUS:
        return _BY_STATUS[status]
    return AgentauthError
