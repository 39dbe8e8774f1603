"""A hand-written fake agentauth for the unit tests, on httpx.MockTransport.

Each route holds a list of answers given in turn (the last one repeats);
an answer is an httpx.Response, an exception to raise (a connection that
failed), or a function of the request. Every request is recorded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

import agentauth

Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]

FAST = agentauth.RetryPolicy(base_delay=0.001, max_delay=0.002, max_retry_after=0.05, max_reconnects=4)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    h = {"Content-Type": "application/json", "X-Request-Id": "rid-header"}
    h.update(headers or {})
    return httpx.Response(status, content=json.dumps(body).encode(), headers=h)


def error_response(status: int, code: str, message: str = "no", **extra: Any) -> httpx.Response:
    err: dict[str, Any] = {"code": code, "message": message, "requestId": "rid-body"}
    err.update(extra)
    return json_response(status, {"error": err})


class FakeServer:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Answer]] = {}
        self.requests: list[httpx.Request] = []

    def on(self, method: str, path: str, *answers: Answer) -> FakeServer:
        self.routes[(method, path)] = list(answers)
        return self

    def calls(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        key = (request.method, request.url.path)
        answers = self.routes.get(key)
        if not answers:
            return error_response(404, "notFound", f"no fake route {key}")
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def client(self, **kwargs: Any) -> agentauth.Client:
        kwargs.setdefault("runtime_token", "aat_runtime")
        kwargs.setdefault("agent_token", "agent.jwt.value")
        kwargs.setdefault("retry", FAST)
        return agentauth.Client("http://agentauth.test", env={}, transport=self.transport(), **kwargs)

    def async_client(self, **kwargs: Any) -> agentauth.AsyncClient:
        kwargs.setdefault("runtime_token", "aat_runtime")
        kwargs.setdefault("agent_token", "agent.jwt.value")
        kwargs.setdefault("retry", FAST)
        return agentauth.AsyncClient("http://agentauth.test", env={}, transport=self.transport(), **kwargs)


def sse(*events: dict[str, Any], comment: str | None = None) -> bytes:
    out = []
    if comment:
        out.append(f": {comment}\n\n")
    for ev in events:
        out.append(f"id: {ev['seq']}\nevent: {ev['type']}\ndata: {json.dumps(ev)}\n\n")
    return "".join(out).encode()


def event(seq: int, type_: str, **data: Any) -> dict[str, Any]:
    return {"turnId": "turn-1", "seq": seq, "type": type_, "at": "2026-11-24T10:00:02.123456789Z", "data": data}


class DroppingStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that sends its chunks, then fails as a cut connection does."""

    def __init__(self, *chunks: bytes, drop: bool = True, error: Exception | None = None) -> None:
        self.chunks = chunks
        self.drop = drop
        self.error = error or httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.drop:
            raise self.error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c
        if self.drop:
            raise self.error


def stream_response(*chunks: bytes, drop: bool = False, error: Exception | None = None) -> httpx.Response:
    return httpx.Response(
        200, headers={"Content-Type": "text/event-stream"}, stream=DroppingStream(*chunks, drop=drop, error=error)
    )
