"""Connecting: arguments and env, which credential each route takes, SigV4, path escaping."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from datetime import timedelta

import pytest

import agentauth
from agentauth import errors

from .fakes import FakeServer, json_response

INSTANCE = {"swarm": "default", "instanceKey": "k", "agent": "assistant", "status": "paused"}


def test_env_is_read_and_arguments_win() -> None:
    env = {
        "AGENTAUTH_URL": "http://env.test:9/",
        "AGENTAUTH_RUNTIME_TOKEN": "aat_env",
        "AGENTAUTH_STREAM_URL": "http://s.test",
    }
    fake = FakeServer().on("GET", "/v1/instances", json_response(200, {"data": []}))
    with agentauth.Client(env=env, transport=fake.transport()) as c:
        assert c.base_url == "http://env.test:9" and c.stream_url == "http://s.test"
        c.list_instances()
    assert fake.requests[0].url.host == "env.test"
    assert fake.requests[0].headers["Authorization"] == "Bearer aat_env"
    with agentauth.Client("http://arg.test", runtime_token="aat_arg", env=env, transport=fake.transport()) as c:
        c.list_instances()
    assert fake.requests[1].url.host == "arg.test"
    assert fake.requests[1].headers["Authorization"] == "Bearer aat_arg"


def test_missing_runtime_token_says_what_to_set() -> None:
    fake = FakeServer()
    with agentauth.Client("http://x.test", env={}, transport=fake.transport()) as c:
        with pytest.raises(errors.MissingCredential) as info:
            c.list_instances()
        assert "AGENTAUTH_RUNTIME_TOKEN" in str(info.value) and "runtime_token=" in str(info.value)
        with pytest.raises(errors.MissingCredential) as info:
            c.list_tools()
        assert "AGENTAUTH_AGENT_TOKEN" in str(info.value)
    assert fake.requests == []


def test_tool_routes_take_the_agent_jwt_and_runtime_routes_the_runtime_token() -> None:
    fake = (
        FakeServer()
        .on("GET", "/v1/agents/tools", json_response(200, {"data": [{"tool_id": "demo:whoami", "name": "whoami"}]}))
        .on("GET", "/v1/agents/skills", json_response(200, {"data": [{"name": "deploy", "relevance_score": 0.5}]}))
        .on("GET", "/v1/instances", json_response(200, {"data": []}))
    )
    calls = iter(["jwt-1", "jwt-2"])
    with fake.client(agent_token=lambda: next(calls)) as c:
        tools = c.list_tools()
        skills = c.search_skills("deploy", top_k=3)
        c.list_instances()
    assert tools[0].name == "whoami" and tools[0].input_schema == {"type": "object"}
    assert skills[0].name == "deploy" and skills[0].relevance_score == 0.5
    assert [r.headers["Authorization"] for r in fake.requests] == ["Bearer jwt-1", "Bearer jwt-2", "Bearer aat_runtime"]
    assert dict(fake.requests[1].url.params) == {"q": "deploy", "top_k": "3"}


def test_sigv4_signs_runtime_routes_for_execute_api_and_streams_for_lambda() -> None:
    from botocore.credentials import Credentials

    fake = (
        FakeServer()
        .on(
            "POST",
            "/_aws/execute-api/api1/$default/v1/oauth/token",
            json_response(200, {"status": "ready", "accessToken": "t"}),
        )
        .on(
            "GET",
            "/_aws/lambda-url/u1/v1/instances/default/k/assistant/turns/t1/events",
            json_response(404, {"error": {"code": "notFound"}}),
        )
        .on("GET", "/_aws/execute-api/api1/$default/v1/agents/tools", json_response(200, {"data": []}))
    )
    with agentauth.Client(
        "http://127.0.0.1:4566/_aws/execute-api/api1/$default",
        auth="sigv4",
        region="us-east-1",
        stream_url="http://127.0.0.1:4566/_aws/lambda-url/u1/",
        agent_token="jwt",
        env={},
        transport=fake.transport(),
        aws_credentials=Credentials("AKIDTEST", "secret", "session-token"),
    ) as c:
        c.get_access_token("a", subjects={"user": "u"})
        with pytest.raises(errors.NotFound):
            list(c.follow_turn("default", "k", "assistant", "t1"))
        c.list_tools()
    token_req, stream_req, tools_req = fake.requests
    assert token_req.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
    assert "/us-east-1/execute-api/aws4_request" in token_req.headers["Authorization"]
    assert token_req.headers["X-Amz-Security-Token"] == "session-token"
    assert "x-amz-content-sha256" in {k.lower() for k in token_req.headers} or "X-Amz-Date" in token_req.headers
    assert "/us-east-1/lambda/aws4_request" in stream_req.headers["Authorization"]
    assert tools_req.headers["Authorization"] == "Bearer jwt"


def test_sigv4_without_a_region_says_so() -> None:
    from botocore.credentials import Credentials

    with agentauth.Client(
        "http://x.test", auth="sigv4", env={}, transport=FakeServer().transport(), aws_credentials=Credentials("a", "b")
    ) as c:
        c._creds._region = None  # no region from the environment either
        import botocore.session

        session = botocore.session.get_session()
        if session.get_config_variable("region"):
            pytest.skip("this machine's AWS config names a region")
        with pytest.raises(errors.MissingCredential, match="AWS_REGION"):
            c.list_instances()


def test_bad_auth_mode_and_url() -> None:
    with pytest.raises(agentauth.AgentauthError, match="sigv4"):
        agentauth.Client("http://x.test", auth="iam", env={})
    with pytest.raises(agentauth.AgentauthError, match="http"):
        agentauth.Client("ftp://x.test", env={})


@pytest.mark.parametrize(
    ("key", "escaped"),
    [
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("1712345678.000100", "1712345678.000100"),
        ("a b/c", "a%20b%2Fc"),
        ("é", "%C3%A9"),
    ],
)
def test_instance_keys_are_one_escaped_segment(key: str, escaped: str) -> None:
    fake = FakeServer()  # no route: the answer is a 404; the request is what is checked
    with fake.client() as c, pytest.raises(errors.NotFound):
        c.pause_instance("default", key, "assistant")
    assert fake.requests[0].url.raw_path.decode() == f"/v1/instances/default/{escaped}/assistant/pause"


def test_lifecycle_and_events() -> None:
    base = "/v1/instances/default/k/assistant"
    fake = (
        FakeServer()
        .on("POST", base + "/pause", json_response(200, INSTANCE))
        .on("POST", base + "/resume", json_response(200, {**INSTANCE, "status": "active"}))
        .on("POST", base + "/terminate", json_response(200, {**INSTANCE, "status": "terminated"}))
        .on("DELETE", base, json_response(200, {"deleted": True, "oauthGrantsKept": True}))
        .on(
            "GET",
            base,
            json_response(
                200,
                {
                    **INSTANCE,
                    "createdAt": "2026-01-02T03:04:05Z",
                    "updatedAt": "2026-01-02T03:04:06Z",
                    "activeTurn": {"id": "turn-2", "status": "parked", "steps": 1},
                    "backlog": 1,
                    "recentTurns": [
                        {"id": "turn-2", "status": "parked"},
                        {"id": "turn-1", "status": "completed", "finalAnswer": "hi"},
                    ],
                },
            ),
        )
        .on(
            "GET",
            base + "/turns/turn-1/events",
            json_response(200, {"data": [{"turnId": "turn-1", "seq": 3, "type": "tool.called", "data": {}}]}),
        )
        .on(
            "POST",
            "/v1/instances/default/k/events",
            json_response(202, {"eventId": "ev-1", "swarm": "default", "instanceKey": "k", "agent": "assistant"}),
        )
    )
    with fake.client() as c:
        assert c.pause_instance("default", "k", "assistant").status == "paused"
        assert c.resume_instance("default", "k", "assistant").status == "active"
        assert c.terminate_instance("default", "k", "assistant", reason="user left").status == "terminated"
        assert c.delete_instance("default", "k", "assistant").oauth_grants_kept
        detail = c.get_instance("default", "k", "assistant")
        # Flat, as the route's answer and the TypeScript SDK's Instance: the record's fields
        # beside the turns, no nested record.
        record = (detail.swarm, detail.instance_key, detail.agent, detail.status)
        assert record == ("default", "k", "assistant", "paused")
        assert detail.created_at is not None and detail.updated_at is not None
        assert detail.updated_at - detail.created_at == timedelta(seconds=1)
        assert not hasattr(detail, "instance")
        assert detail.active_turn is not None and detail.active_turn.status == "parked"
        assert detail.backlog == 1 and detail.recent_turns[1].final_answer == "hi"
        assert c.wait_for_turn("default", "k", "assistant", ignore={"turn-1"}).id == "turn-2"
        assert c.wait_for_turn("default", "k", "assistant", ignore={"turn-2"}).id == "turn-1"
        evs = c.turn_events("default", "k", "assistant", "turn-1", after=2)
        assert evs[0].seq == 3
        posted = c.post_event(
            "default",
            "k",
            "who am I?",
            auth=agentauth.TurnAuth.for_user("demo:user:alice", claims={"scope": "profile.read"}),
            origin={"connector": "chat-ui"},
            id="msg-1",
        )
        assert posted.event_id == "ev-1" and posted.agent == "assistant"
    terminate = fake.calls("POST", base + "/terminate")[0]
    assert json.loads(terminate.content) == {"reason": "user left"}
    assert fake.calls("GET", base + "/turns/turn-1/events")[0].url.params["after"] == "2"
    assert json.loads(fake.calls("POST", "/v1/instances/default/k/events")[0].content) == {
        "auth": {
            "actor": {"type": "user", "id": "demo:user:alice"},
            "subjects": {"user": "demo:user:alice"},
            "claims": {"scope": "profile.read"},
        },
        "text": "who am I?",
        "origin": {"connector": "chat-ui"},
        "id": "msg-1",
    }


def test_instance_is_flat_as_the_typescript_sdks() -> None:
    """get_instance's Instance holds the record's fields itself (TypeScript's Instance extends
    InstanceRecord): no nested ``.instance``. Its active_turn is the turn; a record's, the id."""
    names = [f.name for f in dataclasses.fields(agentauth.Instance)]
    assert names == [
        "swarm",
        "instance_key",
        "agent",
        "status",
        "active_turn",
        "backlog",
        "recent_turns",
        "created_at",
        "updated_at",
        "raw",
    ]
    record = {f.name for f in dataclasses.fields(agentauth.InstanceRecord)}
    assert record <= set(names), "every field of an InstanceRecord is an Instance's too"
    idle = agentauth.Instance.from_json({**INSTANCE, "backlog": 0, "recentTurns": []})
    assert idle.active_turn is None and idle.recent_turns == () and idle.created_at is None
    assert agentauth.InstanceRecord.from_json({**INSTANCE, "activeTurn": "turn-2"}).active_turn == "turn-2"


