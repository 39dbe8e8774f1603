"""Tokens and consent: the token route's three answers, the session long poll."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import httpx
import pytest

import agentauth
from agentauth import _core as core
from agentauth import errors

from .fakes import FakeServer, json_response

READY = {
    "status": "ready",
    "accessToken": "tok-very-secret",
    "tokenType": "Bearer",
    "expiresAt": "2026-11-24T11:00:02Z",
    "scopes": ["openid", "profile"],
    "refreshable": True,
}
PENDING = {
    "status": "authorization_required",
    "authSessionId": "as-1",
    "authorizationUrl": "http://provider.test/auth?x=1",
    "expiresAt": "2026-11-24T10:10:00Z",
    "message": "open the link",
}


def test_ready_token_and_request_body() -> None:
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, READY))
    with fake.client() as c:
        tok = c.get_access_token(
            "e2e-user",
            subjects={"user": "demo:user:alice"},
            scopes=["profile"],
            min_ttl=timedelta(minutes=10),
            actor="alice",
            resume=agentauth.ResumeTarget("default", "thread-1", "assistant"),
        )
    assert tok.access_token.reveal() == "tok-very-secret"
    assert tok.scopes == ("openid", "profile")
    assert tok.refreshable is True
    assert tok.expires_at is not None and tok.expires_at.hour == 11
    assert "tok-very-secret" not in repr(tok) and "tok-very-secret" not in str(tok)
    assert "tok-very-secret" not in repr(tok.raw)
    req = fake.calls("POST", "/v1/oauth/token")[0]
    assert req.headers["Authorization"] == "Bearer aat_runtime"
    assert json.loads(req.content) == {
        "oauthAppRef": "OAuthApp/e2e-user",
        "scopes": ["profile"],
        "minTtlSeconds": 600,
        "turn": {
            "auth": {"subjects": {"user": "demo:user:alice"}, "actor": {"type": "user", "id": "alice"}},
            "resume": {"swarmRef": "Swarm/default", "instanceKey": "thread-1", "agentName": "assistant"},
        },
    }


async def test_authorization_required_is_raised() -> None:
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, PENDING))
    async with fake.async_client() as c:
        with pytest.raises(agentauth.AuthorizationRequired) as info:
            await c.get_access_token("OAuthApp/e2e-user", subjects={"user": "u"})
    e = info.value
    assert e.authorization_url == "http://provider.test/auth?x=1"
    assert e.session_id == "as-1"
    assert e.expires_at is not None and e.expires_at.minute == 10
    assert e.message == "open the link"
    assert e.request_id == "rid-header"
    assert isinstance(e, agentauth.AgentauthError)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("oauthAppNotFound", errors.OAuthAppNotFound),
        ("subjectUnavailable", errors.SubjectUnavailable),
        ("scopeNotAllowed", errors.ScopeNotAllowed),
        ("refreshFailed", errors.RefreshFailed),
        ("configurationError", errors.ConfigurationError),
        ("grantUnreadable", errors.GrantUnreadable),
        ("tokenRevoked", errors.TokenRevoked),
        ("somethingNew", errors.AgentauthError),
    ],
)
def test_error_results_are_typed(code: str, cls: type[errors.AgentauthError]) -> None:
    body = {"status": "error", "error": {"code": code, "message": "provider answered 500 (HTTP 500)"}}
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, body))
    with fake.client() as c, pytest.raises(cls) as info:
        c.get_access_token("a", subjects={"user": "u"})
    assert type(info.value) is cls
    assert info.value.code == code
    assert info.value.status == 200
    assert "provider answered" in info.value.message


def test_scope_not_granted_carries_the_scopes() -> None:
    body = {"status": "error", "error": {"code": "scopeNotGranted", "message": "m", "scopes": ["write"]}}
    fake = FakeServer().on("POST", "/v1/oauth/token", json_response(200, body))
    with fake.client() as c, pytest.raises(errors.ScopeNotGranted) as info:
        c.get_access_token("a")
    assert info.value.scopes == ["write"]


def test_wait_for_authorization_long_polls_until_completed() -> None:
    fake = FakeServer().on(
        "GET",
        "/v1/oauth/sessions/as-1",
        json_response(200, {"status": "pending", "expiresAt": "2026-11-24T10:10:00Z"}),
        json_response(200, {"status": "completed", "expiresAt": "2026-11-24T10:10:00Z"}),
    )
    with fake.client() as c:
        st = c.wait_for_authorization(
            agentauth.AuthorizationRequired("m", authorization_url="u", session_id="as-1", expires_at=None), timeout=120
        )
    assert st.status == "completed"
    waits = [int(r.url.params["wait"]) for r in fake.calls("GET", "/v1/oauth/sessions/as-1")]
    assert waits and all(0 < w <= 55 for w in waits)
    assert waits[0] == 55


@pytest.mark.parametrize(
    ("status", "cls"), [("failed", errors.AuthorizationFailed), ("expired", errors.AuthorizationExpired)]
)
async def test_wait_for_authorization_raises_the_reason(status: str, cls: type[Exception]) -> None:
    body = {"status": status, "expiresAt": "2026-11-24T10:10:00Z", "statusReason": "subject_mismatch"}
    fake = FakeServer().on("GET", "/v1/oauth/sessions/as-1", json_response(200, body))
    async with fake.async_client() as c:
        with pytest.raises(cls) as info:
            await c.wait_for_authorization("as-1", timeout=5)
    assert isinstance(info.value, errors.AuthorizationFailed)
    assert info.value.reason == "subject_mismatch"
    assert info.value.session_id == "as-1"


def test_wait_for_authorization_times_out() -> None:
    fake = FakeServer().on("GET", "/v1/oauth/sessions/as-1", json_response(200, {"status": "pending"}))
    with fake.client() as c, pytest.raises(errors.AuthorizationTimeout) as info:
        c.wait_for_authorization("as-1", timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    assert info.value.session_id == "as-1"


def test_session_read_timeout_covers_the_wait() -> None:
    seen: list[float | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"]["read"])
        return json_response(200, {"status": "completed"})

    fake = FakeServer().on("GET", "/v1/oauth/sessions/as-1", answer)
    with fake.client() as c:
        c.authorization_status("as-1", wait=55)
    assert seen[0] is not None and seen[0] > 55


def test_revoke_and_grant_not_found() -> None:
    fake = FakeServer().on(
        "POST",
        "/v1/oauth/revoke",
        json_response(200, {"revoked": True, "grantId": "grant-1", "providerRevocation": "not_configured"}),
    )
    with fake.client() as c:
        r = c.revoke("e2e-user", "demo:user:alice")
    assert r.grant_id == "grant-1" and r.provider_revocation == "not_configured"
    assert json.loads(fake.requests[0].content) == {"oauthAppRef": "OAuthApp/e2e-user", "subject": "demo:user:alice"}

    from .fakes import error_response

    fake.on("POST", "/v1/oauth/revoke", error_response(404, "grantNotFound"))
    with fake.client() as c, pytest.raises(errors.GrantNotFound) as info:
        c.revoke("e2e-user", "nobody")
    assert isinstance(info.value, errors.NotFound)
    assert info.value.request_id == "rid-body"


def test_pending_authorizations_name_the_whole_resume_target() -> None:
    item = {
        "authSessionId": "as-2",
        "oauthAppRef": {"kind": "OAuthApp", "name": "e2e-user"},
        "provider": "demo",
        "subjectMode": "user",
        "authorizationUrl": "http://p/auth",
        "expiresAt": "2026-11-24T10:10:00Z",
        "message": "m",
    }
    fake = FakeServer().on("GET", "/v1/oauth/pending", json_response(200, {"type": "auth.pending", "items": [item]}))
    with fake.client() as c:
        got = c.pending_authorizations("default", "thread-1", "assistant")
    assert got[0].session_id == "as-2" and got[0].oauth_app_ref == "OAuthApp/e2e-user"
    assert dict(fake.requests[0].url.params) == {
        "swarmRef": "Swarm/default",
        "instanceKey": "thread-1",
        "agentName": "assistant",
    }


def test_wait_for_authorization_bounds_every_long_poll_by_its_deadline() -> None:
    # A consent that never comes: no poll asks the server to hold, or is
    # itself let run, past the caller's timeout (and a little grace).
    seen: list[tuple[int, float]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((int(request.url.params.get("wait", "0")), request.extensions["timeout"]["read"]))
        return json_response(200, {"status": "pending"})

    fake = FakeServer().on("GET", "/v1/oauth/sessions/as-1", answer)
    with fake.client() as c, pytest.raises(errors.AuthorizationTimeout):
        c.wait_for_authorization("as-1", timeout=2.5)
    assert seen
    assert all(wait <= 2.5 and read <= 2.5 + core.DEADLINE_GRACE for wait, read in seen)


@pytest.mark.parametrize("answer", [json_response(503, {"error": {"code": "unavailable"}}), httpx.ReadTimeout("lost")])
async def test_wait_for_authorization_retries_no_poll_past_its_deadline(
    answer: httpx.Response | Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Retries of a lost poll are the policy's, within the wait's deadline:
    # 50 tries of up to 0.1 s would take seconds.
    monkeypatch.setattr(core, "DEADLINE_GRACE", 0.05)
    many = agentauth.RetryPolicy(max_attempts=50, base_delay=0.1, max_delay=0.1)
    fake = FakeServer().on("GET", "/v1/oauth/sessions/as-1", answer)
    started = time.monotonic()
    async with fake.async_client(retry=many) as c:
        with pytest.raises(errors.AgentauthError):
            await c.wait_for_authorization("as-1", timeout=0.3)
    assert time.monotonic() - started < 1.0
    assert len(fake.calls("GET", "/v1/oauth/sessions/as-1")) < 10


def test_wait_for_turn_retries_no_request_past_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "DEADLINE_GRACE", 0.05)
    many = agentauth.RetryPolicy(max_attempts=50, base_delay=0.1, max_delay=0.1)
    fake = FakeServer().on("GET", "/v1/instances/default/k/assistant", httpx.ConnectError("refused"))
    started = time.monotonic()
    with fake.client(retry=many) as c, pytest.raises(errors.AgentauthError):
        c.wait_for_turn("default", "k", "assistant", timeout=0.3)
    assert time.monotonic() - started < 1.0
