"""The tool routes (sdk/TESTING.md, 2; local only): list, invoke → the typed
AuthorizationRequired → consent → invoke → ok with the login's sub; skills."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

import agentauth

from .conftest import Contract, Harness


@pytest.fixture
async def tools_client(contract: Contract) -> AsyncIterator[agentauth.AsyncClient]:
    if not contract.agent_token or not contract.tool:
        pytest.skip("no tool routes here (AGENTAUTH_AGENT_TOKEN, AGENTAUTH_TEST_TOOL unset: the AWS run)")
    async with agentauth.AsyncClient() as c:
        yield c


async def test_list_invoke_consent_invoke(
    tools_client: agentauth.AsyncClient, contract: Contract, harness: Harness
) -> None:
    assert contract.tool
    # The first invoke must ask for consent: forget the login's grant (none is fine).
    with contextlib.suppress(agentauth.errors.GrantNotFound):
        await tools_client.revoke(contract.app, contract.subject(contract.login))

    tools = await tools_client.list_tools()
    names = [t.name for t in tools]
    assert contract.tool in names
    tool = tools[names.index(contract.tool)]
    assert tool.tool_id and tool.input_schema.get("type") == "object"

    with pytest.raises(agentauth.AuthorizationRequired) as info:
        await tools_client.invoke_tool(contract.tool, {})
    needed = info.value
    assert needed.authorization_url and needed.session_id
    assert needed.oauth_app_ref

    harness.consent(needed.authorization_url, contract.login)
    await tools_client.wait_for_authorization(needed, timeout=60)

    result = await tools_client.invoke_tool(contract.tool, {})
    assert result.ok, result
    assert isinstance(result.output, dict) and result.output.get("sub") == contract.login
    assert result.tool_called.get("argsHash") is not None


async def test_skills_search_answers(tools_client: agentauth.AsyncClient) -> None:
    skills = await tools_client.search_skills("deploy", top_k=5)
    assert isinstance(skills, list)
    for s in skills:
        assert s.name


async def test_the_runtime_token_is_refused_on_a_tool_route(contract: Contract) -> None:
    if not contract.agent_token or not contract.tool:
        pytest.skip("no tool routes here")
    import os

    async with agentauth.AsyncClient(agent_token=os.environ.get("AGENTAUTH_RUNTIME_TOKEN") or "x") as c:
        with pytest.raises(agentauth.errors.Unauthenticated) as info:
            await c.list_tools()
    assert info.value.details.get("reason") == "malformed"
