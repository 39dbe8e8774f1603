"""follow_turn(): the SSE route, reconnects with Last-Event-ID, no event twice, the 406 fallback."""

from __future__ import annotations

import httpx
import pytest

from agentauth import errors

from .fakes import FakeServer, event, json_response, sse, stream_response

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
