"""The one error body → typed errors; which requests are retried, and how."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest

import agentauth
from agentauth import _core, errors

from .fakes import FakeServer, error_response, json_response

INSTANCES = "/v1/instances"
INVOKE = "/v1/tools/invoke"
OK_INVOKE = {"result": {"status": "ok", "output": {"sub": "alice"}}, "toolCalled": {}, "toolReturned": {}}

# Every code the server documents has its class, whose code_name is the code.
DOCUMENTED = {
    "invalidRequest": errors.InvalidRequest,
    "unauthenticated": errors.Unauthenticated,
    "forbidden": errors.Forbidden,
    "notFound": errors.NotFound,
    "methodNotAllowed": errors.MethodNotAllowed,
    "payloadTooLarge": errors.PayloadTooLarge,
    "unsupportedMediaType": errors.UnsupportedMediaType,
    "notAcceptable": errors.NotAcceptable,
    "internal": errors.InternalError,
    "conflict": errors.Conflict,
    "instanceTerminated": errors.InstanceTerminated,
    "limitReached": errors.LimitReached,
    "tooManyStreams": errors.TooManyStreams,
    "rate_limited": errors.RateLimited,
    "unavailable": errors.Unavailable,
    "uploadsDisabled": errors.UploadsDisabled,
    "grantNotFound": errors.GrantNotFound,
    "oauthAppNotFound": errors.OAuthAppNotFound,
    "subjectUnavailable": errors.SubjectUnavailable,
    "scopeNotAllowed": errors.ScopeNotAllowed,
    "scopeNotGranted": errors.ScopeNotGranted,
    "tokenRevoked": errors.TokenRevoked,
    "refreshFailed": errors.RefreshFailed,
    "deviceCodeUnsupported": errors.DeviceCodeUnsupported,
    "configurationError": errors.ConfigurationError,
    "grantUnreadable": errors.GrantUnreadable,
}


@pytest.mark.parametrize(("code", "cls"), sorted(DOCUMENTED.items()))
def test_one_class_per_code(code: str, cls: type[errors.AgentauthError]) -> None:
    assert errors.error_class_for(code) is cls
    assert cls.code_name == code
    assert issubclass(cls, agentauth.AgentauthError)


def test_error_body_is_typed_with_request_id_and_details() -> None:
    fake = FakeServer().on(
        "GET",
        "/v1/agents/tools",
        error_response(401, "unauthenticated", "a valid bearer JWT is required", details={"reason": "expired"}),
    )
    with fake.client() as c, pytest.raises(errors.Unauthenticated) as info:
        c.list_tools()
    e = info.value
    assert (e.code, e.status, e.request_id) == ("unauthenticated", 401, "rid-body")
    assert e.details == {"reason": "expired"}
    assert "rid-body" in str(e) and "HTTP 401" in str(e)


def test_request_id_from_the_header_when_the_body_has_none() -> None:
    fake = FakeServer().on("GET", INSTANCES, json_response(403, {"message": "Missing Authentication Token"}))
    with fake.client() as c, pytest.raises(errors.Forbidden) as info:
        c.list_instances()
    assert info.value.request_id == "rid-header"
    assert info.value.message == "Missing Authentication Token"


def test_terminated_instance_is_a_conflict() -> None:
    fake = FakeServer().on("POST", "/v1/instances/default/k/events", error_response(409, "instanceTerminated"))
    with fake.client() as c, pytest.raises(errors.InstanceTerminated) as info:
        c.post_event("default", "k", "hi", auth=agentauth.TurnAuth())
    assert isinstance(info.value, errors.Conflict)


def test_a_get_is_retried_on_503_and_502() -> None:
    fake = FakeServer().on(
        "GET",
        INSTANCES,
        error_response(503, "unavailable"),
        httpx.Response(502, text="bad gateway"),
        json_response(200, {"data": [], "unreadable": []}),
    )
    with fake.client() as c:
        assert c.list_instances() == agentauth.InstanceList(data=(), unreadable=())
    assert len(fake.calls("GET", INSTANCES)) == 3


def test_retries_are_bounded() -> None:
    fake = FakeServer().on("GET", INSTANCES, error_response(503, "unavailable"))
    with fake.client() as c, pytest.raises(errors.Unavailable):
        c.list_instances()
    assert len(fake.calls("GET", INSTANCES)) == 4


def test_500_is_not_retried() -> None:
    fake = FakeServer().on("GET", INSTANCES, error_response(500, "internal"))
    with fake.client() as c, pytest.raises(errors.InternalError):
        c.list_instances()
    assert len(fake.calls("GET", INSTANCES)) == 1


async def test_a_tool_invocation_is_not_retried_on_503_or_a_lost_answer() -> None:
    fake = FakeServer().on("POST", INVOKE, error_response(503, "unavailable"))
    async with fake.async_client() as c:
        with pytest.raises(errors.Unavailable):
            await c.invoke_tool("whoami")
    assert len(fake.calls("POST", INVOKE)) == 1

    fake = FakeServer().on("POST", INVOKE, httpx.ReadError("connection reset"))
    async with fake.async_client() as c:
        with pytest.raises(errors.NetworkError):
            await c.invoke_tool("whoami")
    assert len(fake.calls("POST", INVOKE)) == 1


async def test_any_request_is_retried_when_the_connection_was_never_made() -> None:
    fake = FakeServer().on("POST", INVOKE, httpx.ConnectError("refused"), json_response(200, OK_INVOKE))
    async with fake.async_client() as c:
        result = await c.invoke_tool("whoami")
    assert result.ok and result.output == {"sub": "alice"}
    assert len(fake.calls("POST", INVOKE)) == 2


def test_429_honours_retry_after_on_any_request() -> None:
    fake = FakeServer().on(
        "POST",
        INVOKE,
        httpx.Response(429, headers={"Retry-After": "0"}, json={"error": {"code": "rate_limited", "message": "slow"}}),
        json_response(200, OK_INVOKE),
    )
    with fake.client() as c:
        assert c.invoke_tool("whoami").ok
    assert len(fake.calls("POST", INVOKE)) == 2


def test_429_with_a_long_retry_after_is_raised() -> None:
    fake = FakeServer().on(
        "POST", INVOKE, httpx.Response(429, headers={"Retry-After": "120"}, json={"error": {"code": "rate_limited"}})
    )
    with fake.client() as c, pytest.raises(errors.RateLimited) as info:
        c.invoke_tool("whoami")
    assert info.value.retry_after == 120
    assert len(fake.calls("POST", INVOKE)) == 1


@pytest.mark.parametrize("event_id", ["msg-1", None])
def test_a_posted_event_always_has_an_id_and_is_retried_with_it(event_id: str | None) -> None:
    # As the TypeScript SDK: a post without an id gets one of the SDK's, so
    # that a post whose answer was lost is sent again and queued once.
    posted = {"eventId": "in:msg-1@abc", "swarm": "default", "instanceKey": "k", "agent": "assistant"}
    path = "/v1/instances/default/k/events"
    fake = FakeServer().on(
        "POST", path, error_response(503, "unavailable"), httpx.ReadError("reset"), json_response(202, posted)
    )
    with fake.client() as c:
        got = c.post_event("default", "k", "hi", auth=agentauth.TurnAuth(), id=event_id)
        assert got.event_id == "in:msg-1@abc"
    ids = [json.loads(r.content)["id"] for r in fake.calls("POST", path)]
    assert len(ids) == 3 and len(set(ids)) == 1
    assert ids[0] == event_id if event_id else ids[0].startswith("sdk-")
    with fake.client() as c:
        c.post_event("default", "k", "hi", auth=agentauth.TurnAuth())
        c.post_event("default", "k", "hi", auth=agentauth.TurnAuth())
    later = [json.loads(r.content)["id"] for r in fake.calls("POST", path)[3:]]
    assert event_id is not None or len(set(later)) == 2  # one id per call, not per client


INSTANCE = "/v1/instances/default/k/assistant"
RECORD = {"swarm": "default", "instanceKey": "k", "agent": "assistant", "status": "active"}


@pytest.mark.parametrize("action", ["pause", "terminate"])
def test_pause_and_terminate_are_retried(action: str) -> None:
    path = f"{INSTANCE}/{action}"
    fake = FakeServer().on(
        "POST", path, error_response(503, "unavailable"), httpx.ReadError("reset"), json_response(200, RECORD)
    )
    with fake.client() as c:
        getattr(c, f"{action}_instance")("default", "k", "assistant")
    assert len(fake.calls("POST", path)) == 3


@pytest.mark.parametrize("outcome", [error_response(503, "unavailable"), httpx.ReadError("reset")])
async def test_resume_is_not_resent_after_a_lost_answer(outcome: httpx.Response | Exception) -> None:
    # Each resume queues a wake-up (docs/turns.md, Lifecycle): a second is not a no-op.
    path = f"{INSTANCE}/resume"
    fake = FakeServer().on("POST", path, outcome, json_response(200, RECORD))
    async with fake.async_client() as c:
        with pytest.raises((errors.Unavailable, errors.NetworkError)):
            await c.resume_instance("default", "k", "assistant")
    assert len(fake.calls("POST", path)) == 1
    # One that never reached the server is sent again, as any request.
    fake = FakeServer().on("POST", path, httpx.ConnectError("refused"), json_response(200, RECORD))
    with fake.client() as c:
        assert c.resume_instance("default", "k", "assistant").status == "active"
    assert len(fake.calls("POST", path)) == 2


def test_not_json_is_an_unexpected_response() -> None:
    fake = FakeServer().on("GET", INSTANCES, httpx.Response(200, text="<html>"))
    with fake.client() as c, pytest.raises(errors.UnexpectedResponse):
        c.list_instances()


def test_every_request_has_timeouts() -> None:
    fake = FakeServer().on("GET", INSTANCES, json_response(200, {"data": []}))
    with fake.client() as c:
        c.list_instances()
    t = fake.requests[0].extensions["timeout"]
    assert t == {"connect": 5.0, "read": 30.0, "write": 30.0, "pool": 10.0}


def test_a_request_out_of_time_is_a_timeout_and_a_lost_one_a_network_error() -> None:
    fake = FakeServer().on("POST", INVOKE, httpx.ReadTimeout("slow"))
    with fake.client() as c, pytest.raises(errors.Timeout) as info:
        c.invoke_tool("whoami")
    assert isinstance(info.value, TimeoutError) and info.value.code == "timeout"
    fake = FakeServer().on("POST", INVOKE, httpx.RemoteProtocolError("cut"))
    with fake.client() as c, pytest.raises(errors.NetworkError) as lost:
        c.invoke_tool("whoami")
    assert lost.value.code == "network"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 12 ", 12.0),
        ("²", None),  # a Unicode digit float() refuses
        ("٣", None),
        ("-1", None),
        ("1.5", None),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date gone by: at once
    ],
)
def test_retry_after_reads_seconds_and_dates_and_nothing_else(value: str, seconds: float | None) -> None:
    raw = value.encode()  # as a server sends it: bytes
    response = httpx.Response(429, headers=[(b"Retry-After", raw)], request=httpx.Request("GET", "http://x.test/"))
    assert _core.retry_after(response) == seconds
    err = _core.error_from_response(response)  # a typed error whatever the header holds
    assert isinstance(err, errors.RateLimited)


def test_retry_after_as_a_future_http_date() -> None:
    when = datetime.now(timezone.utc) + timedelta(seconds=20)
    response = httpx.Response(503, headers={"Retry-After": format_datetime(when, usegmt=True)})
    after = _core.retry_after(response)
    assert after is not None and 18 <= after <= 20
