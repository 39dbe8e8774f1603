"""``@requires_access_token``: a function that needs a user's token gets it,
and the user's consent is asked for on the way — in the spirit of AgentCore
Identity's decorator of the same name.

The decorated function is called with the :class:`~agentauth.models.AccessToken`
as a keyword argument (``token`` unless ``into`` says otherwise). When the
user must consent first, ``on_authorization_url`` is called with the link
(show it to that user), the wrapper waits for the consent on the long-poll
route, asks for the token again and calls the function. Sync functions take
a :class:`~agentauth.Client`, coroutine functions an
:class:`~agentauth.AsyncClient`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar, cast

from .client import AsyncClient, Client
from .errors import AuthorizationRequired
from .models import AccessToken, Actor, ResumeTarget

__all__ = ["requires_access_token"]

R = TypeVar("R")

SubjectsArg = Mapping[str, str] | Callable[..., Mapping[str, str]] | None
# Its answer is awaited when it is awaitable (an async function's callback), else ignored.
UrlCallback = Callable[[str], object]


def requires_access_token(
    client: Client | AsyncClient,
    app: str,
    *,
    on_authorization_url: UrlCallback,
    subjects: SubjectsArg = None,
    scopes: Sequence[str] | None = None,
    min_ttl: float | timedelta | None = None,
    actor: Actor | str | Mapping[str, Any] | None = None,
    claims: Mapping[str, Any] | None = None,
    resume: ResumeTarget | None = None,
    into: str = "token",
    wait_timeout: float = 600.0,
    max_consents: int = 2,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Decorate a function so that it is called with ``app``'s token as ``into=``.

    ``subjects`` is ``{"user": …}`` or a callable that gets the call's
    arguments and returns it (one user per call). ``on_authorization_url``
    gets the consent link (it may be a coroutine function for an async
    function); the wrapper then waits up to ``wait_timeout`` seconds for the
    consent (``AuthorizationFailed``, ``AuthorizationExpired`` or
    ``AuthorizationTimeout`` when it does not come). A token still not ready
    after ``max_consents`` consents (default 2, as the TypeScript SDK's
    ``maxConsents``: a consent, and one more when the grant went away at
    once) raises the last ``AuthorizationRequired``.
    """

    def request_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        subj = subjects(*args, **kwargs) if callable(subjects) else subjects
        return {
            "subjects": subj,
            "scopes": scopes,
            "min_ttl": min_ttl,
            "actor": actor,
            "claims": claims,
            "resume": resume,
        }

    # The wrapper takes the function's arguments less ``into``, which Python's
    # typing cannot say (ParamSpec cannot drop a keyword): it is typed as
    # taking any arguments and returning what the function returns.
    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        signature = _signature_without(fn, into)
        if inspect.iscoroutinefunction(fn):
            if not isinstance(client, AsyncClient):
                raise TypeError("requires_access_token: a coroutine function needs an agentauth.AsyncClient")
            aclient = client

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                _refuse_own(kwargs, into)
                params = request_args(args, kwargs)
                consents = 0
                while True:
                    try:
                        token = await aclient.get_access_token(app, **params)
                        break
                    except AuthorizationRequired as needed:
                        if consents >= max_consents:
                            raise
                        consents += 1
                        shown = on_authorization_url(needed.authorization_url)
                        if inspect.isawaitable(shown):
                            await shown
                        await aclient.wait_for_authorization(needed, wait_timeout)
                kwargs[into] = token
                return await fn(*args, **kwargs)

            _present(async_wrapper, signature, into)
            return cast(Callable[..., R], async_wrapper)

        if not isinstance(client, Client):
            raise TypeError("requires_access_token: a plain (sync) function needs an agentauth.Client")
        sclient = client

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            _refuse_own(kwargs, into)
            params = request_args(args, kwargs)
            consents = 0
            while True:
                try:
                    token: AccessToken = sclient.get_access_token(app, **params)
                    break
                except AuthorizationRequired as needed:
                    if consents >= max_consents:
                        raise
                    consents += 1
                    shown = on_authorization_url(needed.authorization_url)
                    if inspect.isawaitable(shown):
                        if inspect.iscoroutine(shown):
                            shown.close()
                        raise TypeError(
                            "requires_access_token: on_authorization_url of a sync function must not be async"
                        ) from needed
                    sclient.wait_for_authorization(needed, wait_timeout)
            kwargs[into] = token
            return fn(*args, **kwargs)

        _present(wrapper, signature, into)
        return wrapper

    return decorate


def _signature_without(fn: Callable[..., Any], into: str) -> inspect.Signature | None:
    """fn's signature less ``into``; a TypeError now, not at the first call (after
    the user was sent to consent), when fn cannot take the token as ``into=``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to check or show
        return None
    param = signature.parameters.get(into)
    if param is not None:
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
            raise TypeError(f"requires_access_token: {into!r} of {fn.__qualname__} must be a keyword parameter")
        return signature.replace(parameters=[p for p in signature.parameters.values() if p.name != into])
    if any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
        return signature
    raise TypeError(
        f"requires_access_token: {fn.__qualname__} has no parameter {into!r} to take the token"
        " (name it, or pass into= the one it has)"
    )


def _present(wrapper: Callable[..., Any], signature: inspect.Signature | None, into: str) -> None:
    """The wrapper shows the signature its callers use: without ``into``, which it
    fills in. What reads signatures to build a tool's schema for a model
    (LangChain, the OpenAI Agents SDK, pydantic) never offers the token."""
    if signature is None:
        return
    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    annotations = dict(getattr(wrapper, "__annotations__", {}))
    annotations.pop(into, None)
    wrapper.__annotations__ = annotations  # a copy: functools.wraps shares fn's dict


def _refuse_own(kwargs: Mapping[str, Any], into: str) -> None:
    if into in kwargs:
        raise TypeError(f"requires_access_token: {into!r} is the token the wrapper passes; the caller must not pass it")
