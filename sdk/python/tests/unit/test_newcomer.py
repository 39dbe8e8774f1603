"""What a newcomer's test of the SDK and a review found (.tools/newcomer-sdk-report.md):
the turn of a posted event, errors that name the address, no userinfo shown,
a tool call's timeout, the stream's ``retry:``, the docstrings ``help()`` shows."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest

import agentauth
from agentauth import _core as core
from agentauth import errors

from .fakes import FAST, FakeServer, error_response, event, json_response, sse, stream_response

VIEW = "/v1/instances/default/k/assistant"
TOKEN = "/v1/oauth/token"


def view(*turns: dict[str, Any], active: dict[str, Any] | None = None, backlog: int = 0) -> httpx.Response:
    body: dict[str, Any] = {"swarm": "default", "instanceKey": "k", "agent": "assistant", "status": "active"}
    body.update(recentTurns=list(turns), backlog=backlog)
    if active is not None:
        body["activeTurn"] = active
    return json_response(200, body)


EARLIER = {"id": "turn-1", "status": "completed", "inputEventId": "ev-1", "finalAnswer": "the earlier answer"}
OURS = {"id": "turn-2", "status": "running", "inputEventId": "ev-2"}
LATER = {"id": "turn-3", "status": "running", "inputEventId": "ev-3"}


# --- P3: the turn of the posted event -------------------------------------------


@pytest.mark.parametrize("sync", [True, False])
async def test_wait_for_turn_with_event_id_returns_that_events_turn_never_the_newest(
    sync: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentauth.client.TURN_POLL_INTERVAL", 0.001)
    # The newest turn is an earlier message's while ours waits in the backlog;
    # ours starts later, and a later message's turn may come before we look again.
    fake = FakeServer().on(
        "GET",
        VIEW,
        view(EARLIER, backlog=1),
        view(EARLIER, backlog=1),
        view(OURS, EARLIER, active=OURS),
        view(LATER, OURS, EARLIER, active=LATER),
    )
    if sync:
        with fake.client() as c:
            assert c.wait_for_turn("default", "k", "assistant").id == "turn-1"  # without: the newest
            turn = c.wait_for_turn("default", "k", "assistant", event_id="ev-2")
    else:
        async with fake.async_client() as ac:
            assert (await ac.wait_for_turn("default", "k", "assistant")).id == "turn-1"
            turn = await ac.wait_for_turn("default", "k", "assistant", event_id="ev-2")
    assert (turn.id, turn.input_event_id) == ("turn-2", "ev-2")
    assert len(fake.calls("GET", VIEW)) == 3

    # A later message's turn already ahead of ours: still ours.
    fake = FakeServer().on("GET", VIEW, view(LATER, OURS, EARLIER, active=LATER))
    with fake.client() as c:
        assert c.wait_for_turn("default", "k", "assistant", event_id="ev-2").id == "turn-2"


def test_wait_for_turn_with_event_id_times_out_rather_than_return_another_turn() -> None:
    fake = FakeServer().on("GET", VIEW, view(EARLIER, backlog=1))
    with fake.client() as c, pytest.raises(errors.Timeout) as info:
        c.wait_for_turn("default", "k", "assistant", event_id="ev-2", timeout=0.05)
    assert "no turn of event ev-2 in default/k/assistant" in str(info.value)
    assert "backlog" in str(info.value)

    # A server that names no turn's input event says so: the wait cannot end.
    old = FakeServer().on("GET", VIEW, view({"id": "turn-1", "status": "completed"}))
    with old.client() as c, pytest.raises(errors.Timeout, match="names no turn's inputEventId"):
        c.wait_for_turn("default", "k", "assistant", event_id="ev-2", timeout=0.05)


def test_turn_summaries_carry_their_input_event_id() -> None:
    detail = agentauth.Instance.from_json({"activeTurn": OURS, "recentTurns": [OURS, EARLIER]})
    assert detail.active_turn is not None and detail.active_turn.input_event_id == "ev-2"
    assert [t.input_event_id for t in detail.recent_turns] == ["ev-2", "ev-1"]
    assert agentauth.TurnSummary.from_json({"id": "turn-0"}).input_event_id is None


def test_wait_for_turn_defaults_to_60_seconds_as_the_typescript_sdk() -> None:
    for cls in (agentauth.AsyncClient, agentauth.Client):
        params = inspect.signature(cls.wait_for_turn).parameters
        assert params["timeout"].default == 60.0
        assert params["event_id"].default is None and params["event_id"].kind is inspect.Parameter.KEYWORD_ONLY
        assert inspect.signature(cls.wait_for_authorization).parameters["timeout"].default == 600.0
    assert agentauth.RetryPolicy().max_retry_after == 60.0


# --- P4: a connection failure names the address and its setting ------------------


@pytest.mark.parametrize(
    ("base_url", "env", "address", "source"),
    [
        (None, {"AGENTAUTH_URL": "http://127.0.0.1:8089"}, "http://127.0.0.1:8089", "AGENTAUTH_URL"),
        ("http://127.0.0.1:8089/", {}, "http://127.0.0.1:8089", "base_url"),
        (None, {}, "http://127.0.0.1:8080", "the default: AGENTAUTH_URL is not set"),
        (
            None,
            {"AGENTAUTH_URL": "https://ops:hunter2@gw.example.test/_aws/execute-api/a1/$default"},
            "https://gw.example.test",
            "AGENTAUTH_URL",
        ),
    ],
)
async def test_no_answer_names_the_address_and_where_it_came_from(
    base_url: str | None, env: dict[str, str], address: str, source: str
) -> None:
    fake = FakeServer().on("POST", TOKEN, httpx.ConnectError("All connection attempts failed"))
    fake.routes[("POST", "/_aws/execute-api/a1/$default" + TOKEN)] = [httpx.ConnectError("refused")]
    async with agentauth.AsyncClient(
        base_url, runtime_token="aat_x", env=env, transport=fake.transport(), retry=FAST
    ) as c:
        with pytest.raises(errors.NetworkError) as info:
            await c.get_access_token("demo-user", subjects={"user": "u"})
    text = str(info.value)
    assert f"POST {TOKEN}: no answer from {address} ({source}): is agentauth running there?" in text, text
    for secret in ("ops", "hunter2", "_aws"):
        assert secret not in text


def test_a_connect_timeout_names_the_address_too() -> None:
    fake = FakeServer().on("GET", "/v1/instances", httpx.ConnectTimeout("timed out"))
    with fake.client() as c, pytest.raises(errors.Timeout) as info:
        c.list_instances()
    assert "no answer from http://agentauth.test (base_url) in time: is agentauth running there?" in str(info.value)


# --- P5: another server at the address -------------------------------------------


@pytest.mark.parametrize("sync", [True, False])
async def test_an_error_answer_that_is_not_agentauths_is_an_unexpected_response(sync: bool) -> None:
    # The demo provider at :9090, an easy slip: a 404 with no agentauth error body and no X-Request-Id.
    fake = FakeServer().on("POST", TOKEN, httpx.Response(404, text="Not Found"))
    kwargs: dict[str, Any] = {"env": {"AGENTAUTH_URL": "http://127.0.0.1:9090"}, "transport": fake.transport()}
    if sync:
        with agentauth.Client(runtime_token="aat_x", **kwargs) as c, pytest.raises(errors.UnexpectedResponse) as info:
            c.get_access_token("demo-user", subjects={"user": "u"})
    else:
        async with agentauth.AsyncClient(runtime_token="aat_x", **kwargs) as ac:
            with pytest.raises(errors.UnexpectedResponse) as info:
                await ac.get_access_token("demo-user", subjects={"user": "u"})
    e = info.value
    assert not isinstance(e, errors.NotFound) and e.status == 404
    assert "the server at http://127.0.0.1:9090 (AGENTAUTH_URL) did not answer as agentauth" in str(e)
    assert "is AGENTAUTH_URL agentauth's address?" in str(e)


@pytest.mark.parametrize(
    ("answer", "cls"),
    [
        # agentauth's error body without the header, the header without a body, API Gateway's own answers.
        (httpx.Response(404, json={"error": {"code": "notFound", "message": "no"}}), errors.NotFound),
        (httpx.Response(404, headers={"X-Request-Id": "r1"}), errors.NotFound),
        (httpx.Response(403, headers={"x-amzn-RequestId": "a1"}, json={"message": "Forbidden"}), errors.Forbidden),
        (httpx.Response(403, headers={"apigw-requestid": "a2"}, json={"message": "Forbidden"}), errors.Forbidden),
    ],
)
def test_agentauths_own_answers_keep_their_class(answer: httpx.Response, cls: type[errors.AgentauthError]) -> None:
    fake = FakeServer().on("GET", "/v1/instances", answer)
    with fake.client() as c, pytest.raises(cls):
        c.list_instances()


def test_a_stream_refused_by_another_server_names_the_stream_url() -> None:
    path = VIEW + "/turns/turn-1/events"
    fake = FakeServer().on("GET", path, httpx.Response(403, text="<html>nope</html>"))
    env = {"AGENTAUTH_STREAM_URL": "http://stream.test"}
    with (
        agentauth.Client("http://agentauth.test", runtime_token="aat_x", env=env, transport=fake.transport()) as c,
        pytest.raises(errors.UnexpectedResponse) as info,
    ):
        list(c.follow_turn("default", "k", "assistant", "turn-1"))
    assert "the server at http://stream.test (AGENTAUTH_STREAM_URL) did not answer as agentauth" in str(info.value)


# --- the review: userinfo, a tool call's timeout, retry:, aclosing ---------------


def test_a_base_urls_userinfo_is_in_no_repr_or_error() -> None:
    fake = FakeServer().on("GET", "/base/v1/instances", httpx.ConnectError("refused"))
    with agentauth.Client(
        "http://alice:s3cret@x.test:8080/base", runtime_token="aat_x", env={}, transport=fake.transport(), retry=FAST
    ) as c:
        shown = [repr(c), repr(c._settings)]
        with pytest.raises(errors.NetworkError) as info:
            c.list_instances()
        shown.append(str(info.value))
    assert "http://[redacted]@x.test:8080/base" in shown[0]
    assert "x.test:8080 (base_url)" in shown[2]
    for bad in ("ftp://alice:s3cret@x.test", "alice:s3cret@x.test:8080", "http://alice:s3/cret@x.test"):
        with pytest.raises(agentauth.AgentauthError) as refused:
            agentauth.Client(bad, env={})
        shown.append(str(refused.value))
    foreign = FakeServer().on("GET", "/v1/instances", httpx.Response(404))
    with (
        agentauth.Client("https://alice:s3cret@y.test", runtime_token="t", env={}, transport=foreign.transport()) as c,
        pytest.raises(errors.UnexpectedResponse) as unexpected,
    ):
        c.list_instances()
    shown.append(str(unexpected.value))
    assert "https://y.test (base_url)" in shown[-1]
    for text in shown:
        assert "alice" not in text and "s3cret" not in text and "s3/" not in text, text


@pytest.mark.parametrize(("timeouts", "read"), [(None, 45.0), (agentauth.Timeouts(read=5.0), 20.0)])
async def test_a_tool_calls_read_timeout_follows_the_timeouts(timeouts: agentauth.Timeouts | None, read: float) -> None:
    seen: list[dict[str, float]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return json_response(200, {"result": {"status": "ok", "output": {}}})

    fake = FakeServer().on("POST", "/v1/tools/invoke", answer)
    async with fake.async_client(timeouts=timeouts) as c:
        await c.invoke_tool("whoami")
    with fake.client(timeouts=timeouts) as sc:
        sc.invoke_tool("whoami")
    assert [t["read"] for t in seen] == [read, read]


def test_the_sse_parser_keeps_the_retry_field() -> None:
    parser = core.SSEParser()
    assert parser.retry is None
    for line in ("retry: 2500", "", "retry: soon", "retry: 1e3"):
        parser.feed(line)
    assert parser.retry == 2.5


@pytest.mark.parametrize("sync", [True, False])
async def test_a_stream_that_ended_is_asked_again_after_its_retry(sync: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("agentauth.client.asyncio.sleep", asleep)
    monkeypatch.setattr("agentauth.client.time.sleep", waits.append)
    path = VIEW + "/turns/turn-1/events"
    events = [event(0, "turn.started"), event(1, "turn.parked"), event(2, "turn.completed", final="hi")]
    fake = FakeServer().on(
        "GET",
        path,
        # retry: 3000, two events, the end (progress: asked again at once) …
        lambda r: stream_response(b"retry: 3000\n\n" + sse(*events[:2])),
        # … nothing new, the end: after the retry: of an earlier stream of the follow …
        lambda r: stream_response(b": keep-alive\n\n"),
        lambda r: stream_response(b"retry: 7000\n\n: keep-alive\n\n"),
        lambda r: stream_response(sse(events[2])),
    )
    policy = agentauth.RetryPolicy(max_retry_after=5.0)  # … at most max_retry_after
    if sync:
        with fake.client(retry=policy) as c:
            seqs = [e.seq for e in c.follow_turn("default", "k", "assistant", "turn-1")]
    else:
        async with fake.async_client(retry=policy) as ac:
            seqs = [e.seq async for e in ac.follow_turn("default", "k", "assistant", "turn-1")]
    assert seqs == [0, 1, 2]
    assert waits == [0.0, 3.0, 5.0]


async def test_aclosing_closes_the_stream_of_a_follow_left_early() -> None:
    closed = asyncio.Event()

    class Parked(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield sse(event(0, "turn.started"), event(1, "turn.parked", authorizationUrl="http://p/auth"))
            await asyncio.Event().wait()
            yield b""

        async def aclose(self) -> None:
            closed.set()

    fake = FakeServer().on(
        "GET",
        VIEW + "/turns/turn-1/events",
        lambda r: httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=Parked()),
    )
    async with fake.async_client() as c:
        async with aclosing(c.follow_turn("default", "k", "assistant", "turn-1")) as events:
            async for e in events:
                if e.type == "turn.parked":
                    break
        assert closed.is_set()  # at once, not when the generator is collected


# --- P16: what help() shows ----------------------------------------------------


@pytest.mark.parametrize("cls", [agentauth.AsyncClient, agentauth.Client])
def test_help_on_the_constructor_lists_the_arguments_env_and_defaults(cls: type[Any]) -> None:
    doc = inspect.getdoc(cls.__init__) or ""
    for word in (
        "base_url",
        "AGENTAUTH_URL",
        "http://127.0.0.1:8080",
        "runtime_token",
        "AGENTAUTH_RUNTIME_TOKEN",
        "agent_token",
        "AGENTAUTH_AGENT_TOKEN",
        "1 h",
        "callable",
        "AGENTAUTH_AUTH",
        "sigv4",
        "AGENTAUTH_STREAM_URL",
        "AWS_REGION",
        "timeouts",
        "retry",
        "60 s",
        "env",
        "transport",
        "aws_credentials",
    ):
        assert word in doc, f"help({cls.__name__}.__init__) does not say {word!r}"


def test_the_docstrings_say_what_each_argument_and_credential_is() -> None:
    doc = inspect.getdoc(agentauth.AsyncClient.get_access_token) or ""
    for arg in ("app", "subjects", "scopes", "min_ttl", "resume", "actor", "claims", "auth", "origin"):
        assert f"    {arg}: " in doc or f"\n{arg}: " in doc, f"get_access_token does not document {arg}"
    for cls in (agentauth.AsyncClient, agentauth.Client):
        for name in ("invoke_tool", "list_tools", "search_skills"):
            assert "agent JWT" in (inspect.getdoc(getattr(cls, name)) or ""), f"{cls.__name__}.{name}"
    assert "600" in (inspect.getdoc(agentauth.AsyncClient.wait_for_authorization) or "")
    assert "60" in (inspect.getdoc(agentauth.AsyncClient.wait_for_turn) or "")


def test_error_response_helper_still_marks_agentauths_answers() -> None:
    # The fakes' error answers are agentauth's (a body and X-Request-Id): the rule above leaves them typed.
    fake = FakeServer().on("GET", "/v1/instances", error_response(404, "notFound"))
    with fake.client() as c, pytest.raises(errors.NotFound):
        c.list_instances()
