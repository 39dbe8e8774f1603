"""@requires_access_token: the callback gets the link, the function gets the token after consent."""

from __future__ import annotations

import inspect
import json
import typing
from typing import Any

import pytest

import agentauth

from .fakes import FakeServer, json_response
from .test_tokens import PENDING, READY


def consent_flow() -> FakeServer:
    return (
        FakeServer()
        .on("POST", "/v1/oauth/token", json_response(200, PENDING), json_response(200, READY))
        .on("GET", "/v1/oauth/sessions/as-1", json_response(200, {"status": "completed"}))
    )


def test_sync_function() -> None:
    fake = consent_flow()
    shown: list[str] = []
    with fake.client() as c:

        @agentauth.requires_access_token(
            c, "e2e-user", subjects=lambda user: {"user": f"demo:user:{user}"}, on_authorization_url=shown.append
        )
        def profile(user: str, *, token: agentauth.AccessToken) -> str:
            return f"{user}:{token.access_token.reveal()}"

        assert profile("alice") == "alice:tok-very-secret"
    assert shown == ["http://provider.test/auth?x=1"]
    bodies = [json.loads(r.content) for r in fake.calls("POST", "/v1/oauth/token")]
    assert all(b["turn"]["auth"]["subjects"] == {"user": "demo:user:alice"} for b in bodies)
    assert profile.__name__ == "profile"


async def test_async_function_with_an_async_callback() -> None:
    fake = consent_flow()
    shown: list[str] = []

    async def show(url: str) -> None:
        shown.append(url)

    async with fake.async_client() as c:

        @agentauth.requires_access_token(c, "e2e-user", subjects={"user": "u"}, on_authorization_url=show, into="tok")
        async def call(x: int, tok: agentauth.AccessToken) -> int:
            assert tok.access_token.reveal() == "tok-very-secret"
            return x + 1

        assert await call(1) == 2
    assert shown == ["http://provider.test/auth?x=1"]


def test_a_ready_token_needs_no_callback() -> None:
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, READY))
    called: list[Any] = []
    with fake.client() as c:

        @agentauth.requires_access_token(c, "a", on_authorization_url=called.append)
        def f(*, token: agentauth.AccessToken) -> bool:
            return bool(token.access_token)

        assert f()
    assert called == []


def test_client_kind_must_match_the_function() -> None:
    fake = FakeServer()
    with fake.client() as c, pytest.raises(TypeError):

        @agentauth.requires_access_token(c, "a", on_authorization_url=print)
        async def f(*, token: agentauth.AccessToken) -> None:
            return None


def test_the_wrapper_shows_the_signature_without_the_token() -> None:
    # A framework that builds a tool's schema from the signature (LangChain,
    # the OpenAI Agents SDK) must not offer the model a `token` argument.
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, READY))
    with fake.client() as c:

        @agentauth.requires_access_token(c, "a", on_authorization_url=print)
        def lookup(city: str, days: int = 1, *, token: agentauth.AccessToken) -> str:
            """Weather for a city."""
            return f"{city}:{days}:{token.token_type}"

        assert list(inspect.signature(lookup).parameters) == ["city", "days"]
        assert "token" not in typing.get_type_hints(lookup)
        assert lookup.__doc__ == "Weather for a city."
        assert lookup("Paris", days=2) == "Paris:2:Bearer"
        assert "token" in lookup.__wrapped__.__annotations__  # type: ignore[attr-defined]


async def test_async_wrapper_shows_the_signature_and_stays_a_coroutine_function() -> None:
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, READY))
    async with fake.async_client() as c:

        @agentauth.requires_access_token(c, "a", on_authorization_url=print, into="tok")
        async def call(x: int, tok: agentauth.AccessToken) -> int:
            return x + 1

        assert inspect.iscoroutinefunction(call)
        assert list(inspect.signature(call).parameters) == ["x"]
        assert await call(1) == 2


def test_a_caller_token_is_refused_not_overwritten() -> None:
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, READY))
    with fake.client() as c:

        @agentauth.requires_access_token(c, "a", on_authorization_url=print)
        def f(*, token: Any) -> Any:
            return token

        with pytest.raises(TypeError, match="token"):
            f(token="the caller's")
    assert fake.requests == []  # refused before a token was asked for


def test_a_function_without_the_parameter_is_refused_when_decorated() -> None:
    fake = FakeServer()
    with fake.client() as c:
        with pytest.raises(TypeError, match="tok"):

            @agentauth.requires_access_token(c, "a", on_authorization_url=print, into="tok")
            def f(*, token: agentauth.AccessToken) -> None:
                return None

        @agentauth.requires_access_token(c, "a", on_authorization_url=print, into="tok")
        def g(**kwargs: Any) -> None:  # takes it through **kwargs
            return None

    assert fake.requests == []


@pytest.mark.parametrize(("pendings", "ok"), [(2, True), (3, False)])
def test_a_grant_gone_at_once_is_consented_again_up_to_max_consents(pendings: int, ok: bool) -> None:
    # As the TypeScript SDK's maxConsents (default 2): a consent, and one more
    # when the token is still not ready after it.
    answers = [json_response(200, PENDING)] * pendings + [json_response(200, READY)]
    fake = (
        FakeServer()
        .on("POST", "/v1/oauth/token", *answers)
        .on("GET", "/v1/oauth/sessions/as-1", json_response(200, {"status": "completed"}))
    )
    shown: list[str] = []
    with fake.client() as c:

        @agentauth.requires_access_token(c, "a", on_authorization_url=shown.append)
        def f(*, token: agentauth.AccessToken) -> str:
            return token.access_token.reveal()

        if ok:
            assert f() == "tok-very-secret"
        else:
            with pytest.raises(agentauth.AuthorizationRequired):
                f()
    assert len(shown) == 2