def test_invoke_results() -> None:
    authz = {
        "oauthAppRef": "OAuthApp/e2e-user",
        "authSessionId": "as-9",
        "authorizationUrl": "http://p/auth",
        "expiresAt": "2026-11-24T10:10:00Z",
        "message": "consent",
    }
    fake = FakeServer().on(
        "POST",
        "/v1/tools/invoke",
        json_response(200, {"result": {"status": "authorization_required", "authorization": authz}}),
        json_response(
            200, {"result": {"status": "error", "error": {"code": "E_TOOL_UPSTREAM", "message": "502", "name": "x"}}}
        ),
        json_response(200, {"result": {"status": "ok", "output": {"sub": "alice"}}, "toolCalled": {"argsHash": "44"}}),
    )
    with fake.client() as c:
        with pytest.raises(agentauth.AuthorizationRequired) as info:
            c.invoke_tool("whoami", {}, call_id="c1")
        assert info.value.session_id == "as-9" and info.value.oauth_app_ref == "OAuthApp/e2e-user"
        failed = c.invoke_tool("whoami")
        assert not failed.ok and failed.error is not None and failed.error.code == "E_TOOL_UPSTREAM"
        with pytest.raises(errors.ToolCallFailed, match="502"):
            failed.raise_for_error()
        ok = c.invoke_tool("whoami")
        assert ok.output == {"sub": "alice"} and ok.tool_called == {"argsHash": "44"}
    assert json.loads(fake.requests[0].content) == {"toolName": "whoami", "args": {}, "callId": "c1"}


