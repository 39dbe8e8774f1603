"""follow_turn(): the SSE route, reconnects with Last-Event-ID, no event twice, the 406 fallback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import agentauth
from agentauth import errors

from .fakes import FAST, DroppingStream, FakeServer, error_response, event, json_response, sse, stream_response

PATH = "/v1/instances/default/k/assistant/turns/turn-1/events"
EVENTS = [
    event(0, "turn.started"),
    event(1, "step.started", step=1),
    event(2, "tool.called", tool="whoami"),
    event(3, "turn.parked", authorizationUrl="http://p/auth"),
    event(4, "turn.resumed"),
    event(5, "turn.completed", final="You are Alice"),
]


def dropped_then_resumed(request: httpx.Request) -> httpx.Response:
    last = request.headers.get("Last-Event-ID")
    if last is None:
        # 0..3 then the connection is cut mid-way through event 4.
        return stream_response(sse(*EVENTS[:4]), b"id: 4\nevent: turn.resumed\ndata: {", drop=True)
    assert last == "3"
    # The server sends from Last-Event-ID on; a repeat of 3 must be dropped all the same.
    return stream_response(sse(EVENTS[3], *EVENTS[4:], comment="keep-alive"))


async def test_async_follow_reconnects_and_never_repeats() -> None:
    fake = FakeServer().on("GET", PATH, dropped_then_resumed)
    async with fake.async_client() as c:
        seqs = [e.seq async for e in c.follow_turn("default", "k", "assistant", "turn-1")]
    assert seqs == [0, 1, 2, 3, 4, 5]
    reqs = fake.calls("GET", PATH)
    assert len(reqs) == 2
    assert all(r.headers["Accept"] == "text/event-stream" for r in reqs)
    assert reqs[1].headers["Last-Event-ID"] == "3"


def test_sync_follow_reconnects_and_never_repeats() -> None:
    fake = FakeServer().on("GET", PATH, dropped_then_resumed)
    with fake.client() as c:
        events = list(c.follow_turn("default", "k", "assistant", "turn-1"))
    assert [e.seq for e in events] == [0, 1, 2, 3, 4, 5]
    assert events[-1].terminal and events[-1].data["final"] == "You are Alice"
    assert events[3].data["authorizationUrl"] == "http://p/auth"


def test_follow_after_starts_later_and_a_stream_end_without_the_turn_end_reconnects() -> None:
    answers = [
        lambda r: stream_response(sse(*EVENTS[2:4]), drop=False),  # the server's 10-minute limit
        lambda r: stream_response(sse(*EVENTS[4:])),
    ]
    fake = FakeServer().on("GET", PATH, *answers)
    with fake.client() as c:
        seqs = [e.seq for e in c.follow_turn("default", "k", "assistant", "turn-1", after=1)]
    assert seqs == [2, 3, 4, 5]
    reqs = fake.calls("GET", PATH)
    assert [r.headers.get("Last-Event-ID") for r in reqs] == ["1", "3"]


async def test_follow_falls_back_to_polling_on_406(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeServer()
    state = {"polls": 0}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Accept") == "text/event-stream":
            return json_response(406, {"error": {"code": "notAcceptable", "message": "use the stream URL"}})
        state["polls"] += 1
        after = int(request.url.params.get("after", "-1"))
        # The JSON form answers the events after `after`, a few at a time.
        return json_response(200, {"data": [e for e in EVENTS if after < e["seq"] <= after + 3]})

    fake.on("GET", PATH, answer)
    monkeypatch.setattr("agentauth.client.POLL_INTERVAL", 0.001)
    async with fake.async_client() as c:
        seqs = [e.seq async for e in c.follow_turn("default", "k", "assistant", "turn-1")]
    assert seqs == [0, 1, 2, 3, 4, 5]
    assert state["polls"] == 2


def test_follow_gives_up_after_the_reconnect_budget() -> None:
    fake = FakeServer().on("GET", PATH, httpx.ConnectError("refused"))
    with fake.client() as c, pytest.raises(errors.StreamFailed):
        list(c.follow_turn("default", "k", "assistant", "turn-1"))
    assert len(fake.calls("GET", PATH)) == 5


def test_follow_raises_a_refusal() -> None:
    fake = FakeServer().on("GET", PATH, json_response(404, {"error": {"code": "notFound", "message": "no turn"}}))
    with fake.client() as c, pytest.raises(errors.NotFound):
        list(c.follow_turn("default", "k", "assistant", "turn-1"))


def test_follow_waits_out_too_many_streams() -> None:
    fake = FakeServer().on(
        "GET",
        PATH,
        httpx.Response(429, headers={"Retry-After": "0"}, json={"error": {"code": "tooManyStreams"}}),
        lambda r: stream_response(sse(*EVENTS)),
    )
    with fake.client() as c:
        assert [e.seq for e in c.follow_turn("default", "k", "assistant", "turn-1")] == [0, 1, 2, 3, 4, 5]


def test_stream_goes_to_the_stream_url() -> None:
    fake = FakeServer().on("GET", "/base" + PATH, lambda r: stream_response(sse(*EVENTS)))
    with fake.client(stream_url="http://stream.test/base/") as c:
        assert len(list(c.follow_turn("default", "k", "assistant", "turn-1"))) == 6
    assert fake.requests[0].url.host == "stream.test"
    assert fake.requests[0].headers["Authorization"] == "Bearer aat_runtime"


def test_sync_follow_falls_back_to_polling_on_406(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Accept") == "text/event-stream":
            return json_response(406, {"error": {"code": "notAcceptable", "message": "use the stream URL"}})
        after = int(request.url.params.get("after", "-1"))
        return json_response(200, {"data": [e for e in EVENTS if e["seq"] > after][:2]})

    monkeypatch.setattr("agentauth.client.POLL_INTERVAL", 0.001)
    fake = FakeServer().on("GET", PATH, answer)
    with fake.client() as c:
        assert [e.seq for e in c.follow_turn("default", "k", "assistant", "turn-1", after=0)] == [1, 2, 3, 4, 5]
    polls = [r.url.params.get("after") for r in fake.calls("GET", PATH)[1:]]
    assert polls == ["0", "2", "4"]


def test_a_parked_turn_on_short_lambda_windows_is_followed_past_the_reconnect_budget() -> None:
    # On Lambda a stream ends 2 s before the invocation's deadline with a
    # comment asking to reconnect: with a 5 s function timeout, every 3 s,
    # for as long as the turn stays parked. Those are not failures.
    def window(request: httpx.Request) -> httpx.Response:
        return stream_response(b": stream limit reached; reconnect with Last-Event-ID to go on\n\n")

    answers: list[Any] = [lambda r: stream_response(sse(*EVENTS[:4]))]
    answers += [window] * (FAST.max_reconnects * 3)
    answers += [lambda r: stream_response(sse(*EVENTS[4:]))]
    fake = FakeServer().on("GET", PATH, *answers)
    with fake.client() as c:
        seqs = [e.seq for e in c.follow_turn("default", "k", "assistant", "turn-1")]
    assert seqs == [0, 1, 2, 3, 4, 5]
    assert {r.headers.get("Last-Event-ID") for r in fake.calls("GET", PATH)[1:]} == {"3"}


async def test_async_streams_that_were_heard_then_went_silent_are_not_a_failure_streak() -> None:
    # Each connection gets a keep-alive, then goes silent past the read
    # timeout (a NAT that forgot it): the server is there, so the follow goes on.
    def silent(request: httpx.Request) -> httpx.Response:
        return stream_response(b": keep-alive\n\n", drop=True, error=httpx.ReadTimeout("silent"))

    answers: list[Any] = [silent] * (FAST.max_reconnects * 2) + [lambda r: stream_response(sse(*EVENTS))]
    fake = FakeServer().on("GET", PATH, *answers)
    async with fake.async_client() as c:
        seqs = [e.seq async for e in c.follow_turn("default", "k", "assistant", "turn-1")]
    assert seqs == [0, 1, 2, 3, 4, 5]


def test_silent_connections_that_were_never_heard_count_towards_the_budget() -> None:
    fake = FakeServer().on("GET", PATH, lambda r: stream_response(drop=True, error=httpx.ReadTimeout("silent")))
    with fake.client() as c, pytest.raises(errors.StreamFailed):
        list(c.follow_turn("default", "k", "assistant", "turn-1"))
    assert len(fake.calls("GET", PATH)) == FAST.max_reconnects + 1


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_5xx_on_a_reconnect_is_reconnected(status: int) -> None:
    fake = FakeServer().on(
        "GET",
        PATH,
        lambda r: stream_response(sse(*EVENTS[:3]), drop=True),
        error_response(status, "internal" if status == 500 else "unavailable"),
        lambda r: stream_response(sse(*EVENTS[3:])),
    )
    with fake.client() as c:
        assert [e.seq for e in c.follow_turn("default", "k", "assistant", "turn-1")] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (401, "unauthenticated", errors.Unauthenticated),
        (403, "forbidden", errors.Forbidden),
        (404, "notFound", errors.NotFound),
    ],
)
async def test_a_refusal_on_a_reconnect_is_raised_after_the_events_already_yielded(
    status: int, code: str, cls: type[errors.AgentauthError]
) -> None:
    fake = FakeServer().on(
        "GET", PATH, lambda r: stream_response(sse(*EVENTS[:3]), drop=True), error_response(status, code)
    )
    seen: list[int] = []

    async def follow(c: agentauth.AsyncClient) -> None:
        async for e in c.follow_turn("default", "k", "assistant", "turn-1"):
            seen.append(e.seq)

    async with fake.async_client() as c:
        with pytest.raises(cls):
            await follow(c)
    assert seen == [0, 1, 2]
    assert len(fake.calls("GET", PATH)) == 2


@pytest.mark.parametrize("sync", [True, False])
async def test_a_200_that_is_not_a_stream_is_read_as_json_then_polled(
    sync: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy (or a server) that ignores Accept and answers the JSON form.
    def answer(request: httpx.Request) -> httpx.Response:
        after = int(request.url.params.get("after", request.headers.get("Last-Event-ID", "-1")))
        return json_response(200, {"data": [e for e in EVENTS if after < e["seq"] <= after + 4]})

    monkeypatch.setattr("agentauth.client.POLL_INTERVAL", 0.001)
    fake = FakeServer().on("GET", PATH, answer)
    if sync:
        with fake.client() as sc:
            seqs = [e.seq for e in sc.follow_turn("default", "k", "assistant", "turn-1")]
    else:
        async with fake.async_client() as ac:
            seqs = [e.seq async for e in ac.follow_turn("default", "k", "assistant", "turn-1")]
    assert seqs == [0, 1, 2, 3, 4, 5]
    assert len(fake.calls("GET", PATH)) == 2


async def test_cancelling_a_follow_propagates_and_closes_the_stream() -> None:
    closed = asyncio.Event()
    started = asyncio.Event()

    class Hanging(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield sse(EVENTS[0])
            started.set()
            await asyncio.Event().wait()  # a parked turn: nothing more for a while
            yield b""

        async def aclose(self) -> None:
            closed.set()

    fake = FakeServer().on(
        "GET", PATH, lambda r: httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=Hanging())
    )
    seen: list[int] = []

    async def follow(c: agentauth.AsyncClient) -> None:
        async for e in c.follow_turn("default", "k", "assistant", "turn-1"):
            seen.append(e.seq)

    async with fake.async_client() as c:
        task = asyncio.create_task(follow(c))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()
    assert closed.is_set()
    assert seen == [0]
    assert len(fake.calls("GET", PATH)) == 1


def test_a_stream_that_cannot_be_decoded_is_an_unexpected_response() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        body = DroppingStream(b"not gzip at all", drop=False)
        return httpx.Response(
            200, headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}, stream=body
        )

    fake = FakeServer().on("GET", PATH, broken)
    with fake.client() as c, pytest.raises(errors.UnexpectedResponse) as info:
        list(c.follow_turn("default", "k", "assistant", "turn-1"))
    assert info.value.__cause__ is None and info.value.__context__ is None


@pytest.mark.parametrize("sync", [True, False])
async def test_polling_goes_on_past_a_failed_poll_and_raises_a_refusal(
    sync: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Behind API Gateway (406, no stream URL) a parked turn is polled for
    # minutes: a poll lost past its retries is reconnected, in the budget.
    monkeypatch.setattr("agentauth.client.POLL_INTERVAL", 0.001)
    polls = {"n": 0}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Accept") == "text/event-stream":
            return error_response(406, "notAcceptable")
        polls["n"] += 1
        if 2 <= polls["n"] <= 2 + FAST.max_attempts * 2:  # two polls lost after all their tries
            return error_response(503, "unavailable")
        after = int(request.url.params.get("after", "-1"))
        return json_response(200, {"data": [e for e in EVENTS if after < e["seq"] <= after + 2]})

    fake = FakeServer().on("GET", PATH, answer)
    if sync:
        with fake.client() as sc:
            seqs = [e.seq for e in sc.follow_turn("default", "k", "assistant", "turn-1")]
    else:
        async with fake.async_client() as ac:
            seqs = [e.seq async for e in ac.follow_turn("default", "k", "assistant", "turn-1")]
    assert seqs == [0, 1, 2, 3, 4, 5]

    gone = FakeServer().on("GET", PATH, error_response(406, "notAcceptable"))
    gone.on("GET", PATH, lambda r: error_response(406 if r.headers.get("Accept") == "text/event-stream" else 404, "x"))
    with gone.client() as c, pytest.raises(errors.NotFound):
        list(c.follow_turn("default", "k", "assistant", "turn-1"))
