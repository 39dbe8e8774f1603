"""agentauth's tool catalog as OpenAI Agents SDK tools (``pip install 'agentauth[openai-agents]'``).

    tools = await function_tools(client)          # the tools the agent JWT may see
    agent = Agent(name="assistant", tools=tools)

Each tool runs through ``POST /v1/tools/invoke`` (agentauth's hooks: the
user's token, per-tool scopes, rate limit, audit). When the user must
consent first, the model gets the link to give them — or, with
``on_authorization_required``, your callback shows it, the call waits for
the consent and runs again. The ``agents`` package is imported here only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..client import AsyncClient
from ..models import ToolManifestEntry
from ._invoke import OnAuthorizationRequired, invoke_async, parse_args

if TYPE_CHECKING:
    from agents import FunctionTool

__all__ = ["function_tool", "function_tools"]


def function_tool(
    client: AsyncClient,
    tool: ToolManifestEntry,
    *,
    on_authorization_required: OnAuthorizationRequired | None = None,
    authorization_timeout: float = 600.0,
) -> FunctionTool:
    """One catalog entry as a ``FunctionTool`` (its input schema as given: not strict mode)."""
    from agents import FunctionTool

    async def on_invoke_tool(_ctx: Any, arguments: str) -> str:
        return await invoke_async(
            client, tool.name, parse_args(arguments), on_authorization_required, authorization_timeout
        )

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.input_schema,
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=False,
    )


async def function_tools(
    client: AsyncClient,
    *,
    on_authorization_required: OnAuthorizationRequired | None = None,
    authorization_timeout: float = 600.0,
) -> list[FunctionTool]:
    """Every tool of the catalog (``GET /v1/agents/tools``) as a ``FunctionTool``."""
    return [
        function_tool(
            client,
            t,
            on_authorization_required=on_authorization_required,
            authorization_timeout=authorization_timeout,
        )
        for t in await client.list_tools()
    ]