async def test_list_instances_names_the_unreadable_apart() -> None:
    listed = {
        "data": [{**INSTANCE, "status": "active", "activeTurn": "turn-9", "createdAt": "2026-11-24T10:00:02Z"}],
        "unreadable": [
            {
                "swarm": "default",
                "instanceKey": "1712345678.000200",
                "agent": "assistant",
                "id": "4f1a",
                "reason": "corrupt record: journal line at byte 926: invalid JSON at byte 32",
            },
            {"id": "9c2e", "reason": "unreadable key"},
        ],
    }
    fake = FakeServer().on("GET", "/v1/instances", json_response(200, listed))
    async with fake.async_client() as c:
        got = await c.list_instances()
    assert isinstance(got, agentauth.InstanceList)
    assert [(i.instance_key, i.status, i.active_turn) for i in got.data] == [("k", "active", "turn-9")]
    assert got.unreadable == (
        agentauth.UnreadableInstance(
            id="4f1a",
            reason="corrupt record: journal line at byte 926: invalid JSON at byte 32",
            swarm="default",
            instance_key="1712345678.000200",
            agent="assistant",
        ),
        agentauth.UnreadableInstance(id="9c2e", reason="unreadable key", swarm=None, instance_key=None, agent=None),
    )
    assert got.unreadable[0].raw["id"] == "4f1a"


