"""No credential in an error: not in its text, not in what it is chained to,
not in the locals of the frames it carries (what error trackers record)."""

from __future__ import annotations

import http.server
import threading
import traceback
from collections.abc import Iterator
from types import TracebackType

import httpx
import pytest

import agentauth
from agentauth import errors

from .fakes import DroppingStream, FakeServer, json_response

JWT = "eyJhbGciOiJSUzI1NiJ9.payload-very-secret.sig"
AWS_SECRET = "aws-secret-key-very-secret"
AWS_SESSION = "aws-session-token-very-secret"
LIBRARIES = ("agentauth", "httpx", "httpcore", "h11", "botocore")


def everything_told(exc: BaseException) -> str:
    """What a log line, a traceback or an error tracker gets of exc: its text,
    the chain, and the repr of every local of every frame on the way."""
    parts = ["".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), repr(exc)]
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb: TracebackType | None = current.__traceback__
        while tb is not None:
            # The frames below the caller's: the SDK's and the libraries it calls.
            if not str(tb.tb_frame.f_globals.get("__name__", "")).startswith(LIBRARIES):
                tb = tb.tb_next
                continue
            for value in tb.tb_frame.f_locals.values():
                try:
                    parts.append(repr(value))
                except Exception:  # noqa: S112 - a repr that fails tells nothing
                    continue
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


@pytest.fixture
def real_server() -> Iterator[str]:
    """A real socket, so that httpx's own HTTP/1.1 layer (h11) checks what is sent."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            body = b'{"data": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_token_read_from_a_file_has_its_newline_dropped(real_server: str) -> None:
    with agentauth.Client(real_server, env={}, agent_token=lambda: JWT + "\n") as c:
        assert c.list_tools() == []


@pytest.mark.parametrize(
    "bad", [JWT + "\r\nX-Injected: 1", "tok\x00en-very-secret", "tökén-very-secret", "a b-very-secret"]
)
def test_a_token_that_is_no_header_value_is_refused_without_being_quoted(real_server: str, bad: str) -> None:
    with (
        agentauth.Client(real_server, env={}, agent_token=lambda: bad) as c,
        pytest.raises(errors.MissingCredential) as info,
    ):
        c.list_tools()
    told = everything_told(info.value)
    assert "very-secret" not in told and JWT not in told
    assert "agent token" in str(info.value)


async def test_async_a_runtime_secret_that_is_no_header_value_is_refused(real_server: str) -> None:
    secret = agentauth.Secret("aat_runtime-very-secret\n\nX: y")
    async with agentauth.AsyncClient(real_server, env={}, runtime_token=secret) as c:
        with pytest.raises(errors.MissingCredential) as info:
            await c.list_instances()
    assert "very-secret" not in everything_told(info.value)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        (httpx.ConnectError, "refused"),
        (httpx.RemoteProtocolError, "Server disconnected without sending a response."),
        (httpx.LocalProtocolError, f"Illegal header value b'Bearer {JWT}'"),
    ],
)
def test_a_failed_connection_is_not_chained_to_httpx_exception_and_its_request(
    kind: type[httpx.TransportError], text: str
) -> None:
    # httpx's exception holds the request: its headers hold the credential.
    def fail(request: httpx.Request) -> httpx.Response:
        raise kind(text, request=request)

    fake = FakeServer().on("POST", "/v1/tools/invoke", fail)
    with fake.client(agent_token=JWT) as c, pytest.raises(errors.NetworkError) as info:
        c.invoke_tool("whoami", {})
    e = info.value
    assert e.__cause__ is None and e.__context__ is None
    assert JWT not in everything_told(e)
    assert kind.__name__ in str(e)


class ExpiringRole:
    """botocore's refreshable credentials: the refresh (STS, IMDS) fails."""

    access_key: str | None = None
    secret_key: str | None = None
    token: str | None = None

    def get_frozen_credentials(self) -> object:
        raise RuntimeError("the refresh failed")


class Signable:
    """Credentials that load, then a signing that fails: the frames hold them."""

    access_key: str | None = None
    secret_key: str | None = None
    token: str | None = None

    def get_frozen_credentials(self) -> object:
        from botocore.credentials import ReadOnlyCredentials

        return ReadOnlyCredentials("AKIDTEST", AWS_SECRET, AWS_SESSION)


@pytest.mark.parametrize("creds", [ExpiringRole(), Signable()])
def test_a_sigv4_failure_is_a_missing_credential_that_carries_no_credential(
    creds: agentauth.AwsCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.auth import SigV4Auth

    def broken(self: object, request: object) -> None:
        raise ValueError("signing failed")

    monkeypatch.setattr(SigV4Auth, "add_auth", broken)
    fake = FakeServer().on("GET", "/v1/instances", json_response(200, {"data": []}))
    with (
        agentauth.Client(
            "http://agentauth.test",
            auth="sigv4",
            region="eu-west-1",
            env={},
            transport=fake.transport(),
            aws_credentials=creds,
        ) as c,
        pytest.raises(errors.MissingCredential, match="SigV4") as info,
    ):
        c.list_instances()
    told = everything_told(info.value)
    assert AWS_SECRET not in told and AWS_SESSION not in told
    assert fake.requests == []


def test_sigv4_takes_frozen_credentials_too() -> None:
    from botocore.credentials import ReadOnlyCredentials

    fake = FakeServer().on("GET", "/v1/instances", json_response(200, {"data": []}))
    with agentauth.Client(
        "http://agentauth.test",
        auth="sigv4",
        region="eu-west-1",
        env={},
        transport=fake.transport(),
        aws_credentials=ReadOnlyCredentials("AKIDTEST", AWS_SECRET, None),
    ) as c:
        assert c.list_instances().data == ()
    assert fake.requests[0].headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")


async def test_an_answer_httpx_cannot_decode_is_an_unexpected_response_without_the_request() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        body = DroppingStream(b"not gzip at all", drop=False)
        return httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=body)

    fake = FakeServer().on("GET", "/v1/agents/tools", broken)
    async with fake.async_client(agent_token=JWT) as c:
        with pytest.raises(errors.UnexpectedResponse) as info:
            await c.list_tools()
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert JWT not in everything_told(info.value)
