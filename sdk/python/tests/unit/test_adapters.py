"""The adapters, with the real frameworks (pinned in requirements-dev.txt)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentauth

from .fakes import FakeServer, json_response

CATALOG = {
    "data": [
        {
            "tool_id": "orders:list",
            "name": "list_orders",
            "description": "Lists orders",
            "input_schema": {"type": "object", "properties": {"note": {"type": "string"}}},
        }
    ]
}
NEEDS_CONSENT = {
    "result": {
        "status": "authorization_required",
        "authorization": {
            "authSessionId": "as-1",
            "authorizationUrl": "http://p/auth",
            "expiresAt": "2026-11-21T10:10:00Z",
            "message": "Connect your account.",
        },
    }
}
OK = {"result": {"status": "ok", "output": {"orders": [1, 2]}}}


def server(*invoke_answers: Any) -> FakeServer:
    return (
        FakeServer()
        .on("GET", "/v1/agents/tools", json_response(200, CATALOG))
        .on("POST", "/v1/tools/invoke", *invoke_answers)
        .on("GET", "/v1/oauth/sessions/as-1", json_response(200, {"status": "completed"}))
    )


async def test_openai_agents_function_tools() -> None:
    pytest.importorskip("agents")
    from agents import FunctionTool

    from agentauth.adapters.openai_agents import function_tools

    fake = server(json_response(200, NEEDS_CONSENT), json_response(200, OK))
    async with fake.async_client() as c:
        tools = await function_tools(c)
        assert isinstance(tools[0], FunctionTool)
        assert tools[0].name == "list_orders" and tools[0].params_json_schema["properties"]["note"]["type"] == "string"
        # No callback: the model is told to give the user the link — the TypeScript SDK's shape.
        first = json.loads(await tools[0].on_invoke_tool(None, '{"note": "x"}'))  # type: ignore[arg-type]
        assert first == {
            "status": "authorization_required",
            "authorizationUrl": "http://p/auth",
            "expiresAt": "2026-11-21T10:10:00+00:00",
            "message": "Connect your account. Ask the user to open the link and consent, then call the tool again.",
        }
        second = json.loads(await tools[0].on_invoke_tool(None, "{}"))  # type: ignore[arg-type]
        assert second == {"status": "ok", "output": {"orders": [1, 2]}}
    assert json.loads(fake.calls("POST", "/v1/tools/invoke")[0].content) == {
        "toolName": "list_orders",
        "args": {"note": "x"},
    }


async def test_openai_agents_callback_waits_and_retries() -> None:
    pytest.importorskip("agents")
    from agentauth.adapters.openai_agents import function_tools

    shown: list[str] = []
    fake = server(json_response(200, NEEDS_CONSENT), json_response(200, OK))
    async with fake.async_client() as c:
        tools = await function_tools(c, on_authorization_required=lambda e: shown.append(e.authorization_url))
        out = json.loads(await tools[0].on_invoke_tool(None, "{}"))  # type: ignore[arg-type]
    assert out["status"] == "ok" and shown == ["http://p/auth"]
    assert len(fake.calls("GET", "/v1/oauth/sessions/as-1")) == 1


async def test_langchain_async_tools() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.tools import StructuredTool

    from agentauth.adapters.langchain import structured_tools

    fake = server(json_response(200, OK))
    async with fake.async_client() as c:
        tools = await structured_tools(c)
        assert isinstance(tools[0], StructuredTool) and tools[0].name == "list_orders"
        out = json.loads(await tools[0].ainvoke({"note": "hi"}))
    assert out["output"] == {"orders": [1, 2]}
    assert json.loads(fake.calls("POST", "/v1/tools/invoke")[0].content)["args"] == {"note": "hi"}


def test_langchain_sync_tools_with_callback() -> None:
    pytest.importorskip("langchain_core")
    from agentauth.adapters.langchain import structured_tools_sync

    shown: list[agentauth.AuthorizationRequired] = []
    fake = server(json_response(200, NEEDS_CONSENT), json_response(200, OK))
    with fake.client() as c:
        tools = structured_tools_sync(c, on_authorization_required=shown.append)
        out = json.loads(tools[0].invoke({}))
    assert out["status"] == "ok" and shown[0].session_id == "as-1"


def test_consent_result_without_an_expiry_leaves_it_out() -> None:
    from agentauth.adapters._invoke import consent_result

    needed = agentauth.AuthorizationRequired("", authorization_url="http://p/auth", session_id="as-1", expires_at=None)
    assert json.loads(consent_result(needed)) == {
        "status": "authorization_required",
        "authorizationUrl": "http://p/auth",
        "message": "the user must consent first. Ask the user to open the link and consent, then call the tool again.",
    }