def test_list_instances_without_unreadable_is_an_empty_tuple() -> None:
    fake = FakeServer().on("GET", "/v1/instances", json_response(200, {"data": [INSTANCE]}))
    with fake.client() as c:
        got = c.list_instances()
    assert len(got.data) == 1 and got.unreadable == ()


class TracedClient(agentauth.Client):
    """A subclass, as an application adds its own helpers (mypy checks what `with` gives)."""

    def traced(self) -> str:
        return "traced"


class TracedAsyncClient(agentauth.AsyncClient):
    def traced(self) -> str:
        return "traced"


async def test_context_managers_give_the_subclass() -> None:
    with TracedClient("http://x.test", env={}, transport=FakeServer().transport()) as c:
        assert c.traced() == "traced"
    async with TracedAsyncClient("http://x.test", env={}, transport=FakeServer().transport()) as ac:
        assert ac.traced() == "traced"


async def test_async_client_awaits_an_async_agent_token_source() -> None:
    # As the TypeScript SDK's agentToken: () => string | Promise<string>.
    issued: list[str] = []

    async def renew() -> str:
        await asyncio.sleep(0)
        issued.append(f"jwt-{len(issued) + 1}")
        return issued[-1]

    fake = FakeServer().on("GET", "/v1/agents/tools", json_response(200, {"data": []}))
    async with fake.async_client(agent_token=renew) as c:
        await c.list_tools()
        await c.list_tools()
    assert [r.headers["Authorization"] for r in fake.requests] == ["Bearer jwt-1", "Bearer jwt-2"]


def test_sync_client_refuses_an_async_agent_token_source() -> None:
    async def renew() -> str:
        return "jwt"

    fake = FakeServer().on("GET", "/v1/agents/tools", json_response(200, {"data": []}))
    with fake.client(agent_token=renew) as c, pytest.raises(errors.MissingCredential, match="AsyncClient"):
        c.list_tools()
    assert fake.requests == []


class RotatingRole:
    """A role's credentials: botocore refreshes them when due (a blocking call to STS)."""

    access_key: str | None = None
    secret_key: str | None = None
    token: str | None = None

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.reads = 0

    def get_frozen_credentials(self) -> object:
        from botocore.credentials import ReadOnlyCredentials

        time.sleep(self.delay)
        self.reads += 1
        return ReadOnlyCredentials(f"AKID{self.reads}", "secret", f"session-{self.reads}")


def test_sigv4_reads_the_credentials_again_for_every_request() -> None:
    role = RotatingRole()
    fake = FakeServer().on("GET", "/v1/instances", json_response(200, {"data": []}))
    with agentauth.Client(
        "http://x.test", auth="sigv4", region="eu-west-1", env={}, transport=fake.transport(), aws_credentials=role
    ) as c:
        c.list_instances()
        c.list_instances()
    assert [r.headers["X-Amz-Security-Token"] for r in fake.requests] == ["session-1", "session-2"]
    assert "Credential=AKID2/" in fake.requests[1].headers["Authorization"]


async def test_async_sigv4_signs_off_the_event_loop() -> None:
    # A refresh that blocks for 0.3 s must not stop the other tasks of the loop.
    role = RotatingRole(delay=0.3)
    fake = FakeServer().on("GET", "/v1/instances", json_response(200, {"data": []}))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async with agentauth.AsyncClient(
        "http://x.test", auth="sigv4", region="eu-west-1", env={}, transport=fake.transport(), aws_credentials=role
    ) as c:
        task = asyncio.create_task(ticker())
        await c.list_instances()
        task.cancel()
    assert ticks >= 10, ticks
    assert fake.requests[0].headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID1/")
