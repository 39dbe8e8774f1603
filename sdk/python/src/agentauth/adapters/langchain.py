"""agentauth's tool catalog as LangChain tools (``pip install 'agentauth[langchain]'``).

    tools = await structured_tools(client)         # AsyncClient: async tools
    tools = structured_tools_sync(sync_client)      # Client: sync tools

Each tool runs through ``POST /v1/tools/invoke``; its result (JSON text) is
what the model reads. When the user must consent first, the model gets the
link to give them — or, with ``on_authorization_required``, your callback
shows it, the call waits for the consent and runs again. ``langchain_core``
is imported here only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..client import AsyncClient, Client
from ..models import ToolManifestEntry
from ._invoke import OnAuthorizationRequired, invoke_async, invoke_sync

if TYPE_CHECKING:
    from langchain_core.tools import StructuredTool

__all__ = ["structured_tool", "structured_tools", "structured_tools_sync"]


def structured_tool(
    client: AsyncClient | Client,
    tool: ToolManifestEntry,
    *,
    on_authorization_required: OnAuthorizationRequired | None = None,
    authorization_timeout: float = 600.0,
) -> StructuredTool:
    """One catalog entry as a ``StructuredTool`` whose args schema is the tool's JSON schema.

    An :class:`~agentauth.AsyncClient` makes an async tool (``ainvoke``), a
    :class:`~agentauth.Client` a sync one (``invoke``).
    """
    from langchain_core.tools import StructuredTool

    if isinstance(client, AsyncClient):
        aclient = client

        async def coroutine(**kwargs: Any) -> str:
            return await invoke_async(aclient, tool.name, kwargs, on_authorization_required, authorization_timeout)

        return StructuredTool.from_function(
            coroutine=coroutine, name=tool.name, description=tool.description, args_schema=tool.input_schema
        )
    sclient = client

    def func(**kwargs: Any) -> str:
        return invoke_sync(sclient, tool.name, kwargs, on_authorization_required, authorization_timeout)

    return StructuredTool.from_function(
        func=func, name=tool.name, description=tool.description, args_schema=tool.input_schema
    )


async def structured_tools(
    client: AsyncClient,
    *,
    on_authorization_required: OnAuthorizationRequired | None = None,
    authorization_timeout: float = 600.0,
) -> list[StructuredTool]:
    """Every tool of the catalog as an async ``StructuredTool``."""
    return [
        structured_tool(
            client, t, on_authorization_required=on_authorization_required, authorization_timeout=authorization_timeout
        )
        for t in await client.list_tools()
    ]


def structured_tools_sync(
    client: Client,
    *,
    on_authorization_required: OnAuthorizationRequired | None = None,
    authorization_timeout: float = 600.0,
) -> list[StructuredTool]:
    """Every tool of the catalog as a sync ``StructuredTool``."""
    return [
        structured_tool(
            client, t, on_authorization_required=on_authorization_required, authorization_timeout=authorization_timeout
        )
        for t in client.list_tools()
    ]
